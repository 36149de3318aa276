"""deploy/higress and deploy/istio: each WasmPlugin against the real CRD's OpenAPI v3 schema (strict
about unknown fields, as `kubectl apply` is), the other manifests' shape, and that every cluster the
plugin will call out to, and every route or domain its rules name, is one the manifests create."""
from __future__ import annotations

import copy
import os
from urllib.parse import urlsplit

import pytest

from deploykit import (DEPLOY, HIGRESS_CRD, ISTIO_CRD, callout_clusters, higress_plugin_config,
                       istio_plugin_config, load_docs, one, plugin_configs, resource_errors)

HIGRESS = os.path.join(DEPLOY, "higress")
ISTIO = os.path.join(DEPLOY, "istio")


@pytest.fixture(scope="module")
def higress_crd() -> dict:
    return one(load_docs(HIGRESS_CRD), "CustomResourceDefinition")


@pytest.fixture(scope="module")
def istio_crd() -> dict:
    return one(load_docs(ISTIO_CRD), "CustomResourceDefinition")


@pytest.fixture(scope="module")
def higress() -> list[dict]:
    return load_docs(os.path.join(HIGRESS, "api-agent.yaml")) + load_docs(os.path.join(HIGRESS, "services.yaml"))


@pytest.fixture(scope="module")
def istio() -> list[dict]:
    return [d for f in ("api-agent.yaml", "services.yaml", "routes.yaml") for d in load_docs(os.path.join(ISTIO, f))]


def test_crds_are_the_expected_ones(higress_crd, istio_crd):
    assert higress_crd["metadata"]["name"] == "wasmplugins.extensions.higress.io"
    assert istio_crd["metadata"]["name"] == "wasmplugins.extensions.istio.io"


def test_higress_wasmplugin_matches_its_crd(higress, higress_crd):
    plugin = one(higress, "WasmPlugin")
    assert resource_errors(plugin, higress_crd) == []
    assert plugin["spec"]["url"].startswith("oci://")


def test_istio_wasmplugin_matches_its_crd(istio, istio_crd):
    plugin = one(istio, "WasmPlugin")
    assert resource_errors(plugin, istio_crd) == []
    spec = plugin["spec"]
    # The CRD's CEL rules (x-kubernetes-validations), by hand.
    assert urlsplit(spec["url"]).scheme in ("", "http", "https", "oci", "file")
    assert sum(k in spec for k in ("selector", "targetRef", "targetRefs")) <= 1
    assert all("*" not in k + v for k, v in spec["selector"]["matchLabels"].items())


@pytest.mark.parametrize("mutate, expected", [
    (lambda s: s.update(defaultConfigDisabled=True), "Additional properties"),    # a typo
    (lambda s: s.update(phase="BEFORE_ROUTER"), "is not one of"),
    (lambda s: s["matchRules"][0].update(ingress="api-agent-llm"), "is not of type 'array'"),
    (lambda s: s["matchRules"][0].update(hosts=["x"]), "Additional properties"),
])
def test_the_higress_schema_refuses_mistakes(higress, higress_crd, mutate, expected):
    plugin = copy.deepcopy(one(higress, "WasmPlugin"))
    mutate(plugin["spec"])
    assert any(expected in e for e in resource_errors(plugin, higress_crd))


@pytest.mark.parametrize("mutate, expected", [
    (lambda s: s.pop("url"), "'url' is a required property"),
    (lambda s: s.update(match=[{"mode": "GATEWAY"}]), "is not one of"),
    (lambda s: s.update(sha256="not-a-digest"), "does not match"),
    (lambda s: s.update(pluginConfig="{}"), "is not of type 'object'"),
    (lambda s: s.update(defaultConfig={}), "Additional properties"),             # Higress's field, not Istio's
])
def test_the_istio_schema_refuses_mistakes(istio, istio_crd, mutate, expected):
    plugin = copy.deepcopy(one(istio, "WasmPlugin"))
    mutate(plugin["spec"])
    assert any(expected in e for e in resource_errors(plugin, istio_crd))


