"""Reasoning models in Envoy, with replies shaped as their servers send them: think blocks in content
(closed, opened by the chat template, cut by the token limit), `reasoning_content` and `reasoning`
fields, streamed reasoning deltas, tool calls written as text, parameters a reasoning model refuses,
and a server that refuses a tool-calling history without its reasoning (as DeepSeek's thinking mode
does). The client sees the final turn's reasoning as `reasoning_content`, never the filter's own words."""
from __future__ import annotations

import json

import pytest

from support.agent import LLM_MODEL, WEATHER_KEY, answer_of
from support.apis import WEATHER_NOW
from support.client import sse_events
from support.mocks import Response, completion

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def message_reply(message: dict, finish: str = "stop") -> Response:
    return Response.json({"id": "chatcmpl-r", "object": "chat.completion", "created": 1, "model": LLM_MODEL,
                          "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                       "logprobs": None, "finish_reason": finish}], "usage": dict(USAGE)})


def sse_reply(deltas: list[dict], finish: str) -> Response:
    """A whole streamed turn (the mock sends it at once): role chunk, the deltas, finish, usage."""
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": LLM_MODEL}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    events += [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": dict(USAGE)})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Response(200, body.encode(), content_type="text/event-stream")


def weather_call(call_id: str = "c1", city: str = "Jinan") -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "get_weather_now", "arguments": json.dumps({"location": city})}}


@pytest.fixture
def react(gateways):
    return gateways()


@pytest.fixture
def native(gateways):
    return gateways(mode="native")


def test_react_think_block_is_not_read_as_an_action(react, mocks):
    q = "Reasoning: think first, then answer"
    thinking = "Maybe Action: get_weather_now with {\"location\": \"Mars\"}? Or Final Answer: nothing. No."
    mocks.llm.script(q, f"<think>\n{thinking}\n</think>\n\nFinal Answer: It is sunny.")
    reply = react.chat(q)
    assert answer_of(reply) == "It is sunny."
    assert reply.json()["choices"][0]["message"]["reasoning_content"] == thinking
    assert mocks.tool_requests() == [], "nothing the model only considered was run"


def test_react_unopened_block_then_an_action(react, mocks):
    q = "Reasoning: unopened think block"
    action = 'Thought: weather\nAction: get_weather_now\nAction Input: {"location": "Jinan"}'
    mocks.llm.script(q, f"Final Answer: a draft I discarded\n</think>\n{action}", "Final Answer: Cold in Jinan.")
    assert answer_of(react.chat(q)) == "Cold in Jinan."
    [tool] = mocks.tool_requests()
    assert (tool.path, tool.query) == (WEATHER_NOW, {"location": "Jinan", "key": WEATHER_KEY})
    second = mocks.llm.requests_for(q)[1].json()["messages"]
    assert not any("</think>" in str(m.get("content")) for m in second), "no reasoning in the scratchpad"


def test_react_turn_cut_while_thinking_is_not_an_answer(react, mocks):
    q = "Reasoning: cut while thinking"
    cut = Response.json({**completion("<think>Final Answer: 42 maybe", LLM_MODEL),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "<think>Final Answer: 42 maybe"},
                                      "finish_reason": "length"}]})
    mocks.llm.script(q, cut, "Final Answer: 7")
    assert answer_of(react.chat(q)) == "7"


def refuses_without_reasoning(field: str, final: dict):
    """DeepSeek's thinking mode with tools: a history whose tool-calling assistant turn lacks its
    reasoning is an HTTP 400."""
    def answer(rec):
        calls = [m for m in rec.json()["messages"] if m.get("role") == "assistant" and m.get("tool_calls")]
        if not calls or not calls[-1].get(field):
            return Response.json({"error": {"message": f"Missing `{field}` in the assistant message",
                                            "type": "invalid_request_error", "param": None, "code": None}}, 400)
        return message_reply(final)
    return answer


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_native_reasoning_goes_back_with_the_tool_calls(native, mocks, field):
    q = f"Reasoning: native with {field}"
    first = message_reply({"content": None, field: "I need the weather.", "tool_calls": [weather_call()]}, "tool_calls")
    final = {"content": "It is 3 °C in Jinan.", field: "The tool said 3 °C."}
    mocks.llm.script(q, first, refuses_without_reasoning(field, final))
    reply = native.chat(q)
    assert answer_of(reply) == "It is 3 °C in Jinan."
    assert reply.json()["choices"][0]["message"]["reasoning_content"] == "The tool said 3 °C."
    history = mocks.llm.requests_for(q)[1].json()["messages"]
    [assistant] = [m for m in history if m["role"] == "assistant"]
    assert assistant[field] == "I need the weather."


def test_native_streamed_turns_keep_their_reasoning(native, mocks):
    """The turns come back as SSE (what the dynamic module's live path asks for, or a server that always
    streams): the reasoning deltas are assembled and sent back with the tool calls."""
    q = "Reasoning: streamed turns"
    first = sse_reply([{"reasoning_content": "Need "}, {"reasoning_content": "weather."},
                       {"tool_calls": [{"index": 0, **weather_call()}]}], "tool_calls")
    final = sse_reply([{"reasoning_content": "Got it."}, {"content": "Cold."}], "stop")

    def second(rec):
        return refuses_without_reasoning("reasoning_content", {})(rec) if not _has_reasoning(rec) else final
    mocks.llm.script(q, first, second)
    reply = native.chat(q)
    assert answer_of(reply) == "Cold."
    assert reply.json()["choices"][0]["message"]["reasoning_content"] == "Got it."


