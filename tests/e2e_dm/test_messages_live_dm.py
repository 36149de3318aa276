"""The Messages event stream is live on this host: the answer's `text_delta` events arrive while the
model still produces them, in the grammar the official SDK reads, and a failure after the stream began
ends it with an `error` event."""
from __future__ import annotations

import anthropic
import pytest

from support import client
from support.agent import CLIENT_HEADERS, CLIENT_MODEL, LLM_MODEL
from support.mocks import Response
from test_live_streaming_dm import ANSWER, DELTAS, GAP_S, MARGIN_S
from test_messages import MESSAGES_PATH, sdk, tool_calls


def stream(port: int, q: str) -> tuple[float | None, float, list[dict]]:
    """(first text delta, end of stream) in seconds from the request, and the events."""
    body = {"model": CLIENT_MODEL, "max_tokens": 512, "stream": True, "messages": [{"role": "user", "content": q}]}
    return client.timed_stream(port, MESSAGES_PATH, body, CLIENT_HEADERS,
                               lambda e: e.get("delta", {}).get("type") == "text_delta")


def test_text_deltas_arrive_as_produced(gateways, mocks):
    q = "Live Messages: the weather in Oslo (native)."
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})),
                     Response.slow(ANSWER, LLM_MODEL, DELTAS, GAP_S))
    first, end, events = stream(gateways(mode="native").port, q)
    kinds = [e["type"] for e in events if e["type"] != "ping"]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    text = "".join(e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta")
    assert text == ANSWER
    assert first is not None and first < end - MARGIN_S, f"first delta at {first} s, stream ended at {end:.3f} s"


def test_the_sdk_reads_a_live_stream(gateways, mocks):
    q = "Live Messages SDK: the weather in Oslo (native)."
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})),
                     Response.slow(ANSWER, LLM_MODEL, DELTAS, GAP_S))
    with sdk(gateways(mode="native")).messages.stream(model=CLIENT_MODEL, max_tokens=512,
                                                      messages=[{"role": "user", "content": q}]) as s:
        assert "".join(s.text_stream) == ANSWER
        assert s.get_final_message().stop_reason == "end_turn"


def test_a_failure_after_the_stream_began_is_an_error_event(gateways, mocks):
    q = "Live Messages: the model fails after a tool."
    err = Response.json({"error": {"message": "overloaded", "type": "server_error"}}, 500)
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), err, err, err, err)
    _, _, events = stream(gateways(mode="native").port, q)
    assert events[0]["type"] == "message_start"
    last = events[-1]
    assert last["type"] == "error" and last["error"]["type"] == "api_error", last


def test_the_sdk_raises_on_the_error_event(gateways, mocks):
    q = "Live Messages SDK: the model fails after a tool."
    err = Response.json({"error": {"message": "overloaded", "type": "server_error"}}, 500)
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), err, err, err, err)
    with pytest.raises(anthropic.APIStatusError):
        with sdk(gateways(mode="native")).messages.stream(model=CLIENT_MODEL, max_tokens=512,
                                                          messages=[{"role": "user", "content": q}]) as s:
            s.get_final_message()
