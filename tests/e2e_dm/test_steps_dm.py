"""tests/e2e/test_steps.py on the dynamic module: these checks hold on both hosts."""
from test_steps import *  # noqa: F401,F403
