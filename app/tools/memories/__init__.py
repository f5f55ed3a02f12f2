"""Long-term memories (kept per character or for all characters, the Memories page) and the chat's
short-term memory (working notes for the current arc, shown in Chat Settings): their models, service,
prompt sources and pages. The tools that write them live in app/tools/builtin/memories.py."""
