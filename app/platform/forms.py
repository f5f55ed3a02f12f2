"""Turning HTML form fields into the same input models the JSON API takes."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.datastructures import FormData, UploadFile

from app.platform.core import jsonin
from app.platform.core.errors import UserError

M = TypeVar("M", bound=BaseModel)


def text(form: FormData, name: str, default: str = "") -> str:
    value = form.get(name)
    return value if isinstance(value, str) else default


def optional_number(form: FormData, name: str, kind: type = float):
    raw = text(form, name).strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError as err:
        raise UserError(f"“{raw}” is not a number ({name.replace('_', ' ')}).") from err


def checkbox(form: FormData, name: str) -> bool:
    return text(form, name).lower() in {"true", "on", "1", "yes"}


def speech_colour(form: FormData) -> dict[str, str]:
    """A character's or persona's speech colour field as model keywords: {"colour": "#rrggbb"}, or
    {"colour": ""} (automatic) when "Automatic" is ticked, since a colour input always sends a colour;
    {} when the form has neither (a form from before speech colours), so the stored colour stays."""
    if "colour" not in form and "colour_auto" not in form:
        return {}
    return {"colour": "" if checkbox(form, "colour_auto") else text(form, "colour")}


def lines(form: FormData, name: str) -> list[str]:
    return [line for line in text(form, name).splitlines() if line.strip()]


def json_object(form: FormData, name: str, label: str) -> dict:
    raw = text(form, name).strip()
    if not raw:
        return {}
    try:
        value = jsonin.loads(raw)
    except jsonin.JsonTooDeep as err:
        raise UserError(f"{label} was refused: {err}.") from None
    except json.JSONDecodeError as err:
        raise UserError(
            f"{label} is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})."
        ) from err
    if not isinstance(value, dict):
        raise UserError(f'{label} must be a JSON object like {{"key": "value"}}.')
    return value


async def upload(form: FormData, name: str) -> bytes | None:
    """The bytes of the file chosen in field `name`; None when none was chosen. A chosen file that
    is empty is refused here, by name: "choose a file" would be wrong, one was chosen."""
    value = form.get(name)
    if isinstance(value, UploadFile) and value.filename:
        return await upload_data(value)
    return None


async def upload_data(value: UploadFile) -> bytes:
    """The bytes of one chosen file (of several in a field); an empty one is refused by name."""
    data = await value.read()
    if not data:
        raise UserError(f"The file “{value.filename}” is empty (0 bytes). Choose another file.")
    return data


def invalid(err: ValidationError) -> UserError:
    """A form's first validation error as one sentence: "Token budget: Input should be ...". A check
    that wrote its own sentence (a name with a line break, app/platform/core/names.py) is shown as it is."""
    if (own := _own_sentence(err)) is not None:
        return own
    first = err.errors()[0]
    field = " ".join(str(p) for p in first["loc"]).replace("_", " ")
    return UserError(f"{field.capitalize()}: {first['msg'].removeprefix('Value error, ')}")


def refused(err: ValidationError, fallback: str) -> UserError:
    """The sentence of a check that wrote one (app/platform/core/names.py), else `fallback` ("A persona needs a name.")."""
    return _own_sentence(err) or UserError(fallback)


def _own_sentence(err: ValidationError) -> UserError | None:
    for error in err.errors():
        if isinstance(cause := error.get("ctx", {}).get("error"), UserError):
            return UserError(str(cause))
    return None


def parse(model: type[M], **values: Any) -> M:
    """`model(**values)`, where a value of None (a field left blank: `optional_number` and friends
    give None) is left out, so the model's own default fills it and no form repeats it. A
    validation error becomes one UserError sentence."""
    try:
        return model(**{name: value for name, value in values.items() if value is not None})
    except ValidationError as err:
        raise invalid(err) from err


def default_of(model: type[BaseModel], name: str) -> Any:
    """The default `model` declares for the field `name`."""
    return model.model_fields[name].get_default(call_default_factory=True)
