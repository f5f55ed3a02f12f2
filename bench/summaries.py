"""Chat Summary in the prompt, on the real path (`build_chat_prompt` over SQLite): how much smaller
a long Roleplay chat's prompt gets with summaries and hidden summarised messages, and what 400
entries cost the build. Prints name=value lines; never asserts on time.

The chat: 2,000 messages after the greeting, alternating the user (~40 words) and the character
(~150 words, roleplay prose), with words from a fixed vocabulary and a seeded random. Context size
32,768 tokens, the default recent-message limit (80), 512 tokens reserved for the reply. The user's
path for a Roleplay chat: SillyTavern's Eldoria World Info book (the fixture) attached to the chat
(its "forest" entry fires from the messages), Memory Recall as a Roleplay chat has it by default
(off). The builds run in the bench's process (the scheduler's jobs do not take part in a build).

- summarized_prompt_ratio: the prompt's tokens with one terse entry (~60 words) per 50 messages (40
  entries, every message covered), "Hide summarised messages" on and a recent tail of 10, divided
  by the prompt the same chat sends without summaries at the same context size when only that size
  limits the history (what SillyTavern and Marinara send: the card, the lore, and the newest
  messages that fit in 32,768 - 512 tokens; counted with Sugo's token counter on Sugo's own prompt
  without entries plus the older messages that would fit).
- summarized_prompt_ratio_vs_window: the same prompt over Sugo's own prompt without summaries,
  whose recent-message window (80) already caps the history at 57-80 messages. All 40 entries are
  sent, including those whose messages left the window long ago: what summaries add there is memory
  of those messages, not savings.
- summary_prompt_build_ms_p50: `build_chat_prompt` with 400 active entries (one per 5 messages),
  hide on, median of 40 runs after 3 warm-ups.

Run: .venv/bin/python bench/summaries.py
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import delete  # noqa: E402
from sqlmodel import Session, select  # noqa: E402

from app.characters.schemas import CharacterIn  # noqa: E402
from app.characters.service import create_character  # noqa: E402
from app.chats.core.window import DEFAULT_RECENT_LIMIT  # noqa: E402
from app.chats.history import history_window  # noqa: E402
from app.chats.models import Message  # noqa: E402
from app.chats.service import create_chat, get_chat, new_message  # noqa: E402
from app.lore import service as lore  # noqa: E402
from app.main import build_services  # noqa: E402
from app.memory.summaries.models import SummaryEntry  # noqa: E402
from app.memory.summaries.service import write_entry  # noqa: E402
from app.platform.settings import Settings  # noqa: E402
from app.prompt.core.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens  # noqa: E402
from app.prompt.service import build_chat_prompt  # noqa: E402

MESSAGES = 2000
CONTEXT_SIZE = 32768
REPLY_TOKENS = 512
ELDORIA = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "sillytavern" / "Eldoria.json"
RUNS = 40
WARM_UPS = 3
WORDS = (
    "lantern harbour tide rope gull salt cliff storm map ember cloak blade whisper road inn ale "
    "moon fog bell tower key chest ship sail oar stone moss river bridge forest wolf fire smoke "
    "she he they walked looked smiled turned slowly quietly the a of to and in with under over"
).split()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def prepare(services) -> int:
    rng = random.Random(12)
    with Session(services.engine) as s:
        char = create_character(
            s,
            CharacterIn(
                name="Mirela",
                description="A lighthouse keeper on a cold coast.",
                first_mes="*Mirela lowers her lantern.* You're alive.",
            ),
        )
        chat = create_chat(s, character_ids=[char.id], name="Long road")
        chat.settings = {"context_size": CONTEXT_SIZE, "max_tokens": REPLY_TOKENS}
        book = lore.import_file(s, ELDORIA.read_bytes(), filename=ELDORIA.name).book
        lore.set_chat_books(s, chat.id, [book.id])
        for i in range(MESSAGES):
            user = i % 2 == 0
            s.add(
                new_message(
                    chat.id,
                    "user" if user else "assistant",
                    "Rowan" if user else "Mirela",
                    [text(rng, 40 if user else 150)],
                    character_id=None if user else char.id,
                )
            )
        s.commit()
        return chat.id


def summarise(services, chat_id: int, every: int) -> None:
    """Entries of about 60 words, each covering `every` messages, the greeting's included."""
    rng = random.Random(every)
    with Session(services.engine) as s:
        s.execute(delete(SummaryEntry).where(SummaryEntry.chat_id == chat_id))
        total = MESSAGES + 1
        for start in range(1, total + 1, every):
            write_entry(
                s,
                chat_id,
                content=text(rng, 60),
                title=f"Part {start // every + 1}",
                scope="range",
                start=start,
                end=min(total, start + every - 1),
            )
        s.commit()


