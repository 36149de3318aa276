"""Native tool-calling mode in Envoy: tools in the request, a turn's calls run in parallel, the
client's own tools returned to it, dangling tool calls in the history answered."""
from __future__ import annotations

import json
import time

import pytest

from support.agent import LLM_MODEL, WEATHER_KEY, answer_of
from support.apis import WEATHER_NOW, weather_api
from support.mocks import Response

DELAY_S = 0.3
CLIENT_TOOL = {"type": "function", "function": {"name": "get_user_city", "description": "The user's city",
                                                  "parameters": {"type": "object", "properties": {}}}}


def tool_calls(*calls: tuple[str, str, dict]) -> Response:
    """An LLM turn whose message calls tools: (id, name, arguments)."""
    message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]}
    return Response.json({"id": "chatcmpl-native", "object": "chat.completion", "created": 1, "model": LLM_MODEL,
                          "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


@pytest.fixture
def native(gateways):
    return gateways(mode="native")


def test_single_call_round_trip(native, mocks):
    q = "Native: what is the weather in Oslo?"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "It is -3 °C and snowing in Oslo.")
    assert answer_of(native.chat(q)) == "It is -3 °C and snowing in Oslo."
    first, second = mocks.llm.requests_for(q)
    names = [t["function"]["name"] for t in first.json()["tools"]]
    assert {"get_weather_now", "get_station", "translate_text"} <= set(names)
    assert first.json()["messages"] == [{"role": "user", "content": q}], "the client's messages, as sent"
    last = second.json()["messages"][-1]
    assert last["role"] == "tool" and last["tool_call_id"] == "c1" and '"location": "Oslo"' in last["content"]
    [tool] = mocks.tool_requests()
    assert (tool.method, tool.path, tool.query) == ("GET", WEATHER_NOW, {"location": "Oslo", "key": WEATHER_KEY})


def test_two_calls_of_a_turn_run_in_parallel(native, mocks):
    """Each weather reply takes 300 ms: run one after the other, the request would take 600 ms more."""
    def slow_weather(rec):
        reply = weather_api(rec)
        reply.delay_s = DELAY_S
        return reply

    mocks.weather.route("GET", WEATHER_NOW, slow_weather)
    q = "Native: weather in Oslo and in Berlin?"
    mocks.llm.script(q, tool_calls(("c_oslo", "get_weather_now", {"location": "Oslo"}),
                                   ("c_berlin", "get_weather_now", {"location": "Berlin"})),
                     "Oslo -3 °C, Berlin 12 °C.")
    start = time.monotonic()
    reply = native.chat(q)
    elapsed = time.monotonic() - start
    assert answer_of(reply) == "Oslo -3 °C, Berlin 12 °C."
    oslo, berlin = sorted(mocks.tool_requests(), key=lambda r: r.query["location"] != "Oslo")
    assert abs(oslo.at - berlin.at) < 0.1, "both calls were sent at once"
    assert elapsed < 2 * DELAY_S - 0.05, f"{elapsed * 1000:.0f} ms: the calls did not overlap"
    print(f"parallel turn of two 300 ms tool calls: whole request {elapsed * 1000:.0f} ms")
    tools = [m for m in mocks.llm.requests_for(q)[1].json()["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c_oslo", "c_berlin"], "results in the order of the calls"
    assert '"Oslo"' in tools[0]["content"] and '"Berlin"' in tools[1]["content"]


def test_client_tools_are_returned_to_the_client(native, mocks):
    q = "Native: what is the weather where I am?"
    mocks.llm.script(q, tool_calls(("u1", "get_user_city", {})))
    reply = native.chat(q, tools=[CLIENT_TOOL])
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "get_user_city"
    assert mocks.tool_requests() == []
    first = mocks.llm.requests_for(q)[0].json()
    assert first["tools"][-1] == CLIENT_TOOL

    stream = native.openai().chat.completions.create(model="m", messages=[{"role": "user", "content": q}],
                                                     tools=[CLIENT_TOOL], stream=True)
    deltas = [c.choices[0] for c in stream if c.choices]
    calls = [tc for d in deltas if d.delta.tool_calls for tc in d.delta.tool_calls]
    assert calls[0].function.name == "get_user_city" and calls[0].id == "u1"
    assert deltas[-1].finish_reason == "tool_calls"


def test_a_client_tool_named_like_a_gateway_tool_is_a_400(native, mocks):
    clash = {"type": "function", "function": {"name": "get_weather_now", "parameters": {"type": "object"}}}
    reply = native.chat("Native: clash?", tools=[clash])
    assert reply.status == 400 and "also a tool of the gateway" in reply.json()["error"]["message"]


def test_dangling_tool_calls_in_the_history_are_answered(native, mocks):
    q = "Native: never mind, just say hello."
    mocks.llm.script(q, "Hello!")
    history = [{"role": "user", "content": "Native: weather?"},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "old1", "type": "function", "function": {"name": "get_weather_now", "arguments": "{}"}}]},
               {"role": "user", "content": q}]
    assert answer_of(native.chat(history)) == "Hello!"
    sent = mocks.llm.requests_for(q)[0].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == "old1" and "failed" in sent[2]["content"]
