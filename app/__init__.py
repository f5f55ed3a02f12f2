"""Sugo: a self-hosted AI roleplay and chat front end."""
