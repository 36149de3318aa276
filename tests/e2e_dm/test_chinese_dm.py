"""tests/e2e/test_chinese.py on the dynamic module: these checks hold on both hosts."""
from test_chinese import *  # noqa: F401,F403
