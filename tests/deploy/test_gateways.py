"""The manifests of deploy/ as the gateways would run them: the plugin configuration each controller
hands the filter (Higress: `_rules_` made from matchRules; Istio: pluginConfig as JSON), loaded by
`envoy --mode validate`, then served by a real Envoy whose routes and clusters are named as Higress
and Istio name them (routes after the Ingress / the VirtualService route, clusters
outbound|<port>||<service>), with mocks in place of the LLM and the APIs."""
from __future__ import annotations

import json
import os

import pytest

from deploykit import (DEPLOY, gateway_bootstrap, higress_plugin_config, istio_plugin_config, load_docs, one,
                       plugin_json, static_cluster)
from support.client import request
from support.envoy import validate
from support.mocks import MockLLM, MockServer, Response
from support.react import action, final

# Support for Higress's `_rules_` in the filter (by route name, domain, service; else pass through) is
# the contract these tests are written against; it was being implemented when they were written.

CLIENT_KEY = "sk-consumer-key"
CHAT = "/compatible-mode/v1/chat/completions"     # the Dashscope path the Higress routes expose
PASSTHROUGH_PREFIX = "/other"                     # a route no rule names


def weather_reply(rec) -> Response:
    """Seniverse's /v3/weather/now.json, in its shape."""
    return Response.json({"results": [{"location": {"name": rec.query.get("location")},
                                       "now": {"text": "Sunny", "code": "0", "temperature": "21"}}]})


@pytest.fixture(scope="module")
def mocks():
    servers = {"llm": MockLLM(), "amap": MockServer("amap"),
               "seniverse": MockServer("seniverse", {("GET", "/v3/weather/now.json"): weather_reply})}
    for s in servers.values():
        s.start()
    yield servers
    for s in servers.values():
        s.stop()


@pytest.fixture(autouse=True)
def fresh(mocks):
    for s in mocks.values():
        s.reset()


def chat(port: int, question: str, path: str, host: str | None = None, model: str = "qwen-max"):
    headers = {"Authorization": f"Bearer {CLIENT_KEY}"}
    if host:
        headers["Host"] = host
    body = {"model": model, "messages": [{"role": "user", "content": question}]}
    return body, request(port, "POST", path, body, headers)


def answer(reply) -> str:
    assert reply.status == 200, f"HTTP {reply.status}: {reply.text[:400]}"
    return reply.json()["choices"][0]["message"]["content"]


