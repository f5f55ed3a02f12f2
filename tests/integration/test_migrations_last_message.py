"""Issue 21's migrations bring old rows forward: a memory learns its newest message (so the prompt's recall
can leave out the window's memories), and old summary entries are held for no reason."""

from alembic import command
from sqlalchemy import text

from app.platform.db import make_engine
from app.platform.migrate import alembic_config, upgrade_database


def test_old_memories_learn_their_newest_message_and_old_entries_no_reason(tmp_path):
    engine = make_engine(tmp_path / "old.db")
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "7c9e1b3d5f8a")
        conn.execute(
            text(
                "insert into chat (id, name, mode, settings, st_header, next_speaker, created_at, updated_at,"
                " last_message_at) values (7, 'Old', 'roleplay', '{}', '{}', 0, '2024-01-01', '2024-01-01',"
                " '2024-01-01')"
            )
        )
        for chunk_id, ids in ((3, "[12, 14, 13]"), (4, "[]")):
            conn.execute(
                text(
                    "insert into memory_chunk (id, chat_id, content, message_ids, fingerprint, message_count,"
                    " status, first_message_at, last_message_at, created_at) values (:id, 7, 'Aria: hi.', :ids,"
                    " '', 1, 'waiting', '2024-01-01', '2024-01-01', '2024-01-01')"
                ),
                {"id": chunk_id, "ids": ids},
            )
        conn.execute(
            text(
                "insert into summary_entry (chat_id, title, content, first_message_id, last_message_id,"
                " first_position, last_position, tokens, active, origin, awaiting_review, created_at,"
                " updated_at) values (7, '', 'Old.', 1, 2, 1, 2, 1, 0, 'model', 1, '2024-01-01', '2024-01-01')"
            )
        )
    upgrade_database(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("select id, last_message_id from memory_chunk order by id")).all()
        assert rows == [(3, 14), (4, None)]
        assert conn.execute(text("select review_reason, awaiting_review from summary_entry")).one() == ("", 1)
        # The word index's trigger survived (no table copy): deleting a memory still empties its words.
        conn.execute(text("insert into fts_memory_chunk (rowid, body) values (3, 'c7qaria')"))
        conn.execute(text("delete from memory_chunk where id = 3"))
        assert conn.execute(text("select count(*) from fts_memory_chunk where rowid = 3")).scalar() == 0