def test_both_plugins_run_last_and_fail_closed(higress, istio):
    """After authentication and authorization, before lower-priority plugins such as a provider
    translator; a plugin that cannot load must not let requests through unrewritten."""
    for plugin in (one(higress, "WasmPlugin"), one(istio, "WasmPlugin")):
        spec = plugin["spec"]
        assert (spec["phase"], spec["priority"], spec["failStrategy"]) == ("UNSPECIFIED_PHASE", 200, "FAIL_CLOSE")
    assert one(istio, "WasmPlugin")["spec"]["match"] == [{"mode": "CLIENT"}]   # a gateway's traffic


def test_higress_controller_output(higress):
    """defaultConfigDisable with two rules: no global part, the rules in order, each with its matcher."""
    spec = one(higress, "WasmPlugin")["spec"]
    config = higress_plugin_config(spec)
    assert list(config) == ["_rules_"]
    route, domain = config["_rules_"]
    assert route["_match_route_"] == ["api-agent-llm"] and "_match_domain_" not in route
    assert domain["_match_domain_"] == ["agent.example.com", "*.agent.example.com"]
    assert {k: v for k, v in route.items() if not k.startswith("_")} == spec["matchRules"][0]["config"]
    assert domain["mode"] == "native" and route["promptTemplate"]["language"] == "CH"


@pytest.mark.parametrize("spec, expected", [
    ({"defaultConfig": {"a": 1}}, {"a": 1}),
    ({"defaultConfig": {"a": 1}, "matchRules": [{"ingress": ["r"], "config": {"a": 2}}]},
     {"a": 1, "_rules_": [{"a": 2, "_match_route_": ["r"]}]}),
    ({"defaultConfig": {"a": 1}, "defaultConfigDisable": True,
      "matchRules": [{"domain": ["*.x.com"], "config": {"a": 2}}, {"ingress": ["r"], "configDisable": True}]},
     {"_rules_": [{"a": 2, "_match_domain_": ["*.x.com"]}]}),
    ({"defaultConfigDisable": True, "matchRules": [{"service": ["s.dns:443"], "config": {}}]},
     {"_rules_": [{"_match_service_": ["s.dns:443"]}]}),
    ({"defaultConfig": {"a": 1}, "defaultConfigDisable": True}, None),               # nothing installed
    ({"pluginConfig": {"b": 1}, "defaultConfig": {"a": 1}, "matchRules": [{"ingress": ["r"]}]}, {"b": 1}),
])
def test_higress_conversion(spec, expected):
    """The conversion as alibaba/higress pkg/ingress/config/ingress_config.go convertIstioWasmPlugin."""
    assert higress_plugin_config(spec) == expected


