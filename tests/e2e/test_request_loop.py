"""`loop: request`: the client's request is held, every LLM turn (the first too) is a callout, and the
answer is a local reply with its real status, so that plain (non-streaming) clients raise on late
errors instead of reading a 200 with no choices. Checked with the official client."""
from __future__ import annotations

import openai
import pytest

from support.agent import CLIENT_MODEL, LLM_MODEL, envoy_config, plugin_config
from support.envoy import Envoy
from support.mocks import Response
from support.react import action, final


@pytest.fixture(scope="module")
def gw(mocks, envoy_binary, wasm, tmp_path_factory):
    plugin = plugin_config(mocks)
    plugin["loop"] = "request"
    envoy = Envoy(envoy_binary, envoy_config(wasm, mocks, plugin), str(tmp_path_factory.mktemp("envoy"))).start()
    from support.agent import Gateway
    yield Gateway(envoy)
    envoy.stop()


def ask(gw, q: str, **fields):
    """The completion, or a stream's chunks (read while the client is open)."""
    with gw.openai() as client:
        result = client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}],
                                                **fields)
        return list(result) if fields.get("stream") else result


def test_the_whole_loop_runs_in_callouts(gw, mocks):
    q = "Request loop: the weather in Oslo?"
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Cold in Oslo."))
    assert ask(gw, q).choices[0].message.content == "Cold in Oslo."
    first, second = mocks.llm.requests_for(q)
    assert first.json()["model"] == LLM_MODEL, "the first turn is a callout with llm.model"
    assert first.headers["authorization"] == "Bearer sk-llm"
    assert len(mocks.weather.requests) == 1
    chunks = list(ask(gw, q, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Cold in Oslo."


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_late_failure_is_a_real_status_the_client_raises_on(gw, mocks, stream):
    q = f"Request loop: the LLM fails after a tool call (stream={stream})?"
    overloaded = Response.json({"error": {"message": "overloaded"}}, 503)
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), overloaded)
    with pytest.raises(openai.InternalServerError) as raised:
        ask(gw, q, stream=stream)
    assert raised.value.status_code == 502
    assert "the LLM answered HTTP 503" in raised.value.message
    assert raised.value.body["code"] == "llm_error"
    # Turn 2 was sent 1 + llm.maxRetries (2) times.
    assert len(mocks.llm.requests_for(q)) == 4


def test_the_first_turn_is_retried_and_honours_retry_after(gw, mocks):
    q = "Request loop: rate limited at first?"
    limited = Response(429, b'{"error": {"message": "slow down"}}', headers={"Retry-After": "1"})
    mocks.llm.script(q, limited)
    with pytest.raises(openai.RateLimitError) as raised:
        ask(gw, q)
    assert raised.value.status_code == 429 and "slow down" in raised.value.message
    sent = [r.at for r in mocks.llm.requests_for(q)]
    assert len(sent) == 3, "one call and two retries"
    assert all(b - a >= 0.95 for a, b in zip(sent, sent[1:])), f"Retry-After: 1 was honoured: {sent}"


def test_a_provider_error_on_the_first_turn_keeps_its_status(gw, mocks):
    q = "Request loop: a wrong key?"
    mocks.llm.script(q, Response.json({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                                  "param": None, "code": "invalid_api_key"}}, 401))
    with pytest.raises(openai.AuthenticationError) as raised:
        ask(gw, q)
    assert "Incorrect API key provided" in raised.value.message
    assert len(mocks.llm.requests_for(q)) == 1, "a 401 is not retried"
