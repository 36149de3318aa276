"""Tokens per consumer on the dynamic module: tests/e2e/test_rate_limit.py as it is."""
from test_rate_limit import *  # noqa: F401,F403
