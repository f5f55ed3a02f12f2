"""Gather what the context grid, the size table and the prompt snapshot show for a chat."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlmodel import Session, col, select

from app.characters.models import Character
from app.chats import service as chats
from app.chats.models import Chat, Message
from app.connections.crypto import KeyBox
from app.connections.models import Connection
from app.connections.providers import get_provider
from app.connections.service import provider_config
from app.platform.core.downloads import safe_stem
from app.platform.services import Services
from app.platform.timeutil import utcnow
from app.prompt.core.blocks import Prompt
from app.prompt.core.grid import CostEstimate, Grid, Prices, cache_hit_rate, context_grid, estimate_cost
from app.prompt.core.inspect import SizeRow, group_totals, size_breakdown, snapshot_text, stable_prefix_tokens
from app.prompt.service import Effective, build_chat_prompt

# How many recent replies the cache hit rate looks at.
USAGE_WINDOW = 50


@dataclass(frozen=True)
class ContextReport:
    prompt: Prompt
    connection: Connection | None
    grid: Grid
    sizes: list[SizeRow]
    cost: CostEstimate
    prefix_tokens: int
    last_input_tokens: int | None  # what the provider reported for the last real reply
    last_cached_tokens: int | None
    cache_hit_rate: float | None
    replies_with_usage: int


def _usages(session: Session, chat_id: int) -> list[dict]:
    rows = session.exec(
        select(Message)
        .where(Message.chat_id == chat_id, Message.role == "assistant")
        .order_by(col(Message.id).desc())
        .limit(USAGE_WINDOW)
    )
    usages = []
    for msg in rows:
        for swipe in reversed(msg.swipes):
            if isinstance(swipe.get("usage"), dict):
                usages.append(swipe["usage"])
    return usages  # newest first


def context_report(
    session: Session, chat: Chat, *, services: Services, speaker: Character | None = None
) -> ContextReport:
    prompt, effective = build_chat_prompt(session, chat, services=services, speaker=speaker)
    conn = effective.connection
    prices = (
        Prices(conn.price_input_per_m, conn.price_output_per_m, conn.price_cached_input_per_m)
        if conn
        else Prices()
    )
    prefix = stable_prefix_tokens(prompt)
    usages = _usages(session, chat.id)
    rate, replies = cache_hit_rate(usages)
    last = usages[0] if usages else {}
    return ContextReport(
        prompt=prompt,
        connection=conn,
        grid=context_grid(group_totals(prompt), prompt.context_size, prompt.reply_reserve),
        sizes=size_breakdown(prompt),
        cost=estimate_cost(
            prices, input_tokens=prompt.total_tokens, prefix_tokens=prefix, reply_reserve=prompt.reply_reserve
        ),
        prefix_tokens=prefix,
        last_input_tokens=last.get("input_tokens"),
        last_cached_tokens=last.get("cached_input_tokens"),
        cache_hit_rate=rate,
        replies_with_usage=replies,
    )


def snapshot(
    session: Session, chat: Chat, *, services: Services, fmt: str, speaker: Character | None = None
) -> tuple[str, str]:
    """(filename, content) of the exact package for the next reply (`speaker`'s, in a group):
    annotated text, or the JSON body the provider would receive (without any key)."""
    prompt, effective = build_chat_prompt(session, chat, services=services, speaker=speaker)
    safe = safe_stem(chat.name, "chat")
    stamp = utcnow().strftime("%Y%m%d-%H%M%S")
    if fmt == "json":
        return f"{safe} prompt {stamp}.json", json.dumps(
            _provider_request(prompt, effective, services.keybox), indent=2, ensure_ascii=False
        )
    conn = effective.connection
    header = [
        ("Chat", f"{chat.name} (#{chat.id}, {chat.mode})"),
        ("Characters", ", ".join(c.name for c in chats.chat_characters(session, chat.id))),
        (
            "Connection",
            f"{conn.name} · {conn.kind} · {conn.model or 'default model'} · {conn.base_url}"
            if conn
            else "none yet",
        ),
        ("Taken", utcnow().isoformat(timespec="seconds")),
    ]
    return f"{safe} prompt {stamp}.txt", snapshot_text(prompt, header)


def _provider_request(prompt: Prompt, effective: Effective, keybox: KeyBox) -> dict:
    conn = effective.connection
    if conn is None:
        return {"provider": None, "messages": list(prompt.messages)}
    try:
        config = provider_config(conn, keybox)
    except ValueError:
        # The body is the same without the secrets (the key and the header values, which the
        # snapshot leaves out anyway) that could not be decrypted.
        config = provider_config(
            conn.model_copy(update={"api_key_encrypted": None, "extra_headers": {}}), keybox
        )
    module = get_provider(conn.kind)
    path = "/messages" if conn.kind == "anthropic" else "/chat/completions"
    return {
        "provider": conn.kind,
        "url": conn.base_url.rstrip("/") + path,
        "body": module.build_body(config, list(prompt.messages), effective.params, stream=True),
    }
