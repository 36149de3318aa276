"""The agent's steps (x-api-agent-steps: true) with the official client, plain and streamed: the
client keeps working (unknown fields are ignored) and the steps are there; and the context block
reaches the model in the current user message."""
from __future__ import annotations

import json

import pytest

from support.agent import CLIENT_MODEL, WEATHER_KEY, Gateway, envoy_config, plugin_config
from support.envoy import Envoy
from support.react import action, final

STEPS = {"x-api-agent-steps": "true"}


@pytest.fixture(scope="module")
def ctx_gateway(mocks, envoy_binary, wasm, tmp_path_factory):
    plugin = plugin_config(mocks)
    plugin["context"] = {"time": True, "timezone": "Europe/Berlin", "headers": {"consumer": "x-consumer-id"},
                         "text": "The user is on the mobile app."}
    envoy = Envoy(envoy_binary, envoy_config(wasm, mocks, plugin), str(tmp_path_factory.mktemp("envoy"))).start()
    yield Gateway(envoy)
    envoy.stop()


def test_steps_with_the_official_client(gateway, mocks):
    q = "Steps: the weather in Oslo?"
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Cold."))
    with gateway.openai() as client:
        r = client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}],
                                           extra_headers=STEPS)
        assert r.choices[0].message.content == "Cold."
        steps = r.model_extra["api_agent_steps"]
        assert [s["type"] for s in steps] == ["llm", "tool", "llm"]
        assert steps[1]["name"] == "get_weather_now" and steps[1]["status"] == 200
        assert WEATHER_KEY not in json.dumps(steps)
        chunks = list(client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}],
                                                     stream=True, extra_headers=STEPS))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Cold."
        assert [s["type"] for s in chunks[-1].model_extra["api_agent_steps"]] == ["llm", "tool", "llm"]
        plain = client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}])
        assert "api_agent_steps" not in (plain.model_extra or {}), "off unless asked"


def test_the_context_block_reaches_the_model(ctx_gateway, mocks):
    q = "Context: what time is it?"
    mocks.llm.script(q, final("Late."))
    with ctx_gateway.openai() as client:
        client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}],
                                       extra_headers={"x-consumer-id": "alice"})
    [req] = mocks.llm.requests_for(q)
    messages = req.json()["messages"]
    question = messages[-1]["content"]
    assert "[Context]\nCurrent time: " in question and "(Europe/Berlin, UTC+0" in question
    assert "consumer: alice\nThe user is on the mobile app." in question
    assert "[Context]" not in messages[0]["content"], "never in the system prompt"
