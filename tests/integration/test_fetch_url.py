"""fetch_url over real HTTP on loopback (issue 24, acceptance 2): private and loopback addresses are
refused directly, after a redirect and behind a host name; an allowed loopback host is read, with its
readable text, title and final URL; limits (2 MB fetched, 20,000 characters returned, 3 redirects)
and binary files are refused or cut with a sentence."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from app.tools.builtin.fetch_url import TOOLS
from app.tools.net.fetch import FetchError, fetch
from app.tools.registry import MAX_RESULT_CHARS, ToolContext, ToolError
from tests.support.fake_web import FakeWeb
from tests.support.live import LiveSugo

FETCH_URL = TOOLS[0]
ARTICLE = (
    "<!doctype html><html><head><title>The Tea Garden</title></head><body>"
    "<nav>Home | About | Shop</nav><article><h1>The Tea Garden</h1>"
    + "".join(
        f"<p>Paragraph {i}: green tea grows slowly on the misty hills of the garden.</p>" for i in range(12)
    )
    + "</article><footer>Copyright</footer></body></html>"
)


@pytest.fixture
def site():
    """The page being read, on 127.0.0.2 (loopback, so only an allow lets it through)."""
    with FakeWeb(host="127.0.0.2") as web:
        yield web


@pytest.fixture
def inner():
    """A loopback service that must never be reached: 127.0.0.1."""
    with FakeWeb(host="127.0.0.1") as web:
        web.page("/secret", "the admin panel")
        yield web


@pytest.fixture(scope="module")
def services_for(tmp_path_factory):
    """A real Sugo's services per SUGO_FETCH_ALLOW, made once for the module (each runs the migrations)."""
    made = {}

    def get(allow: tuple[str, ...]):
        if allow not in made:
            data = tmp_path_factory.mktemp("fetch") / "data"
            made[allow] = LiveSugo(data, fetch_allow=allow, start_scheduler=False).services
        return made[allow]

    yield get
    for services in made.values():
        services.close()


@pytest.fixture
def run(services_for):
    """run(url, allow=...) -> the tool's result, through a real Sugo's services."""

    def call(url: str, allow: tuple[str, ...] = ()):
        ctx = ToolContext(
            services=services_for(allow),
            chat_id=1,
            character_id=None,
            persona_id=None,
            message_id=None,
            now=datetime.now(UTC),
        )
        return asyncio.run(FETCH_URL.run(ctx, FETCH_URL.args.model_validate({"url": url})))

    return call


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:{inner}/secret", "127.0.0.1 is a loopback address"),
        ("http://10.0.0.1/", "10.0.0.1 is a private or reserved address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
        ("http://[::1]:{inner}/secret", "::1 is a loopback address"),
        ("http://localhost:{inner}/secret", "localhost (127.0.0.1) is not fetched"),
    ],
)
def test_refuses_private_addresses(run, inner, url, why):
    with pytest.raises(ToolError, match="is not fetched") as err:
        run(url.format(inner=inner.port))
    assert why in str(err.value)
    assert inner.seen == []


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("http://127.0.0.1:{inner}/secret", "127.0.0.1 is a loopback address"),
        ("http://10.0.0.1/admin", "10.0.0.1 is a private or reserved address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
        ("http://[::1]:{inner}/secret", "::1 is a loopback address"),
        ("http://localhost:{inner}/secret", "localhost (127.0.0.1) is not fetched"),
    ],
)
def test_refuses_a_redirect_from_an_allowed_host(run, site, inner, target, why):
    site.redirect("/go", target.format(inner=inner.port))
    with pytest.raises(ToolError, match="is not fetched") as err:
        run(f"{site.url}/go", allow=("127.0.0.2",))
    assert why in str(err.value)
    assert site.hits("/go") == 1  # the allowed host was asked; the place it pointed to never was
    assert inner.seen == []


def test_reads_an_allowed_loopback_page(run, site):
    site.page("/tea", ARTICLE)
    site.redirect("/old", "/tea", status=301)
    result = run(f"{site.url}/old", allow=("127.0.0.2",))
    lines = result.text.splitlines()
    assert lines[:2] == ["Title: The Tea Garden", f"URL: {site.url}/tea"]
    assert "Paragraph 11: green tea grows slowly" in result.text
    assert "Home | About" not in result.text  # the readable text, not the navigation
    assert result.notice == "Read The Tea Garden (127.0.0.2)"


def test_a_loopback_page_without_the_allow_is_refused(run, site):
    site.page("/tea", ARTICLE)
    with pytest.raises(ToolError, match="127.0.0.2 is a loopback address"):
        run(f"{site.url}/tea")
    assert site.seen == []


