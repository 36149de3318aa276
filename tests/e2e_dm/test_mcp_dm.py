"""MCP servers with a pinned `toolsList` on the dynamic module: tests/e2e/test_mcp.py as it is, against
the same Python SDK server. Requests of a worker share one session per server here too
(`agent::sessions`, per worker thread), and a restarted server's lost session is reopened."""
from test_mcp import *  # noqa: F401,F403
