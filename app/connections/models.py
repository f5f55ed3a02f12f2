from datetime import datetime

from sqlmodel import Field, SQLModel

from app.platform.modelbase import json_field
from app.platform.timeutil import utcnow


class Connection(SQLModel, table=True):
    """A model endpoint the user brings. The API key is stored encrypted (see crypto.py)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str
    kind: str = "openai"  # "openai" (chat completions) | "anthropic" (Messages API) | "text" (a raw prompt)
    preset: str = "custom"
    base_url: str
    model: str = ""
    api_key_encrypted: str | None = None
    extra_headers: dict = json_field()
    extra_body: dict = json_field()
    temperature: float | None = 0.8
    top_p: float | None = None
    # Samplers local servers take (llama.cpp, KoboldCpp, vLLM, Ollama); None: not sent.
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int = 512
    context_size: int = 8192
    stop: list = json_field(list)
    is_default: bool = False
    # Prices per million tokens, for the cost estimate in the context grid (None: unknown).
    price_input_per_m: float | None = None
    price_output_per_m: float | None = None
    price_cached_input_per_m: float | None = None
    # Semantic search (embeddings): a model on this connection's OpenAI-compatible /embeddings, at
    # embedding_url when set, or with the key and address of embedding_connection_id (borrowed).
    embedding_model: str = ""
    embedding_url: str = ""
    embedding_connection_id: int | None = None
    # Tools: "auto" offers them until the provider refuses them once (then `tools_refused` says why and
    # they are no longer offered), "on" always, "off" never.
    tools_mode: str = Field(default="auto", sa_column_kwargs={"server_default": "auto"})
    tools_refused: str = Field(default="", sa_column_kwargs={"server_default": ""})
    # Text completion (kind "text"): the endpoint's shape ("openai_completions" for /v1/completions,
    # "llamacpp" for /completion, "ollama" for /api/generate), and the SillyTavern instruct and context
    # templates the raw prompt is written with, kept whole as their files are ({} instruct: plain text
    # with names; {} context: SillyTavern's Default story string).
    text_api: str = Field(default="", sa_column_kwargs={"server_default": ""})
    instruct_template: dict = json_field()
    context_template: dict = json_field()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class AppDefault(SQLModel, table=True):
    """App-wide choices from Connections → Defaults, one row per key."""

    __tablename__ = "app_default"

    key: str = Field(primary_key=True)
    value: str = ""
