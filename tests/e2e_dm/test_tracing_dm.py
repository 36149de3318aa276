"""Trace context on every callout, on the dynamic module: tests/e2e/test_tracing.py as it is."""
from test_tracing import *  # noqa: F401,F403
