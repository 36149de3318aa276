"""Traces in Envoy's own OpenTelemetry tracer, exported over OTLP/gRPC to a real receiver in the test.

On the dynamic module the run is a tree under Envoy's request span: `invoke_agent` (the agent's name,
outcome, usage), one `chat` span per LLM turn and one `execute_tool` span per tool call, with GenAI
attributes, and every callout carries its own span's `traceparent`. Proxy-Wasm has no tracing ABI:
there the callouts carry the request's trace context and the trace has Envoy's spans only (docs/hosts.md).
No span attribute ever holds a secret; tool content only with `tracing.content: true`."""
from __future__ import annotations

import time

import pytest

from support import client
from support.agent import (CHAT_PATH, CLIENT_HEADERS, CLIENT_KEY, CLIENT_MODEL, LLM_KEY, LLM_MODEL,
                           TRANSLATE_AUTH, TRANSLATE_KEY, WEATHER_KEY, Gateway, envoy_config, plugin_config)
from support.envoy import Envoy
from support.mocks import Response
from support.otlp import Receiver, with_tracing
from test_native import tool_calls

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
SECRETS = (CLIENT_KEY, LLM_KEY, WEATHER_KEY, TRANSLATE_KEY, TRANSLATE_AUTH.split()[1])


@pytest.fixture(scope="module")
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "content"])
def traced(request, receiver, mocks, wasm, envoy_binary, tmp_path_factory):
    plugin = plugin_config(mocks, mode="native", loop="request",
                           tracing={"agentName": "weather-agent", "content": request.param})
    config = with_tracing(envoy_config(wasm, mocks, plugin), receiver.port)
    envoy = Envoy(envoy_binary, config, str(tmp_path_factory.mktemp("spans"))).start()
    yield Gateway(envoy), request.param, wasm.endswith(".so")
    envoy.stop()


def ask(gw: Gateway, q: str, trace_id: str | None = TRACE_ID) -> client.Reply:
    headers = dict(CLIENT_HEADERS)
    if trace_id:
        headers["traceparent"] = f"00-{trace_id}-{CLIENT_SPAN}-01"
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}]}
    return client.request(gw.port, "POST", CHAT_PATH, body, headers)


def fresh_trace_id() -> str:
    return f"{time.time_ns():032x}"[-32:]


def parent_of(header: str) -> tuple[str, str]:
    _, trace_id, span_id, _ = header.split("-")
    return trace_id, span_id


def assert_no_secret(spans: list[dict]) -> None:
    for s in spans:
        for key, value in s["attributes"].items():
            assert not any(secret in value for secret in SECRETS), (s["name"], key, value)


def test_the_run_is_a_tree_of_genai_spans(traced, receiver, mocks):
    gw, content, dm = traced
    trace_id = fresh_trace_id()
    q = f"spans-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "Cold.")
    reply = ask(gw, q, trace_id)
    assert reply.status == 200, reply.text[:300]
    llm = mocks.llm.requests_for(q)
    tools = [r for r in mocks.tool_requests() if "Oslo" in r.target]
    assert len(llm) == 2 and len(tools) == 1
    if not dm:
        # Proxy-Wasm: the client's context on every callout, and Envoy's request span in the trace.
        for r in llm + tools:
            assert parent_of(r.headers["traceparent"]) == (trace_id, CLIENT_SPAN), r.headers
        spans = receiver.trace(trace_id, 1)
        assert [s["parent"] for s in spans] == [CLIENT_SPAN], spans
        assert not [s for s in spans if s["attributes"].get("gen_ai.operation.name")], spans
        return
    spans = receiver.trace(trace_id, 5)
    by_op = {}
    for s in spans:
        by_op.setdefault(s["attributes"].get("gen_ai.operation.name", "envoy"), []).append(s)
    (server,) = by_op["envoy"]
    (agent,) = by_op["invoke_agent"]
    chats = sorted(by_op["chat"], key=lambda s: s["attributes"]["api_agent.turn"])
    (tool,) = by_op["execute_tool"]
    assert server["parent"] == CLIENT_SPAN
    assert agent["parent"] == server["span_id"] and agent["name"] == "invoke_agent weather-agent"
    assert all(s["parent"] == agent["span_id"] for s in chats + [tool]), spans
    a = agent["attributes"]
    assert (a["gen_ai.agent.name"], a["api_agent.outcome"]) == ("weather-agent", "answer"), a
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == ("20", "10"), a
    assert (a["api_agent.turns"], a["api_agent.tool_calls"]) == ("2", "1") and "error.type" not in a, a
    for turn, (span, reason) in enumerate(zip(chats, ["tool_calls", "stop"]), start=1):
        c = span["attributes"]
        assert span["name"] == f"chat {LLM_MODEL}", span
        assert c["api_agent.turn"] == str(turn) and c["gen_ai.response.finish_reasons"] == reason, c
        assert (c["gen_ai.request.model"], c["gen_ai.response.model"]) == (LLM_MODEL, LLM_MODEL), c
        assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == ("10", "5"), c
        assert c["http.response.status_code"] == "200", c
    t = tool["attributes"]
    assert tool["name"] == "execute_tool get_weather_now"
    assert (t["gen_ai.tool.name"], t["gen_ai.tool.call.id"], t["http.response.status_code"]) == \
        ("get_weather_now", "c1", "200"), t
    assert ("gen_ai.tool.call.arguments" in t) == content and ("gen_ai.tool.call.result" in t) == content, t
    if content:
        assert "Oslo" in t["gen_ai.tool.call.arguments"] and "snowing" in t["gen_ai.tool.call.result"], t
    # Each callout carries its own span's context.
    assert [parent_of(r.headers["traceparent"]) for r in llm] == [(trace_id, s["span_id"]) for s in chats]
    assert parent_of(tools[0].headers["traceparent"]) == (trace_id, tool["span_id"])
    assert all(s["start"] <= s["end"] for s in spans)
    assert_no_secret(spans)