def set_hide(services, chat_id: int, hide: bool) -> None:
    with Session(services.engine) as s:
        chat = get_chat(s, chat_id)
        chat.settings = {**chat.settings, "summary_hide_messages": hide, "summary_recent_tail": 10}
        s.add(chat)
        s.commit()


def prompt_tokens(services, chat_id: int) -> int:
    with Session(services.engine) as s:
        prompt, _ = build_chat_prompt(s, get_chat(s, chat_id), services=services)
        return prompt.total_tokens


def context_filled_tokens(services, chat_id: int, sugo_prompt: int) -> int:
    """Sugo's prompt without summaries, plus the older messages (newest first) its window left out that
    still fit in the context when only its size limits the history; each costs its text and the
    per-message overhead the builder counts."""
    with Session(services.engine) as s:
        sent = {m.id for m in history_window(s, chat_id, before_id=None, limit=DEFAULT_RECENT_LIMIT).messages}
        messages = s.exec(select(Message).where(Message.chat_id == chat_id).order_by(Message.id.desc())).all()  # type: ignore[union-attr]
    room = CONTEXT_SIZE - REPLY_TOKENS - sugo_prompt
    total = sugo_prompt
    for msg in messages:
        if msg.id in sent:
            continue
        cost = count_tokens(msg.content) + MESSAGE_OVERHEAD_TOKENS
        if cost > room:
            break
        room -= cost
        total += cost
    return total


def check_path(services, chat_id: int) -> None:
    """The figures mean nothing unless the lore fires and the entries are sent."""
    with Session(services.engine) as s:
        prompt, _ = build_chat_prompt(s, get_chat(s, chat_id), services=services)
    text = "\n".join(b.text for b in prompt.blocks)
    if "Eldoria is here" not in text or "Part 1" not in text:
        raise RuntimeError("the prompt lacks the Eldoria lore entry or the summary entries")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        services = build_services(Settings(data_dir=Path(folder), start_scheduler=False))
        try:
            chat_id = prepare(services)
            without = prompt_tokens(services, chat_id)
            filled = context_filled_tokens(services, chat_id, without)
            summarise(services, chat_id, 50)
            set_hide(services, chat_id, True)
            with_summaries = prompt_tokens(services, chat_id)
            check_path(services, chat_id)
            summarise(services, chat_id, 5)
            times = []
            with Session(services.engine) as s:
                chat = get_chat(s, chat_id)
                for run in range(WARM_UPS + RUNS):
                    t = time.perf_counter()
                    build_chat_prompt(s, chat, services=services)
                    if run >= WARM_UPS:
                        times.append((time.perf_counter() - t) * 1000)
        finally:
            services.close()
    print(f"messages={MESSAGES}")
    print(f"prompt_tokens_without_summaries_context_filled={filled}")
    print(f"prompt_tokens_without_summaries_sugo_window={without}")
    print(f"prompt_tokens_with_summaries={with_summaries}")
    print(f"summarized_prompt_ratio={with_summaries / filled:.3f}")
    print(f"summarized_prompt_ratio_vs_window={with_summaries / without:.3f}")
    print(f"summary_prompt_build_ms_p50={statistics.median(times):.2f}")


if __name__ == "__main__":
    main()
