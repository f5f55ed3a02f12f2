"""The limits of a chat's memory (issue 25), in one place so `rules` and `notes` share them."""

REQUEST_CHARS = 240
RESULT_CHARS = 700
MAX_FILES = 14
MAX_COMMANDS = 8
# More than this many requests: keep the first FIRST_KEPT and the last LAST_KEPT.
LONG_CHAT_REQUESTS = 7
FIRST_KEPT = 2
LAST_KEPT = 4
PREVIOUS_SUMMARY_CHARS = 1000
MAX_NOTES = 30
NOTE_CHARS = 500
FILE_NAME_CHARS = 120
COMMAND_CHARS = 120
