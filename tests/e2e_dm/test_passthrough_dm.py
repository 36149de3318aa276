"""Requests the agent does not take carry no identity to the LLM (tests/e2e/test_passthrough.py on the dynamic module)."""
from test_passthrough import *  # noqa: F401,F403
