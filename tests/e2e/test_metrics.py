"""The plugin's metrics in Envoy's stats, after known traffic: exact counts, tags extracted by
`stats_config.stats_tags` (as the README shows) so that Prometheus sees labels, histograms recorded,
and one info line per request in the log."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from support.agent import CHAT_PATH, CLIENT_HEADERS, Gateway, envoy_config, plugin_config, spec_text
from support.apis import WEATHER_NOW
from support.client import request
from support.envoy import Envoy
from support.mocks import Response
from support.react import action, final

TAGS = ("mode", "outcome", "tool", "class")


def stats_config() -> dict:
    """What the README tells operators to add to the bootstrap."""
    return {"stats_tags": [{"tag_name": t, "regex": rf"^wasmcustom\.api_agent\..*?(\.{t}\.([^.]+))"} for t in TAGS]}


def metered_plugin(mocks) -> dict:
    """maxIterations 2, and a third API whose token exchange needs a header no client sends: its calls
    are never authorized (the token service is never asked)."""
    plugin = plugin_config(mocks, max_iterations=2)
    exchange = {"serviceName": "sts.dns", "servicePort": 9, "path": "/token", "audience": "pets",
                "subjectHeader": "x-never-sent"}
    pets = {"serviceName": "pets.dns", "servicePort": 9, "domain": "pets.example", "tokenExchange": exchange}
    plugin["apis"].append({"apiProvider": pets, "api": spec_text("oai-petstore.yaml")})
    return plugin


@pytest.fixture(scope="module")
def metered(mocks, envoy_binary, wasm, tmp_path_factory):
    cfg = envoy_config(wasm, mocks, metered_plugin(mocks))
    cfg["stats_config"] = stats_config()
    cfg["stats_flush_interval"] = "0.2s"
    envoy = Envoy(envoy_binary, cfg, str(tmp_path_factory.mktemp("envoy"))).start()
    yield Gateway(envoy), envoy
    envoy.stop()


def admin(envoy: Envoy, path: str) -> str:
    with urllib.request.urlopen(f"http://{envoy.admin}{path}", timeout=5) as r:
        return r.read().decode()


def counters(envoy: Envoy) -> dict[str, int]:
    stats = json.loads(admin(envoy, "/stats?format=json&filter=api_agent"))["stats"]
    return {s["name"]: s["value"] for s in stats if "value" in s}


# The known traffic: each question's LLM turns (the weather API answers 500 for "Fail").
def known_traffic() -> dict[str, list]:
    overloaded = Response.json({"error": {"message": "overloaded"}}, 503)
    return {
        "M1 weather?": [action("get_weather_now", {"location": "Oslo"}), final("Cold.")],
        "M2 tool fails?": [action("get_weather_now", {"location": "Fail"}), final("Broken.")],
        "M3 refused?": [action("no_such_tool", {}), action("get_weather_now", {"city": "Oslo"}), final("Hm.")],
        "M4 LLM fails later?": [action("get_weather_now", {"location": "Oslo"}), overloaded],
        "M5 malformed?": ["Thought: hmm\nAction: get_weather_now\nAction Input: {not json", final("Fine.")],
        "M6 too many calls?": [action("get_weather_now", {"location": c}) for c in ("A", "B", "C")],
        "M7 not authorized?": [action("listPets", {"limit": 1}), final("No pets.")],
    }


BAD_REQUEST = "a body without messages"

# What the known traffic counts, host-independently: (metric, labels) -> count.
KNOWN_COUNTS: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {
    ("requests", (("mode", "react"), ("outcome", "answered"))): 5,
    ("requests", (("mode", "react"), ("outcome", "llm_error"))): 1,
    ("requests", (("mode", "react"), ("outcome", "iteration_limit"))): 1,
    ("requests", (("mode", "react"), ("outcome", "client_error"))): 1,
    # LLM replies the loop acted on: M1 2, M2 2, M3 3, M4 2 (its failing turn retried twice), M5 2, M6 3, M7 2
    ("llm_turns", (("mode", "react"),)): 16,
    ("llm_retries", (("mode", "react"),)): 2,
    ("malformed_outputs", (("mode", "react"),)): 1,
    ("tool_calls", (("tool", "get_weather_now"), ("class", "2xx"))): 4,   # M1, M4, M6 twice (maxIterations 2)
    ("tool_calls", (("tool", "get_weather_now"), ("class", "5xx"))): 1,   # M2
    ("tool_calls", (("tool", "get_weather_now"), ("class", "refused"))): 1,   # M3: an unknown argument
    ("tool_calls", (("tool", "_unknown_"), ("class", "refused"))): 1,   # M3: a tool the model made up
    ("tool_calls", (("tool", "listPets"), ("class", "unauthorized"))): 1,   # M7: never sent
}


def send_known_traffic(gw, mocks) -> dict[str, int]:
    """Sends the known traffic; the status each question (and the bad request) got."""
    busy = Response.json({"error": "busy"}, 500)
    script = known_traffic()
    for q, turns in script.items():
        mocks.llm.script(q, *turns)
    mocks.weather.route("GET", WEATHER_NOW, lambda rec: busy if rec.query["location"] == "Fail" else
                        Response.json({"location": rec.query["location"], "temperature": 1}))
    statuses = {q: gw.chat(q).status for q in script}
    statuses[BAD_REQUEST] = request(gw.port, "POST", CHAT_PATH, b'{"model": "m"}',
                                    {**CLIENT_HEADERS, "Content-Type": "application/json"}).status
    return statuses


def counted(envoy: Envoy, before: dict[str, int]) -> dict[str, int]:
    """The counters that changed since `before`, by how much."""
    after = counters(envoy)
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def wasm_stat(metric: str, labels: tuple[tuple[str, str], ...]) -> str:
    """A metric's name in /stats on Proxy-Wasm: the tags are segments of the name."""
    return "wasmcustom.api_agent." + metric + "".join(f".{k}.{v}" for k, v in labels)


