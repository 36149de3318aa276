"""tests/e2e/test_streaming.py on the dynamic module: these checks hold on both hosts."""
from test_streaming import *  # noqa: F401,F403
