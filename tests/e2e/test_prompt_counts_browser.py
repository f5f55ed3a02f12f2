"""Issue 11 item 9: Peek Prompt and the Context page give one count per block; plain information
is boxed calmly, not in a warning's amber; counts read "2 keys", not "2 key". Desktop and phone."""

import re

from playwright.sync_api import Page, expect

DESCRIPTION = (
    "Aria keeps the harbour lights of Vell and knows every captain by the creak of their boat. "
    "She speaks softly, notices everything and trusts slowly. "
) * 12
# The border a warning box gets, read from the page's own stylesheet (color-mix makes it an srgb value).
WARN_BORDER = """() => { const el = document.createElement('p'); el.className = 'notice notice-warn';
  document.body.append(el); const c = getComputedStyle(el).borderTopColor; el.remove(); return c; }"""
BORDERS = "el => ['Top', 'Right', 'Bottom', 'Left'].map(s => getComputedStyle(el)['border' + s + 'Color'])"


def _chat_with_lore(live) -> dict:
    with live.client() as c:
        char = c.post(
            "/api/characters",
            json={
                "name": "Aria",
                "description": DESCRIPTION,
                "personality": "calm",
                "first_mes": "The harbour is quiet tonight.",
            },
        ).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        book = c.post("/api/lorebooks", json={"name": "Vell"}).json()
        for key, content in (
            ("lighthouse", "The lighthouse was built in 1820."),
            ("harbour", "Vell's harbour freezes."),
        ):
            assert (
                c.post(
                    f"/api/lorebooks/{book['id']}/entries", json={"keys": [key], "content": content}
                ).status_code
                == 201
            )
        assert c.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [book["id"]]}).status_code == 200
        assert (
            c.post(
                f"/api/chats/{chat['id']}/messages", json={"content": "Is the lighthouse lit?"}
            ).status_code
            == 201
        )
    return chat


def _tokens(text: str) -> int:
    return int(re.search(r"\d+", text.replace(",", "")).group())


def test_peek_prompt_and_context_count_each_block_the_same(page: Page, live, shot):
    chat = _chat_with_lore(live)

    page.goto(f"{live.url}/chats/{chat['id']}/prompt")
    peek: dict[str, list[int]] = {}
    for block in page.locator(".prompt-block:not([data-message-id])").all():
        label = block.locator(".block-label").inner_text()
        peek.setdefault(label, []).append(_tokens(block.locator(".tokens").inner_text()))
    peek_total = _tokens(page.locator(".prompt-summary strong").first.inner_text())
    assert any(label.startswith("Character") for label in peek), peek
    shot("peek")

    page.goto(f"{live.url}/chats/{chat['id']}/context")
    sizes = {
        row.locator("td").nth(0).inner_text().strip(): _tokens(row.locator("td").nth(1).inner_text())
        for row in page.locator("#context-sizes tbody tr").all()
    }
    compared = 0
    for label, counts in peek.items():
        if len(counts) == 1 and label in sizes:
            assert sizes[label] == counts[0], (label, sizes[label], counts[0])
            compared += 1
    assert compared >= 2, (peek, sizes)
    assert _tokens(page.locator(".prompt-summary strong").first.inner_text()) == peek_total
    assert sum(sizes.values()) == peek_total  # the role markers are a row of their own
    shot("context")


def test_information_is_not_styled_as_a_warning_and_counts_are_plural(page: Page, live, shot):
    chat = _chat_with_lore(live)
    page.goto(f"{live.url}/chats/{chat['id']}/prompt")
    info = page.locator(".prompt-peek .notice", has_text="Lorebooks:")
    expect(info).to_have_count(1)
    expect(info).to_contain_text("2 keys")
    expect(info).not_to_contain_text("2 key)")
    expect(info).to_have_class(re.compile(r"\bnotice-info\b"))
    expect(info).not_to_have_class(re.compile(r"\bnotice-warn\b"))
    amber = page.evaluate(WARN_BORDER)
    borders = info.evaluate(BORDERS)
    assert amber not in borders, (amber, borders)
    assert "0.984314 0.74902 0.141176" not in " ".join(borders)  # no shade of --warn either
    info.scroll_into_view_if_needed()
    shot("info-box")

    # A real warning keeps its amber: the no-connection notice on the chat page.
    page.goto(f"{live.url}/chats/{chat['id']}")
    warn = page.locator(".composer-notice")
    assert warn.evaluate(BORDERS) == [amber] * 4

    with live.client() as c:
        book = c.post("/api/lorebooks", json={"name": "Tiny"}).json()
        c.post(f"/api/lorebooks/{book['id']}/entries", json={"keys": ["x"], "content": "One."})
    page.goto(f"{live.url}/lorebooks")
    row = page.locator(".muted.small", has_text="budget").filter(has_text="1 entry ")
    expect(row).to_have_count(1)
    expect(page.get_by_text(re.compile(r"\b1 entries\b"))).to_have_count(0)
    shot("lorebooks")
    page.goto(live.url + "/")
    expect(page.locator(".chat-row-meta").first).to_contain_text("2 msgs")
    shot("chat-list")
