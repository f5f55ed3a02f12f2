"""Tasks and reminders: the `create_task`/`update_task`/`cancel_task` tools' rows, the job that fires
them when due (a real reply in their chat), the prompt source listing the open ones, and the Tasks page."""
