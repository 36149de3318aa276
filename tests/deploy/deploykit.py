"""What the deployment tests share: the manifests and CRDs, what Higress's and Istio's controllers hand
the filter, Envoy bootstraps with named routes and (TLS) clusters, a registry server, TLS material.

The mocks, the Envoy process and `envoy --mode validate` come from tests/e2e/support (conftest.py puts
tests/e2e on sys.path); this module only adds what the deployment needs.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import yaml
from support.envoy import stop_group

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
CRDS = os.path.join(os.path.dirname(__file__), "crds")
HIGRESS_CRD = os.path.join(ROOT, "..", "shared", "higress", "wasmplugin-crd.yaml")
ISTIO_CRD = os.path.join(CRDS, "istio-wasmplugin-crd.yaml")
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"

ENVOY = os.path.abspath(os.environ.get("ENVOY") or os.path.join(ROOT, ".venv", "bin", "envoy"))
WASM = os.path.abspath(os.environ.get("WASM") or os.path.join(ROOT, "dist", "api_agent.wasm"))
OCI_LAYOUT = os.path.abspath(os.environ.get("OCI_LAYOUT") or os.path.join(ROOT, "dist", "oci"))
OCI_REF = os.environ.get("OCI_REF") or "localhost:5000/api-agent:0.1.0"

# Every Envoy (and registry) a test started, so a failing test's report can show their log tails.
RUNNING: list = []

WASM_FILTER = "envoy.filters.http.wasm"
ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}


def load_docs(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


# --- CustomResourceDefinitions as JSON Schemas ------------------------------------------------------

def crd_version_schema(crd: dict, version: str) -> dict:
    [v] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return v["schema"]["openAPIV3Schema"]


def strict_schema(schema: Any) -> Any:
    """A Kubernetes structural schema as the JSON Schema the API server (with kubectl's default strict
    field validation) applies: unknown fields are errors, except under
    `x-kubernetes-preserve-unknown-fields` (kept as is, permissive); `nullable` allows null. CEL
    rules (`x-kubernetes-validations`) are not JSON Schema: the tests check the ones that matter."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) if k in ("items", "additionalProperties", "anyOf", "allOf", "oneOf", "not")
           else v for k, v in schema.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if "properties" in schema:
        out["properties"] = {k: strict_schema(v) for k, v in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in schema:
            out["additionalProperties"] = False
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def resource_errors(obj: dict, crd: dict) -> list[str]:
    """Why the API server would refuse `obj` as an instance of `crd` (empty: it would accept it)."""
    import jsonschema

    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    api_group, _, version = obj.get("apiVersion", "").rpartition("/")
    errors = []
    if api_group != group or obj.get("kind") != kind:
        errors.append(f"apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')} is not {group}/*, {kind}")
    served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
    if version not in served:
        return errors + [f"version {version!r} not served (served: {served})"]
    if not (obj.get("metadata") or {}).get("name"):
        errors.append("metadata.name missing")
    if crd["spec"]["scope"] == "Namespaced" and not obj["metadata"].get("namespace"):
        errors.append("metadata.namespace missing (the manifests name theirs)")
    extra = set(obj) - {"apiVersion", "kind", "metadata", "spec", "status"}
    if extra:
        errors.append(f"unknown top-level fields {sorted(extra)}")
    body = {k: v for k, v in obj.items() if k in ("spec", "status")}
    validator = jsonschema.Draft7Validator(strict_schema(crd_version_schema(crd, version)))
    errors += [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(body)]
    return errors


# --- What the controllers give the filter ------------------------------------------------------------

def higress_plugin_config(spec: dict) -> dict | None:
    """The plugin configuration Higress's controller makes of its WasmPlugin, as
    convertIstioWasmPlugin in alibaba/higress pkg/ingress/config/ingress_config.go does: pluginConfig,
    if set, as it is; else defaultConfig (unless defaultConfigDisable) plus `_rules_`, one per enabled
    match rule: its config with `_match_route_` (ingress), `_match_service_` (service) and
    `_match_domain_` (domain) added. None: Higress installs no plugin (disabled, no rule)."""
    if spec.get("pluginConfig"):
        return copy.deepcopy(spec["pluginConfig"])
    disabled = bool(spec.get("defaultConfigDisable"))
    config = None if disabled else copy.deepcopy(spec.get("defaultConfig"))
    rules = []
    for rule in spec.get("matchRules") or []:
        if rule.get("configDisable"):
            continue
        r = copy.deepcopy(rule.get("config") or {})
        for field, key in (("ingress", "_match_route_"), ("service", "_match_service_"), ("domain", "_match_domain_")):
            if rule.get(field):
                r[key] = list(rule[field])
        if not any(k in r for k in ("_match_route_", "_match_service_", "_match_domain_")):
            raise ValueError(f"invalid match rule has no match condition: {rule}")
        rules.append(r)
    if rules:
        config = config if config is not None else {}
        config["_rules_"] = rules
    elif disabled:
        return None
    return config


def istio_plugin_config(spec: dict) -> dict | None:
    """Istio (pilot/pkg/model/wasm.go buildPluginConfig) hands pluginConfig to the filter as JSON."""
    return copy.deepcopy(spec.get("pluginConfig")) or None


def plugin_json(config: dict) -> str:
    """The configuration as the controllers serialise it (protobuf Struct to JSON)."""
    return json.dumps(config, ensure_ascii=False, separators=(",", ":"))


def plugin_configs(config: dict) -> list[dict]:
    """The global part (if any) and every rule's configuration."""
    parts = [r for r in config.get("_rules_", [])]
    global_part = {k: v for k, v in config.items() if not k.startswith("_")}
    return ([global_part] if global_part else []) + parts


def callout_clusters(config: dict) -> set[str]:
    """Every cluster the filter calls out to: `cluster`, else outbound|<servicePort>||<serviceName>."""
    def name(p: dict) -> str:
        return p.get("cluster") or f"outbound|{p['servicePort']}||{p['serviceName']}"
    out = set()
    for c in plugin_configs(config):
        out.add(name(c["llm"]))
        out.update(name(a["apiProvider"]) for a in c.get("apis", []))
    return out


# --- Envoy bootstraps -------------------------------------------------------------------------------

def address(port: int, host: str = "127.0.0.1") -> dict:
    return {"socket_address": {"address": host, "port_value": port}}


def wasm_filter(wasm: str, configuration: str) -> dict:
    return {"name": WASM_FILTER, "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
        "config": {"name": "api-agent",
                   "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                     "value": configuration},
                   "vm_config": {"vm_id": "api-agent", "runtime": "envoy.wasm.runtime.v8",
                                 "code": {"local": {"filename": os.path.abspath(wasm)}}}}}}


