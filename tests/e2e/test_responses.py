"""The OpenAI Responses API in front of the agent, in Envoy, with the official `openai` client and the
OpenAI Agents SDK: string and item input, instructions, the client's function tools round trip,
text.format json_schema, the event stream (order, sequence numbers, final text), the refusals, and
chat completions unchanged on the same route. Every object and event the gateway writes is validated
against the Responses schemas vendored from the OpenAI OpenAPI document
(support/responses_schema.json)."""
from __future__ import annotations

import asyncio
import json
import os

import jsonschema
import openai
import pytest

from support import client
from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, LLM_MODEL, answer_of
from support.mocks import Response

RESPONSES_PATH = "/v1/responses"
SCHEMA_FILE = os.path.join(os.path.dirname(__file__), "support", "responses_schema.json")
with open(SCHEMA_FILE, encoding="utf-8") as f:
    _DEFS = json.load(f)["$defs"]
CITY_TOOL = {"type": "function", "name": "get_user_city", "description": "The user's city",
             "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}
EVENT_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added", "response.output_text.delta", "response.output_text.done",
               "response.content_part.done", "response.output_item.done", "response.completed"]


def validate(value: dict, name: str) -> None:
    jsonschema.Draft202012Validator({"$defs": _DEFS, "$ref": f"#/$defs/{name}"}).validate(value)


