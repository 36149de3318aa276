"""tests/e2e/test_native.py on the dynamic module: these checks hold on both hosts."""
from test_native import *  # noqa: F401,F403
