"""Large catalogs in Envoy (issue 31): a generated 2,400-operation OpenAPI document loads in both modes,
its first turn to the LLM stays under 16,000 bytes, a `find_tools` round trip works in each mode, and
`_rules_` can choose `tools.select: all` per route."""
from __future__ import annotations

import json

import pytest

from support.agent import answer_of, envoy_config, plugin_config
from support.catalog import big_spec, op_name
from support.envoy import Envoy
from support.react import action, final
from test_native import tool_calls
from test_rules import AGENT_HOST, OTHER_HOST, chat, two_routes

OPERATIONS = 2_400
FIRST_TURN_MAX = 16_000


def with_big_api(mocks, ops: int, **options) -> dict:
    """The usual plugin configuration plus a generated API of `ops` operations, served by the weather
    mock (its unknown paths answer 404: the tests look at what was sent)."""
    plugin = plugin_config(mocks, **options)
    big = {"serviceName": "weather.dns", "servicePort": mocks.weather.port, "domain": "big.example",
           "maxExecutionTime": 2000}
    plugin["apis"].append({"apiProvider": big, "api": big_spec(ops)})
    return plugin


@pytest.fixture(scope="module")
def start(envoy_binary, tmp_path_factory):
    started: dict[str, Envoy] = {}

    def run(cfg: dict, key: str) -> Envoy:
        if key not in started:
            started[key] = Envoy(envoy_binary, cfg, str(tmp_path_factory.mktemp("envoy"))).start()
        return started[key]
    yield run
    for e in started.values():
        e.stop()


@pytest.fixture(params=["react", "native"])
def big(request, mocks, wasm, start):
    mode = request.param
    return mode, start(envoy_config(wasm, mocks, with_big_api(mocks, OPERATIONS, mode=mode)), mode)


def first_turn(mocks, q: str):
    return mocks.llm.requests_for(q)[0]


def test_a_large_catalog_loads_and_its_first_turn_is_bounded(big, mocks):
    mode, envoy = big
    q = f"Catalog ({mode}): archive the invoice records of region 3"
    mocks.llm.script(q, final("Archived.") if mode == "react" else "Archived.")
    assert answer_of(chat(envoy, AGENT_HOST, q)) == "Archived."
    rec = first_turn(mocks, q)
    assert len(rec.body) <= FIRST_TURN_MAX, f"{mode}: the first turn is {len(rec.body)} bytes"
    text = rec.body.decode()
    assert "archiveInvoiceR3" in text and "find_tools" in text, "the best tool and find_tools are offered"
    assert "listBudgetR9" not in text, "a tool the question has no word of is not"
    if mode == "native":
        assert len(rec.json()["tools"]) <= 128


def test_find_tools_round_trip(big, mocks):
    mode, envoy = big
    q = f"Catalog ({mode}): hello"
    wanted = "updateLicenseR1"
    search = {"query": "update a license of region 1"}
    if mode == "react":
        mocks.llm.script(q, action("find_tools", search), action(wanted, {"licenseId": "L-1"}), final("Updated."))
    else:
        mocks.llm.script(q, tool_calls(("c1", "find_tools", search)),
                         tool_calls(("c2", wanted, {"licenseId": "L-1"})), "Updated.")
    assert answer_of(chat(envoy, AGENT_HOST, q)) == "Updated."
    turns = mocks.llm.requests_for(q)
    assert len(turns) == 3
    found = turns[1].json()["messages"][-1]["content"]
    assert f"{wanted}: Update license records in region 1" in found, found
    [call] = [r for r in mocks.weather.requests if r.path.startswith("/r1/")]
    assert (call.path, call.query) == ("/r1/license/update", {"licenseId": "L-1"})
    for before, after in zip(turns, turns[1:]):
        prior = before.json()["messages"]
        assert after.json()["messages"][:len(prior)] == prior, "each turn repeats the one before as a prefix"
    if mode == "native":
        first, second = ([t["function"]["name"] for t in r.json()["tools"]] for r in turns[:2])
        assert wanted not in first and second[:len(first)] == first and wanted in second[len(first):]
        assert len(second) <= 128


def test_rules_choose_all_per_route(mocks, wasm, start):
    """Global: a selection of a 100-operation catalog; the rule of the agent's route: all of it."""
    everything = {**with_big_api(mocks, 100), "tools": {"select": "all"}, "_match_route_": ["llm-route"]}
    plugin = {**with_big_api(mocks, 100), "_rules_": [everything]}
    envoy = start(two_routes(envoy_config(wasm, mocks, plugin)), "rules")
    q = "Catalog rules: the weather?"
    for host, whole in ((AGENT_HOST, True), (OTHER_HOST, False)):
        mocks.llm.reset()
        mocks.llm.script(q, final("Fine."))
        assert answer_of(chat(envoy, host, q)) == "Fine."
        prompt = json.dumps(first_turn(mocks, q).json())
        names = [op_name(i) for i in range(100)]
        assert all(n in prompt for n in names) == whole, host
        assert ("find_tools" in prompt) != whole, host
