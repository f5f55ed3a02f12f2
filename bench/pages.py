"""The pages a user opens, on chats of 100, 2,000 and 20,000 messages, and the chat page while Memory
Recall builds the memories of a 2,000-message import (issue 23). A real Sugo in its own process with its
scheduler on (bench/sugo_process.py) on a fresh data folder; every request goes over HTTP through one
keep-alive connection, as a browser's page loads to the same host do. Each figure is taken over
RUNS requests after WARM_UPS, with a short pause between them (a person clicking, not a load test).
Prints name=value lines; never asserts on time.

The chats are Roleplay chats with Chat Summary's "Hide summarised messages" on and summary entries
covering all but the newest 100 messages (one entry per 50 messages), so the chat page folds them as it
does for a user who summarises. Their messages (~70 tokens each, the user and the character in turn) are
written straight into the database through a second engine (as bench/prompt_build.py `fill_messages`
does), with Memory Recall's chunking paused for them: embedding 22,000 messages for real would take ten
minutes, and the memory job would run beside the measured pages. The summary entries go through the API.

- chat_page_ms_p50_<n>: GET /chats/{id}, the chat page (its newest messages, the composer, the panels).
- settings_ms_p50_<n>: GET /chats/{id}/settings, Chat Settings as a page of its own.
- peek_ms_p50_20000: GET /chats/{id}/prompt, Peek Prompt (the prompt built, no model called).
- home_ms_p50: GET /, the home page, with HOME_CHATS more chats of HOME_MESSAGES messages each (and the
  three above) listed.
- chat_page_growth_ratio: chat_page_ms_p50_20000 / chat_page_ms_p50_100 (target under 1.5).
- chat_page_ms_p50_immersive_100: the same 100-message chat's page with the roleplay view on (issue 29):
  an uploaded background for the chat, the character's full-size art, its speech colour and the
  persona's; measured right after chat_page_ms_p50_100 (the messages hold quoted speech and *actions*
  in both). chat_page_immersive_ratio_100: the two divided (target within 1.1). speakers_css_ms_p50: the
  speech colours' stylesheet the page links (cached by the browser after the first page).

Then background work: a 2,000-message SillyTavern .jsonl imported through the UI's import route
(POST /chats/import, as the Import button sends it), "Hide summarised" turned on for it; the import
starts the memory job, which chunks and embeds every message with the built-in model (all-MiniLM-L6-v2,
real work). Meanwhile the chat page of that chat is opened again and again until the memory status
(GET /api/chats/{id}/memories/status) says building is done; then the same page again, idle.
- chat_page_ms_p95_during_import / chat_page_ms_p50_during_import: the page while the memories build.
- chat_page_ms_p95_idle / chat_page_ms_p50_idle: the same page afterwards.
- chat_page_p95_ratio_during_import: during / idle at p95 (target under 1.5).
- import_memory_build_s: from the import's answer to the memories built; import_page_samples: pages
  measured meanwhile.

Run: .venv/bin/python bench/pages.py
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from PIL import Image as PILImage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlmodel import Session, select  # noqa: E402

from app.backgrounds.models import Background  # noqa: E402
from app.characters.models import Character  # noqa: E402
from app.chats.service import new_message  # noqa: E402
from app.images.service import store_image  # noqa: E402
from app.main import build_services  # noqa: E402
from app.personas.models import Persona  # noqa: E402
from app.platform.settings import Settings  # noqa: E402
from bench.sugo_process import running_sugo  # noqa: E402

SIZES = (100, 2_000, 20_000)
SUMMARY_EVERY = 50  # one Chat Summary entry per this many messages
UNSUMMARISED = 100  # the newest messages no entry covers
HOME_CHATS, HOME_MESSAGES = 50, 200
IMPORT_MESSAGES = 2_000
RUNS, WARM_UPS = 40, 3
IDLE_RUNS = 100  # the idle p95 is the yardstick: more samples than the others
PAUSE_S = 0.05
LIMIT_S = 600  # only a hung run stops the bench
CHARACTER, USER = "Aria", "Rowan"
PLACES = "lantern harbour orchard ferry mill bridge market tower forest meadow chapel island".split()


def message_text(i: int) -> str:
    """About 70 tokens, different for each message."""
    place = PLACES[(i // SUMMARY_EVERY) % len(PLACES)]
    return (
        f'*Day {i // 40 + 1}. We follow the river past the mill and the old bridge.* "The '
        f'{["rain", "wind", "sun", "fog"][i % 4]} keeps us company," step {i}. Near the {place} we talk '
        f'about the people we met on the road, "the supper we shared and the plans for tomorrow."'
    )


def chat_file(count: int) -> bytes:
    """A SillyTavern .jsonl: a header, then `count` lines, the user and Aria in turn."""
    lines: list[dict] = [
        {"user_name": USER, "character_name": CHARACTER, "create_date": "2025-01-01T10:00:00.000Z"}
    ]
    for i in range(count):
        user = i % 2 == 1
        lines.append(
            {
                "name": USER if user else CHARACTER,
                "is_user": user,
                "send_date": "2025-01-01T10:00:00.000Z",
                "mes": message_text(i),
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


def roleplay_settings(**extra: object) -> dict:
    return {"summary_hide_messages": True, **extra}


def new_chat(client: httpx.Client, character_id: int, name: str) -> int:
    chat = client.post(
        "/api/chats", json={"character_ids": [character_id], "mode": "roleplay", "name": name}
    ).json()
    client.put(
        f"/api/chats/{chat['id']}/options",
        json={"settings": roleplay_settings(memory_chunking_paused=True), "mode": "roleplay"},
    ).raise_for_status()
    return chat["id"]


def fill_messages(data_dir: Path, counts: dict[int, int], character_id: int) -> None:
    """`counts[chat_id]` messages into each chat, straight into the database (a second engine)."""
    services = build_services(Settings(data_dir=data_dir, start_scheduler=False))
    try:
        with Session(services.engine) as session:
            for chat_id, count in counts.items():
                for i in range(count):
                    user = i % 2 == 1
                    session.add(
                        new_message(
                            chat_id,
                            "user" if user else "assistant",
                            USER if user else CHARACTER,
                            [message_text(i)],
                            character_id=None if user else character_id,
                        )
                    )
                session.commit()
    finally:
        services.close()


def summarise(client: httpx.Client, chat_id: int, count: int) -> None:
    """Chat Summary entries over all but the newest UNSUMMARISED messages, SUMMARY_EVERY each."""
    for start in range(1, count - UNSUMMARISED + 1, SUMMARY_EVERY):
        client.post(
            f"/api/chats/{chat_id}/summaries",
            json={
                "content": f"Aria and Rowan walked the river, messages {start} on.",
                "scope": "range",
                "start": start,
                "end": start + SUMMARY_EVERY - 1,
            },
        ).raise_for_status()


def timed(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    client.get(path).raise_for_status()
    return (time.perf_counter() - start) * 1000


def times(client: httpx.Client, path: str, runs: int = RUNS) -> list[float]:
    for _ in range(WARM_UPS):
        timed(client, path)
    values = []
    for _ in range(runs):
        values.append(timed(client, path))
        time.sleep(PAUSE_S)
    return values


def p95(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.95))]


def import_chat(client: httpx.Client, character_id: int) -> int:
    """The 2,000-message file through the UI's import route; the new chat's id (from its redirect)."""
    answer = client.post(
        "/chats/import",
        files={"file": ("long.jsonl", chat_file(IMPORT_MESSAGES), "application/jsonl")},
        data={"character_id": str(character_id)},
        headers={"HX-Request": "true"},
    )
    answer.raise_for_status()
    return int(answer.headers["HX-Redirect"].rsplit("/", 1)[1])


def building(client: httpx.Client, chat_id: int) -> bool:
    return client.get(f"/api/chats/{chat_id}/memories/status").json()["building"] is not None


def page_figures(client: httpx.Client, data_dir: Path, character_id: int, figures: dict) -> None:
    sized = {n: new_chat(client, character_id, f"{n} messages") for n in SIZES}
    home = [new_chat(client, character_id, f"Walk {i}") for i in range(HOME_CHATS)]
    fill_messages(
        data_dir, {**{sized[n]: n for n in SIZES}, **dict.fromkeys(home, HOME_MESSAGES)}, character_id
    )
    for n in SIZES:
        summarise(client, sized[n], n)
    for n in SIZES:
        figures[f"chat_page_ms_p50_{n}"] = statistics.median(times(client, f"/chats/{sized[n]}"))
        if n == 100:
            immersive_figures(client, data_dir, character_id, sized[n], figures)
    for n in (100, 20_000):
        figures[f"settings_ms_p50_{n}"] = statistics.median(times(client, f"/chats/{sized[n]}/settings"))
    figures["peek_ms_p50_20000"] = statistics.median(times(client, f"/chats/{sized[20_000]}/prompt"))
    figures["home_ms_p50"] = statistics.median(times(client, "/"))
    figures["chat_page_growth_ratio"] = figures["chat_page_ms_p50_20000"] / figures["chat_page_ms_p50_100"]


def picture(width: int, height: int) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), (40, 30, 60)).save(out, "PNG")
    return out.getvalue()


def set_roleplay_view(data_dir: Path, character_id: int, *, on: bool) -> int | None:
    """The character's art and speech colour and the persona's colour, set (or cleared) through a second
    engine as `fill_messages` writes; the uploaded background's id when on."""
    services = build_services(Settings(data_dir=data_dir, start_scheduler=False))
    try:
        with Session(services.engine) as session:
            character = session.get(Character, character_id)
            background_id = None
            if on:
                art = store_image(session, picture(800, 1200))
                backdrop = store_image(session, picture(1920, 1080))
                background = Background(name="harbour.png", image_id=backdrop.id)
                session.add(background)
                session.flush()
                background_id = background.id
            character.art_id = art.id if on else None
            character.colour = "#e0a3ff" if on else None
            for persona in session.exec(select(Persona)):
                persona.colour = "#8fd3c7" if on else None
            session.commit()
            return background_id
    finally:
        services.close()