def tool_calls(name: str, args: dict) -> Response:
    """A native LLM turn that calls one tool."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
    return Response.json({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                          "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


# --- Higress ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def higress() -> list[dict]:
    return [d for f in ("api-agent.yaml", "services.yaml") for d in load_docs(os.path.join(DEPLOY, "higress", f))]


def higress_gateway(wasm: str, docs: list[dict], ports: dict[str, int]) -> dict:
    """What Higress's gateway would hold: a route per Ingress path named after the Ingress, in a virtual
    host per Ingress host (none: *), to the cluster of its higress.io/destination; a cluster
    outbound|<port>||<registry>.dns per McpBridge registry (here: plain HTTP to a mock); plus a route
    `other` that no rule names, to see requests pass through."""
    registries = {f"{r['name']}.dns": r for r in one(docs, "McpBridge")["spec"]["registries"]}
    cluster_of = {name: f"outbound|{r['port']}||{name}" for name, r in registries.items()}
    hosts: dict[str, list[dict]] = {}
    for ing in (d for d in docs if d["kind"] == "Ingress"):
        a = ing["metadata"]["annotations"]
        target = {"cluster": cluster_of[a["higress.io/destination"]],
                  "host_rewrite_literal": a["higress.io/upstream-vhost"], "timeout": "30s"}
        for rule in ing["spec"]["rules"]:
            for p in rule["http"]["paths"]:
                match = {"path": p["path"]} if p["pathType"] == "Exact" else {"prefix": p["path"]}
                hosts.setdefault(rule.get("host", "*"), []).append(
                    {"name": ing["metadata"]["name"], "match": match, "route": target})
    llm = hosts["*"][0]["route"]
    hosts["*"].append({"name": "other", "match": {"prefix": PASSTHROUGH_PREFIX + "/"},
                       "route": {**llm, "prefix_rewrite": "/"}})
    vhosts = [{"name": f"vh{i}", "domains": [h], "routes": r} for i, (h, r) in enumerate(sorted(hosts.items()))]
    clusters = [static_cluster(cluster_of[n], ports[r["name"]]) for n, r in registries.items()]
    config = higress_plugin_config(one(docs, "WasmPlugin")["spec"])
    return gateway_bootstrap(wasm, plugin_json(config), vhosts, clusters)


def test_higress_configuration_loads_in_envoy(higress, envoy_binary, wasm, tmp_path):
    config = higress_gateway(wasm, higress, {"dashscope": 1, "amap": 2, "seniverse": 3})
    r = validate(envoy_binary, config, str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "_rules_[1]" in r.stdout + r.stderr, "both rules configured"


def test_higress_rules_in_envoy(higress, mocks, wasm, start_envoy):
    """Rule 1 by route name (ReAct, Chinese, three tools), rule 2 by domain (native, one tool), and a
    route neither names: untouched."""
    ports = {"dashscope": mocks["llm"].port, "amap": mocks["amap"].port, "seniverse": mocks["seniverse"].port}
    port = start_envoy(higress_gateway(wasm, higress, ports)).port
    llm, weather = mocks["llm"], mocks["seniverse"]
    spec = one(higress, "WasmPlugin")["spec"]
    route_llm = spec["matchRules"][0]["config"]["llm"]

    # 1. The route api-agent-llm: rule 1.
    q = "济南现在天气怎么样？"
    llm.script(q, action("get_weather_now", {"location": "济南", "language": "zh-Hans", "unit": "c"}),
               final("济南现在 21 °C，晴。"))
    _, reply = chat(port, q, CHAT)
    assert answer(reply) == "济南现在 21 °C，晴。"
    first, second = llm.requests_for(q)
    prompt = json.dumps(first.json(), ensure_ascii=False)
    assert all(t in prompt for t in ("get_location_coordinate", "search_nearby_pois", "get_weather_now"))
    assert first.path == CHAT and first.headers["host"] == route_llm["domain"]
    assert first.headers["authorization"] == f"Bearer {route_llm['apiKey']}", "the consumer's key replaced"
    assert second.json()["model"] == route_llm["model"] and second.headers["host"] == route_llm["domain"]
    [call] = weather.requests
    assert (call.path, call.headers["host"]) == ("/v3/weather/now.json", "api.seniverse.com")
    assert call.query == {"location": "济南", "language": "zh-Hans", "unit": "c", "key": "REPLACE-ME-seniverse-key"}

    # 2. Any route of a *.agent.example.com host: rule 2 (native, the weather tool only).
    q = "Hello, who are you?"
    llm.script(q, "An agent, matched by domain.")
    _, reply = chat(port, q, CHAT, host="eu.agent.example.com")
    assert answer(reply) == "An agent, matched by domain."
    [first] = llm.requests_for(q)
    assert [t["function"]["name"] for t in first.json()["tools"]] == ["get_weather_now"]
    assert first.json()["messages"] == [{"role": "user", "content": q}]
    assert first.headers["authorization"] == f"Bearer {route_llm['apiKey']}"

    # 3. A route no rule names, on a host no rule names: the request and the answer pass untouched.
    q = "Plain question"
    llm.script(q, "Plain answer")
    body, reply = chat(port, q, PASSTHROUGH_PREFIX + CHAT)
    assert reply.status == 200
    [seen] = llm.requests_for(q)
    assert seen.json() == body and "tools" not in seen.json()
    assert seen.headers["authorization"] == f"Bearer {CLIENT_KEY}", "not the agent's: nothing replaced"
    assert reply.body == llm.exchanges[-1].response.body
    assert len(weather.requests) == 1 and mocks["amap"].requests == []


# --- Istio --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def istio() -> list[dict]:
    return [d for f in ("api-agent.yaml", "services.yaml", "routes.yaml")
            for d in load_docs(os.path.join(DEPLOY, "istio", f))]


def istio_gateway(wasm: str, docs: list[dict], ports: dict[str, int], config: dict | None = None,
                  other_host: str | None = None) -> dict:
    """What the ingress gateway would hold: the VirtualService's route (named as in the VirtualService)
    in a virtual host of its hosts; a cluster outbound|<port>||<host> per ServiceEntry port. With
    `other_host`: another virtual host, with the same routes, as another team's on a shared gateway."""
    vs = one(docs, "VirtualService")
    routes = []
    for r in vs["spec"]["http"]:
        dest = r["route"][0]["destination"]
        match = {"path": r["match"][0]["uri"]["exact"],
                 "headers": [{"name": ":method", "string_match": {"exact": r["match"][0]["method"]["exact"]}}]}
        routes.append({"name": r["name"], "match": match,
                       "route": {"cluster": f"outbound|{dest['port']['number']}||{dest['host']}",
                                 "host_rewrite_literal": r["rewrite"]["authority"], "timeout": r["timeout"]}})
    clusters = [static_cluster(f"outbound|{p['number']}||{h}", ports[h])
                for se in docs if se["kind"] == "ServiceEntry" for h in se["spec"]["hosts"] for p in se["spec"]["ports"]]
    config = config or istio_plugin_config(one(docs, "WasmPlugin")["spec"])
    vhosts = [{"name": "api-agent", "domains": vs["spec"]["hosts"], "routes": routes}]
    if other_host:
        vhosts.append({"name": "other", "domains": [other_host], "routes": routes})
    return gateway_bootstrap(wasm, plugin_json(config), vhosts, clusters)


