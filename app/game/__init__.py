"""Game Mode: a chat run by a Game Master (issue 27)."""
