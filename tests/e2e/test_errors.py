"""What is not the agent's, and what goes wrong: requests passed through untouched, bad client bodies
(a local JSON 400), a failing first LLM turn (a non-2xx passed through; a useless 200 and any failing
later turn become an error in the body, since the 200 is already out)."""
import json

import openai
import pytest

from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, LLM_KEY
from support.client import request, sse_events
from support.mocks import Response
from support.react import action

CHAT = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": "Anything?"}]}


@pytest.mark.parametrize("method, path, body, content_type", [
    ("GET", "/v1/models", None, None),
    ("POST", "/v1/embeddings", b'{"model": "e", "input": "hi"}', "application/json"),
    ("POST", CHAT_PATH, json.dumps(CHAT).encode(), "text/plain"),
], ids=["get-models", "post-embeddings", "chat-not-json"])
def test_non_chat_request_passes_with_the_provider_key(gateway, mocks, method, path, body, content_type):
    """Passed on as it came, but for its credentials: the consumer's key is for the gateway, the provider
    gets `llm.apiKey` (test_passthrough.py: every kind of request, identity headers, `refuse`)."""
    headers = {**CLIENT_HEADERS, "X-Trace": "abc"}
    if content_type:
        headers["Content-Type"] = content_type
    reply = request(gateway.port, method, path, body, headers)

    [seen] = mocks.llm.exchanges
    assert (seen.request.method, seen.request.target) == (method, path)
    assert seen.request.body == (body or b"")
    assert seen.request.headers["authorization"] == f"Bearer {LLM_KEY}"
    assert seen.request.headers["x-trace"] == "abc"
    assert (reply.status, reply.body) == (seen.response.status, seen.response.body)
    assert mocks.tool_requests() == []


@pytest.mark.parametrize("body", [
    b'{"model": "m", "messages": [{"role": "user", "content": "hi"}',
    b'{"model": "m"}',
    b'{"model": "m", "messages": []}',
    b'{"model": "m", "messages": [{"role": "user", "content": "  "}]}',
    b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 2}',
], ids=["truncated-json", "no-messages", "empty-messages", "empty-question", "n-2"])
def test_bad_client_body_is_a_local_400(gateway, mocks, body):
    reply = request(gateway.port, "POST", CHAT_PATH, body, {**CLIENT_HEADERS, "Content-Type": "application/json"})
    assert reply.status == 400 and reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    # No LLM request completes. (Its headers may have reached the upstream already, since the filter's
    # header callback must let them go on; Envoy then aborts it: the mock files it under `aborted`.)
    assert mocks.llm.requests == []


def test_bad_client_body_raises_bad_request_in_the_official_client(gateway, mocks):
    with gateway.openai() as client, pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": "hi"}], n=2)
    assert raised.value.status_code == 400 and "'n' must be 1" in raised.value.message
    assert mocks.llm.requests == []


def test_bad_streaming_client_body_is_a_json_400(gateway, mocks):
    """A 400 means no stream was started, so its body is a JSON error, as OpenAI sends it: the SDKs read
    the message of a non-2xx reply as JSON only (an SSE body leaves them with just "Error code: 400")."""
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 2, "stream": True}
    reply = request(gateway.port, "POST", CHAT_PATH, body, CLIENT_HEADERS)
    assert reply.status == 400
    assert reply.headers["content-type"] == "application/json", reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"

    with gateway.openai() as client, pytest.raises(openai.BadRequestError) as raised:
        list(client.chat.completions.create(model=CLIENT_MODEL, messages=body["messages"], n=2, stream=True))
    assert "'n' must be 1" in raised.value.message
    assert mocks.llm.requests == []


