"""Secrets never reach the filter's own log: Envoy runs with the filter at trace level, requests use
every configured secret (llm.apiKey, an apiKey in the query and one in a header, a static header), and
none of them appears in the log, in any form the filter writes it (raw or percent-encoded)."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from support.agent import (LLM_KEY, TRANSLATE_AUTH, TRANSLATE_KEY, WEATHER_KEY, Gateway, answer_of, envoy_config,
                           plugin_config)
from support.envoy import Envoy
from support.react import action, final

SECRET_WEATHER_KEY = "wk-s3cret&key=1"     # needs percent-encoding in the query


@pytest.fixture(scope="module")
def traced(mocks, envoy_binary, wasm, tmp_path_factory):
    plugin = plugin_config(mocks)
    plugin["apis"][0]["apiProvider"]["apiKey"]["value"] = SECRET_WEATHER_KEY
    envoy = Envoy(envoy_binary, envoy_config(wasm, mocks, plugin), str(tmp_path_factory.mktemp("envoy")),
                  wasm_log_level="trace").start()
    yield Gateway(envoy), envoy
    envoy.stop()


def test_no_secret_in_a_trace_level_log(traced, mocks):
    gw, envoy = traced
    q = "Secrets: weather in Oslo, then translate it?"
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}),
                     action("translate_text", {"text": "cold", "target_lang": "DE"}), final("Kalt."))
    assert answer_of(gw.chat(q)) == "Kalt."
    # Every secret was really used, so the log had every chance to show it.
    assert mocks.weather.requests[0].query["key"] == SECRET_WEATHER_KEY
    assert mocks.translate.requests[0].headers["x-api-key"] == TRANSLATE_KEY
    assert mocks.translate.requests[0].headers["authorization"] == TRANSLATE_AUTH
    assert mocks.llm.requests_for(q)[1].headers["authorization"] == f"Bearer {LLM_KEY}"
    with open(envoy.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    assert "[redacted]" in log, "the debug lines that carried secrets are there, masked"
    for secret in (LLM_KEY, SECRET_WEATHER_KEY, quote(SECRET_WEATHER_KEY, safe=""), TRANSLATE_KEY,
                   TRANSLATE_AUTH.split()[-1]):
        assert secret not in log, f"{secret!r} is in the log"
    assert WEATHER_KEY  # the default key is replaced in this configuration
