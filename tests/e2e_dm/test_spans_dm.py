"""Traces on the dynamic module: tests/e2e/test_spans.py as it is."""
from test_spans import *  # noqa: F401,F403
