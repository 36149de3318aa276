"""Two filter configurations in one Envoy, on both hosts: on Proxy-Wasm they share one VM (the same
`vm_id`, as Istio and Higress deploy one plugin on several listeners or routes), and each request
still runs with its own configuration. (Until this test, the configuration loaded last served every
listener of the VM.)"""
from __future__ import annotations

import copy
import json
import time
import urllib.request

from support import client
from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, envoy_config, plugin_config
from support.envoy import Envoy


def listener_ports(envoy: Envoy) -> dict[str, int]:
    with urllib.request.urlopen(f"http://{envoy.admin}/listeners?format=json", timeout=5) as r:
        statuses = json.loads(r.read())["listener_statuses"]
    return {s["name"]: int(s["local_address"]["socket_address"]["port_value"]) for s in statuses}


def test_each_listener_keeps_its_own_configuration(mocks, wasm, envoy_binary, tmp_path):
    config = envoy_config(wasm, mocks, plugin_config(mocks, mode="react"))
    first = config["static_resources"]["listeners"][0]
    second = copy.deepcopy(first)
    second["name"] = "agent-native"
    hcm = second["filter_chains"][0]["filters"][0]["typed_config"]
    native = json.dumps(plugin_config(mocks, mode="native"))
    hcm["http_filters"][0]["typed_config"]["config"]["configuration"]["value"] = native
    config["static_resources"]["listeners"].append(second)
    envoy = Envoy(envoy_binary, config, str(tmp_path)).start()
    try:
        ports = listener_ports(envoy)
        for name, tools_sent in (("agent", False), ("agent-native", True)):
            q = f"shared-vm {name} {time.monotonic_ns()}"
            mocks.llm.script(q, "Final Answer: ok" if not tools_sent else "ok")
            body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}]}
            reply = client.request(ports[name], "POST", CHAT_PATH, body, CLIENT_HEADERS)
            assert reply.status == 200, reply.text[:300]
            first_turn = mocks.llm.requests_for(q)[0].json()
            assert ("tools" in first_turn) == tools_sent, f"{name}: {sorted(first_turn)}"
    finally:
        envoy.stop()
