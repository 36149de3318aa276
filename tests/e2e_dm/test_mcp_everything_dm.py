"""The reference MCP server (`@modelcontextprotocol/server-everything`, run with npx) on the dynamic
module: tests/e2e/test_mcp_everything.py, skipped as there without npx. A restarted server is checked for
what holds on this host (see test_mcp_dm.py: no session outlives a request here)."""
from test_mcp_dm import restarted_server_still_answers
from test_mcp_everything import (  # noqa: F401
    ARGS,
    EXPECTED,
    NAME,
    gateway,
    running,
    test_images_are_described_and_links_named,
    test_structured_content_and_schema_checks,
    test_text_results,
)


def test_a_restarted_server_still_answers(running, mocks):
    restarted_server_still_answers(running, mocks, NAME, ARGS, EXPECTED)
