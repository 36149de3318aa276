"""MCP discovery in Envoy: a server without a pinned `toolsList` is listed by the plugin itself (root
context callouts) when it starts; until a configuration has any tool, requests get a 503 OpenAI error
the client can retry; a server that is down is listed again after a backoff."""
from __future__ import annotations

import os
import sys
import time

import pytest

from support import mcp_servers as mcp
from support.agent import CHAT_PATH, LLM_KEY, LLM_MODEL, answer_of
from support.envoy import Envoy, bootstrap, callout_cluster
from support.agent import Gateway
from support.mcp_servers import tool_calls, tool_results

HERE = os.path.dirname(__file__)
SERVER = os.path.join(HERE, "support", "mcp_server.py")


def only_mcp(mocks, port: int) -> dict:
    """A plugin whose only tools are the MCP server's, listed by the plugin."""
    llm = {"apiKey": LLM_KEY, "serviceName": "llm.dns", "servicePort": mocks.llm.port, "path": CHAT_PATH,
           "model": LLM_MODEL, "maxExecutionTime": 5000}
    server = {"serviceName": "mcp.dns", "servicePort": port, "domain": f"127.0.0.1:{port}", "path": "/mcp",
              "maxExecutionTime": 2000, "tools": ["add", "forecast"]}
    return {"llm": llm, "apis": [{"mcpServer": server}], "mode": "native"}


def start_gateway(mocks, wasm, envoy_binary, port, workdir) -> tuple[Gateway, Envoy]:
    clusters = {callout_cluster("llm.dns", mocks.llm.port): mocks.llm.port, callout_cluster("mcp.dns", port): port}
    envoy = Envoy(envoy_binary, bootstrap(wasm, only_mcp(mocks, port), mocks.llm.port, clusters), workdir).start()
    return Gateway(envoy), envoy


# The listing counter of apis[0] as each host names it in /stats.
WASM_LISTINGS = "wasmcustom.api_agent.mcp_listings.api.0.outcome."


def listing_counts(envoy: Envoy, prefix: str = WASM_LISTINGS) -> dict[str, int]:
    """`api_agent.mcp_listings` of apis[0] by outcome, from Envoy's admin /stats."""
    import json
    import urllib.request
    with urllib.request.urlopen(f"http://{envoy.admin}/stats?format=json&filter=mcp_listings", timeout=5) as r:
        stats = json.loads(r.read())["stats"]
    return {s["name"][len(prefix):]: s["value"] for s in stats if s.get("name", "").startswith(prefix)}


def wait_ready(gateway: Gateway, q: str, timeout_s: float = 15):
    """Asks until the gateway stops answering 503 (its tools are listed); the last reply."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = gateway.chat(q)
        if reply.status != 503 or time.monotonic() > deadline:
            return reply
        time.sleep(0.2)


def test_a_server_is_listed_when_the_plugin_starts(mocks, wasm, envoy_binary, tmp_path):
    port = mcp.free_port()
    server = mcp.Running([sys.executable, SERVER, str(port)], port)
    gateway, envoy = start_gateway(mocks, wasm, envoy_binary, port, str(tmp_path))
    try:
        q = "Discovered: 2 + 3?"
        mocks.llm.script(q, tool_calls(("c1", "add", {"a": 2, "b": 3})), "5")
        assert answer_of(wait_ready(gateway, q)) == "5"
        first = mocks.llm.requests_for(q)[0].json()
        assert sorted(t["function"]["name"] for t in first["tools"]) == ["add", "forecast"], "the allow-list applies"
        assert tool_results(mocks, q) == {"c1": "5"}
        assert "MCP tools of apis[0] listed: 2 tool(s): add, forecast" in envoy.log_tail(400)
    finally:
        envoy.stop()
        server.stop()


def test_requests_before_any_tool_get_a_503_until_the_server_is_up(mocks, wasm, envoy_binary, tmp_path):
    # Each of Envoy's Wasm VMs (main thread and worker) lists for itself: counts add up across them.
    not_ready_until_listed(mocks, wasm, envoy_binary, str(tmp_path), WASM_LISTINGS, lambda listed: listed >= 1)


def not_ready_until_listed(mocks, wasm, envoy_binary, workdir, prefix, listed_ok):
    """A 503 `tools_not_ready` (retry-after: 1) while the server is down, the answer once it is listed,
    and each listing counted: failures while it was down, then `listed_ok(listed)`."""
    port = mcp.free_port()
    gateway, envoy = start_gateway(mocks, wasm, envoy_binary, port, workdir)
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
        deadline = time.monotonic() + 3    # the dynamic module's counters reach Envoy up to 0.1 s late
        while True:
            counts = listing_counts(envoy, prefix)
            if counts.get("failed", 0) >= 1 and listed_ok(counts.get("listed", 0)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert counts.get("failed", 0) >= 1 and listed_ok(counts.get("listed", 0)), counts
    finally:
        envoy.stop()
        if server:
            server.stop()
