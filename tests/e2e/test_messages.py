"""Anthropic Messages in front of the agent, in Envoy, with the official `anthropic` Python SDK:
`messages.create` and `messages.stream` with the gateway's own tools called by the loop, a client
tool round trip (tool_use out, tool_result back, the final answer), plain and streamed; the raw event
grammar; malformed bodies and the provider's errors in Anthropic's shape. The model behind still
speaks chat completions at llm.path (the scripted fake LLM)."""
from __future__ import annotations


import anthropic
import pytest

from support import client
from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_KEY, CLIENT_MODEL, LLM_MODEL, answer_of
from support.mocks import Response
from test_native import tool_calls

MESSAGES_PATH = "/v1/messages"
CITY_TOOL = {"name": "get_user_city", "description": "The user's city",
             "input_schema": {"type": "object", "properties": {}}}
BLOCK_EVENTS = {"content_block_start", "content_block_delta", "content_block_stop"}


def sdk(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"http://127.0.0.1:{gw.port}", api_key=CLIENT_KEY, max_retries=0,
                               timeout=client.TIMEOUT_S)



def post(gw, body: dict) -> client.Reply:
    return client.request(gw.port, "POST", MESSAGES_PATH, body, CLIENT_HEADERS)


def events_of(reply: client.Reply) -> list[dict]:
    """The events of a Messages stream, each `event:` line matching its data's type."""
    return client.named_events(reply.text)


@pytest.fixture
def native(gateways):
    return gateways(mode="native")


def test_create_with_the_gateways_tools(gateway, mocks):
    q = "Messages: what is the weather in Oslo?"
    msg = sdk(gateway).messages.create(model=CLIENT_MODEL, max_tokens=1024, system="Answer in one sentence.",
                                       messages=[{"role": "user", "content": q}], metadata={"user_id": "u-1"})
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    assert msg.content[-1].type == "text" and "Oslo" in msg.content[-1].text
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    sent = mocks.llm.requests_for(q)
    assert len(sent) == 2, "a tool turn, then the answer"
    assert sent[0].path == CHAT_PATH, "the model is asked with chat completions at llm.path"
    body = sent[0].json()
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith("Answer in one sentence."), "system before the prompt"
    assert body["user"] == "u-1" and body["max_tokens"] == 1024
    assert "metadata" not in body and "system" not in body


def test_stream_with_the_gateways_tools(native, mocks):
    q = "Messages stream: what is the weather in Paris?"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Paris"})), "It is 20 °C in Paris.")
    with sdk(native).messages.stream(model=CLIENT_MODEL, max_tokens=512,
                                     messages=[{"role": "user", "content": q}]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert final.content[-1].text == "It is 20 °C in Paris." and final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "message_delta" in kinds
    assert len(mocks.llm.requests_for(q)) == 2 and mocks.tool_requests(), "the loop called the weather tool"
    q = "Messages raw stream: what is the weather in Paris?"
    raw = post(native, {"model": CLIENT_MODEL, "max_tokens": 512, "stream": True,
                        "messages": [{"role": "user", "content": q}]})
    assert raw.status == 200 and raw.headers["content-type"].startswith("text/event-stream")
    events = events_of(raw)
    names = [e["type"] for e in events if e["type"] != "ping"]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert set(names[1:-2]) <= BLOCK_EVENTS
    text = "".join(e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta")
    assert "Paris" in text
    starts = [e["index"] for e in events if e["type"] == "content_block_start"]
    stops = [e["index"] for e in events if e["type"] == "content_block_stop"]
    assert starts == stops == list(range(len(starts)))


@pytest.mark.parametrize("streamed", [False, True])
def test_client_tool_round_trip(native, mocks, streamed):
    q = f"Messages native ({'streamed' if streamed else 'plain'}): what is the weather where I am?"
    mocks.llm.script(q, tool_calls(("u1", "get_user_city", {})), "It is -3 °C in Oslo.")
    c = sdk(native)
    ask = {"model": CLIENT_MODEL, "max_tokens": 512, "tools": [CITY_TOOL]}
    messages = [{"role": "user", "content": q}]
    if streamed:
        with c.messages.stream(messages=messages, **ask) as s:
            first = s.get_final_message()
    else:
        first = c.messages.create(messages=messages, **ask)
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert (use.id, use.name, use.input) == ("u1", "get_user_city", {})
    assert mocks.tool_requests() == [], "the client's tool is the client's to run"
    sent = mocks.llm.requests_for(q)[0].json()
    assert "get_user_city" in [t["function"]["name"] for t in sent["tools"]]
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "Oslo"}]}]
    if streamed:
        with c.messages.stream(messages=messages, **ask) as s:
            second = s.get_final_message()
    else:
        second = c.messages.create(messages=messages, **ask)
    assert second.stop_reason == "end_turn" and second.content[-1].text == "It is -3 °C in Oslo."
    msgs = mocks.llm.requests_for(q)[1].json()["messages"]
    assert msgs[-1] == {"role": "tool", "tool_call_id": "u1", "content": "Oslo"}
    assert msgs[-2]["tool_calls"][0]["id"] == "u1"


