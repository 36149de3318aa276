"""MCP discovery on the dynamic module: the same behaviour as tests/e2e/test_mcp_discovery.py. A server
without a pinned `toolsList` is listed by the filter configuration on Envoy's main thread when it loads
and every 5 minutes; each complete list reaches the workers before their next request; until a
configuration has any tool, requests get a 503 `tools_not_ready` the client can retry; a server that is
down is listed again after a backoff. Listings are counted under the module's labelled metric (when the
next request of the configuration is reported: Envoy records a module's metrics on streams)."""
from __future__ import annotations

import json
import sys
import urllib.request

from support import mcp_servers as mcp
from support.agent import answer_of
from support.envoy import Envoy
from support.mcp_servers import tool_calls, tool_results
from test_mcp_discovery import SERVER, start_gateway, wait_ready
from test_mcp_discovery import test_a_server_is_listed_when_the_plugin_starts  # noqa: F401


def listing_counts(envoy: Envoy) -> dict[str, int]:
    """`api_agent_mcp_listings` of apis[0] by outcome, from Envoy's admin /stats."""
    with urllib.request.urlopen(f"http://{envoy.admin}/stats?format=json&filter=mcp_listings", timeout=5) as r:
        stats = json.loads(r.read())["stats"]
    prefix = "dynamicmodulescustom.api_agent_mcp_listings.api.0.outcome."
    return {s["name"][len(prefix):]: s["value"] for s in stats if s.get("name", "").startswith(prefix)}


def test_requests_before_any_tool_get_a_503_until_the_server_is_up(mocks, wasm, envoy_binary, tmp_path):
    port = mcp.free_port()
    gateway, envoy = start_gateway(mocks, wasm, envoy_binary, port, str(tmp_path))
    server = None
    try:
        reply = gateway.chat("Discovered: too early")
        assert reply.status == 503, reply.text
        assert reply.headers.get("retry-after") == "1", reply.headers
        assert reply.json()["error"]["code"] == "tools_not_ready"
        assert "MCP tools/list of apis[0] failed" in envoy.log_tail(200)
        server = mcp.Running([sys.executable, SERVER, str(port)], port)
        q = "Discovered: forecast"
        mocks.llm.script(q, tool_calls(("c1", "forecast", {"city": "Oslo"})), "Sunny.")
        assert answer_of(wait_ready(gateway, q, timeout_s=20)) == "Sunny."
        assert tool_results(mocks, q) == {"c1": "Oslo: sunny for 1 day(s), 21 °C"}
        assert "MCP tools of apis[0] listed: 2 tool(s): add, forecast" in envoy.log_tail(400)
        # Failures while the server was down, then the listing that worked: one process lists once.
        counts = listing_counts(envoy)
        assert counts.get("failed", 0) >= 1 and counts.get("listed", 0) == 1, counts
    finally:
        envoy.stop()
        if server:
            server.stop()
