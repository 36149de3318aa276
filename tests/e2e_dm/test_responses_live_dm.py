"""The Responses event stream is live on this host: the answer's `response.output_text.delta` events
arrive while the model still produces them, in the event grammar the official client reads, and a
failure after the stream began ends it with `response.failed`."""
from __future__ import annotations

from support import client
from support.agent import CLIENT_HEADERS, CLIENT_MODEL, LLM_MODEL
from support.mocks import Response
from test_live_streaming_dm import ANSWER, DELTAS, GAP_S, MARGIN_S
from test_native import tool_calls
from test_responses import EVENT_ORDER, RESPONSES_PATH, validate


def stream(port: int, q: str) -> tuple[float | None, float, list[dict]]:
    """(first text delta, end of stream) in seconds from the request, and the events (each checked
    against the Responses schema)."""
    body = {"model": CLIENT_MODEL, "input": q, "stream": True}
    first, end, events = client.timed_stream(port, RESPONSES_PATH, body, CLIENT_HEADERS,
                                             lambda e: e["type"] == "response.output_text.delta")
    for event in events:
        validate(event, "ResponseStreamEvent")
    return first, end, events


def test_text_deltas_arrive_as_produced(gateways, mocks):
    q = "Live Responses: the weather in Oslo (native)."
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})),
                     Response.slow(ANSWER, LLM_MODEL, DELTAS, GAP_S))
    first, end, events = stream(gateways(mode="native").port, q)
    kinds = [e["type"] for i, e in enumerate(events) if i == 0 or events[i - 1]["type"] != e["type"]]
    assert kinds == EVENT_ORDER
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["response"]["output_text"] == ANSWER
    assert first is not None and first < end - MARGIN_S, f"first delta at {first} s, stream ended at {end:.3f} s"


def test_a_failure_after_the_stream_began_is_response_failed(gateways, mocks):
    q = "Live Responses: the model fails after a tool."
    err = Response.json({"error": {"message": "overloaded", "type": "server_error"}}, 500)
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), err, err, err, err)
    _, _, events = stream(gateways(mode="native").port, q)
    assert events[0]["type"] == "response.created"
    last = events[-1]
    assert last["type"] == "response.failed" and last["response"]["status"] == "failed"
    assert last["response"]["error"]["code"] == "llm_error"