def _has_reasoning(rec) -> bool:
    return any(m.get("reasoning_content") == "Need weather." for m in rec.json()["messages"])


def test_streaming_client_gets_reasoning_deltas_before_the_content(native, mocks):
    q = "Reasoning: streaming client"
    mocks.llm.script(q, message_reply({"content": "Sunny.", "reasoning_content": "Looked outside."}))
    reply = native.chat(q, stream=True)
    assert reply.status == 200, reply.text[:300]
    events = [json.loads(e) for e in sse_events(reply.text) if e != "[DONE]"]
    kinds = [k for e in events for k in ("reasoning_content", "content")
             if e.get("choices") and e["choices"][0]["delta"].get(k)]
    text = "".join(e["choices"][0]["delta"].get("reasoning_content") or "" for e in events if e.get("choices"))
    assert text == "Looked outside."
    assert kinds.index("reasoning_content") < kinds.index("content"), kinds


def test_reasoning_return_false_keeps_it_from_the_client(gateways, mocks):
    gw = gateways(mode="native", reasoning={"return": False})  # a top-level key of the configuration
    q = "Reasoning: not returned"
    mocks.llm.script(q, message_reply({"content": "Sunny.", "reasoning_content": "private"}))
    reply = gw.chat(q)
    assert answer_of(reply) == "Sunny."
    assert "reasoning_content" not in reply.json()["choices"][0]["message"]


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "get_weather_now", "arguments": {"location": "Jinan"}}\n</tool_call>',
    '[TOOL_CALLS][{"name": "get_weather_now", "arguments": {"location": "Jinan"}}]',
])
def test_native_tool_calls_written_as_text_are_run(native, mocks, text):
    q = f"Reasoning: text tool call {text[:12]}"
    mocks.llm.script(q, message_reply({"content": text}), "Cold in Jinan.")
    assert answer_of(native.chat(q)) == "Cold in Jinan."
    [tool] = mocks.tool_requests()
    assert tool.query["location"] == "Jinan"


@pytest.mark.parametrize("param", ["stop", "max_tokens", "temperature", "top_p"])
def test_a_refused_parameter_is_stepped_down(gateways, mocks, param):
    """OpenAI's reasoning models answer 400 to `stop`, `max_tokens`, `temperature`, `top_p`. With
    `loop: request` every turn is a callout the filter can send again (on Proxy-Wasm the forwarded
    first turn's status is out before its body is read; the dynamic module reads it either way)."""
    react = gateways(loop="request")
    q = f"Reasoning: refuses {param}"

    sent = {}

    def strict(rec):
        body = rec.json()
        sent.setdefault("first", body)
        if param in body:
            return Response.json({"error": {"message": f"Unsupported parameter: '{param}' is not supported with "
                                            "this model.", "type": "invalid_request_error", "param": param,
                                            "code": "unsupported_parameter"}}, 400)
        if param == "max_tokens":
            assert body.get("max_completion_tokens") == sent["first"]["max_tokens"], body
        return Response.json(completion("Final Answer: fine", LLM_MODEL))
    mocks.llm.script(q, strict)
    fields = {"max_tokens": 64, "temperature": 0.2, "top_p": 0.9}
    extra = {param: fields[param]} if param in fields else {}
    assert answer_of(react.chat(q, **extra)) == "fine"
    assert param not in mocks.llm.requests_for(q)[-1].json()


def test_early_stop_answer_has_none_of_the_filters_words(react, mocks):
    q = "Reasoning: the same malformed reply"
    mocks.llm.script(q, "Action: {not json", "Action: {not json", "Action: {not json")
    answer = answer_of(react.chat(q))
    for word in ("json blob", "format", "Action", "Observation"):
        assert word not in answer, answer


def _streamed_content(reply) -> tuple[str, str]:
    """(content, reasoning_content) a streaming client got."""
    assert reply.status == 200, reply.text[:300]
    events = [json.loads(e) for e in sse_events(reply.text) if e != "[DONE]"]
    deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
    return ("".join(d.get("content") or "" for d in deltas), "".join(d.get("reasoning_content") or "" for d in deltas))


def test_a_template_opened_think_block_never_reaches_a_streaming_client_as_content(gateways, mocks):
    """A server whose chat template opens the block (DeepSeek-R1, QwQ) sends only `</think>`. Declared
    (`reasoning.templateOpens`), no request shows the thinking as content, live on the dynamic module
    too; undeclared, the dynamic module learns it from the first such turn and reads every later
    request's turns that way (Proxy-Wasm reads each whole turn, and never needed to)."""
    thinking, text = "The user asks about Jinan. I know it.", "Sunny in Jinan."
    turn = sse_reply([{"content": thinking + "\n</think>"}, {"content": "\n\n" + text}], "stop")
    declared = gateways(mode="native", reasoning={"templateOpens": True})
    q = "Reasoning: template opens (declared)"
    mocks.llm.script(q, turn)
    assert _streamed_content(declared.chat(q, stream=True)) == (text, thinking)
    learning = gateways(mode="native", max_iterations=5)
    mocks.llm.script("Reasoning: template opens (first)", turn)
    learning.chat("Reasoning: template opens (first)", stream=True)
    q = "Reasoning: template opens (learnt)"
    mocks.llm.script(q, turn)
    assert _streamed_content(learning.chat(q, stream=True)) == (text, thinking)
