"""Errors services raise for the user; routes turn them into 4xx answers with the message as is."""


class UserError(ValueError):
    """Bad input: the message says what was wrong and what to do."""

    status_code = 400


class Conflict(UserError):
    """The request is fine but clashes with work going on (a run already busy): 409."""

    status_code = 409


class NotFound(LookupError):
    status_code = 404
