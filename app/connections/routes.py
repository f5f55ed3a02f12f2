"""Connection pages."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from app.connections import service
from app.connections.core.builtin_templates import BUILTIN_CONTEXT_TEMPLATES, BUILTIN_INSTRUCT_TEMPLATES
from app.connections.core.presets import PRESETS, PRESETS_BY_ID
from app.connections.models import Connection
from app.connections.schemas import ConnectionIn
from app.memory.recall.core.sources import BUILTIN_MODELS
from app.memory.recall.embedding import default_embedding_setting, set_default_embedding
from app.platform import forms
from app.platform.core import jsonin
from app.platform.core.errors import UserError
from app.web.deps import FormDep, KeyBoxDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
MAX_TEMPLATE_BYTES = 200_000  # a SillyTavern template is a few hundred bytes; its strings stop at 100,000


def _list(
    request: Request,
    session,
    *,
    hx: bool = False,
    blocks: tuple[str, ...] = ("content",),
    oob: tuple[str, ...] = (),
    **extra,
) -> HTMLResponse:
    """The list page; for HTMX, `blocks` of it and `oob` (the whole content when a form elsewhere
    led here, with the URL pushed)."""
    ctx = {
        "connections": service.list_connections(session),
        "builtin_models": BUILTIN_MODELS,
        "default_embedding": default_embedding_setting(session),
        **extra,
    }
    if not hx:
        return render(request, "connections/list.html", ctx)
    headers = {"HX-Push-Url": "/connections"} if "content" in blocks else None
    return render_blocks(request, "connections/list.html", ctx, blocks, oob=oob, headers=headers)


def _templates(form, current: Connection | None) -> dict:
    """The text-completion templates the form chose: an imported file wins, then a built-in by name;
    "__kept__" keeps the connection's own (imported before)."""
    chosen = {}
    for kind, builtins in (("instruct", BUILTIN_INSTRUCT_TEMPLATES), ("context", BUILTIN_CONTEXT_TEMPLATES)):
        upload = form.get(f"{kind}_file")
        if isinstance(upload, UploadFile) and upload.filename:
            raw = upload.file.read(MAX_TEMPLATE_BYTES + 1)
            if len(raw) > MAX_TEMPLATE_BYTES:
                raise UserError(f"The {kind} template file is over {MAX_TEMPLATE_BYTES // 1000} KB.")
            try:
                data = jsonin.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, jsonin.JsonTooDeep) as err:
                raise UserError(
                    f"The {kind} template “{upload.filename}” is not a JSON file: {err}"
                ) from None
            if not isinstance(data, dict):
                raise UserError(f"The {kind} template “{upload.filename}” is not a JSON object.")
            chosen[f"{kind}_template"] = data
            continue
        name = forms.text(form, f"{kind}_name")
        if name == "__kept__" and current is not None:
            chosen[f"{kind}_template"] = dict(getattr(current, f"{kind}_template") or {})
        else:
            chosen[f"{kind}_template"] = dict(builtins[name]) if name in builtins else {}
    return chosen


def _form_input(form, *, testing: bool = False, current: Connection | None = None) -> ConnectionIn:
    # Testing needs no name: the values are tried, not saved.
    name = forms.text(form, "name") or ("Connection being tested" if testing else "")
    try:
        return ConnectionIn(
            name=name,
            kind=forms.text(form, "kind", "openai"),
            preset=forms.text(form, "preset", "custom"),
            base_url=forms.text(form, "base_url"),
            model=forms.text(form, "model"),
            api_key=forms.text(form, "api_key") or None,
            clear_key=forms.checkbox(form, "clear_key"),
            extra_headers=forms.json_object(form, "extra_headers", "Extra headers"),
            extra_body=forms.json_object(form, "extra_body", "Extra body"),
            temperature=forms.optional_number(form, "temperature"),
            top_p=forms.optional_number(form, "top_p"),
            top_k=forms.optional_number(form, "top_k", int),
            min_p=forms.optional_number(form, "min_p"),
            repetition_penalty=forms.optional_number(form, "repetition_penalty"),
            max_tokens=forms.optional_number(form, "max_tokens", int)
            or forms.default_of(ConnectionIn, "max_tokens"),
            context_size=forms.optional_number(form, "context_size", int)
            or forms.default_of(ConnectionIn, "context_size"),
            stop=forms.lines(form, "stop"),
            is_default=forms.checkbox(form, "is_default"),
            price_input_per_m=forms.optional_number(form, "price_input_per_m"),
            price_output_per_m=forms.optional_number(form, "price_output_per_m"),
            price_cached_input_per_m=forms.optional_number(form, "price_cached_input_per_m"),
            embedding_model=forms.text(form, "embedding_model"),
            embedding_url=forms.text(form, "embedding_url"),
            embedding_connection_id=forms.optional_number(form, "embedding_connection_id", int),
            tools_mode=forms.text(form, "tools_mode", "auto"),
            text_api=forms.text(form, "text_api") if forms.text(form, "kind") == "text" else "",
            **_templates(form, current),
        )
    except ValidationError as err:
        raise forms.invalid(err) from err


