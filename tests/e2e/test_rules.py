"""Per-route configuration in Envoy, the two ways that work there (a Wasm filter cannot have
`typed_per_filter_config` in Envoy):

1. Higress's `_rules_` inside the plugin configuration, matched by route name (`_match_route_`) or host
   (`_match_domain_`): the first matching rule wins, else the global part, else the request passes
   through untouched. This is also what Higress's controller produces from a `WasmPlugin` with
   `matchRules` and `defaultConfigDisable: true`.
2. One filter per configuration, `disabled: true` in the filter chain and enabled on its route with a
   `FilterConfig` in `typed_per_filter_config`."""
from __future__ import annotations

import copy
import json

import pytest

from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, answer_of, envoy_config, plugin_config
from support.client import request
from support.envoy import Envoy, WASM_FILTER
from support.react import action, final

AGENT_HOST, OTHER_HOST = "agent.example.com", "other.example.com"


def hcm_of(cfg: dict) -> dict:
    return cfg["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def two_routes(cfg: dict) -> dict:
    """Two virtual hosts, each with one named route to the LLM cluster."""
    route = hcm_of(cfg)["route_config"]["virtual_hosts"][0]["routes"][0]
    hosts = []
    for name, domain in (("llm-route", AGENT_HOST), ("other-route", OTHER_HOST)):
        r = copy.deepcopy(route)
        r["name"] = name
        hosts.append({"name": name, "domains": [domain, f"{domain}:*"], "routes": [r]})
    hcm_of(cfg)["route_config"]["virtual_hosts"] = hosts
    return cfg


def chat(envoy: Envoy, host: str, q: str):
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}]}
    return request(envoy.port, "POST", CHAT_PATH, body, {**CLIENT_HEADERS, "Host": host})


@pytest.fixture(scope="module")
def start(envoy_binary, tmp_path_factory):
    started = []

    def run(cfg: dict) -> Envoy:
        e = Envoy(envoy_binary, cfg, str(tmp_path_factory.mktemp("envoy"))).start()
        started.append(e)
        return e
    yield run
    for e in started:
        e.stop()


def reset(mocks) -> None:
    for s in mocks.all():
        s.reset()


def rules_only(mocks, matcher: dict) -> dict:
    """What Higress's controller makes of `defaultConfigDisable: true` with one match rule."""
    return {"_rules_": [{**plugin_config(mocks), **matcher}]}


@pytest.mark.parametrize("matcher", [{"_match_route_": ["llm-route"]}, {"_match_domain_": ["agent.*"]}],
                         ids=["by-route", "by-domain"])
def test_a_rule_applies_on_its_route_only(mocks, wasm, start, matcher):
    envoy = start(two_routes(envoy_config(wasm, mocks, rules_only(mocks, matcher))))
    q = f"Rules: the weather in Oslo ({list(matcher)[0]})?"
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), final("Cold."))
    assert answer_of(chat(envoy, AGENT_HOST, q)) == "Cold."
    assert len(mocks.weather.requests) == 1

    # Elsewhere no configuration applies: the request reaches the upstream exactly as sent.
    reset(mocks)
    reply = chat(envoy, OTHER_HOST, "Untouched?")
    [seen] = mocks.llm.requests
    assert json.loads(seen.body) == {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": "Untouched?"}]}
    assert seen.headers["authorization"] == CLIENT_HEADERS["Authorization"], "the client's own key, untouched"
    assert reply.status == 200 and mocks.weather.requests == [], "the mock LLM answered it itself"


def test_the_first_matching_rule_wins_and_the_global_part_applies_elsewhere(mocks, wasm, start):
    chinese = {**plugin_config(mocks, language="CH"), "_match_route_": ["llm-route"]}
    never = {**plugin_config(mocks), "_match_domain_": ["*.nowhere.test"]}
    plugin = {**plugin_config(mocks, max_iterations=2), "_rules_": [never, chinese]}
    envoy = start(two_routes(envoy_config(wasm, mocks, plugin)))
    q = "Rules: which prompt applies?"
    mocks.llm.script(q, final("A."))
    assert answer_of(chat(envoy, AGENT_HOST, q)) == "A."
    assert "问题" in json.dumps(mocks.llm.requests_for(q)[0].json(), ensure_ascii=False), "the Chinese rule"
    reset(mocks)
    mocks.llm.script(q, final("B."))
    assert answer_of(chat(envoy, OTHER_HOST, q)) == "B."
    assert "Question:" in json.dumps(mocks.llm.requests_for(q)[0].json()), "the global (English) part"


def test_one_filter_per_route_enabled_by_filter_config(mocks, wasm, start):
    cfg = two_routes(envoy_config(wasm, mocks, plugin_config(mocks)))
    filters = hcm_of(cfg)["http_filters"]
    wasm_filter = next(f for f in filters if f["name"] == WASM_FILTER)
    wasm_filter["name"] = "api-agent-en"
    wasm_filter["disabled"] = True
    chinese = copy.deepcopy(wasm_filter)
    chinese["name"] = "api-agent-ch"
    chinese["typed_config"]["config"]["configuration"]["value"] = json.dumps(plugin_config(mocks, language="CH"))
    filters.insert(1, chinese)
    enable = {"@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "config": {}}
    for vh, name in zip(hcm_of(cfg)["route_config"]["virtual_hosts"], ("api-agent-ch", "api-agent-en")):
        vh["routes"][0]["typed_per_filter_config"] = {name: enable}
    envoy = start(cfg)
    q = "Per-filter: which prompt applies?"
    mocks.llm.script(q, final("A."))
    assert answer_of(chat(envoy, AGENT_HOST, q)) == "A."
    assert "问题" in json.dumps(mocks.llm.requests_for(q)[0].json(), ensure_ascii=False)
    reset(mocks)
    mocks.llm.script(q, final("B."))
    assert answer_of(chat(envoy, OTHER_HOST, q)) == "B."
    assert "Question:" in json.dumps(mocks.llm.requests_for(q)[0].json())
