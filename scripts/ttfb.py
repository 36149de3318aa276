#!/usr/bin/env python3
"""Time to first byte and to the whole answer, Proxy-Wasm against the dynamic module, same Envoy, same
mocks: one tool call (the LLM answers each turn after LLM_DELAY_S), plain and stream: true. Then, for a
streaming client, time to the first answer token when the final LLM turn is produced slowly (SLOW_DELTAS
deltas SLOW_GAP_S apart, streamed to the agent if it asks for a stream).
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
from support.envoy import Envoy, as_dynamic_module  # noqa: E402
from support.mocks import Response, completion  # noqa: E402
from support.react import action, final  # noqa: E402

LLM_DELAY_S = 0.2
SLOW_DELTAS, SLOW_GAP_S = 20, 0.05
SLOW_ANSWER = "It is cold in Oslo today: minus four degrees, a light wind from the north and some snow later."


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


def first_answer(port: int, mocks: Mocks, q: str) -> tuple[float, float, float]:
    """(headers, first answer content, end of stream) in seconds, for a streaming client whose final LLM
    turn is produced slowly."""
    mocks.llm.script(q, turn(action("get_weather_now", {"location": "Oslo"})),
                     Response.slow(final(SLOW_ANSWER), LLM_MODEL, SLOW_DELTAS, SLOW_GAP_S))
    body = json.dumps({"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    conn.request("POST", CHAT_PATH, body, {**CLIENT_HEADERS, "content-type": "application/json"})
    resp = conn.getresponse()
    headers, content = time.perf_counter() - t0, None
    assert resp.status == 200, resp.status
    while line := resp.readline():
        if content is None and line.startswith(b"data: {") and has_content(line[6:]):
            content = time.perf_counter() - t0
    conn.close()
    assert content is not None, "no answer content in the stream"
    return headers, content, time.perf_counter() - t0


def has_content(data: bytes) -> bool:
    choices = json.loads(data).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


def model_times() -> tuple[float, float]:
    """When the fake model produces the first answer token and its last delta, from the request's start."""
    text = final(SLOW_ANSWER)
    size = -(-len(text) // SLOW_DELTAS)
    first = text.index("Final Answer:") // size + 1
    n = -(-len(text) // size)
    return LLM_DELAY_S + first * SLOW_GAP_S, LLM_DELAY_S + n * SLOW_GAP_S


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
                got = [first_answer(envoy.port, mocks, f"slow {host} {i}") for i in range(runs)]
                h, c, t = (statistics.median(x[k] for x in got) * 1000 for k in range(3))
                print(f"{host:15} stream=True  slow final turn: headers {h:7.1f} ms  first answer token {c:7.1f} ms"
                      f"  whole answer {t:7.1f} ms  (median of {runs})")
            finally:
                envoy.stop()
        first, last = (x * 1000 for x in model_times())
        print(f"the fake model produces the first answer token at ~{first:.0f} ms and its last delta at ~{last:.0f} ms"
              f" ({SLOW_DELTAS} deltas {SLOW_GAP_S * 1000:.0f} ms apart after a {LLM_DELAY_S * 1000:.0f} ms tool turn)")
    finally:
        for s in mocks.all():
            s.stop()


if __name__ == "__main__":
    main()
