"""MCP servers as a tool source in Envoy, against a small server written with the official Python SDK
(`support/mcp_server.py`: Streamable HTTP, SSE-framed replies). The plugin pins the server's own
`tools/list` result. The SDK (2.3) speaks both 2026-07-28 and the 2025 revisions: the gateway speaks
2026-07-28 with it, without a session (tests/e2e/test_mcp_everything.py has a 2025-only server)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from support import mcp_servers as mcp
from support.agent import answer_of
from support.mcp_servers import tool_calls, tool_results

HERE = os.path.dirname(__file__)


@pytest.fixture(scope="module")
def running(mocks, wasm, envoy_binary, tmp_path_factory):
    port = mcp.free_port()
    server = mcp.Running([sys.executable, os.path.join(HERE, "support", "mcp_server.py"), str(port)], port)
    gw, envoy = mcp.gateway(mocks, wasm, envoy_binary, port, str(tmp_path_factory.mktemp("envoy")))
    yield gw, server
    envoy.stop()
    server.stop()


@pytest.fixture
def gateway(running):
    return running[0]


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


def requests_to_server(gateway, port: int) -> int:
    """Requests Envoy sent to the MCP server's cluster so far (its upstream_rq_total)."""
    stats = json.loads(gateway.envoy._admin_get("/stats?format=json&filter=upstream_rq_total") or "{}")["stats"]
    name = f"cluster.outbound|{port}||mcp.dns.upstream_rq_total"
    return next((s["value"] for s in stats if s.get("name") == name), 0)


def test_requests_share_one_session(running, mocks):
    """The second of two requests calling the server sends only its tools/call (1 request to the server):
    it uses what the first one learnt of the server (its revision; with a 2025 server, its session)."""
    gateway, server = running
    sent = []
    for i in range(2):
        q = f"MCP shared session: request {i + 1}"
        mocks.llm.script(q, tool_calls(("c1", "add", {"a": i, "b": 1})), "ok")
        before = requests_to_server(gateway, server.port)
        assert answer_of(gateway.chat(q)) == "ok"
        assert tool_results(mocks, q) == {"c1": str(i + 1)}
        sent.append(requests_to_server(gateway, server.port) - before)
    assert sent[1] == 1, f"requests to the MCP server per agent request: {sent}"


def test_a_restarted_server_needs_no_new_session(running, mocks):
    """2026-07-28 has no session to lose: a restarted server serves the next call as it is."""
    gateway, server = running
    for round in ("before", "after"):
        if round == "after":
            server.restart()
        q = f"MCP restart: {round}"
        mocks.llm.script(q, tool_calls(("c1", NAME, ARGS)), "ok")
        assert answer_of(gateway.chat(q)) == "ok"
        assert tool_results(mocks, q)["c1"] == EXPECTED
    log = gateway.envoy.log_tail(400)
    assert "is gone (HTTP" not in log and "opening a session" not in log, "no session in 2026-07-28"


NAME, ARGS, EXPECTED = "add", {"a": 20, "b": 22}, "42"
