"""Summaries: Chat Summary entries for Roleplay chats, day and week summaries for Conversation chats."""
