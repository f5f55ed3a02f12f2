"""The reminders prompt source: the speaking character's open reminders in this chat, above the
conversation (slot "reminders"), with their ids, so the model can change or cancel them; it also
declares the job that fires them and the kind of run a restart can leave behind (app/tools/tasks/firing.py)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text

from app.platform.jobs import Job, RunKind
from app.platform.timeutil import as_utc
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, Turn
from app.tools.tasks import firing, service
from app.tools.tasks.core import schedule

_ANY_OPEN = text("SELECT 1 FROM task WHERE chat_id = :chat_id AND status = 'open' LIMIT 1")


class TaskSource(PromptSource):
    name = "tasks"
    kinds = ("reminders",)
    label = "Reminders"

    def __init__(self, start_reply: firing.StartReply) -> None:
        self._start_reply = start_reply

    def contribute(self, turn: Turn) -> Contribution | None:
        # Most chats have no open reminder: one probe on the (chat_id, status) index tells, before any
        # object is built.
        if turn.session.connection().execute(_ANY_OPEN, {"chat_id": turn.chat.id}).first() is None:
            return None
        tasks = service.open_tasks(turn.session, turn.chat.id, turn.speaker.id)
        if not tasks:
            return None
        now = turn.services.clock.now()
        zone = service.user_zone(turn.session, turn.persona.id if turn.persona else None)
        lines = [
            f"Reminders you have set in this chat, {zone.label} time (change one with update_task or "
            "cancel it with cancel_task, by its id):"
        ]
        for task in tasks:
            due = schedule.format_due(as_utc(task.due_at), now, zone.tz, zone.label)
            lines.append(
                f"- Task {task.id}: due {due}, {schedule.interval_text(task.interval_hours)}. {task.purpose}"
            )
        block = DynamicBlock("reminders", "Reminders and tasks", "\n".join(lines))
        return Contribution(fixed=(block,), note=f"Reminders: {len(tasks)} open in this chat.")

    def jobs(self) -> Sequence[Job]:
        """Background jobs to register with the scheduler when the app starts."""
        return (firing.tasks_job(self._start_reply),)

    def runs(self) -> Sequence[RunKind]:
        """The kinds of runs this source keeps in the database, in the order they settle at start."""
        return (firing.TASK_RUNS,)
