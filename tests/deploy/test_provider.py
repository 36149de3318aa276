"""envoy/provider.yaml, the complete configuration for a real OpenAI-compatible provider: only the key
and the model are placeholders; with test values it loads in Envoy; every upstream is verified TLS;
the route, the callout cluster and the plugin's llm settings agree; only the chat path is routed.
And every TLS example of envoy/README.md verifies its server."""
from __future__ import annotations

import os
import re

import yaml

from deploykit import ROOT, SYSTEM_CA, localize_clusters, substitute
from support.client import request
from support.envoy import validate, with_wasm

PROVIDER = os.path.join(ROOT, "envoy", "provider.yaml")
README = os.path.join(ROOT, "envoy", "README.md")
VALUES = {"OPENAI_API_KEY": "sk-test-provider-key", "OPENAI_MODEL": "gpt-test-model"}
TLS_CONTEXT = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"


def provider_text() -> str:
    with open(PROVIDER, encoding="utf-8") as f:
        return f.read()


def provider(values: dict[str, str] = VALUES) -> dict:
    return yaml.safe_load(substitute(provider_text(), values))


def hcm(config: dict) -> dict:
    [listener] = config["static_resources"]["listeners"]
    return listener["filter_chains"][0]["filters"][0]["typed_config"]


def plugin(config: dict) -> dict:
    wasm = next(f for f in hcm(config)["http_filters"] if f["name"] == "envoy.filters.http.wasm")
    return yaml.safe_load(wasm["typed_config"]["config"]["configuration"]["value"])


def clusters(config: dict) -> dict[str, dict]:
    return {c["name"]: c for c in config["static_resources"]["clusters"]}


def endpoint(cluster: dict) -> tuple[str, int]:
    a = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
    return a["address"], a["port_value"]


def tls_contexts(node):
    """Every UpstreamTlsContext in a parsed configuration."""
    if isinstance(node, dict):
        if node.get("@type") == TLS_CONTEXT:
            yield node
        for v in node.values():
            yield from tls_contexts(v)
    elif isinstance(node, list):
        for v in node:
            yield from tls_contexts(v)


def test_only_the_key_and_the_model_are_placeholders():
    """envoy/README.md's envsubst names exactly these; any other dollar sign would be a mistake."""
    assert set(re.findall(r"\$\{?([A-Za-z_]\w*)", provider_text())) == set(VALUES)
    assert "${" not in substitute(provider_text(), VALUES)


def test_it_loads_in_envoy(envoy_binary, wasm, tmp_path):
    r = validate(envoy_binary, with_wasm(provider(), wasm), str(tmp_path))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "configured" in out and "2 tool(s)" in out


def test_route_cluster_and_plugin_agree():
    config = provider()
    llm, apis = plugin(config)["llm"], plugin(config)["apis"]
    assert (llm["apiKey"], llm["model"]) == (VALUES["OPENAI_API_KEY"], VALUES["OPENAI_MODEL"])
    by_name = clusters(config)
    [route] = [r for r in hcm(config)["route_config"]["virtual_hosts"][0]["routes"] if "route" in r]
    assert route["match"]["path"] == llm["path"]
    assert route["route"]["cluster"] == llm["cluster"], "first turn and later turns: one provider cluster"
    assert route["route"]["host_rewrite_literal"] == llm["domain"] == endpoint(by_name[llm["cluster"]])[0]
    assert "request_headers_to_add" not in route["route"], "llm.apiKey replaces the client's Authorization"
    for api in apis:
        server = yaml.safe_load(api["api"])["servers"][0]["url"]
        host = re.match(r"https://([^/]+)/", server).group(1)
        assert endpoint(by_name[api["apiProvider"]["cluster"]]) == (host, 443)


def test_every_upstream_is_verified_tls():
    for name, c in clusters(provider()).items():
        host, port = endpoint(c)
        ctx = c["transport_socket"]["typed_config"]
        assert ctx["@type"] == TLS_CONTEXT and port == 443, name
        assert ctx["sni"] == host, name
        assert ctx["common_tls_context"]["validation_context"] == {
            "trusted_ca": {"filename": SYSTEM_CA},
            "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": host}}]}, name


def test_readme_tls_examples_verify():
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    contexts = [ctx for b in blocks for ctx in tls_contexts(yaml.safe_load(b))]
    assert contexts, "envoy/README.md shows a TLS cluster"
    for ctx in contexts:
        v = ctx["common_tls_context"]["validation_context"]
        assert ctx["sni"] and v["trusted_ca"]["filename"] and v["match_typed_subject_alt_names"], ctx


def test_only_the_chat_path_is_routed(wasm, start_envoy):
    """Anything else is Envoy's 404: no other request reaches the provider with a client's credentials."""
    port = start_envoy(localize_clusters(with_wasm(provider(), wasm), {})).port
    for method, path in (("GET", "/v1/models"), ("GET", "/v1/chat/completions"), ("POST", "/v1/embeddings")):
        reply = request(port, method, path, b"{}" if method == "POST" else None,
                        {"Authorization": "Bearer sk-consumer"})
        assert (reply.status, reply.text) == (404, "only POST /v1/chat/completions is served here\n"), path
