"""Secrets never reach the log, at trace level too (tests/e2e/test_secrets.py on the dynamic module)."""
from test_secrets import *  # noqa: F401,F403