def test_istio_configuration_loads_in_envoy(istio, envoy_binary, wasm, tmp_path):
    config = istio_gateway(wasm, istio, {"api.openai.com": 1, "api.seniverse.com": 2})
    r = validate(envoy_binary, config, str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "api-agent configured" in r.stdout + r.stderr


def test_istio_plugin_in_envoy(istio, mocks, wasm, start_envoy):
    ports = {"api.openai.com": mocks["llm"].port, "api.seniverse.com": mocks["seniverse"].port}
    port = start_envoy(istio_gateway(wasm, istio, ports)).port
    llm = istio_plugin_config(one(istio, "WasmPlugin")["spec"])["llm"]
    q = "Is it warm in Jinan?"
    mocks["llm"].script(q, tool_calls("get_weather_now", {"location": "Jinan", "language": "en", "unit": "c"}),
                        "Yes: 21 °C and sunny in Jinan.")
    _, reply = chat(port, q, "/v1/chat/completions", host="agent.example.com", model="gpt-4o-mini")
    assert answer(reply) == "Yes: 21 °C and sunny in Jinan."
    first, second = mocks["llm"].requests_for(q)
    for r in (first, second):
        assert r.headers["authorization"] == f"Bearer {llm['apiKey']}" and r.headers["host"] == "api.openai.com"
    assert second.json()["model"] == llm["model"]
    [call] = mocks["seniverse"].requests
    assert call.headers["host"] == "api.seniverse.com"
    assert call.query == {"location": "Jinan", "language": "en", "unit": "c", "key": "REPLACE-ME-seniverse-key"}


def test_istio_plugin_scoped_to_its_host(istio, mocks, wasm, start_envoy):
    """deploy/README.md: on a shared gateway, pluginConfig as one `_rules_` entry matching the agent's
    domain; another host's chat requests pass untouched."""
    scoped = {"_rules_": [{**istio_plugin_config(one(istio, "WasmPlugin")["spec"]),
                           "_match_domain_": ["agent.example.com"]}]}
    ports = {"api.openai.com": mocks["llm"].port, "api.seniverse.com": mocks["seniverse"].port}
    port = start_envoy(istio_gateway(wasm, istio, ports, scoped, other_host="other.example.com")).port
    for host, agent in (("agent.example.com", True), ("other.example.com", False)):
        q = f"Who answers on {host}?"
        mocks["llm"].script(q, "The model.")
        body, reply = chat(port, q, "/v1/chat/completions", host=host, model="gpt-4o-mini")
        assert answer(reply) == "The model."
        [seen] = mocks["llm"].requests_for(q)
        assert ("tools" in seen.json()) is agent
        assert (seen.headers["authorization"] == f"Bearer {CLIENT_KEY}") is not agent
        assert agent or seen.json() == body
