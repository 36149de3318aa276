"""tests/e2e/test_mcp_stateless.py on the dynamic module, as it is."""
from test_mcp_stateless import *  # noqa: F401,F403
