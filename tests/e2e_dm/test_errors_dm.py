"""Errors on the dynamic module. What does not depend on the host is tests/e2e/test_errors.py as it is;
in `loop: response` this host holds the LLM reply's headers while the loop runs, so a failure after the
first turn is a real status (502/504 with a JSON error) where the Wasm build can only put the error in
a 200 body. Streaming clients get their answer live: a first-turn failure still has its real status;
a later one is an error event in the stream that started when the loop went on to tools."""
import json

import openai
import pytest

from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL
from support.client import request
from support.faults import sse_events
from support.mocks import Response
from test_errors import (  # noqa: F401
    LATER_FAILURES,
    script_later_failure,
    test_bad_client_body_is_a_local_400,
    test_bad_client_body_raises_bad_request_in_the_official_client,
    test_bad_streaming_client_body_is_a_json_400,
    test_first_llm_turn_empty_200_is_a_real_502,
    test_first_llm_turn_error_is_passed_through,
    test_non_chat_request_passes_with_the_provider_key,
)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_first_llm_turn_unusable_200_is_a_real_502(gateway, mocks, stream):
    q = f"Is the first LLM reply usable (not JSON, stream={stream})?"
    mocks.llm.script(q, Response(200, b"<html>bad gateway</html>", "text/html"))
    reply = gateway.chat(q, stream=stream)
    assert reply.status == 502 and reply.headers["content-type"].startswith("application/json")
    assert reply.json()["error"]["type"] == "api_error"


@pytest.mark.parametrize("kind", LATER_FAILURES)
def test_later_llm_failure_is_a_real_502(gateway, mocks, kind):
    q = f"Weather in Oslo, but the LLM fails later ({kind})?"
    script_later_failure(mocks, q, kind)
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}]}
    reply = request(gateway.port, "POST", CHAT_PATH, body, CLIENT_HEADERS)
    assert reply.status == 502 and reply.headers["content-type"].startswith("application/json")
    error = reply.json()["error"]
    assert error["type"] == "api_error" and LATER_FAILURES[kind][1] in error["message"]
    assert "choices" not in reply.json()
    # A 500 is retried (llm.maxRetries, default 2) after a backoff: the timer thread and Envoy's scheduler.
    retries = 2 if kind == "http-500" else 0
    assert len(mocks.weather.requests) == 1 and len(mocks.llm.requests_for(q)) == 2 + retries


@pytest.mark.parametrize("kind", LATER_FAILURES)
def test_later_llm_failure_ends_the_live_stream_with_an_error_event(gateway, mocks, kind):
    """Streaming clients get their stream live: it started (200, the role chunk) when the loop went
    on to tools, so a later failure is an error event in it, as OpenAI sends mid-stream errors."""
    q = f"Weather in Oslo, but the LLM fails later ({kind}, stream)?"
    script_later_failure(mocks, q, kind)
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": True}
    reply = request(gateway.port, "POST", CHAT_PATH, body, CLIENT_HEADERS)
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    role, error_event, done = sse_events(reply.text)
    assert json.loads(role)["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert done == "[DONE]"
    error = json.loads(error_event)["error"]
    assert error["type"] == "api_error" and LATER_FAILURES[kind][1] in error["message"]
    retries = 2 if kind == "http-500" else 0
    assert len(mocks.weather.requests) == 1 and len(mocks.llm.requests_for(q)) == 2 + retries


def test_later_llm_failure_raises_in_the_official_client(gateway, mocks):
    q = "Weather in Oslo, the official client, the LLM fails later?"
    script_later_failure(mocks, q, "not-json")
    with gateway.openai() as client, pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}])
    assert raised.value.status_code == 502 and "not JSON" in raised.value.message
    script_later_failure(mocks, q, "not-json")
    with gateway.openai() as client, pytest.raises(openai.APIError) as raised:
        list(client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}],
                                            stream=True))
    assert "not JSON" in raised.value.message


def test_an_answer_after_tools_is_a_200_with_its_own_content_type(gateway, mocks):
    from support.react import action, final
    q = "Weather in Oslo, answered after a tool (dynamic module)?"
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Cold in Oslo."))
    plain = gateway.chat(q)
    assert plain.status == 200 and plain.headers["content-type"] == "application/json"
    assert plain.json()["choices"][0]["message"]["content"] == "Cold in Oslo."
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Cold in Oslo."))
    streamed = gateway.chat(q, stream=True)
    assert streamed.status == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    assert "Cold in Oslo." in streamed.text
