"""tests/e2e/test_retries.py on the dynamic module: these checks hold on both hosts."""
from test_retries import *  # noqa: F401,F403
