"""The seam's order: a source whose `begin` left work running contributes after the others, so
their work overlaps with its own; the prompt still gets every contribution in registry order."""

from types import SimpleNamespace

from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, PromptSources

# A session as the seam asks it (which database it speaks to): each source runs in a savepoint on
# PostgreSQL, in place on SQLite.
SESSION = SimpleNamespace(get_bind=lambda: SimpleNamespace(dialect=SimpleNamespace(name="sqlite")))


class Recorder(PromptSource):
    def __init__(self, name: str, log: list, *, running: bool = False, fails: bool = False) -> None:
        self.name, self.label, self.log, self.running, self.fails = name, name.title(), log, running, fails

    def begin(self, turn):
        self.log.append(f"begin {self.name}")
        return self.running

    def contribute(self, turn):
        self.log.append(
            f"contribute {self.name}: saw " + ",".join(b.kind for c in turn.contributed for b in c.dynamic)
        )
        if self.fails:
            raise RuntimeError("broken")
        return Contribution(dynamic=(DynamicBlock(self.name, self.name, self.name),), note=self.name)


def test_running_sources_contribute_last_but_keep_their_place():
    log: list = []
    sources = PromptSources(
        [Recorder("recall", log, running=True), Recorder("lore", log), Recorder("notes", log)]
    )
    gathered = sources.gather(
        SimpleNamespace(session=SESSION, chat=SimpleNamespace(id=1), contributed=[], timings={})
    )
    # The source contributing last sees what the others gave (Advanced Memory counts their tokens).
    assert log == [
        "begin recall",
        "begin lore",
        "begin notes",
        "contribute lore: saw ",
        "contribute notes: saw lore",
        "contribute recall: saw lore,notes",
    ]
    assert [b.kind for b in gathered.dynamic] == ["recall", "lore", "notes"]
    assert gathered.notes == ("recall", "lore", "notes")


def test_a_failing_running_source_is_named_in_its_place():
    log: list = []
    sources = PromptSources([Recorder("recall", log, running=True, fails=True), Recorder("lore", log)])
    gathered = sources.gather(
        SimpleNamespace(session=SESSION, chat=SimpleNamespace(id=1), contributed=[], timings={})
    )
    assert [b.kind for b in gathered.dynamic] == ["lore"]
    assert gathered.warnings[0].startswith("Recall failed") and gathered.notes == ("lore",)


class Taker(PromptSource):
    """Takes messages out of the history; `fails` breaks its filter."""

    def __init__(self, name: str, ids: set, *, fails: bool = False) -> None:
        self.name, self.label, self.ids, self.fails = name, name.title(), ids, fails

    def history_filter(self, turn):
        if self.fails:
            raise RuntimeError("broken")
        return self.ids


def test_sources_take_messages_out_and_a_failing_filter_takes_none():
    sources = PromptSources(
        [Taker("summaries", {3, 4}), Taker("other", {9}), Taker("broken", {5}, fails=True)]
    )
    gathered = sources.gather(
        SimpleNamespace(session=SESSION, chat=SimpleNamespace(id=1), contributed=[], timings={})
    )
    assert gathered.left_out == frozenset({3, 4, 9})
    assert gathered.warnings[0].startswith("Broken failed")


def test_every_source_is_priced_in_registry_order_even_when_it_fails():
    log: list = []
    sources = PromptSources(
        [Recorder("recall", log, running=True), Recorder("lore", log, fails=True), Recorder("notes", log)]
    )
    gathered = sources.gather(
        SimpleNamespace(session=SESSION, chat=SimpleNamespace(id=1), contributed=[], timings={})
    )
    assert [name for name, _ in gathered.timings] == ["recall", "lore", "notes"]
    assert all(ms >= 0 for _, ms in gathered.timings)
