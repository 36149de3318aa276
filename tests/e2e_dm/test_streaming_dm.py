"""tests/e2e/test_streaming.py on the dynamic module (it checks there that this host asks the LLM for
streamed turns)."""
from test_streaming import *  # noqa: F401,F403
