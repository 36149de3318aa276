"""tests/e2e/test_approval.py on the dynamic module: these checks hold on both hosts."""
from test_approval import *  # noqa: F401,F403
