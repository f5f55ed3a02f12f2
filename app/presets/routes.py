"""The Presets page: the list, the editor, import and export."""

from __future__ import annotations

import secrets
from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData

from app.platform import forms
from app.platform.core.downloads import content_disposition
from app.presets import service
from app.presets.core.model import (
    CHAT_HISTORY,
    PLACEMENTS,
    ROLES,
    WRAPS,
    Choice,
    ChoiceOption,
    Parameters,
    Preset,
    PresetError,
    Section,
)
from app.prompt.core.arrangement import DEFAULT_NAME, default_preset
from app.web.deps import ServicesDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)

# Where a section can go, in the editor's words; custom text is in the list or at a depth.
PLACEMENT_LABELS = {
    "ordered": "In the list",
    "depth": "At a depth",
    "recent": "Above the newest turns",
    "default": "Where Sugo puts it",
}
PARAMETERS = (
    ("temperature", "Temperature", float),
    ("top_p", "Top P", float),
    ("top_k", "Top K", int),
    ("min_p", "Min P", float),
    ("repetition_penalty", "Repetition penalty", float),
    ("frequency_penalty", "Frequency penalty", float),
    ("presence_penalty", "Presence penalty", float),
    ("max_tokens", "Reply length (tokens)", int),
    ("context_size", "Context size (tokens)", int),
)
# Marker sections whose text the user may write: it replaces Sugo's built-in text for that part.
WRITABLE_MARKERS = ("main_prompt", "post_history")


def _editor(request: Request, preset: Preset, markers: dict[str, str], **extra) -> dict:
    named = {s.marker for s in preset.sections}
    return {
        "preset": preset,
        "markers": markers,
        # A marker not in the preset yet, ready to add where Sugo's default would place it.
        "missing_sections": [s for s in default_preset(markers).sections if s.marker not in named],
        "new_text_section": Section(id="", name="New section", content=""),
        "placements": PLACEMENT_LABELS,
        "roles": ROLES,
        "wraps": WRAPS,
        "parameters": [(key, label, "any" if kind is float else "1") for key, label, kind in PARAMETERS],
        "writable": WRITABLE_MARKERS,
        "chat_history": CHAT_HISTORY,
        **extra,
    }


@router.get("/presets")
def presets_page(request: Request, session: SessionDep, services: ServicesDep) -> HTMLResponse:
    """Saved presets, the built-in default, import."""
    return render(
        request,
        "presets/list.html",
        {"presets": service.list_presets(session), "default_name": DEFAULT_NAME},
    )


@router.post("/presets")
def new_preset(request: Request, session: SessionDep, services: ServicesDep) -> Response:
    """A new preset: a copy of Sugo's default, opened in the editor."""
    markers = services.sources.markers()
    names = {row.name for row in service.list_presets(session)}
    name = next(n for n in (f"My preset {i}" for i in range(1, 10_000)) if n not in names)
    row = service.save_preset(session, Preset(name=name, sections=default_preset(markers).sections), markers)
    return _go(request, f"/presets/{row.id}")


@router.post("/presets/import")
async def import_preset(request: Request, session: SessionDep, services: ServicesDep) -> Response:
    """A SillyTavern, Marinara or Sugo preset file; refused with the reason, writing nothing."""
    form = await request.form()
    upload = form.get("file")
    raw = await forms.upload(form, "file")
    if raw is None:
        raise PresetError("Choose a preset file to import.")
    filename = getattr(upload, "filename", "") or ""
    row = service.import_preset(session, raw, filename, services.sources.markers())
    return _go(request, f"/presets/{row.id}?imported=1")


@router.get("/presets/{preset_id}")
def edit_preset_page(
    preset_id: int, request: Request, session: SessionDep, services: ServicesDep
) -> HTMLResponse:
    """The editor: sections in order, choices, parameters."""
    preset = service.get_preset(session, preset_id)
    ctx = _editor(request, preset, services.sources.markers(), preset_id=preset_id)
    ctx["imported"] = request.query_params.get("imported") == "1"
    return render(request, "presets/edit.html", ctx)


