#!/usr/bin/env python3
"""Time to first byte and to the whole answer, Proxy-Wasm against the dynamic module, same Envoy, same
mocks: one tool call (the LLM answers each turn after LLM_DELAY_S), plain and stream: true.
Usage: ENVOY=... scripts/ttfb.py dist/api_agent.wasm dist/libapi_agent.so [runs]"""
from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, LLM_MODEL, Mocks, envoy_config, plugin_config  # noqa: E402
from support.envoy import WASM_FILTER, Envoy  # noqa: E402
from support.mocks import Response, completion  # noqa: E402
from support.react import action, final  # noqa: E402

LLM_DELAY_S = 0.2


def as_dynamic_module(config: dict, lib: str) -> dict:
    os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = os.path.dirname(os.path.abspath(lib))
    for listener in config["static_resources"]["listeners"]:
        for f in listener["filter_chains"][0]["filters"]:
            hs = f["typed_config"]["http_filters"]
            for i, h in enumerate(hs):
                if h["name"] == WASM_FILTER:
                    hs[i] = {"name": "envoy.filters.http.dynamic_modules", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
                        "dynamic_module_config": {"name": os.path.basename(lib)[3:-3]}, "filter_name": "api-agent",
                        "filter_config": h["typed_config"]["config"]["configuration"]}}
    return config


def turn(text: str) -> Response:
    return Response.json(completion(text, LLM_MODEL), delay_s=LLM_DELAY_S)


def once(port: int, mocks: Mocks, q: str, stream: bool) -> tuple[float, float, int]:
    mocks.llm.script(q, turn(action("get_weather_now", {"location": "Oslo"})), turn(final("Cold.")))
    body = json.dumps({"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": stream})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    conn.request("POST", CHAT_PATH, body, {**CLIENT_HEADERS, "content-type": "application/json"})
    resp = conn.getresponse()
    first = time.perf_counter() - t0
    resp.read()
    conn.close()
    return first, time.perf_counter() - t0, resp.status


def main() -> None:
    wasm, lib = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    envoy_bin = os.environ.get("ENVOY") or os.path.join(ROOT, ".venv", "bin", "envoy")
    mocks = Mocks.start()
    try:
        for host, cfg in (("proxy-wasm", lambda: envoy_config(wasm, mocks, plugin_config(mocks))),
                          ("dynamic-module", lambda: as_dynamic_module(envoy_config(wasm, mocks, plugin_config(mocks)),
                                                                       lib))):
            envoy = Envoy(envoy_bin, cfg(), tempfile.mkdtemp(prefix="ttfb-")).start()
            try:
                for stream in (False, True):
                    once(envoy.port, mocks, "warm-up", stream)
                    got = [once(envoy.port, mocks, f"ttfb {host} {stream} {i}", stream) for i in range(runs)]
                    assert all(s == 200 for _, _, s in got), got
                    ttfb = statistics.median(f for f, _, _ in got) * 1000
                    total = statistics.median(t for _, t, _ in got) * 1000
                    print(f"{host:15} stream={str(stream):5} first byte {ttfb:7.1f} ms  whole answer {total:7.1f} ms"
                          f"  (median of {runs}; each LLM turn takes {LLM_DELAY_S * 1000:.0f} ms)")
            finally:
                envoy.stop()
    finally:
        for s in mocks.all():
            s.stop()


if __name__ == "__main__":
    main()
