"""Issue 11 item 11: Sugo installs like an app. Chromium reads the manifest and its icons, runs the
service worker, and, with the network gone, shows the offline page instead of an error; chats and
API answers never land in the worker's cache. Desktop and phone."""

import re

from playwright.sync_api import Page, expect

CACHED_PATHS = """async () => {
  const out = [];
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    for (const request of await cache.keys()) out.push(new URL(request.url).pathname);
  }
  return out;
}"""

IMAGE_SIZE = """async (src) => {
  const img = new Image();
  img.src = src;
  await img.decode();
  return [img.naturalWidth, img.naturalHeight];
}"""


def test_manifest_worker_and_offline_page(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "Local", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The harbour is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    chat_url = f"{live.url}/chats/{chat['id']}"
    page.goto(live.url + "/")

    # The manifest, as the page links it.
    href = page.locator("link[rel=manifest]").get_attribute("href")
    answer = page.request.get(live.url + href)
    assert answer.ok and answer.headers["content-type"] == "application/manifest+json"
    manifest = answer.json()
    assert manifest["name"] == "Sugo" and manifest["short_name"]
    assert (manifest["start_url"], manifest["scope"], manifest["display"]) == ("/", "/", "standalone")
    assert manifest["background_color"] == "#0f1015" and manifest["theme_color"] == "#16171f"
    sizes = {}
    for icon in manifest["icons"]:
        assert icon["type"] == "image/png"
        width, height = page.evaluate(IMAGE_SIZE, icon["src"])
        assert f"{width}x{height}" == icon["sizes"]
        sizes.setdefault(icon["purpose"], set()).add(icon["sizes"])
    assert sizes == {"any": {"192x192", "512x512"}, "maskable": {"512x512"}}
    apple = page.locator("link[rel=apple-touch-icon]").get_attribute("href")
    assert page.evaluate(IMAGE_SIZE, apple) == [180, 180]
    colours = page.locator("meta[name=theme-color]")
    expect(colours).to_have_count(2)
    assert {colours.nth(i).get_attribute("media") for i in range(2)} == {
        "(prefers-color-scheme: dark)",
        "(prefers-color-scheme: light)",
    }

    # The status bar follows the theme Sugo shows (dark unless chosen), whatever the system prefers.
    page.emulate_media(color_scheme="light")
    page.reload()
    assert {colours.nth(i).get_attribute("content") for i in range(2)} == {"#16171f"}
    page.get_by_role("button", name="Theme").click()
    assert {colours.nth(i).get_attribute("content") for i in range(2)} == {"#eeedf5"}
    page.get_by_role("button", name="Theme").click()

    # The worker takes the page over, with its scope the whole site.
    # `ready` never settles without a worker: bounded (generously) so that case fails, not hangs.
    scope = page.evaluate("""Promise.race([navigator.serviceWorker.ready.then(r => r.scope),
                                           new Promise(done => setTimeout(() => done("no worker"), 20000))])""")
    assert scope == live.url + "/"

    # Used online: a chat and an API answer pass through, and are not kept. A page opened once the
    # worker is active is always its client (one open before may or may not have been claimed).
    page.goto(chat_url)
    assert page.evaluate("navigator.serviceWorker.controller !== null")
    expect(page.locator("article.msg-assistant")).to_contain_text("The harbour is quiet.")
    assert page.evaluate("fetch('/api/chats').then(r => r.status)") == 200
    cached = page.evaluate(CACHED_PATHS)
    assert "/static/app.css" in cached and "/static/offline.html" in cached
    assert not [p for p in cached if not p.startswith("/static/")], cached
    names = page.evaluate("caches.keys()")
    assert len(names) == 1 and re.fullmatch(r"sugo-shell-[0-9a-f]{16}", names[0])

    # Offline: the friendly page, styled from the cache, for any page asked for.
    page.context.set_offline(True)
    page.goto(chat_url)
    expect(page.get_by_role("heading", name="Sugo can't reach its server")).to_be_visible()
    expect(page.get_by_text("runs on your own computer or home server")).to_be_visible()
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(15, 16, 21)"
    shot("offline")
    page.goto(live.url + "/characters")
    retry = page.get_by_role("link", name="Retry")
    expect(retry).to_be_visible()

    # Back online, Retry opens the page that was asked for.
    page.context.set_offline(False)
    retry.click()
    expect(page).to_have_url(live.url + "/characters")
    expect(page.get_by_role("heading", name="Characters")).to_be_visible()
    cached = page.evaluate(CACHED_PATHS)
    assert not [p for p in cached if not p.startswith("/static/")], cached
