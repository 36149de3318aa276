"""tests/e2e/test_limits.py on the dynamic module: these checks hold on both hosts."""
from test_limits import *  # noqa: F401,F403
