"""Advanced Memory Recall (issue 14): a Roleplay chat split into scenes, each closed scene summarised
by a helper model and recalled with an excerpt of its messages, the current window restarted at the
newest scene when the prompt reaches its ceiling. Pure parts: breaks, check, recap, participants,
window, recalled, transfer, problems; services: checks, writer, jobs, prepare, fix, prompt, service; the prompt source
(source.py), Chat Settings (settings_form.py), the pages (pages.py, routes.py) and the JSON API."""
