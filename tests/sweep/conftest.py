"""The sweep tests share helpers from sweephelp.py (a plain module: conftest names clash across test dirs)."""