def immersive_figures(
    client: httpx.Client, data_dir: Path, character_id: int, chat_id: int, figures: dict
) -> None:
    background_id = set_roleplay_view(data_dir, character_id, on=True)
    client.put(
        f"/api/chats/{chat_id}/options",
        json={
            "settings": roleplay_settings(memory_chunking_paused=True, background=f"image:{background_id}"),
            "mode": "roleplay",
        },
    ).raise_for_status()
    page = client.get(f"/chats/{chat_id}").text
    shown = (r'id="chat-backdrop"[^>]*><img src="/images/', r'id="character-art"[^>]*><img src="/images/')
    if not all(re.search(part, page) for part in shown) or 'class="dialogue"' not in page:
        raise RuntimeError("the roleplay view (background, art, dialogue) is not on the measured page")
    figures["chat_page_ms_p50_immersive_100"] = statistics.median(times(client, f"/chats/{chat_id}"))
    figures["chat_page_immersive_ratio_100"] = (
        figures["chat_page_ms_p50_immersive_100"] / figures["chat_page_ms_p50_100"]
    )
    css = re.search(r'href="(/chats/\d+/speakers\.css[^"]*)"', page)
    if css:
        figures["speakers_css_ms_p50"] = statistics.median(times(client, html.unescape(css.group(1))))
    client.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": roleplay_settings(memory_chunking_paused=True), "mode": "roleplay"},
    ).raise_for_status()
    set_roleplay_view(data_dir, character_id, on=False)


