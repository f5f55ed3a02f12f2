"""Tools: what a character can do besides talking (app/tools/registry.py is the one list)."""
