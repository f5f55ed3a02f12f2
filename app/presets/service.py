"""Saved presets: read, save, import, export, and the one a chat uses. A preset is checked whole before
anything is written (app/presets/core/model.py `check_preset`); a refused one changes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from dataclasses import replace

from sqlmodel import Session, select

from app.chats.settings import ChatSettings
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import utcnow
from app.presets.core import formats
from app.presets.core.model import Preset, PresetError, check_preset
from app.presets.models import PromptPreset

MAX_PRESETS = 500
EXPORT_FORMATS = ("sugo", "sillytavern", "marinara")


def list_presets(session: Session) -> list[PromptPreset]:
    return list(session.exec(select(PromptPreset).order_by(PromptPreset.name, PromptPreset.id)))


def get_row(session: Session, preset_id: int) -> PromptPreset:
    row = session.get(PromptPreset, preset_id)
    if row is None:
        raise NotFound("That preset no longer exists.")
    return row


class _SavedMarkers(Collection[str]):
    """The markers of a stored preset were checked when it was saved: one whose source is gone since
    still reads (it then places nothing)."""

    def __contains__(self, marker: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def read_row(row: PromptPreset) -> Preset:
    return formats.read_preset_file(json.dumps(row.data), _SavedMarkers())


def get_preset(session: Session, preset_id: int) -> Preset:
    return read_row(get_row(session, preset_id))


def chat_preset(session: Session, settings: ChatSettings) -> Preset | None:
    """The preset a chat's prompt follows; None (Sugo's default layout) when it has none, or its preset
    was deleted or can no longer be read."""
    if settings.preset_id is None:
        return None
    row = session.get(PromptPreset, settings.preset_id)
    if row is None:
        return None
    try:
        return read_row(row)
    except PresetError:
        return None


def save_preset(
    session: Session, preset: Preset, markers: dict[str, str], preset_id: int | None = None
) -> PromptPreset:
    """Check `preset` and write it (a new row without `preset_id`); PresetError says why not."""
    check_preset(preset, markers)
    if preset_id is None:
        if len(list_presets(session)) >= MAX_PRESETS:
            raise PresetError(f"Sugo keeps at most {MAX_PRESETS} presets; delete one first.")
        row = PromptPreset(name=preset.name.strip())
    else:
        row = get_row(session, preset_id)
        row.updated_at = utcnow()
    row.name = preset.name.strip()
    row.data = formats.write_sugo_preset(replace(preset, name=preset.name.strip()))
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def import_preset(session: Session, raw: bytes, filename: str, markers: dict[str, str]) -> PromptPreset:
    """A SillyTavern, Marinara or Sugo preset file as a new preset; a file that does not parse or breaks
    a limit is refused with the reason (PresetError) and nothing is written."""
    if not raw:
        raise PresetError("The file is empty.")
    stem = re.sub(r"(\.marinara)?\.json$", "", filename or "", flags=re.IGNORECASE).strip() or None
    preset = formats.read_preset_file(raw, markers, name=stem)
    return save_preset(session, preset, markers)


def delete_preset(session: Session, preset_id: int) -> None:
    session.delete(get_row(session, preset_id))
    session.commit()


def export_preset(preset: Preset, fmt: str) -> tuple[str, bytes]:
    """The preset as a file: (file name, bytes)."""
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"Unknown export format {fmt!r}.")
    safe = re.sub(r"[^\w .-]+", "", preset.name).strip() or "preset"
    if fmt == "sillytavern":
        return f"{safe}.json", _json(formats.write_sillytavern_preset(preset))
    if fmt == "marinara":
        data = formats.write_marinara_preset(preset, utcnow().isoformat().replace("+00:00", "Z"))
        return f"{safe}.marinara.json", _json(data)
    return f"{safe}.sugo.json", _json(formats.write_sugo_preset(preset))


def _json(data: dict) -> bytes:
    return json.dumps(data, ensure_ascii=False, indent=4).encode("utf-8")
