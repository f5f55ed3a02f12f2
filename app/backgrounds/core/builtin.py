"""The backgrounds shipped with Sugo: small SVG scenes drawn for it (static/backgrounds/<name>.svg),
nothing downloaded. Calm and dark, so the scrim over them keeps text readable in either theme."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Builtin:
    name: str  # the file's stem, and the "builtin:<name>" a chat or character stores
    label: str

    @property
    def file_name(self) -> str:
        return f"{self.name}.svg"

    @property
    def url(self) -> str:
        return f"/static/backgrounds/{self.file_name}"


BUILTINS: tuple[Builtin, ...] = (
    Builtin("dusk", "Dusk hills"),
    Builtin("forest", "Forest at night"),
    Builtin("tavern", "Tavern"),
    Builtin("night-city", "Night city"),
    Builtin("sea", "Moonlit sea"),
    Builtin("parchment", "Parchment"),
)
_BY_NAME = {b.name: b for b in BUILTINS}
# SillyTavern names a background by its file name: an imported chat's "dusk.svg" is ours.
_BY_FILE = {b.file_name.lower(): b for b in BUILTINS}


def builtin(name: str) -> Builtin | None:
    return _BY_NAME.get(name)


def builtin_by_file(file_name: str) -> Builtin | None:
    return _BY_FILE.get(file_name.lower())