def test_counts_after_known_traffic(metered, mocks):
    gw, envoy = metered
    before = counters(envoy)
    statuses = send_known_traffic(gw, mocks)
    # loop response: M4's later failure is a 200 with the error in the body.
    assert statuses == {**{q: 200 for q in known_traffic()}, BAD_REQUEST: 400}, statuses
    delta = counted(envoy, before)
    assert delta == {wasm_stat(m, labels): n for (m, labels), n in KNOWN_COUNTS.items()}, delta

    prometheus = admin(envoy, "/stats/prometheus")
    assert 'api_agent_requests{mode="react",outcome="answered"}' in prometheus
    assert 'api_agent_tool_calls{tool="get_weather_now",class="5xx"}' in prometheus
    # Histograms are flushed every stats_flush_interval.
    time.sleep(0.6)
    hist = json.loads(admin(envoy, "/stats?format=json&filter=api_agent.request_duration_ms"))
    [h] = [s for s in hist["stats"] if "histograms" in s]
    [requests] = h["histograms"]["computed_quantiles"]
    assert requests["name"] == "wasmcustom.api_agent.request_duration_ms.mode.react"
    assert requests["values"][-1]["cumulative"] is not None, "the longest request's duration, recorded"
    assert "api_agent_tool_call_duration_ms_count{tool=\"get_weather_now\"}" in admin(envoy, "/stats/prometheus")
    assert_request_lines(envoy)


def assert_request_lines(envoy: Envoy) -> None:
    """The known traffic's request log lines: one per request, M4's and M2's as the README shows them."""
    with open(envoy.log_path, encoding="utf-8") as f:
        lines = [l for l in f if "api-agent request #" in l]
    assert any("outcome=llm_error status=502 code=llm_error llm_turns=2 llm_retries=2" in l for l in lines), lines
    assert any("tools=[get_weather_now:500:" in l for l in lines), lines