def test_first_llm_turn_error_is_passed_through(gateway, mocks):
    q = "Is the provider down?"
    provider_error = Response.json({"error": {"message": "The server is overloaded.", "type": "server_error",
                                              "param": None, "code": None}}, 500)
    mocks.llm.script(q, provider_error)
    reply = gateway.chat(q)
    assert (reply.status, reply.body) == (500, provider_error.body)

    with gateway.openai() as client, pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}])
    assert "The server is overloaded." in raised.value.message
    assert mocks.tool_requests() == []


def test_first_llm_turn_unusable_200_is_an_error_body(gateway, mocks):
    """The 200 is out before the body is read, so a useless first reply becomes an error in the body:
    a JSON error object for plain clients, an SSE error event then [DONE] for streaming ones."""
    q = "Is the first LLM reply usable (not JSON)?"
    mocks.llm.script(q, Response(200, b"<html>bad gateway</html>", "text/html"))
    plain = gateway.chat(q)
    assert plain.status == 200 and plain.json()["error"]["type"] == "api_error"

    streamed = gateway.chat(q, stream=True)
    assert streamed.status == 200
    error_event, done = sse_events(streamed.text)
    assert json.loads(error_event)["error"]["type"] == "api_error" and done == "[DONE]"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_first_llm_turn_empty_200_is_a_real_502(gateway, mocks, stream):
    """A reply without a body gets no body callback from Envoy; the filter reads it at header time,
    when the status is still its own, and answers a real 502 with a JSON error (no stream began)."""
    q = f"Is the first LLM reply usable (empty, stream={stream})?"
    mocks.llm.script(q, Response(200, b""))
    reply = gateway.chat(q, stream=stream)
    assert reply.status == 502
    assert reply.headers["content-type"].startswith("application/json")
    error = reply.json()["error"]
    assert error["type"] == "api_error" and "not JSON" in error["message"]


LATER_FAILURES = {
    "http-500": (Response.json({"error": {"message": "model overloaded"}}, 500), "the LLM answered HTTP 500"),
    "not-json": (Response(200, b"<html>bad gateway</html>", "text/html"), "not JSON"),
    "no-choices": (Response.json({"id": "x", "object": "chat.completion", "choices": []}), "no choices"),
}


def script_later_failure(mocks, q, kind):
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), LATER_FAILURES[kind][0])


@pytest.mark.parametrize("kind", LATER_FAILURES)
def test_later_llm_failure_is_an_error_body(gateway, mocks, kind):
    q = f"Weather in Oslo, but the LLM fails later ({kind})?"
    script_later_failure(mocks, q, kind)
    reply = gateway.chat(q)
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert error["type"] == "api_error" and error["code"]
    assert LATER_FAILURES[kind][1] in error["message"]
    # A 500 is retried (llm.maxRetries, default 2) after a backoff, by the filter's timers.
    retries = 2 if kind == "http-500" else 0
    assert len(mocks.weather.requests) == 1 and len(mocks.llm.requests_for(q)) == 2 + retries
    # A late error in a 200 body carries `choices: []`, so that clients fail on it as on no answer.
    assert reply.json()["choices"] == []


@pytest.mark.parametrize("kind", LATER_FAILURES)
def test_later_llm_failure_is_an_sse_error_event(gateway, mocks, kind):
    q = f"Weather in Oslo, streamed, but the LLM fails later ({kind})?"
    script_later_failure(mocks, q, kind)
    messages = [{"role": "user", "content": q}]
    reply = request(gateway.port, "POST", CHAT_PATH, {"model": CLIENT_MODEL, "messages": messages, "stream": True},
                    CLIENT_HEADERS)
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    error_event, done = sse_events(reply.text)
    assert done == "[DONE]"
    error = json.loads(error_event)["error"]
    assert error["type"] == "api_error" and LATER_FAILURES[kind][1] in error["message"]

    with gateway.openai() as client, pytest.raises(openai.APIError) as raised:
        list(client.chat.completions.create(model=CLIENT_MODEL, messages=messages, stream=True))
    assert LATER_FAILURES[kind][1] in raised.value.message