def test_a_failed_tool_call_is_an_error_span(traced, receiver, mocks):
    gw, _, dm = traced
    if not dm:
        pytest.skip("Proxy-Wasm makes no spans of its own (docs/hosts.md)")
    mocks.weather.route("GET", "/v3/weather/now", Response.json({"error": "down", "key": WEATHER_KEY}, 500))
    trace_id = fresh_trace_id()
    q = f"spans-error-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c9", "get_weather_now", {"location": "Bergen"})), "No idea.")
    assert ask(gw, q, trace_id).status == 200
    spans = receiver.trace(trace_id, 5)
    (tool,) = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    assert (tool["attributes"]["error.type"], tool["attributes"]["http.response.status_code"]) == ("500", "500")
    assert_no_secret(spans)


def test_a_request_without_trace_context_joins_envoys_trace(traced, receiver, mocks):
    gw, _, dm = traced
    q = f"spans-fresh-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Jinan"})), "Warm.")
    assert ask(gw, q, trace_id=None).status == 200
    llm = mocks.llm.requests_for(q)
    if not dm:
        assert all("traceparent" not in r.headers for r in llm), "none invented on Proxy-Wasm"
        return
    trace_id, span_id = parent_of(llm[0].headers["traceparent"])
    spans = receiver.trace(trace_id, 5)
    chat = [s for s in spans if s["span_id"] == span_id]
    assert chat and chat[0]["attributes"]["gen_ai.operation.name"] == "chat", spans
    assert [s for s in spans if s["parent"] == ""], "Envoy's request span is the trace's root"


@pytest.fixture(scope="module")
def routed(receiver, mocks, wasm, envoy_binary, tmp_path_factory):
    """`loop: response`: the first turn is forwarded with the client's model, its span named after it."""
    plugin = plugin_config(mocks, mode="native", tracing={"agentName": "weather-agent"})
    config = with_tracing(envoy_config(wasm, mocks, plugin), receiver.port)
    envoy = Envoy(envoy_binary, config, str(tmp_path_factory.mktemp("spans-routed"))).start()
    yield Gateway(envoy), wasm.endswith(".so")
    envoy.stop()


def test_a_clients_model_name_reaches_spans_bounded_and_printable(routed, receiver, mocks):
    """The client chooses `model`: one with control characters, or over 256 bytes, is a 400 naming it
    before anything runs; one within that is cut to 128 bytes in every span name and attribute; later
    turns name the model they asked for."""
    gw, dm = routed
    hostile = {"model": "evil\u0001\n\u001b[31m" + "é" * 25_000, "messages": [{"role": "user", "content": "hi"}]}
    refused = client.request(gw.port, "POST", CHAT_PATH, hostile, CLIENT_HEADERS)
    assert refused.status == 400 and refused.json()["error"]["param"] == "model", refused.text[:300]
    trace_id = fresh_trace_id()
    q = f"spans-model-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "Cold.")
    model = "m-" + "é" * 124
    headers = dict(CLIENT_HEADERS, traceparent=f"00-{trace_id}-{CLIENT_SPAN}-01")
    body = {"model": model, "messages": [{"role": "user", "content": q}]}
    reply = client.request(gw.port, "POST", CHAT_PATH, body, headers)
    assert reply.status == 200, reply.text[:300]
    if not dm:
        return  # Proxy-Wasm makes no spans of its own (docs/hosts.md)
    spans = receiver.trace(trace_id, 5)
    chats = sorted([s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"],
                   key=lambda s: s["attributes"]["api_agent.turn"])
    assert len(chats) == 2, spans
    first = chats[0]
    assert first["name"].startswith("chat m-éé"), first["name"][:40]
    for s in spans:
        for text in [s["name"], *s["attributes"].values()]:
            assert len(text.encode()) <= len("chat ") + 128, text[:60]
            assert not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in text), (s["name"][:40], text[:60])
    assert len(first["attributes"]["gen_ai.request.model"].encode()) <= 128
    assert chats[1]["name"] == f"chat {LLM_MODEL}" and chats[1]["attributes"]["gen_ai.request.model"] == LLM_MODEL
