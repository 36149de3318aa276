"""tests/e2e/test_messages.py on the dynamic module: these checks hold on both hosts (the stream is live here)."""
from test_messages import *  # noqa: F401,F403
