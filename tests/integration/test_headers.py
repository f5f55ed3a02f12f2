"""Security headers on pages, fragments, the JSON API and refusals; the policy allows exactly the
inline script the pages carry."""

from __future__ import annotations

import re

from app.web.headers import inline_script_hashes
from app.web.templates import TEMPLATES_DIR
from tests.conftest import add_character

SAME_ORIGIN_ONLY = ("default-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'")


def _policy(response) -> dict[str, str]:
    csp = response.headers["content-security-policy"]
    return {part.split(" ", 1)[0]: part for part in csp.split("; ")}


def _assert_headers(response) -> None:
    policy = _policy(response)
    assert all(
        rule.split(" ", 1)[0] in policy and policy[rule.split(" ", 1)[0]] == rule for rule in SAME_ORIGIN_ONLY
    )
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    assert policy["style-src"] == "style-src 'self'"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_pages_fragments_api_answers_and_refusals_carry_the_headers(api):
    char = add_character(api)
    answers = [
        api.get("/"),
        api.get("/characters"),
        api.get(f"/characters/{char['id']}"),
        api.get("/", headers={"HX-Request": "true"}, params={"q": "x"}),
        api.get("/api/chats"),
        api.get("/api/chats/999"),
        api.get("/static/app.js"),
        api.get("/healthz"),
        api.post(
            "/api/chats", json={"character_ids": [char["id"]]}, headers={"Origin": "https://evil.example"}
        ),
    ]
    assert [r.status_code for r in answers] == [200, 200, 200, 200, 200, 404, 200, 200, 403]
    for response in answers:
        _assert_headers(response)


def test_the_policy_allows_the_pages_inline_script_by_its_hash_and_nothing_else(api):
    page = api.get("/characters").text
    inline = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert len(inline) == 1 and "sugo-theme" in inline[0]  # the theme bootstrap, before first paint
    sources = _policy(api.get("/characters"))["script-src"].split()[1:]
    assert sources == ["'self'", *inline_script_hashes(page)]


def test_the_api_docs_page_has_its_own_policy_for_swagger_ui(api):
    r = api.get("/docs")
    policy = _policy(r)
    assert (
        set(inline_script_hashes(r.text)) <= set(policy["script-src"].split())
        and "'unsafe-inline'" not in policy["script-src"]
    )
    assert policy["frame-ancestors"] == "frame-ancestors 'none'" and r.headers["x-frame-options"] == "DENY"


def test_no_template_needs_inline_script_styles_or_eval():
    """What the policy would block: event-handler attributes, hx-on (htmx evaluates it), js: values,
    style attributes and <style> elements; inline <script> only in base.html (hashed at start)."""
    for path in TEMPLATES_DIR.rglob("*.html"):
        text = path.read_text()
        assert not re.search(
            r"\son[a-z]+\s*=|hx-on|\bjs:|javascript:|\sstyle\s*=|<style", text, re.IGNORECASE
        ), path
        if path.name != "base.html":
            assert "<script>" not in text, path
