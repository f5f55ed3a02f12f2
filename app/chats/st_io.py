"""SillyTavern .jsonl chats in and out of Sugo's tables. Each imported line is kept (minus the
text Sugo stores in columns) so an export gives back every field SillyTavern wrote.

A reply's reasoning travels as SillyTavern keeps it: `extra.reasoning` and `extra.reasoning_duration`
(ms) for the shown version, `swipe_info[i].extra` for the others. Reasoning tags still inside an
imported reply's text (a chat written without reasoning parsing) are read out of it as new replies
are (app/connections/core/answers.py), so they are neither shown as the reply nor sent back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from app.backgrounds import service as backgrounds
from app.characters.models import Character
from app.characters.service import avatar_key
from app.chats import service as chats
from app.chats import st_metadata, turn_taking
from app.chats.core import imported, st_group, st_jsonl
from app.chats.core.quoting import MAX_REFERENCES, REFERENCE_CHARS, excerpt_problem
from app.chats.models import Chat, Message
from app.chats.settings import ChatSettings
from app.connections.core.answers import ONLY_THINKING, read_answer
from app.platform.core.errors import UserError
from app.platform.timeutil import as_utc, utcnow


@dataclass
class ImportedChat:
    chat: Chat
    lorebooks: list[str]  # names the file attached to the chat; attaching them is lore's part
    notes: list[str] = field(default_factory=list)  # what the file asked for and did not get
    line_ids: list[int] = field(default_factory=list)  # the new messages' ids in the file's order
    metadata: dict = field(default_factory=dict)  # the file's chat_metadata, for the prompt sources to read
    messages: int = 0  # lines written as messages (a Sugo file's refresh marks are not)


@dataclass
class GroupPlan:
    """A SillyTavern group's chat coming in (app/chats/core/st_group.py): its members in the group's
    order, the muted ones, the settings the group file sets, and, from a group file of before
    SillyTavern's PR #4805, this chat's metadata (newer chats carry it in their header line)."""

    name: str
    members: list[Character]
    muted: set[int]
    settings: dict[str, Any]
    metadata: dict[str, Any] | None
    group_raw: dict[str, Any]


# The group file an imported group chat came with, kept in its header for the group export (never
# written into the chat file's own header).
ST_GROUP_KEY = "_st_group"


def import_chat(
    session: Session,
    raw: bytes,
    *,
    character_id: int | None = None,
    file_name: str | None = None,
    group: GroupPlan | None = None,
) -> ImportedChat:
    """Import a SillyTavern chat for a character (the one named in the file when none is given), or
    a group's chat for its members (`group`: each line's speaker found by its `original_avatar`, else
    its name), with the settings its chat_metadata carries, named after the file (imported.py says
    how). One transaction: a refused file creates nothing."""
    try:
        parsed = st_jsonl.parse_chat_jsonl(raw)
    except st_jsonl.ChatImportError as err:
        raise UserError(str(err)) from err
    if group is None:
        character = _find_character(session, character_id, parsed.character_name)
        members, fallback = [character], f"{character.name} – imported {utcnow():%Y-%m-%d %H:%M}"
    else:
        members, fallback = group.members, group.name
    raw_meta = parsed.header.get("chat_metadata")
    if group is not None and not isinstance(raw_meta, dict) and group.metadata is not None:
        raw_meta = group.metadata
    meta = st_metadata.read_metadata(raw_meta)
    stored = parsed.header.get("chat_name")
    stored_name = (stored if isinstance(stored, str) else None) or meta.name
    if group is None:
        name = imported.choose_name(file_name, stored_name, fallback)
    else:
        # A group chat's file is named by its date in SillyTavern: the group's name goes first.
        parts = (group.name, imported.name_from_file(file_name))
        name = imported.clean_name(stored_name) or imported.clean_name(" – ".join(p for p in parts if p))
    chat = chats.create_chat(
        session,
        character_ids=[m.id for m in members],
        name=imported.unique_name(name, _names_like(session, name)),
        mode=meta.mode or "roleplay",
        with_greetings=False,
    )
    chat.st_header = parsed.header if group is None else {**parsed.header, ST_GROUP_KEY: group.group_raw}
    found = {}
    if meta.background_file and "background" not in meta.settings:
        # The file names its background: an upload of that name, a shipped one, or kept for later.
        found["background"] = backgrounds.imported_choice(session, meta.background_file)
    chat.settings = ChatSettings.model_validate(
        {**meta.settings, **found, **(group.settings if group else {})}
    ).model_dump(exclude_none=True)
    if group is not None:
        for member_id in group.muted:
            turn_taking.set_muted(session, chat.id, member_id, True)
    speaker_of = _speaker_finder(members, single=group is None)
    now = utcnow()
    last = None
    added = []
    for st in parsed.messages:
        texts = st.swipes or [st.mes]
        swipe_id = min(max(st.swipe_id, 0), len(texts) - 1) if st.swipes else 0
        created = st.send_date or now
        swipes = [chats.swipe_record(t) for t in texts]
        if not st.is_user:
            swipes = [_reasoning_apart(version, st.raw, i, swipe_id) for i, version in enumerate(swipes)]
        base = dict(st.raw)
        base["mes"] = ""
        if "swipes" in base:
            base["swipes"] = []
        refresh = isinstance(st.raw.get("extra"), dict) and st.raw["extra"].get("sugo_kind") == "refresh"
        speaker = None if st.is_user else speaker_of(st)
        msg = Message(
            chat_id=chat.id,
            kind="refresh" if refresh else "message",
            role="system" if refresh else ("user" if st.is_user else "assistant"),
            name=st.name or (parsed.user_name if st.is_user else _name(speaker)),
            character_id=speaker.id if speaker else None,
            content=swipes[swipe_id]["content"],
            status=swipes[swipe_id]["status"],
            error=swipes[swipe_id]["error"],
            swipes=swipes,
            active_swipe=swipe_id,
            hidden=st.is_system,
            st_extra=base,
            created_at=created,
            updated_at=created,
        )
        msg.quote, msg.chat_refs = _quote_and_refs(st.raw.get("extra"))
        session.add(msg)
        added.append(msg)
        last = created
    chat.last_message_at = last or now
    session.add(chat)
    session.flush()
    raw_meta = parsed.header.get("chat_metadata")
    return ImportedChat(
        chat,
        meta.lorebooks,
        meta.notes,
        [m.id for m in added],
        raw_meta if isinstance(raw_meta, dict) else {},
        messages=sum(m.kind == "message" for m in added),
    )


def _speaker_finder(members: list[Character], *, single: bool):
    """Who wrote a character's line: the chat's one character, or in a group the member whose avatar
    key is the line's `original_avatar`, else the member of the line's name (a line of a character no
    longer in the group has none)."""
    by_key = {avatar_key(m): m for m in members}
    by_name = {m.name: m for m in reversed(members)}

    def speaker_of(st: st_jsonl.StMessage) -> Character | None:
        if single:
            return members[0]
        key = st.raw.get("original_avatar")
        if isinstance(key, str) and key in by_key:
            return by_key[key]
        return by_name.get(st.name)

    return speaker_of


def _name(character: Character | None) -> str:
    return character.name if character else "Unknown character"


def _names_like(session: Session, name: str) -> set[str]:
    """The chat names that begin with `name` (it, and its numbered copies)."""
    return set(session.exec(select(Chat.name).where(col(Chat.name).startswith(name, autoescape=True))))


def _find_character(session: Session, character_id: int | None, name: str) -> Character:
    if character_id is not None:
        char = session.get(Character, character_id)
        if char is None:
            raise UserError(f"Character {character_id} does not exist.")
        return char
    if name:
        char = session.exec(select(Character).where(col(Character.name) == name)).first()
        if char:
            return char
    raise UserError(
        f"This chat belongs to {name or 'an unnamed character'}, who is not in Sugo yet. "
        "Import the character's card first, or pick the character to attach the chat to."
    )


def export_chat(
    session: Session,
    chat: Chat,
    *,
    lorebooks: Sequence[str] = (),
    extra_metadata: Mapping[str, Any] | None = None,
) -> bytes:
    """The chat as SillyTavern .jsonl; its settings and the names of the lorebooks attached to it
    (first one SillyTavern's chat lorebook) go into the header's chat_metadata, with `extra_metadata`
    (what the prompt sources keep per chat, such as summary entries)."""
    characters = chats.chat_characters(session, chat.id)
    header = {k: v for k, v in (chat.st_header or {}).items() if k != ST_GROUP_KEY}
    group = len(characters) > 1
    keys = {c.id: avatar_key(c) for c in characters}
    if group:
        # SillyTavern's group chat header since PR #4805: the names are "unused" (the group file
        # names the members; each character line its speaker by `original_avatar`).
        header["user_name"] = header["character_name"] = "unused"
    else:
        # An imported chat keeps the user name it was written with unless a persona was chosen for it.
        if chat.persona_id or "user_name" not in header:
            header["user_name"] = chats.user_name(session, chat)
        header["character_name"] = characters[0].name if characters else header.get("character_name", "")
    header.setdefault("create_date", st_jsonl.format_send_date(as_utc(chat.created_at)))
    original = header.get("chat_metadata")
    settings = chats.chat_settings(chat)
    ours = st_metadata.chat_metadata(
        settings,
        name=chat.name,
        mode=chat.mode,
        lorebooks=lorebooks,
        background_file=backgrounds.exported_file_name(session, settings.background),
    )
    for key, value in (extra_metadata or {}).items():
        # A source's keys under `sugo` (the chat's notes) join Sugo's own block rather than replace it.
        if key == st_metadata.SUGO_KEY and isinstance(value, Mapping):
            ours[key] = {**ours.get(key, {}), **value}
        else:
            ours[key] = value
    header["chat_metadata"] = st_metadata.merge_metadata(original if isinstance(original, dict) else {}, ours)
    lines = []
    for msg in chats.list_messages(session, chat.id):
        base = dict(msg.st_extra)
        if msg.kind == "refresh" and not base:
            # SillyTavern has no refresh marks: a hidden system line that Sugo recognises again.
            base = {"extra": {"sugo_kind": "refresh"}}
        texts = [s.get("content", "") for s in msg.swipes] or [msg.content]
        had_swipes = "swipes" in base
        # A message that never had alternatives is written without a swipes list, as ST does for
        # user messages; anything with alternatives gets the full list.
        write_swipes = texts if (len(texts) > 1 or had_swipes or msg.role == "assistant") else []
        if base and not had_swipes and len(texts) == 1:
            write_swipes = []
        if msg.role == "assistant" and 0 <= msg.active_swipe < len(msg.swipes):
            base = _with_reasoning(base, msg.swipes[msg.active_swipe])
        if group and msg.role == "assistant" and msg.character_id in keys and "original_avatar" not in base:
            base = {**base, "original_avatar": keys[msg.character_id]}
        if msg.quote or msg.chat_refs:
            # SillyTavern keeps unknown `extra` keys: the excerpt and the attached memories come back.
            extra = dict(base.get("extra") or {}) if isinstance(base.get("extra"), dict) else {}
            extra.update({"sugo_quote": msg.quote, "sugo_chat_refs": msg.chat_refs or []})
            base = {**base, "extra": extra}
        lines.append(
            st_jsonl.message_line(
                name=msg.name,
                is_user=msg.role == "user",
                is_system=msg.hidden or msg.kind == "refresh",
                mes=msg.content,
                send_date=as_utc(msg.created_at),
                swipes=write_swipes,
                swipe_id=msg.active_swipe,
                base=base or None,
            )
        )
    return st_jsonl.write_chat_jsonl(header, lines)


def export_group(session: Session, chat: Chat, *, chat_file_id: str) -> dict[str, Any]:
    """The chat's group as a SillyTavern group file: members by avatar key, the muted ones, the
    turn-taking and card settings; whatever the imported group file held besides is kept."""
    members = turn_taking.group_members(session, chat.id)
    if len(members) < 2:
        raise UserError("This chat has one character: it exports as a chat, not as a group.")
    header = chat.st_header or {}
    raw = header.get(ST_GROUP_KEY) if isinstance(header.get(ST_GROUP_KEY), dict) else {}
    return st_group.group_file(
        raw=raw,
        name=chat.name,
        members=[avatar_key(m.character) for m in members],
        disabled=[avatar_key(m.character) for m in members if m.muted],
        settings=chats.chat_settings(chat).model_dump(),
        chat_id=chat_file_id,
    )


def group_plan(session: Session, group: st_group.StGroup, *, file_id: str) -> GroupPlan:
    """The members of a SillyTavern group file found among Sugo's characters: by the avatar key the
    card was imported with, else by the name the key holds (`Seraphina.png` → Seraphina). A member not
    found refuses the import, naming it: the cards come first."""
    found: list[Character] = []
    muted: set[int] = set()
    missing: list[str] = []
    for key in group.members:
        char = session.exec(
            select(Character).where(Character.st_avatar == key).order_by(col(Character.id))
        ).first()
        if char is None:
            stem = st_group.avatar_stem(key)
            char = session.exec(
                select(Character).where(Character.name == stem).order_by(col(Character.id))
            ).first()
        if char is None:
            missing.append(key)
        else:
            if char not in found:
                found.append(char)
            if key in group.disabled:
                muted.add(char.id)
    if missing:
        raise UserError(
            f"This group's members {', '.join(missing)} are not in Sugo yet: import their cards first."
            if len(missing) > 1
            else f"This group's member {missing[0]} is not in Sugo yet: import the card first."
        )
    if len(found) < 2:
        raise UserError("This group names one character: import its chat as a chat of that character.")
    return GroupPlan(group.name, found, muted, group.settings, group.metadata_for(file_id), group.raw)


def _quote_and_refs(extra: object) -> tuple[str | None, list | None]:
    """A line's excerpt and attached chat memories as Sugo exported them; what does not read as
    such (wrong types, past the limits) is left out."""
    if not isinstance(extra, dict):
        return None, None
    quote = extra.get("sugo_quote")
    quote = quote.strip() if isinstance(quote, str) and quote.strip() and not excerpt_problem(quote) else None
    raw = extra.get("sugo_chat_refs")
    refs = [
        {"chat_id": r.get("chat_id"), "title": r["title"][:500], "text": r["text"][:REFERENCE_CHARS]}
        for r in (raw if isinstance(raw, list) else [])[:MAX_REFERENCES]
        if isinstance(r, dict) and isinstance(r.get("title"), str) and isinstance(r.get("text"), str)
    ]
    return quote, refs or None


def _reasoning_apart(version: dict, raw: dict, index: int, active: int) -> dict:
    """An imported reply version with its reasoning apart from its text: SillyTavern's own (the line's
    `extra` for the shown swipe, `swipe_info[index].extra` for another) and any tags in the text."""
    extra = raw.get("extra")
    if index != active:
        infos = raw.get("swipe_info")
        info = infos[index] if isinstance(infos, list) and index < len(infos) else None
        extra = info.get("extra") if isinstance(info, dict) else None
    extra = extra if isinstance(extra, dict) else {}
    given = extra.get("reasoning") if isinstance(extra.get("reasoning"), str) else ""
    answer = read_answer(version["content"])
    reasoning = "\n\n".join(t for t in (given.strip(), answer.reasoning) if t)
    if not reasoning and not answer.had_reasoning:
        return version
    ms = extra.get("reasoning_duration")
    ms = round(ms) if isinstance(ms, int | float) and not isinstance(ms, bool) and 0 <= ms < 10**9 else None
    content = answer.text if answer.had_reasoning else version["content"]
    failed = {"status": "error", "error": ONLY_THINKING} if not content.strip() else {}
    return {
        **version,
        "content": content,
        **failed,
        **({"reasoning": reasoning, "reasoning_ms": ms} if reasoning else {}),
    }


def _with_reasoning(base: dict, version: dict) -> dict:
    """The exported line's `extra` with the shown version's reasoning, as SillyTavern keeps it."""
    extra = dict(base.get("extra")) if isinstance(base.get("extra"), dict) else {}
    reasoning, ms = version.get("reasoning"), version.get("reasoning_ms")
    if isinstance(reasoning, str) and reasoning:
        extra["reasoning"] = reasoning
        if isinstance(ms, int):
            extra["reasoning_duration"] = ms
    elif extra.get("reasoning"):  # the imported line's reasoning belongs to another version
        extra.pop("reasoning")
        extra.pop("reasoning_duration", None)
    else:
        return base
    return {**base, "extra": extra}
