"""tests/e2e/test_catalog.py on the dynamic module: these checks hold on both hosts."""
from test_catalog import *  # noqa: F401,F403
