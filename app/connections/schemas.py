from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, field_validator

from app.connections.core.template_files import TemplateError, parse_context_template, parse_instruct_template
from app.platform.core.names import checked
from app.platform.modelbase import RowId

# The text-completion endpoint shapes (app/connections/providers/text_completion.py).
TEXT_APIS = ("openai_completions", "llamacpp", "ollama")


class ConnectionIn(BaseModel):
    """What the form and the API accept. `api_key`: empty keeps the saved key; `clear_key` removes it.
    A saved key or header value is only ever sent to the address it was saved with: changing
    `base_url` or `embedding_url` needs the key (and header values) typed again, or `clear_key`."""

    name: Annotated[str, checked("A connection's name")] = Field(min_length=1, max_length=120)
    kind: str = "openai"
    preset: str = "custom"
    base_url: str = Field(min_length=1, max_length=500)
    model: str = ""
    api_key: str | None = None
    clear_key: bool = False
    # Saved header values are never shown: None keeps all of them, a name with an empty value keeps
    # that one's saved value; a name left out is removed.
    extra_headers: dict[str, str] | None = None
    extra_body: dict = Field(default_factory=dict)
    temperature: float | None = Field(default=0.8, ge=0, le=5)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0, le=10_000)
    min_p: float | None = Field(default=None, ge=0, le=1)
    repetition_penalty: float | None = Field(default=None, ge=0, le=10)
    max_tokens: int = Field(default=512, ge=1, le=1_000_000)
    context_size: int = Field(default=8192, ge=256, le=10_000_000)
    stop: list[str] = Field(default_factory=list)
    is_default: bool = False
    price_input_per_m: float | None = Field(default=None, ge=0)
    price_output_per_m: float | None = Field(default=None, ge=0)
    price_cached_input_per_m: float | None = Field(default=None, ge=0)
    embedding_model: str = Field(default="", max_length=200)
    embedding_url: str = Field(default="", max_length=500)
    embedding_connection_id: RowId | None = None
    # Tools: "auto" offers them until the provider refuses them once, "on" always, "off" never.
    tools_mode: str = "auto"
    # Text completion (kind "text"): the endpoint's shape and the SillyTavern templates, as their files.
    text_api: str = ""
    instruct_template: dict = Field(default_factory=dict)
    context_template: dict = Field(default_factory=dict)

    @field_validator("text_api")
    @classmethod
    def _text_api(cls, v: str) -> str:
        if v not in {"", *TEXT_APIS}:
            raise ValueError("text_api must be one of " + ", ".join(TEXT_APIS))
        return v

    @field_validator("instruct_template", "context_template")
    @classmethod
    def _template(cls, v: dict, info) -> dict:
        if not v:
            return v
        read = parse_instruct_template if info.field_name == "instruct_template" else parse_context_template
        try:
            read(v)
        except TemplateError as err:
            raise ValueError(str(err)) from None
        return v

    @field_validator("tools_mode")
    @classmethod
    def _tools_mode(cls, v: str) -> str:
        if v not in {"auto", "on", "off"}:
            raise ValueError("tools_mode must be 'auto', 'on' or 'off'")
        return v

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in {"openai", "anthropic", "text"}:
            raise ValueError(
                "kind must be 'openai' (chat completions), 'anthropic' (Messages API) or 'text' (text completion)"
            )
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if not v.startswith(("http://", "https://")):
            raise ValueError("The base URL must start with http:// or https://")
        return v

    @field_validator("embedding_url")
    @classmethod
    def _embedding_url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and not v.startswith(("http://", "https://")):
            raise ValueError("The embedding endpoint URL must start with http:// or https://")
        return v


class ConnectionRead(BaseModel):
    """A connection as shown anywhere outside the server: the key never leaves, only whether one is set."""

    id: int
    name: str
    kind: str
    preset: str
    base_url: str
    model: str
    has_key: bool
    extra_header_names: list[str]  # the values (an Azure api-key, say) never leave the server
    extra_body: dict
    temperature: float | None
    top_p: float | None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int
    context_size: int
    stop: list[str]
    is_default: bool
    price_input_per_m: float | None
    price_output_per_m: float | None
    price_cached_input_per_m: float | None
    embedding_model: str
    embedding_url: str
    embedding_connection_id: int | None
    tools_mode: str = "auto"
    tools_refused: str = ""  # why tools are no longer offered in "auto" (the provider's words)
    text_api: str = ""
    instruct_template: dict = Field(default_factory=dict)
    context_template: dict = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime


class ProbeOut(BaseModel):
    ok: bool
    model: str | None
    message: str
