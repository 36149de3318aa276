"""tests/e2e/test_conversation.py on the dynamic module: these checks hold on both hosts."""
from test_conversation import *  # noqa: F401,F403
