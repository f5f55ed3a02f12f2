"""Advanced Memory Recall (issue 14): a Roleplay chat split into scenes, each closed scene summarised
by a helper model and recalled with an excerpt of its messages, the current window restarted at the
newest scene when the prompt reaches its ceiling. Built in steps: the pure parts first (scene breaks
in a reply, the scene check, the scene recap), then the storage, the jobs, the prompt source and the
pages; the feature is offered in Chat Settings only once it works end to end."""