@router.get("/connections")
def list_connections_page(request: Request, session: SessionDep) -> HTMLResponse:
    """All connections."""
    return _list(request, session)


@router.post("/connections/defaults")
def save_defaults_page(request: Request, form: FormDep, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """Connections → Defaults: the embedding source used where nothing more specific is set."""
    value = forms.text(form, "embeddings")
    set_default_embedding(session, value)
    return _list(request, session, hx=hx, blocks=("defaults",), defaults_saved=True)


@router.get("/connections/new")
def new_connection_page(
    request: Request,
    session: SessionDep,
    preset: str = "custom",
    base_url: str = "",
    model: str = "",
    name: str = "",
) -> HTMLResponse:
    """The form, filled from a preset (and from a discovered local server)."""
    p = PRESETS_BY_ID.get(preset, PRESETS_BY_ID["custom"])
    conn = Connection(
        name=name or (p.label if p.id != "custom" else ""),
        kind=p.kind,
        preset=p.id,
        base_url=base_url or p.base_url,
        model=model or p.model,
        context_size=p.context_size,
        extra_headers=dict(p.extra_headers),
        text_api=p.text_api,
        instruct_template=dict(BUILTIN_INSTRUCT_TEMPLATES[p.instruct]) if p.instruct else {},
        # The context template of the same name where there is one (ChatML's wraps the story string too).
        context_template=dict(BUILTIN_CONTEXT_TEMPLATES[p.instruct])
        if p.instruct in BUILTIN_CONTEXT_TEMPLATES
        else {},
    )
    return render(
        request,
        "connections/edit.html",
        {
            "conn": conn,
            "presets": PRESETS,
            "preset": p,
            "headers": service.header_form_value(conn),
            "instruct_builtins": BUILTIN_INSTRUCT_TEMPLATES,
            "context_builtins": BUILTIN_CONTEXT_TEMPLATES,
            "connections": service.list_connections(session),
        },
    )


@router.post("/connections")
def create_connection_page(
    request: Request, form: FormDep, session: SessionDep, keybox: KeyBoxDep, hx: HxRequest
) -> HTMLResponse:
    """Save a new connection, then show the list."""
    service.create_connection(session, keybox, _form_input(form))
    session.flush()
    return _list(request, session, hx=hx)


@router.get("/connections/{connection_id}")
def edit_connection_page(connection_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """Edit one connection (the key is never shown, only whether one is saved)."""
    conn = service.get_connection(session, connection_id)
    return render(
        request,
        "connections/edit.html",
        {
            "conn": conn,
            "presets": PRESETS,
            "preset": None,
            "headers": service.header_form_value(conn),
            "instruct_builtins": BUILTIN_INSTRUCT_TEMPLATES,
            "context_builtins": BUILTIN_CONTEXT_TEMPLATES,
            "connections": service.list_connections(session),
        },
    )


@router.post("/connections/test")
async def test_connection_form(request: Request, session: SessionDep, keybox: KeyBoxDep) -> HTMLResponse:
    """Test the values in the form before saving (a saved key is used when the field is empty and
    the address is the saved one)."""
    form = await request.form()
    saved_id = forms.optional_number(form, "connection_id", int)
    current = service.get_connection(session, saved_id) if saved_id else None
    data = _form_input(form, testing=True, current=current)
    result = await service.probe_form(session, keybox, data, saved_id=saved_id)
    return render(request, "connections/_test_result.html", {"result": result})


@router.post("/connections/{connection_id}")
def update_connection_page(
    connection_id: int, request: Request, form: FormDep, session: SessionDep, keybox: KeyBoxDep, hx: HxRequest
) -> HTMLResponse:
    """Save changes, then show the list."""
    current = service.get_connection(session, connection_id)
    service.update_connection(session, keybox, connection_id, _form_input(form, current=current))
    return _list(request, session, hx=hx)


@router.post("/connections/{connection_id}/test")
async def test_saved_connection(
    connection_id: int, request: Request, session: SessionDep, keybox: KeyBoxDep
) -> HTMLResponse:
    """Test a saved connection."""
    conn = service.get_connection(session, connection_id)
    result = await service.probe_connection(conn, keybox)
    return render(request, "connections/_test_result.html", {"result": result})


@router.post("/connections/{connection_id}/default")
def set_default_connection_page(
    connection_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Make a connection the default."""
    service.set_default(session, connection_id)
    return _list(request, session, hx=hx, blocks=("connection_list",))


@router.post("/connections/{connection_id}/delete")
def delete_connection_page(
    connection_id: int, request: Request, session: SessionDep, hx: HxRequest
) -> HTMLResponse:
    """Delete a connection."""
    service.delete_connection(session, connection_id)
    return _list(request, session, hx=hx, blocks=("connection_list",), oob=("defaults",))
