from datetime import UTC, datetime, timedelta

from app.memory.recall.core.chunking import (
    MessageText,
    StoredChunk,
    chunk_messages,
    embedding_windows,
    missed_messages,
    stale_chunks,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def m(i, text=None, name=None):
    return MessageText(
        i, name or ("Rowan" if i % 2 else "Mirela"), text or f"message {i}", T0 + timedelta(minutes=i)
    )


def test_only_complete_groups_of_five():
    drafts = chunk_messages([m(i) for i in range(1, 13)])
    assert [d.message_ids for d in drafts] == [(1, 2, 3, 4, 5), (6, 7, 8, 9, 10)]
    assert drafts[0].content.startswith("Rowan: message 1\n\nMirela: message 2")
    assert drafts[0].first_message_at == T0 + timedelta(minutes=1)
    assert drafts[1].last_message_at == T0 + timedelta(minutes=10)
    assert chunk_messages([m(i) for i in range(1, 5)]) == []


def test_empty_messages_are_not_chunked():
    msgs = [m(1), m(2, "  "), m(3), m(4), m(5), m(6)]
    assert chunk_messages(msgs)[0].message_ids == (1, 3, 4, 5, 6)


def test_edits_deletes_and_hides_make_chunks_stale():
    msgs = [m(i) for i in range(1, 11)]
    drafts = chunk_messages(msgs)
    stored = [StoredChunk(100 + n, d.message_ids, d.fingerprint) for n, d in enumerate(drafts)]
    current = {x.id: x for x in msgs}
    assert stale_chunks(stored, current) == []
    edited = {**current, 3: m(3, "changed")}
    assert stale_chunks(stored, edited) == [100]
    gone = {k: v for k, v in current.items() if k != 8}
    assert stale_chunks(stored, gone) == [101]


def test_long_messages_are_embedded_in_overlapping_windows_so_the_tail_is_seen():
    long_text = " ".join(f"w{i}" for i in range(1000)) + " lighthouse"
    windows = embedding_windows([m(1, "short one"), m(2, long_text)], max_words=200)
    assert windows[0] == "Rowan: short one"
    assert len(windows) > 5 and windows[-1].endswith("lighthouse")
    assert all(len(w.split()) <= 200 for w in windows)


def test_a_message_readable_again_inside_a_chunk_or_beside_one_is_missed():
    chunks = [(2, 3, 4, 5, 6), (8, 9, 10, 11, 12), (13, 14, 15, 16, 17)]
    readable = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    # 7 was hidden when the chunks were made (it sits between two of them); 18 and 19 wait for more.
    assert missed_messages(readable, chunks) == [7]
    # a failed reply written after all, inside a chunk's span
    assert missed_messages(list(range(2, 13)), [(2, 3, 4, 5, 6), (7, 8, 10, 11, 12)]) == [9]
    assert missed_messages(readable, []) == []
    assert missed_messages([2, 3, 4, 5, 6], [(2, 3, 4, 5, 6)]) == []


def test_a_forgotten_memory_leaves_a_whole_chunk_of_gap_and_stays_forgotten():
    readable = list(range(2, 23))
    # the user forgot the memory of 7–11: its five messages are in no chunk, and that is not a mistake
    assert missed_messages(readable, [(2, 3, 4, 5, 6), (12, 13, 14, 15, 16), (17, 18, 19, 20, 21)]) == []
    # the first memory forgotten, too (the pinned message 1 is not among the readable ones)
    assert missed_messages(readable, [(7, 8, 9, 10, 11), (12, 13, 14, 15, 16)]) == []
    # a message hidden before the first chunk was made, shown again: one message before the first chunk
    assert missed_messages([2, 3, 4, 5, 6, 7], [(3, 4, 5, 6, 7)]) == [2]
