"""Retries in Envoy: a failed LLM turn is sent again after a backoff run by the filter's timers (also
in test_errors and test_request_loop); GET tools are retried only where the API opts in, and a POST
never is."""
from __future__ import annotations

import pytest

from support.agent import Gateway, answer_of, envoy_config, last_message, plugin_config
from support.apis import TRANSLATE, WEATHER_NOW, weather_api
from support.envoy import Envoy
from support.mocks import Response
from support.react import action, final


@pytest.fixture(scope="module")
def retrying(mocks, envoy_binary, wasm, tmp_path_factory):
    plugin = plugin_config(mocks)
    for api in plugin["apis"]:
        api["apiProvider"]["maxRetries"] = 2
    envoy = Envoy(envoy_binary, envoy_config(wasm, mocks, plugin), str(tmp_path_factory.mktemp("envoy"))).start()
    yield Gateway(envoy)
    envoy.stop()


def flaky(failures: int, then):
    """A route that answers 503 `failures` times, then as `then`."""
    calls = []

    def answer(rec):
        calls.append(rec)
        if len(calls) <= failures:
            return Response.json({"error": "busy"}, 503)
        return then(rec)
    return answer


def test_a_get_tool_is_retried_where_the_api_opts_in(retrying, mocks):
    q = "Retries: the weather in Oslo, flaky?"
    mocks.weather.route("GET", WEATHER_NOW, flaky(2, weather_api))
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Snowing in Oslo."))
    assert answer_of(retrying.chat(q)) == "Snowing in Oslo."
    sent = [r.at for r in mocks.weather.requests]
    assert len(sent) == 3
    # Backoffs of 100-200 ms, then 200-400 ms (timer resolution 20 ms).
    assert 0.09 <= sent[1] - sent[0] <= 0.5 and 0.19 <= sent[2] - sent[1] <= 0.7, sent
    assert '"condition": "snowing"' in last_message(mocks.llm.requests_for(q)[1])


def test_a_post_tool_is_never_retried(retrying, mocks):
    q = "Retries: translate, flaky?"
    mocks.translate.route("POST", TRANSLATE, flaky(5, lambda rec: Response.json({})))
    mocks.llm.script(q, action("translate_text", {"text": "hi", "target_lang": "DE"}), final("Failed."))
    assert answer_of(retrying.chat(q)) == "Failed."
    assert len(mocks.translate.requests) == 1
    assert "HTTP 503" in last_message(mocks.llm.requests_for(q)[1])


def test_without_opting_in_a_get_tool_is_not_retried(gateway, mocks):
    q = "Retries: the weather in Oslo, flaky, default config?"
    mocks.weather.route("GET", WEATHER_NOW, flaky(1, weather_api))
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Unknown."))
    assert answer_of(gateway.chat(q)) == "Unknown."
    assert len(mocks.weather.requests) == 1
