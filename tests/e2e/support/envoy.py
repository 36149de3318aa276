"""Envoy for the tests and the demo: the bootstrap configuration as a dict, and the process.

Every address is 127.0.0.1. Envoy runs in its own session (a signal to the test runner's process
group must not reach it, and its whole group can be stopped), with `--admin-address-path` so the
kernel may pick every port; the listener's port is read back from the admin API.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

WASM_FILTER = "envoy.filters.http.wasm"
ROUTE_CLUSTER = "llm"        # the route's upstream: the first LLM turn goes there


def callout_cluster(service_name: str, port: int) -> str:
    """The cluster name the plugin derives from serviceName/servicePort (Higress naming)."""
    return f"outbound|{port}||{service_name}"


def bootstrap(wasm: str, plugin_config: dict, llm_port: int, clusters: dict[str, int],
              listener_port: int = 0) -> dict:
    """One listener (route "/" → the LLM, through the wasm filter), one cluster per callout."""
    wasm_filter = {
        "name": WASM_FILTER,
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": {
                "name": "api-agent",
                "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                  "value": json.dumps(plugin_config, ensure_ascii=False)},
                "vm_config": {"vm_id": "api-agent", "runtime": "envoy.wasm.runtime.v8",
                              "code": {"local": {"filename": os.path.abspath(wasm)}}},
            },
        },
    }
    hcm = {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
                     ".HttpConnectionManager",
            "stat_prefix": "agent",
            "route_config": {"virtual_hosts": [{
                "name": "all", "domains": ["*"],
                "routes": [{"match": {"prefix": "/"}, "route": {"cluster": ROUTE_CLUSTER, "timeout": "60s"}}],
            }]},
            "http_filters": [wasm_filter, {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
            }],
        },
    }
    listener = {"name": "agent", "address": _address(listener_port),
                "per_connection_buffer_limit_bytes": 16 * 1024 * 1024,
                "filter_chains": [{"filters": [hcm]}]}
    all_clusters = {ROUTE_CLUSTER: llm_port, **clusters}
    return {"admin": {"address": _address(0)},
            "static_resources": {"listeners": [listener],
                                 "clusters": [_cluster(n, p) for n, p in all_clusters.items()]}}


def with_wasm(config: dict, wasm: str) -> dict:
    """The config with every wasm filter loading `wasm` (absolute, so Envoy's cwd does not matter)."""
    for listener in config["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                for http_filter in f.get("typed_config", {}).get("http_filters", []):
                    if http_filter["name"] == WASM_FILTER:
                        code = http_filter["typed_config"]["config"]["vm_config"]["code"]
                        code["local"]["filename"] = os.path.abspath(wasm)
    return config


def as_dynamic_module(config: dict, lib: str) -> dict:
    """The configuration with every Proxy-Wasm filter replaced by the dynamic module `lib`
    (`lib<name>.so`, the same configuration text); Envoy finds the library through
    ENVOY_DYNAMIC_MODULES_SEARCH_PATH, which it inherits from this process."""
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = os.path.dirname(os.path.abspath(lib))
    for listener in config["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                hs = f.get("typed_config", {}).get("http_filters", [])
                for i, h in enumerate(hs):
                    if h["name"] == WASM_FILTER:
                        hs[i] = {"name": "envoy.filters.http.dynamic_modules", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3"
                                     ".DynamicModuleFilter",
                            "dynamic_module_config": {"name": os.path.basename(lib)[len("lib"):-len(".so")]},
                            "filter_name": "api-agent",
                            "filter_config": h["typed_config"]["config"]["configuration"]}}
    return config


def grpc_cluster(name: str, port: int) -> dict:
    """A cluster for a gRPC service on 127.0.0.1:`port` (HTTP/2 upstream), e.g. a collector or a rate
    limit service a test runs."""
    h2 = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}}}}
    return {**_cluster(name, port), "typed_extension_protocol_options": h2}


def _address(port: int) -> dict:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def _cluster(name: str, port: int) -> dict:
    return {"name": name, "type": "STATIC", "connect_timeout": "1s",
            "load_assignment": {"cluster_name": name,
                                "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _address(port)}}]}]}}


def stop_group(proc: "subprocess.Popen | None") -> None:
    """SIGTERM to a process group started with start_new_session; SIGKILL if it does not exit in 5 s."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


class EnvoyError(Exception):
    pass


class Envoy:
    """One Envoy process with its own work directory (config, admin address file, log)."""

    def __init__(self, binary: str, config: dict, workdir: str, wasm_log_level: str = "debug"):
        self.binary = binary
        self.wasm_log_level = wasm_log_level
        self.config = config
        self.workdir = workdir
        self.log_path = os.path.join(self.workdir, "envoy.log")
        self.proc: subprocess.Popen | None = None
        self.admin = ""
        self.port = 0

    def start(self, timeout_s: float = 30) -> "Envoy":
        """Start Envoy and wait until its listener is up; EnvoyError (with the log tail) if it is not."""
        cfg = write_config(self.config, self.workdir)
        admin_path = os.path.join(self.workdir, "admin-address")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-c", cfg, "--concurrency", "1", "--disable-hot-restart",
                 "--admin-address-path", admin_path, "--file-flush-interval-msec", "50", "-l", "info", "--component-log-level", f"wasm:{self.wasm_log_level}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(admin_path, timeout_s)
        except BaseException:       # also Ctrl-C: Envoy is in its own session, so nobody else stops it
            self.stop()
            raise
        return self

    def _wait_ready(self, admin_path: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EnvoyError(f"Envoy exited with {self.proc.returncode}:\n{self.log_tail()}")
            if not self.admin and os.path.exists(admin_path):
                with open(admin_path, encoding="utf-8") as f:
                    self.admin = f.read().strip()
            if self.admin and self._admin_get("/ready") == "LIVE":
                self.port = self._listener_port()
                if self.port:
                    return
            time.sleep(0.05)
        raise EnvoyError(f"Envoy not ready after {timeout_s:g} s:\n{self.log_tail()}")

    def stop(self) -> None:
        stop_group(self.proc)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def _admin_get(self, path: str) -> str | None:
        try:
            with urllib.request.urlopen(f"http://{self.admin}{path}", timeout=2) as r:
                return r.read().decode().strip()
        except OSError:
            return None

    def _listener_port(self) -> int:
        """The first listener's port: the kernel picked it when the config said 0."""
        try:
            statuses = json.loads(self._admin_get("/listeners?format=json") or "{}")["listener_statuses"]
            return int(statuses[0]["local_address"]["socket_address"]["port_value"])
        except (ValueError, KeyError, IndexError, TypeError):
            return 0


def write_config(config: dict, workdir: str) -> str:
    """Envoy reads JSON as YAML; JSON keeps the written config exact and diffable."""
    path = os.path.join(workdir, "envoy.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1, ensure_ascii=False)
    return path


def validate(binary: str, config: dict, workdir: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """`envoy --mode validate`: loads the module and runs the plugin's on_configure, binds nothing."""
    return subprocess.run([binary, "--mode", "validate", "-c", write_config(config, workdir),
                           "--disable-hot-restart", "-l", "info"],
                          capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
