"""Issue 14, the contract live streaming meets on this host: a streaming client gets the final answer's
deltas while the model still produces them, not when the loop ends, and its response starts (200, the
role chunk) when the loop goes on to tools, before they answer."""
from __future__ import annotations

import http.client
import json
import time

import pytest

from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, LLM_MODEL
from support.apis import WEATHER_NOW
from support.mocks import Response
from support.react import action, final
from test_native import tool_calls

ANSWER = "It is cold in Oslo today: minus four degrees, a light wind from the north and some snow later."
DELTAS, GAP_S = 20, 0.05
# The answer's deltas span ~0.9 s; the first must come well before the last one was produced.
MARGIN_S = 0.4




def stream_times(port: int, q: str) -> tuple[float, float, str]:
    """(first answer content, end of stream) in seconds from the request, and the answer's text."""
    body = json.dumps({"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    conn.request("POST", CHAT_PATH, body, {**CLIENT_HEADERS, "content-type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
    first, text = None, ""
    while line := resp.readline():
        if not line.startswith(b"data: {"):
            continue
        choices = json.loads(line[6:]).get("choices") or [{}]
        content = (choices[0].get("delta") or {}).get("content")
        if content:
            first = first if first is not None else time.perf_counter() - t0
            text += content
    conn.close()
    assert first is not None, "no answer content in the stream"
    return first, time.perf_counter() - t0, text


def test_react_final_answer_deltas_arrive_as_produced(gateway, mocks):
    q = "Live: the weather in Oslo (ReAct)."
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}),
                     Response.slow(final(ANSWER), LLM_MODEL, DELTAS, GAP_S))
    first, end, text = stream_times(gateway.port, q)
    assert text == ANSWER
    assert first < end - MARGIN_S, f"first answer token at {first:.3f} s, stream ended at {end:.3f} s"


def test_native_final_answer_deltas_arrive_as_produced(gateways, mocks):
    q = "Live: the weather in Oslo (native)."
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})),
                     Response.slow(ANSWER, LLM_MODEL, DELTAS, GAP_S))
    first, end, text = stream_times(gateways(mode="native").port, q)
    assert text == ANSWER
    assert first < end - MARGIN_S, f"first answer token at {first:.3f} s, stream ended at {end:.3f} s"


def test_the_response_starts_when_tools_run_not_when_they_answer(gateways, mocks):
    q = "Live: a slow weather service (native)."
    slow = Response.json({"weather": "snow"}, delay_s=1.5)
    mocks.weather.route("GET", WEATHER_NOW, slow)
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "Snow in Oslo.")
    body = json.dumps({"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", gateways(mode="native").port, timeout=30)
    t0 = time.perf_counter()
    conn.request("POST", CHAT_PATH, body, {**CLIENT_HEADERS, "content-type": "application/json"})
    resp = conn.getresponse()
    role = json.loads(resp.readline()[len(b"data: "):])
    at = time.perf_counter() - t0
    assert resp.status == 200 and role["choices"][0]["delta"]["role"] == "assistant"
    assert at < 1.0, f"the role chunk came at {at:.3f} s, after the 1.5 s tool"
    rest = resp.read().decode()
    conn.close()
    assert "Snow in Oslo." in rest and rest.endswith("data: [DONE]\n\n")


def test_a_client_that_leaves_mid_answer_leaves_envoy_well(gateways, mocks):
    """The client closes its connection while the final turn is still streaming to the agent: the
    streamed callout is reset, nothing is sent on the finished stream, and Envoy goes on serving."""
    gw = gateways(mode="native")
    q = "Live: the client leaves mid-answer."
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})),
                     Response.slow(ANSWER, LLM_MODEL, DELTAS, GAP_S))
    body = json.dumps({"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    conn.request("POST", CHAT_PATH, body, {**CLIENT_HEADERS, "content-type": "application/json"})
    resp = conn.getresponse()
    while line := resp.readline():
        if line.startswith(b"data: {") and b'"content":"' in line and b'"content":""' not in line:
            break
    conn.sock.close()
    conn.close()
    time.sleep(GAP_S * DELTAS + 0.3)   # the model's stream would have ended by now
    q2 = "Live: after a client left."
    mocks.llm.script(q2, "Still here.")
    assert gw.chat(q2).json()["choices"][0]["message"]["content"] == "Still here."
    log = gw.envoy.log_tail(400)
    assert "outcome=cancelled" in log
    assert not any(p in log for p in ("panicked", "Segmentation fault", "envoy bug", "assert failure"))
