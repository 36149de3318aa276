"""MCP servers as a tool source in Envoy, against a small server written with the official Python SDK
(`support/mcp_server.py`: Streamable HTTP, stateful sessions, SSE-framed replies). The plugin pins the
server's own `tools/list` result; every call opens a session (initialize, notifications/initialized)
through Envoy before its `tools/call`."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from support.agent import Gateway, answer_of, plugin_config
from support.envoy import Envoy, bootstrap, callout_cluster
from support.mocks import Response

HERE = os.path.dirname(__file__)
ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rpc(port: int, body: dict, session: str | None = None) -> tuple[dict, str | None]:
    """One JSON-RPC POST to the server, directly: the message of its (SSE-framed) reply, the session."""
    headers = {"content-type": "application/json", "accept": ACCEPT}
    if session:
        headers["mcp-session-id"] = session
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
        sid = r.headers.get("mcp-session-id")
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return (json.loads(data[-1]) if data else {}), sid


def listed_tools(port: int) -> dict:
    """The server's `tools/list` result, as an operator would pin it in `toolsList`."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}
    _, sid = rpc(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    rpc(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    message, _ = rpc(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
    return message["result"]


@pytest.fixture(scope="module")
def mcp_port():
    port = free_port()
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "support", "mcp_server.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("the MCP server did not start")
            time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(timeout=5)


@pytest.fixture(scope="module")
def gateway(mocks, wasm, envoy_binary, mcp_port, tmp_path_factory):
    plugin = plugin_config(mocks, mode="native")
    server = {"serviceName": "mcp.dns", "servicePort": mcp_port, "domain": f"127.0.0.1:{mcp_port}",
              "path": "/mcp", "maxExecutionTime": 5000, "toolsList": listed_tools(mcp_port)}
    plugin["apis"].append({"mcpServer": server})
    clusters = {callout_cluster(f"{m.name}.dns", m.port): m.port for m in mocks.all()}
    clusters[callout_cluster("mcp.dns", mcp_port)] = mcp_port
    envoy = Envoy(envoy_binary, bootstrap(wasm, plugin, mocks.llm.port, clusters),
                  str(tmp_path_factory.mktemp("envoy"))).start()
    yield Gateway(envoy)
    envoy.stop()


def tool_calls(*calls: tuple[str, str, dict]) -> Response:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]}
    return Response.json({"id": "chatcmpl-mcp", "object": "chat.completion", "created": 1, "model": "m",
                          "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def tool_results(mocks, q: str, n: int = 2) -> dict[str, str]:
    """The `tool` messages of LLM request `n` of the conversation: call id → content."""
    messages = mocks.llm.requests_for(q)[n - 1].json()["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def test_mcp_tools_are_offered_and_called_in_one_turn(gateway, mocks):
    q = "MCP: what is 2 + 40, and the forecast for Oslo?"
    mocks.llm.script(q, tool_calls(("c1", "add", {"a": 2, "b": 40}), ("c2", "forecast", {"city": "Oslo"})),
                     "42, and sunny in Oslo.")
    assert answer_of(gateway.chat(q)) == "42, and sunny in Oslo."
    first = mocks.llm.requests_for(q)[0].json()
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"add", "forecast", "explode", "get_weather_now"} <= names, "MCP and OpenAPI tools side by side"
    assert tool_results(mocks, q) == {"c1": "42", "c2": "Oslo: sunny for 1 day(s), 21 °C"}


def test_later_turns_call_the_server_again(gateway, mocks):
    q = "MCP: add twice"
    mocks.llm.script(q, tool_calls(("c1", "add", {"a": 1, "b": 1})), tool_calls(("c2", "add", {"a": 2, "b": 2})),
                     "2 then 4.")
    assert answer_of(gateway.chat(q)) == "2 then 4."
    assert tool_results(mocks, q, 2) == {"c1": "2"}
    assert tool_results(mocks, q, 3) == {"c1": "2", "c2": "4"}


def test_a_tool_error_is_told_to_the_model(gateway, mocks):
    q = "MCP: explode"
    mocks.llm.script(q, tool_calls(("c1", "explode", {"why": "test"})), "It failed.")
    assert answer_of(gateway.chat(q)) == "It failed."
    assert tool_results(mocks, q)["c1"].startswith("'explode' reported an error: Error executing tool explode")


def test_arguments_the_schema_refuses_never_reach_the_server(gateway, mocks):
    q = "MCP: add words"
    mocks.llm.script(q, tool_calls(("c1", "add", {"a": "two", "b": 2})), "Cannot.")
    assert answer_of(gateway.chat(q)) == "Cannot."
    content = tool_results(mocks, q)["c1"]
    assert content.startswith("Invalid arguments for 'add': at /a:"), content
