"""A pytest session: options, the session that profiles and judges, the confirmation
re-run, outputs, and the one child launcher.

Imports every layer below it, render included.
"""