@router.post("/presets/{preset_id}")
async def save_preset(
    preset_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Save the editor's form; a refused preset leaves the stored one as it was."""
    form = await request.form()
    markers = services.sources.markers()
    stored = service.get_preset(session, preset_id)
    preset = _read_form(form, stored)
    service.save_preset(session, preset, markers, preset_id)
    ctx = _editor(request, preset, markers, preset_id=preset_id, saved=True)
    if hx:
        return render_blocks(request, "presets/edit.html", ctx, ["preset_editor"])
    return render(request, "presets/edit.html", ctx)


@router.post("/presets/{preset_id}/duplicate")
def duplicate_preset(
    preset_id: int, request: Request, session: SessionDep, services: ServicesDep
) -> Response:
    preset = service.get_preset(session, preset_id)
    copy = replace(preset, name=f"{preset.name} (copy)"[:200])
    row = service.save_preset(session, copy, services.sources.markers())
    return _go(request, f"/presets/{row.id}")


@router.post("/presets/{preset_id}/delete")
def delete_preset(preset_id: int, request: Request, session: SessionDep) -> Response:
    service.delete_preset(session, preset_id)
    return _go(request, "/presets")


@router.get("/presets/{preset_id}/export")
def export_preset(preset_id: int, session: SessionDep, format: str = "sugo") -> Response:
    """The preset as Sugo's, SillyTavern's or Marinara's file."""
    name, data = service.export_preset(service.get_preset(session, preset_id), format)
    return Response(
        data,
        media_type="application/json",
        headers={"Content-Disposition": content_disposition(name, fallback="preset.json")},
    )


def _go(request: Request, url: str) -> Response:
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def _read_form(form: FormData, stored: Preset) -> Preset:
    """The editor's fields as a preset. Rows come in the page's order; what the page does not show (an
    imported file's unknown fields) is kept from the stored preset, matched by id."""
    kept_sections = {s.id: s for s in stored.sections}
    columns = [
        form.getlist(f"section_{field}")
        for field in ("id", "name", "marker", "content", "role", "placement", "depth", "enabled")
    ]
    if len({len(c) for c in columns}) != 1:
        raise PresetError("The form's sections were cut short; reload the page and try again.")
    sections = []
    for sid, name, marker, content, role, placement, depth, enabled in zip(*columns, strict=True):
        sid = str(sid).strip() or f"text_{secrets.token_hex(4)}"
        before = kept_sections.get(sid)
        sections.append(
            Section(
                id=sid,
                name=str(name).strip(),
                marker=str(marker) or None,
                content=str(content),
                role=str(role) if role in ROLES else "system",
                enabled=enabled == "1",
                placement=str(placement) if placement in PLACEMENTS else "ordered",
                depth=_whole(str(depth), "depth", 4),
                extra=before.extra if before else {},
            )
        )
    return Preset(
        name=forms.text(form, "name").strip(),
        description=forms.text(form, "description"),
        wrap=forms.text(form, "wrap", "none"),
        prefill=forms.text(form, "prefill"),
        sections=tuple(sections),
        choices=_read_choices(form, {c.variable: c for c in stored.choices}),
        parameters=Parameters(**{key: forms.optional_number(form, key, kind) for key, _, kind in PARAMETERS}),
        extra=stored.extra,
    )


def _read_choices(form: FormData, stored: dict[str, Choice]) -> tuple[Choice, ...]:
    choices = []
    keys = form.getlist("choice_key")
    for key, variable, question, separator, multi in zip(
        keys,
        form.getlist("choice_variable"),
        form.getlist("choice_question"),
        form.getlist("choice_separator"),
        form.getlist("choice_multi"),
        strict=False,
    ):
        labels = form.getlist(f"option_label_{key}")
        values = form.getlist(f"option_value_{key}")
        ids = form.getlist(f"option_id_{key}")
        options = tuple(
            ChoiceOption(str(oid) or f"o{i + 1}", str(label).strip() or str(value)[:40], str(value))
            for i, (oid, label, value) in enumerate(zip(ids, labels, values, strict=False))
            if str(label).strip() or str(value).strip()
        )
        variable = str(variable).strip()
        if not variable and not options:
            continue  # an empty new choice: nothing to keep
        before = stored.get(variable)
        choices.append(
            Choice(
                variable=variable,
                question=str(question).strip(),
                options=options,
                multi=multi == "1",
                separator=str(separator) if separator != "" else ", ",
                extra=before.extra if before else {},
            )
        )
    return tuple(choices)


def _whole(raw: str, what: str, default: int) -> int:
    try:
        return int(raw) if raw.strip() else default
    except ValueError:
        raise PresetError(f"“{raw}” is not a whole number ({what}).") from None
