"""Starting points for the connection form. A preset only fills fields; everything stays editable."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preset:
    id: str
    label: str
    kind: str
    base_url: str
    model: str = ""
    needs_key: bool = False
    context_size: int = 8192
    extra_headers: dict = field(default_factory=dict)
    hint: str = ""
    text_api: str = ""  # for kind "text": the endpoint's shape
    instruct: str = ""  # for kind "text": the built-in instruct template it starts with


PRESETS: tuple[Preset, ...] = (
    Preset("openai", "OpenAI", "openai", "https://api.openai.com/v1", "gpt-4o-mini", True, 128000,
           hint="Needs an API key from platform.openai.com."),
    Preset("anthropic", "Anthropic", "anthropic", "https://api.anthropic.com/v1", "claude-sonnet-4-5", True,
           200000, hint="Native Messages API, with prompt caching."),
    Preset("openrouter", "OpenRouter", "openai", "https://openrouter.ai/api/v1", "", True, 32768,
           {"X-Title": "Sugo"}, hint="One key for many models; model names look like vendor/model."),
    Preset("ollama", "Ollama", "openai", "http://127.0.0.1:11434/v1", "", False, 8192,
           hint="Runs on this computer; model names as “ollama list” shows them."),
    Preset("llamacpp", "llama.cpp server", "openai", "http://127.0.0.1:8080/v1", "", False, 8192,
           hint="llama-server serves one model; the model name may be left empty."),
    Preset("koboldcpp", "KoboldCpp", "openai", "http://127.0.0.1:5001/v1", "", False, 8192,
           hint="KoboldCpp's OpenAI-compatible endpoint."),
    Preset("lmstudio", "LM Studio", "openai", "http://127.0.0.1:1234/v1", "", False, 8192,
           hint="Start the local server in LM Studio's Developer tab."),
    Preset("custom", "Other OpenAI-compatible", "openai", "", "", False, 8192,
           hint="vLLM, proxies, anything that speaks /v1/chat/completions."),
    Preset("koboldcpp_text", "KoboldCpp (text completion)", "text", "http://127.0.0.1:5001/v1", "", False, 8192,
           hint="Sugo writes the raw prompt with an instruct template; KoboldCpp's /v1/completions continues it.",
           text_api="openai_completions", instruct="ChatML"),
    Preset("llamacpp_text", "llama.cpp (text completion)", "text", "http://127.0.0.1:8080", "", False, 8192,
           hint="llama-server's own /completion endpoint, with the model's instruct template.",
           text_api="llamacpp", instruct="ChatML"),
    Preset("ollama_text", "Ollama (raw prompt)", "text", "http://127.0.0.1:11434", "", False, 8192,
           hint="Ollama's /api/generate with raw: true: Sugo's template, not Ollama's.",
           text_api="ollama", instruct="ChatML"),
)  # fmt: skip # a table: one preset per row

PRESETS_BY_ID = {p.id: p for p in PRESETS}


def allows_prefill(kind: str, base_url: str) -> bool:
    """Whether the provider goes on from a reply's start sent as the last assistant message. Anthropic
    and local servers do; OpenAI's own API answers anew after it (the text would be said twice)."""
    host = base_url.split("://", 1)[-1].split("/", 1)[0].lower()
    return not (kind == "openai" and host == "api.openai.com")


LOCAL_PRESET_BY_PORT = {11434: "ollama", 8080: "llamacpp", 5001: "koboldcpp", 1234: "lmstudio"}
