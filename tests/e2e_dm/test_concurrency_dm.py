"""tests/e2e/test_concurrency.py on the dynamic module: these checks hold on both hosts."""
from test_concurrency import *  # noqa: F401,F403
