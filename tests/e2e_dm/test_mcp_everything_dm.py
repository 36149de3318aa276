"""The reference MCP server (`@modelcontextprotocol/server-everything`, run with npx) on the dynamic
module: tests/e2e/test_mcp_everything.py as it is (skipped as there without npx)."""
from test_mcp_everything import *  # noqa: F401,F403
