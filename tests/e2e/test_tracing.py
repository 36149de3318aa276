"""Trace context on every callout, on both hosts: the LLM turns and tool calls of an agent request
carry the client's W3C `traceparent` (the same trace id) and `tracestate`, its `x-request-id`, and B3
headers where the client sent them; a client without trace context gets none invented."""
from __future__ import annotations

import time

from support import client
from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL
from test_native import tool_calls

TRACE = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "vendor=opaque",
    "x-b3-traceid": "4bf92f3577b34da6a3ce929d0e0e4736",
    "x-b3-spanid": "00f067aa0ba902b7",
    "x-b3-sampled": "1",
}


def ask(gw, q: str, headers: dict):
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}]}
    return client.request(gw.port, "POST", CHAT_PATH, body, {**CLIENT_HEADERS, **headers})


def test_every_callout_carries_the_trace_context(gateways, mocks):
    gw = gateways(mode="native", loop="request")
    q = f"trace-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "Cold.")
    reply = ask(gw, q, {**TRACE, "x-request-id": "req-123"})
    assert reply.status == 200, reply.text[:300]
    llm = mocks.llm.requests_for(q)
    tools = [r for r in mocks.tool_requests() if "Oslo" in r.target]
    assert len(llm) == 2 and len(tools) == 1
    for r in llm + tools:
        for name, value in {**TRACE, "x-request-id": "req-123"}.items():
            assert r.headers.get(name) == value, (r.target, name, r.headers)


def test_no_trace_context_is_invented(gateways, mocks):
    gw = gateways(mode="native", loop="request")
    q = f"notrace-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Bergen"})), "Wet.")
    assert ask(gw, q, {}).status == 200
    for r in mocks.llm.requests_for(q) + [r for r in mocks.tool_requests() if "Bergen" in r.target]:
        assert "traceparent" not in r.headers and "x-b3-traceid" not in r.headers, r.headers