def test_higress_services_and_routes_exist(higress):
    config = higress_plugin_config(one(higress, "WasmPlugin")["spec"])
    bridge = one(higress, "McpBridge")
    assert (bridge["metadata"]["name"], bridge["metadata"]["namespace"]) == ("default", "higress-system")
    services = {}
    for r in bridge["spec"]["registries"]:
        assert r["type"] == "dns" and r["protocol"] == "https" and r["sni"] == r["domain"], r
        services[f"{r['name']}.dns"] = r
    assert callout_clusters(config) == {f"outbound|{r['port']}||{name}" for name, r in services.items()}
    for c in plugin_configs(config):          # :authority and TLS name agree for every callout
        for p in [c["llm"]] + [a["apiProvider"] for a in c["apis"]]:
            assert services[p["serviceName"]]["domain"] == p["domain"]

    ingresses = {i["metadata"]["name"]: i for i in higress if i["kind"] == "Ingress"}
    route_rule, domain_rule = config["_rules_"]
    assert set(route_rule["_match_route_"]) <= set(ingresses)
    hosts = {r.get("host") for i in ingresses.values() for r in i["spec"]["rules"]}
    assert set(domain_rule["_match_domain_"]) <= hosts
    for ing in ingresses.values():
        a = ing["metadata"]["annotations"]
        assert ing["spec"]["ingressClassName"] == "higress"
        assert a["higress.io/destination"] in services and a["higress.io/backend-protocol"] == "HTTPS"
        provider = services[a["higress.io/destination"]]["domain"]
        assert a["higress.io/proxy-ssl-name"] == a["higress.io/upstream-vhost"] == provider
        paths = [p for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
        assert {p["path"] for p in paths} == {route_rule["llm"]["path"]}


def test_istio_services_and_routes_exist(istio):
    config = istio_plugin_config(one(istio, "WasmPlugin")["spec"])
    entries = [d for d in istio if d["kind"] == "ServiceEntry"]
    rules = {d["spec"]["host"]: d for d in istio if d["kind"] == "DestinationRule"}
    clusters = set()
    for se in entries:
        assert se["apiVersion"] == "networking.istio.io/v1" and se["spec"]["exportTo"] == ["."]
        assert se["spec"]["resolution"] == "DNS" and se["spec"]["location"] == "MESH_EXTERNAL"
        for host in se["spec"]["hosts"]:
            for port in se["spec"]["ports"]:
                assert port["protocol"] == "HTTP", "plain HTTP from the plugin; the DestinationRule adds TLS"
                clusters.add(f"outbound|{port['number']}||{host}")
            tls = rules[host]["spec"]["trafficPolicy"]["tls"]
            assert tls == {"mode": "SIMPLE", "sni": host, "subjectAltNames": [host],
                           "caCertificates": "/etc/ssl/certs/ca-certificates.crt"}, "verified TLS"
            assert rules[host]["spec"]["exportTo"] == ["."]
    assert callout_clusters(config) <= clusters
    for c in plugin_configs(config):
        for p in [c["llm"]] + [a["apiProvider"] for a in c["apis"]]:
            assert p["domain"] == p["serviceName"]

    gateway, vs = one(istio, "Gateway"), one(istio, "VirtualService")
    assert vs["spec"]["gateways"] == [gateway["metadata"]["name"]]
    assert set(vs["spec"]["hosts"]) <= {h for s in gateway["spec"]["servers"] for h in s["hosts"]}
    [route] = vs["spec"]["http"]
    assert route["match"][0]["uri"] == {"exact": config["llm"]["path"]}
    [dest] = route["route"]
    assert f"outbound|{dest['destination']['port']['number']}||{dest['destination']['host']}" in clusters
    assert route["rewrite"]["authority"] == dest["destination"]["host"] == config["llm"]["domain"]
    wasm = one(istio, "WasmPlugin")
    assert wasm["spec"]["selector"]["matchLabels"] == gateway["spec"]["selector"] == {"istio": "ingressgateway"}


@pytest.mark.parametrize("doc_set", ["higress", "istio"])
def test_every_manifest_has_a_known_shape(doc_set, request):
    known = {("extensions.higress.io/v1alpha1", "WasmPlugin"), ("networking.higress.io/v1", "McpBridge"),
             ("networking.k8s.io/v1", "Ingress"), ("extensions.istio.io/v1alpha1", "WasmPlugin"),
             ("networking.istio.io/v1", "ServiceEntry"), ("networking.istio.io/v1", "DestinationRule"),
             ("networking.istio.io/v1", "Gateway"), ("networking.istio.io/v1", "VirtualService")}
    for d in request.getfixturevalue(doc_set):
        assert (d["apiVersion"], d["kind"]) in known, d
        assert set(d) == {"apiVersion", "kind", "metadata", "spec"}, d["metadata"]
        assert d["metadata"]["name"] and d["metadata"]["namespace"] in ("higress-system", "istio-system")
        assert isinstance(d["spec"], dict) and d["spec"]