def tool_calls(*calls: tuple[str, str, dict]) -> Response:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]}
    return Response.json({"id": "chatcmpl-r", "object": "chat.completion", "created": 1, "model": LLM_MODEL,
                          "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def post(gw, body: dict) -> client.Reply:
    return client.request(gw.port, "POST", RESPONSES_PATH, body, CLIENT_HEADERS)


def events_of(reply: client.Reply) -> list[dict]:
    """The events of a Responses stream, each `event:` line matching its data's type and its schema."""
    events = client.named_events(reply.text)
    for event in events:
        validate(event, "ResponseStreamEvent")
    return events


@pytest.fixture
def native(gateways):
    return gateways(mode="native")


def test_string_input_with_instructions(gateway, mocks):
    q = "Responses: what is the weather in Oslo?"
    r = gateway.openai().responses.create(model=CLIENT_MODEL, input=q, instructions="Answer in one sentence.",
                                          metadata={"team": "qa"}, user="u-1")
    assert r.status == "completed" and r.id.startswith("resp_") and r.object == "response"
    assert "Oslo" in r.output_text and r.output[-1].type == "message"
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens > 0
    assert r.metadata == {"team": "qa"}
    first = mocks.llm.requests_for(q)[0]
    assert first.path == CHAT_PATH, "the model is asked with chat completions at llm.path"
    body = first.json()
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith("Answer in one sentence."), "instructions before the prompt"
    assert "metadata" not in body and "user" not in body and "input" not in body


def test_item_input_and_the_raw_object_match_the_schema(gateway, mocks):
    q = "Responses items: what is the weather in Berlin?"
    reply = post(gateway, {"model": CLIENT_MODEL, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": q}]}]})
    assert reply.status == 200, reply.text[:300]
    assert reply.headers["content-type"].startswith("application/json")
    obj = reply.json()
    validate(obj, "Response")
    assert obj["output_text"] and obj["output"][-1]["content"][0]["text"] == obj["output_text"]
    assert len(mocks.llm.requests_for(q)) == 2, "a tool turn, then the answer"


def test_client_function_tools_round_trip(native, mocks):
    q = "Responses native: what is the weather where I am?"
    mocks.llm.script(q, tool_calls(("u1", "get_user_city", {})), "It is -3 °C in Oslo.")
    oai = native.openai()
    first = oai.responses.create(model=CLIENT_MODEL, input=q, tools=[CITY_TOOL])
    [call] = [o for o in first.output if o.type == "function_call"]
    assert (call.name, call.call_id, call.arguments) == ("get_user_city", "u1", "{}")
    assert mocks.tool_requests() == []
    sent = mocks.llm.requests_for(q)[0].json()
    assert "get_user_city" in [t["function"]["name"] for t in sent["tools"]]
    items = [{"role": "user", "content": q}, *[o.model_dump(exclude_none=True) for o in first.output],
             {"type": "function_call_output", "call_id": "u1", "output": "Oslo"}]
    second = oai.responses.create(model=CLIENT_MODEL, input=items, tools=[CITY_TOOL])
    assert second.output_text == "It is -3 °C in Oslo."
    msgs = mocks.llm.requests_for(q)[1].json()["messages"]
    assert msgs[-1] == {"role": "tool", "tool_call_id": "u1", "content": "Oslo"}
    assert msgs[-2]["tool_calls"][0]["id"] == "u1"


def test_text_format_json_schema(native, mocks):
    q = "Responses json: which city is the capital of Norway?"

    def llm(rec):
        last = rec.json()["messages"][-1]["content"]
        if last.startswith("Question:\n"):   # the formatting call of JSON mode
            return Response.json(_completion('{"city": "Oslo"}'))
        return Response.json(_completion("The capital of Norway is Oslo."))

    mocks.llm.route("POST", CHAT_PATH, llm)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    r = native.openai().responses.create(
        model=CLIENT_MODEL, input=q, text={"format": {"type": "json_schema", "name": "capital", "schema": schema}})
    assert json.loads(r.output_text) == {"city": "Oslo"}
    sent = [x.json() for x in mocks.llm.requests]
    assert "response_format" not in sent[0], "not on the tool-using turn"


def _completion(content: str) -> dict:
    return {"id": "chatcmpl-j", "object": "chat.completion", "created": 1, "model": LLM_MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def test_stream_event_order_and_final_text(gateway, mocks):
    q = "Responses stream: what is the weather in Paris?"
    with gateway.openai().responses.stream(model=CLIENT_MODEL, input=q) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "Paris" in final.output_text and final.status == "completed"
    deduped = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert deduped == EVENT_ORDER
    raw = post(gateway, {"model": CLIENT_MODEL, "input": q, "stream": True})
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = events_of(raw)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert events[-1]["response"]["output_text"] == text


_QUESTION = {"role": "user", "content": "Responses: refused?"}
_CALL = {"type": "function_call", "call_id": "call_1", "name": "get_user_city", "arguments": "{}"}


@pytest.mark.parametrize("extra, says, param", [
    ({"previous_response_id": "resp_123"}, "keeps no state", "previous_response_id"),
    ({"store": True}, "keeps no state", "store"),
    ({"conversation": "conv_1"}, "send the whole conversation", "conversation"),
    ({"tools": [{"type": "web_search"}]}, "'web_search'", "tools"),
    ({"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "'file_search'", "tools"),
    ({"input": 42}, "the request body", "input"),
    # Fields of the wrong JSON type: each named in `param`, none passed on or echoed.
    ({"text": 5}, "'text' must be an object", "text"),
    ({"metadata": 5}, "'metadata' must be an object", "metadata"),
    ({"user": {}}, "'user' must be a string", "user"),
    ({"temperature": "hot"}, "'temperature' must be a number", "temperature"),
    ({"model": 5}, "'model' must be a string", "model"),
    ({"model": {"id": CLIENT_MODEL}}, "'model' must be a string", "model"),
    ({"model": ""}, "'model' must not be empty", "model"),
    ({"model": "m" * 100_000}, "at most 256 are taken", "model"),
    ({"input": [_QUESTION, {"type": "function_call_output", "call_id": "call_9", "output": "x"}]},
     "matches no earlier unanswered function_call", "input[1].call_id"),
    ({"input": [_QUESTION, _CALL]}, "has no function_call_output", "input[1].call_id"),
    ({"tools": [{**CITY_TOOL, "name": "t" * 10_000}]}, "must be 1 to 64 of", "tools[0].name"),
])
def test_refusals_are_400s(gateway, mocks, extra, says, param):
    body = {"model": CLIENT_MODEL, "input": "Responses: refused?", **extra}
    reply = post(gateway, body)
    assert reply.status == 400, reply.text[:300]
    err = reply.json()["error"]
    assert err["type"] == "invalid_request_error" and says in err["message"], err
    assert err["param"] == param, err
    assert mocks.llm.requests == []
    with pytest.raises(openai.BadRequestError, match=says.strip("'")):
        gateway.openai().responses.create(**body)


def test_chat_completions_unchanged_on_the_same_route(gateway):
    assert "Rome" in answer_of(gateway.chat("Chat beside Responses: what is the weather in Rome?"))


def test_agents_sdk_completes_a_run(gateway, mocks):
    agents = pytest.importorskip("agents")
    sdk = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gateway.port}/v1", api_key="sk-client-secret",
                             max_retries=0)
    agents.set_tracing_disabled(True)
    model = agents.OpenAIResponsesModel(model=CLIENT_MODEL, openai_client=sdk)
    agent = agents.Agent(name="Weather", instructions="You answer weather questions.", model=model)
    q = "Agents SDK: what is the weather in Madrid?"
    result = asyncio.run(agents.Runner.run(agent, q))
    assert "Madrid" in result.final_output
    assert mocks.llm.requests_for(q), "the run went through the agent's loop"


def test_responses_path_from_the_configuration(gateways, mocks):
    gw = gateways(responses={"path": "/agent/respond"})
    q = "Responses path: what is the weather in Lisbon?"
    reply = client.request(gw.port, "POST", "/agent/respond", {"model": CLIENT_MODEL, "input": q}, CLIENT_HEADERS)
    assert reply.status == 200, reply.text[:300]
    validate(reply.json(), "Response")
    assert "Lisbon" in reply.json()["output_text"]
    assert mocks.llm.requests_for(q)[0].path == CHAT_PATH