def static_cluster(name: str, port: int, transport_socket: dict | None = None) -> dict:
    c = {"name": name, "type": "STATIC", "connect_timeout": "2s",
         "load_assignment": {"cluster_name": name,
                             "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address(port)}}]}]}}
    if transport_socket:
        c["transport_socket"] = transport_socket
    return c


def gateway_bootstrap(wasm: str, configuration: str, virtual_hosts: list[dict], clusters: list[dict]) -> dict:
    """A listener on 127.0.0.1 (a kernel-picked port) whose connection manager runs the filter with
    `configuration` and then the router over `virtual_hosts`; an admin on a kernel-picked port."""
    hcm = {"name": "envoy.filters.network.http_connection_manager", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
                 ".HttpConnectionManager",
        "stat_prefix": "agent",
        "route_config": {"name": "gateway", "virtual_hosts": virtual_hosts},
        "http_filters": [wasm_filter(wasm, configuration), ROUTER]}}
    listener = {"name": "gateway", "address": address(0), "per_connection_buffer_limit_bytes": 16 * 1024 * 1024,
                "filter_chains": [{"filters": [hcm]}]}
    return {"admin": {"address": address(0)},
            "static_resources": {"listeners": [listener], "clusters": clusters}}


def localize_clusters(config: dict, ports: dict[str, int]) -> dict:
    """`config` with every cluster pointing at 127.0.0.1: the port in `ports` (by cluster name), else a
    port nothing listens on. The TLS settings stay as they are; no DNS name is ever resolved."""
    config = copy.deepcopy(config)
    for c in config["static_resources"]["clusters"]:
        c["type"] = "STATIC"
        c.pop("dns_lookup_family", None)
        c["load_assignment"] = {"cluster_name": c["name"], "endpoints": [{"lb_endpoints": [
            {"endpoint": {"address": address(ports.get(c["name"], unused_port()))}}]}]}
    return config


def admin_stats(envoy, prefix: str) -> dict[str, int]:
    """Counters and gauges of a running support.envoy.Envoy whose names start with `prefix`."""
    with urllib.request.urlopen(f"http://{envoy.admin}/stats?filter=^{re.escape(prefix)}", timeout=5) as r:
        lines = r.read().decode().splitlines()
    stats = {}
    for line in lines:
        name, _, value = line.partition(": ")
        if value.strip().lstrip("-").isdigit():
            stats[name] = int(value)
    return stats


def substitute(text: str, values: dict[str, str]) -> str:
    """envsubst with an explicit variable list: `${NAME}` for the listed names, nothing else."""
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return text


def unused_port() -> int:
    """A loopback port that was free a moment ago (for servers that cannot report the port they got)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- A registry --------------------------------------------------------------------------------------

class Registry:
    """The CNCF distribution registry (Debian's docker-registry) on 127.0.0.1, plain HTTP, storing in
    `workdir`; in its own session, stopped with its process group."""

    def __init__(self, workdir: str, binary: str | None = None):
        self.binary = binary or shutil.which("docker-registry") or "docker-registry"
        self.workdir = workdir
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(workdir, "registry.log")

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20) -> "Registry":
        for _ in range(3):          # the port is picked before the registry binds it: retry a race
            self.port = unused_port()
            cfg = os.path.join(self.workdir, "config.yml")
            with open(cfg, "w", encoding="utf-8") as f:
                yaml.safe_dump({"version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
                                "storage": {"filesystem": {"rootdirectory": os.path.join(self.workdir, "data")}},
                                "http": {"addr": self.host, "secret": "api-agent-tests"}}, f)
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen([self.binary, "serve", cfg], stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"the registry did not start:\n{self.log_tail()}")

    def stop(self) -> None:
        stop_group(self.proc)

    def get(self, path: str, accept: str | None = None) -> tuple[dict[str, str], bytes]:
        """A raw GET of the registry API (headers with lower-case names, body)."""
        req = urllib.request.Request(f"http://{self.host}{path}", headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=10) as r:
            return {k.lower(): v for k, v in r.headers.items()}, r.read()

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"


# --- TLS material --------------------------------------------------------------------------------------

@dataclass
class Cert:
    cert: str       # PEM file
    key: str        # PEM file


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(workdir: str, name: str) -> Cert:
    """A self-signed CA (EC P-256, 1 day)."""
    key, cert = os.path.join(workdir, f"{name}.key"), os.path.join(workdir, f"{name}.pem")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", key, "-out", cert, cwd=workdir)
    return Cert(cert, key)


def make_server_cert(workdir: str, name: str, dns: str, ca: Cert | None = None) -> Cert:
    """A server certificate for the DNS name `dns`: signed by `ca`, or self-signed."""
    key, cert = os.path.join(workdir, f"{name}.key"), os.path.join(workdir, f"{name}.pem")
    san = ["-addext", f"subjectAltName=DNS:{dns}", "-addext", "extendedKeyUsage=serverAuth"]
    if ca is None:
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                 "-subj", f"/CN={dns}", *san, "-keyout", key, "-out", cert, cwd=workdir)
    else:
        csr = os.path.join(workdir, f"{name}.csr")
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-subj", f"/CN={dns}", *san, "-keyout", key, "-out", csr, cwd=workdir)
        _openssl("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-days", "1",
                 "-copy_extensions", "copy", "-out", cert, cwd=workdir)
    return Cert(cert, key)
