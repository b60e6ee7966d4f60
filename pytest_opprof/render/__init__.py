"""Renderers: each takes plain data and returns a string; none prints."""
