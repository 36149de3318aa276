"""MCP discovery on the dynamic module: the same behaviour as tests/e2e/test_mcp_discovery.py. A server
without a pinned `toolsList` is listed by the filter configuration on Envoy's main thread when it loads
and every 5 minutes; each complete list reaches the workers before their next request; until a
configuration has any tool, requests get a 503 `tools_not_ready` the client can retry; a server that is
down is listed again after a backoff. Listings are counted under the module's labelled metric (when the
next request of the configuration is reported: Envoy records a module's metrics on streams)."""
from __future__ import annotations

from test_mcp_discovery import not_ready_until_listed
from test_mcp_discovery import test_a_server_is_listed_when_the_plugin_starts  # noqa: F401

DM_LISTINGS = "dynamicmodulescustom.api_agent_mcp_listings.api.0.outcome."


def test_requests_before_any_tool_get_a_503_until_the_server_is_up(mocks, wasm, envoy_binary, tmp_path):
    # One process lists once: exactly one listing worked.
    not_ready_until_listed(mocks, wasm, envoy_binary, str(tmp_path), DM_LISTINGS, lambda listed: listed == 1)
