"""MCP's stateless revision (2026-07-28) behind the gateway, negotiated: a server that speaks only
2026-07-28 (support/mcp_modern.py, built from the specification: it refuses `initialize`) and the 2025
reference server (`@modelcontextprotocol/server-everything`, TypeScript SDK v1, run with npx: it knows
no 2026-07-28) are both listed by the plugin and serve tools to the loop in one request; a listing is
refreshed when its `ttlMs` says (bounded below by 10 s, jittered)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.request

import pytest

from support import mcp_servers as mcp
from support.agent import CHAT_PATH, LLM_KEY, LLM_MODEL, Gateway, answer_of
from support.envoy import Envoy, bootstrap, callout_cluster
from support.mcp_servers import tool_calls, tool_results
from test_mcp_everything import PACKAGE

MODERN = os.path.join(os.path.dirname(__file__), "support", "mcp_modern.py")


def server_entry(name: str, port: int, **extra) -> dict:
    return {"mcpServer": {"serviceName": f"{name}.dns", "servicePort": port, "domain": f"127.0.0.1:{port}",
                          "path": "/mcp", "maxExecutionTime": 5000, **extra}}


def start_gateway(mocks, wasm, envoy_binary, servers: dict[str, int], apis: list[dict], workdir: str):
    llm = {"apiKey": LLM_KEY, "serviceName": "llm.dns", "servicePort": mocks.llm.port, "path": CHAT_PATH,
           "model": LLM_MODEL, "maxExecutionTime": 10000}
    clusters = {callout_cluster("llm.dns", mocks.llm.port): mocks.llm.port}
    clusters.update({callout_cluster(f"{name}.dns", port): port for name, port in servers.items()})
    plugin = {"llm": llm, "apis": apis, "mode": "native"}
    envoy = Envoy(envoy_binary, bootstrap(wasm, plugin, mocks.llm.port, clusters), workdir).start()
    return Gateway(envoy), envoy


def seen(port: int) -> list[dict]:
    """What the modern server received: method, session, Mcp-Name and MCP-Protocol-Version of each."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/control", timeout=5) as r:
        return json.loads(r.read())["seen"]


def wait_for_log(envoy: Envoy, text: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        tail = envoy.log_tail(2000)
        if text in tail:
            return tail
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not in the log:\n{envoy.log_tail(60)}")
        time.sleep(0.2)


def test_a_modern_only_and_a_2025_server_both_serve_tools_to_the_loop(mocks, wasm, envoy_binary, tmp_path):
    npx = shutil.which("npx")
    if not npx:
        pytest.skip("npx is not installed")
    modern_port, legacy_port = mcp.free_port(), mcp.free_port()
    modern = mcp.Running([sys.executable, MODERN, str(modern_port), "60000"], modern_port)
    legacy = mcp.Running([npx, "-y", PACKAGE, "streamableHttp"], legacy_port,
                         env={**os.environ, "PORT": str(legacy_port)})
    apis = [server_entry("modern", modern_port), server_entry("legacy", legacy_port, tools=["echo", "get-sum"])]
    gateway, envoy = start_gateway(mocks, wasm, envoy_binary, {"modern": modern_port, "legacy": legacy_port},
                                   apis, str(tmp_path))
    try:
        log = wait_for_log(envoy, "MCP tools of apis[1] listed: 2 tool(s): echo, get-sum (MCP 2025-")
        log = wait_for_log(envoy, "MCP tools of apis[0] listed: 2 tool(s): add, forecast (MCP 2026-07-28, cacheScope public")
        assert "does not speak 2026-07-28: trying its handshake" in log, "the 2025 server was tried in 2026-07-28 first"
        q = "Both revisions: 2 + 3, Oslo, echo"
        mocks.llm.script(q, tool_calls(("c1", "add", {"a": 2, "b": 3}), ("c2", "forecast", {"city": "Oslo"}),
                                       ("c3", "echo", {"message": "hi"})), "done")
        assert answer_of(gateway.chat(q)) == "done"
        assert tool_results(mocks, q) == {"c1": "5", "c2": "Oslo: clear skies (stateless)", "c3": "Echo: hi"}
        received = seen(modern_port)
        assert not [r for r in received if r["method"] == "initialize" or r["session"]], received
        calls = [r for r in received if r["method"] == "tools/call"]
        assert sorted(r["name"] for r in calls) == ["add", "forecast"] and {r["version"] for r in calls} == {"2026-07-28"}
    finally:
        envoy.stop()
        modern.stop()
        legacy.stop()


def test_a_listing_refresh_follows_ttl_ms(mocks, wasm, envoy_binary, tmp_path):
    """The server says its list is fresh for 1 s: the gateway lists it again after its 10 s floor (not
    after the 5 minutes of a list that says nothing), so a tool it adds reaches the model."""
    port = mcp.free_port()
    server = mcp.Running([sys.executable, MODERN, str(port), "1000"], port)
    gateway, envoy = start_gateway(mocks, wasm, envoy_binary, {"modern": port}, [server_entry("modern", port)],
                                   str(tmp_path))
    try:
        wait_for_log(envoy, "MCP tools of apis[0] listed: 2 tool(s): add, forecast")
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/control",
                                                      json.dumps({"add": "late"}).encode(), method="POST"), timeout=5)
        started = time.monotonic()
        wait_for_log(envoy, "MCP tools of apis[0] listed: 3 tool(s): add, forecast, late", timeout_s=25)
        assert time.monotonic() - started < 20, "listed again within the bounded TTL"
        deadline = time.monotonic() + 15       # every worker's copy refreshes on its own jittered clock
        for i in range(100):
            q = f"Refreshed {i}: late"
            mocks.llm.script(q, tool_calls(("c1", "late", {})), "ok")
            reply = gateway.chat(q)
            if answer_of(reply) == "ok" and tool_results(mocks, q) == {"c1": "late ran"}:
                break
            assert time.monotonic() < deadline, f"the new tool never reached the loop: {reply.text}"
            time.sleep(0.5)
        lists = [r for r in seen(port) if r["method"] == "tools/list"]
        assert lists and {r["version"] for r in lists} == {"2026-07-28"}
    finally:
        envoy.stop()
        server.stop()
