"""tests/e2e/test_responses.py on the dynamic module: these checks hold on both hosts (the stream is live
here; tests/e2e_dm/test_live_streaming_dm.py has the live relay itself)."""
from test_responses import *  # noqa: F401,F403