def import_figures(client: httpx.Client, character_id: int, figures: dict) -> None:
    chat_id = import_chat(client, character_id)
    started = time.perf_counter()
    client.put(
        f"/api/chats/{chat_id}/options", json={"settings": roleplay_settings(), "mode": "roleplay"}
    ).raise_for_status()
    summarise(client, chat_id, IMPORT_MESSAGES)
    during: list[float] = []
    while building(client, chat_id):
        if time.perf_counter() - started > LIMIT_S:
            raise RuntimeError("the imported chat's memories were not built in time")
        for _ in range(10):
            during.append(timed(client, f"/chats/{chat_id}"))
            time.sleep(PAUSE_S)
    figures["import_memory_build_s"] = time.perf_counter() - started
    idle = times(client, f"/chats/{chat_id}", IDLE_RUNS)
    figures["chat_page_ms_p50_idle"] = statistics.median(idle)
    figures["chat_page_ms_p95_idle"] = p95(idle)
    figures["chat_page_ms_p50_during_import"] = statistics.median(during) if during else 0.0
    figures["chat_page_ms_p95_during_import"] = p95(during) if during else 0.0
    figures["chat_page_p95_ratio_during_import"] = figures["chat_page_ms_p95_during_import"] / max(
        figures["chat_page_ms_p95_idle"], 1e-9
    )
    figures["import_page_samples"] = len(during)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only-import", action="store_true", help="only the import figures (a minute or two)"
    )
    args = parser.parse_args()
    figures: dict[str, float | int] = {"load_average_1m_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        with (
            running_sugo(SUGO_DATA_DIR=str(data_dir)) as url,
            httpx.Client(base_url=url, timeout=120) as client,
        ):
            character = client.post(
                "/api/characters", json={"name": CHARACTER, "first_mes": "Hello, Rowan."}
            ).json()
            if not args.only_import:
                page_figures(client, data_dir, character["id"], figures)
            import_figures(client, character["id"], figures)
    print(f"home_chats={HOME_CHATS + len(SIZES)}")
    for name, value in figures.items():
        print(f"{name}={value:.2f}" if isinstance(value, float) else f"{name}={value}")


if __name__ == "__main__":
    main()
