"""tests/e2e/test_tools.py on the dynamic module: these checks hold on both hosts."""
from test_tools import *  # noqa: F401,F403
