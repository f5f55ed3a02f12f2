"""Backgrounds of the roleplay view: pictures the user uploaded, and the few shipped with Sugo."""