def test_plain_text_json_and_binary(run, site):
    site.page("/notes.txt", "line one\nline two", "text/plain")
    site.page("/data.json", '{"a": 1}', "application/json")
    site.page("/paper.pdf", b"%PDF-1.7\x00\x01binary", "application/pdf")
    site.page("/blob", b"\x89PNG\r\n\x1a\n\x00\x00", "")
    allow = ("127.0.0.2",)
    assert run(f"{site.url}/notes.txt", allow).text.endswith("\n\nline one\nline two")
    assert run(f"{site.url}/data.json", allow).text.endswith('{"a": 1}')
    with pytest.raises(ToolError, match="is not a text page \\(it is application/pdf\\)"):
        run(f"{site.url}/paper.pdf", allow)
    with pytest.raises(ToolError, match="is not a text page"):
        run(f"{site.url}/blob", allow)


def test_long_text_is_cut_with_a_note(run, site):
    site.page("/long.txt", "word " * 10_000, "text/plain")
    text = run(f"{site.url}/long.txt", ("127.0.0.2",)).text
    assert len(text) <= MAX_RESULT_CHARS
    assert "[Cut here: the text is 49,999 characters long and only the first" in text


def test_a_page_over_2_mb_is_read_up_to_2_mb(run, site):
    site.page("/huge.txt", "x" * (3 * 1024 * 1024), "text/plain")
    text = run(f"{site.url}/huge.txt", ("127.0.0.2",)).text
    assert "(The page is larger than 2 MB: only its start was read.)" in text
    assert "[Cut here: the text is 2,097,152 characters long" in text


def test_errors_and_redirect_loops(run, site):
    site.page("/gone", "nope", "text/html", status=404)
    for i in range(5):
        site.redirect(f"/r{i}", f"/r{i + 1}")
    allow = ("127.0.0.2",)
    with pytest.raises(ToolError, match="answered HTTP 404"):
        run(f"{site.url}/gone", allow)
    with pytest.raises(ToolError, match="redirected more than 3 times"):
        run(f"{site.url}/r0", allow)
    assert [site.hits(f"/r{i}") for i in range(5)] == [1, 1, 1, 1, 0]


def test_bad_arguments_never_reach_the_handler():
    with pytest.raises(ValueError):
        FETCH_URL.args.model_validate({"url": ""})
    with pytest.raises(ValueError):
        FETCH_URL.args.model_validate({"url": "http://x.example/" + "a" * 3000})


def test_the_fetch_keeps_the_host_name_while_pinned(site):
    """Allowed by name: the request goes to the address checked, saying the name it was asked for."""
    with FakeWeb(host="127.0.0.1") as local:
        local.page("/who", "hello")
        got = asyncio.run(
            fetch(f"http://localhost:{local.port}/who", allow=("localhost",), max_bytes=100, timeout_s=5)
        )
        assert (got.status, got.body, got.url) == (200, b"hello", f"http://localhost:{local.port}/who")
        assert local.seen[0].headers["host"] == f"localhost:{local.port}"


def test_nothing_listening_is_a_sentence(site):
    with FakeWeb(host="127.0.0.2") as closed:
        port = closed.port
    with pytest.raises(FetchError, match=f"http://127.0.0.2:{port}/ could not be reached"):
        asyncio.run(fetch(f"http://127.0.0.2:{port}/", allow=("127.0.0.2",), max_bytes=100, timeout_s=5))


def test_a_page_in_another_charset_is_read(run, site):
    page = (
        '<html><head><meta charset="iso-8859-1"><title>Café crème</title></head><body><article>'
        + "<p>Le café est très bon à Paris, et la crème aussi. Voilà pourquoi.</p>" * 10
        + "</article></body></html>"
    )
    site.page("/cafe", page.encode("latin-1"), "text/html")
    text = run(f"{site.url}/cafe", ("127.0.0.2",)).text
    assert text.startswith("Title: Café crème\n") and "Le café est très bon à Paris" in text


def test_the_host_is_resolved_once_and_the_connection_pinned(monkeypatch):
    """The name is looked up once, by the check; the connection goes to that answer. A second lookup
    (what a client resolving by itself would do, and where a rebinding DNS would answer 127.0.0.1)
    fails here, so the fetch succeeding shows there was none."""
    probe = asyncio.new_event_loop()
    loop_class = type(probe)  # the class asyncio.run's loops are
    probe.close()
    real = loop_class.getaddrinfo
    answers = []

    async def one_answer(self, host, *args, **kwargs):
        if host == "pinned.test":
            answers.append(host)
            if len(answers) > 1:
                raise OSError("pinned.test was resolved a second time")
            return await real(self, "127.0.0.1", *args, **kwargs)
        return await real(self, host, *args, **kwargs)

    monkeypatch.setattr(loop_class, "getaddrinfo", one_answer)
    with FakeWeb(host="127.0.0.1") as local:
        local.page("/p", "pinned")
        got = asyncio.run(
            fetch(f"http://pinned.test:{local.port}/p", allow=("pinned.test",), max_bytes=100, timeout_s=5)
        )
    assert got.body == b"pinned" and answers == ["pinned.test"]
    assert local.seen[0].headers["host"] == f"pinned.test:{local.port}"