@pytest.mark.parametrize("extra, says", [
    ({"max_tokens": None}, "'max_tokens' is required"),
    ({"max_tokens": 0}, "'max_tokens' must be at least 1"),
    ({"temperature": "hot"}, "'temperature' must be a number"),
    ({"model": ""}, "'model' must not be empty"),
    ({"messages": [{"role": "system", "content": "x"}]}, "messages[0]: unknown role 'system'"),
    ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]},
     "messages[0].content[0]: blocks of type 'audio' are not supported"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools of type 'web_search_20250305'"),
    ({"thinking": {"type": "enabled", "budget_tokens": 10}}, "'thinking.budget_tokens' must be"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]},
     "matches no earlier unanswered tool_use"),
])
def test_malformed_bodies_are_anthropic_400s(gateway, mocks, extra, says):
    body = {"model": CLIENT_MODEL, "max_tokens": 100,
            "messages": [{"role": "user", "content": "Messages: refused?"}], **extra}
    body = {k: v for k, v in body.items() if v is not None}
    reply = post(gateway, body)
    assert reply.status == 400, reply.text[:300]
    obj = reply.json()
    assert obj["type"] == "error" and obj["error"]["type"] == "invalid_request_error", obj
    assert says in obj["error"]["message"], obj
    assert mocks.llm.requests == []
    with pytest.raises(anthropic.BadRequestError) as e:
        # Through extra_body: the SDK checks some fields' types itself before sending.
        sdk(gateway).messages.create(model=CLIENT_MODEL, max_tokens=100, extra_body=extra,
                                     messages=[{"role": "user", "content": "Messages: refused?"}])
    assert says in str(e.value)


@pytest.mark.parametrize("status, error", [(429, anthropic.RateLimitError), (401, anthropic.AuthenticationError)])
def test_the_providers_error_is_in_anthropics_shape(gateway, mocks, status, error):
    q = f"Messages: the provider refuses ({status})."
    refusal = Response.json({"error": {"message": "the provider says no", "type": "x", "code": None}}, status)
    mocks.llm.script(q, refusal, refusal, refusal, refusal)
    reply = post(gateway, {"model": CLIENT_MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": q}]})
    assert reply.status == status, reply.text[:300]
    obj = reply.json()
    assert obj["type"] == "error" and "the provider says no" in obj["error"]["message"], obj
    with pytest.raises(error, match="the provider says no"):
        sdk(gateway).messages.create(model=CLIENT_MODEL, max_tokens=100, messages=[{"role": "user", "content": q}])


def test_chat_completions_unchanged_on_the_same_route(gateway):
    assert "Rome" in answer_of(gateway.chat("Chat beside Messages: what is the weather in Rome?"))


def test_messages_path_from_the_configuration(gateways, mocks):
    gw = gateways(messages={"path": "/agent/messages"})
    q = "Messages path: what is the weather in Lisbon?"
    body = {"model": CLIENT_MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": q}]}
    reply = client.request(gw.port, "POST", "/agent/messages", body, CLIENT_HEADERS)
    assert reply.status == 200, reply.text[:300]
    assert reply.json()["type"] == "message" and "Lisbon" in reply.json()["content"][-1]["text"]
    assert mocks.llm.requests_for(q)[0].path == CHAT_PATH
