"""The plugin's metrics on the dynamic module, after the known traffic of tests/e2e/test_metrics.py: the
same exact counts, under this host's names. The module defines its metrics with real labels, so the
bootstrap needs no `stats_tags`: `/stats` shows `dynamicmodulescustom.api_agent_<metric>.<label>.<value>`,
Prometheus `envoy_dynamicmodulescustom_api_agent_<metric>{<label>="<value>"}`. Only difference in the
traffic: M4's later LLM failure is a real 502 here (Wasm: a 200 with the error in the body).

Also here: a request whose held LLM reply Envoy failed is counted and logged with the status the client
got from Envoy (`code=host_reply`), not as if the client had left; an answer Envoy could not write past
the listener's limit is still logged `answered` (strict xfail: Envoy's response.code reads 200 then)."""
from __future__ import annotations

import json
import time

import pytest

from support.agent import Gateway, envoy_config
from support.envoy import Envoy
from support.faults import GatewayPool, MiB, Rig, chat, final_turn_bytes, mid_body, reply, tool_turn
from test_metrics import (
    BAD_REQUEST,
    KNOWN_COUNTS,
    admin,
    assert_request_lines,
    counted,
    counters,
    known_traffic,
    metered_plugin,
    send_known_traffic,
)


def dm_stat(metric: str, labels: tuple[tuple[str, str], ...]) -> str:
    """A metric's name in /stats on the dynamic module (its labels appear as name segments there)."""
    return "dynamicmodulescustom.api_agent_" + metric + "".join(f".{k}.{v}" for k, v in labels)


def counted_when_flushed(envoy: Envoy, before: dict[str, int], expected: dict[str, int], timeout_s: float = 3.0):
    """`counted`, once the module's counters reached Envoy: streams batch them and the main thread adds
    them at most 0.1 s later (src/dm/tally.rs). Returns the last reading when `expected` never comes."""
    deadline = time.monotonic() + timeout_s
    while True:
        delta = counted(envoy, before)
        if delta == expected or time.monotonic() > deadline:
            return delta
        time.sleep(0.05)


@pytest.fixture(scope="module")
def metered(mocks, envoy_binary, wasm, tmp_path_factory):
    cfg = envoy_config(wasm, mocks, metered_plugin(mocks))
    cfg["stats_flush_interval"] = "0.2s"       # no stats_config: the labels are the module's own
    envoy = Envoy(envoy_binary, cfg, str(tmp_path_factory.mktemp("envoy"))).start()
    yield Gateway(envoy), envoy
    envoy.stop()


def test_counts_after_known_traffic(metered, mocks):
    gw, envoy = metered
    before = counters(envoy)
    statuses = send_known_traffic(gw, mocks)
    assert statuses == {**{q: 200 for q in known_traffic()}, "M4 LLM fails later?": 502, BAD_REQUEST: 400}, statuses
    expected = {dm_stat(m, labels): n for (m, labels), n in KNOWN_COUNTS.items()}
    delta = counted_when_flushed(envoy, before, expected)
    assert delta == expected, delta

    prometheus = admin(envoy, "/stats/prometheus")
    assert 'envoy_dynamicmodulescustom_api_agent_requests{mode="react",outcome="answered"}' in prometheus
    assert 'envoy_dynamicmodulescustom_api_agent_tool_calls{tool="get_weather_now",class="5xx"}' in prometheus
    assert "wasmcustom" not in prometheus
    # Histograms are flushed every stats_flush_interval.
    time.sleep(0.6)
    hist = json.loads(admin(envoy, "/stats?format=json&filter=api_agent_request_duration_ms"))
    [h] = [s for s in hist["stats"] if "histograms" in s]
    [requests] = h["histograms"]["computed_quantiles"]
    assert requests["name"] == "dynamicmodulescustom.api_agent_request_duration_ms.mode.react"
    assert requests["values"][-1]["cumulative"] is not None, "the longest request's duration, recorded"
    prometheus = admin(envoy, "/stats/prometheus")
    assert 'envoy_dynamicmodulescustom_api_agent_tool_call_duration_ms_count{tool="get_weather_now"}' in prometheus
    assert 'envoy_dynamicmodulescustom_api_agent_turns_per_request_bucket{mode="react",le="5"}' in prometheus
    assert 'envoy_dynamicmodulescustom_api_agent_tokens_per_request_count{mode="react"}' in prometheus
    assert_request_lines(envoy)


# --- requests Envoy failed on the held reply ------------------------------------------------------

# Two cases where the client's status comes from Envoy itself: the first LLM reply's body cut by an RST
# (Envoy's 502 'upstream connect error ... protocol error'), and a 2 MiB answer with maxResponseBytes
# 4 MiB over a 1 MiB listener (Envoy's 500). The request line and the requests counter carry that status
# (code=host_reply), not `cancelled` or `answered`. The second is not yet: at stream_complete Envoy's
# `response.code` attribute still reads 200 there (the 500 is a local reply after the answer's headers
# were let go), so the module cannot tell.
OVER_THE_LISTENER = (
    "maxResponseBytes 4 MiB over a 1 MiB listener, a 2 MiB answer: the client gets Envoy's 500, but Envoy's "
    "response.code attribute reads 200 when the stream completes, so the line says outcome=answered status=200")


@pytest.fixture(scope="module")
def rig():
    r = Rig.start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def fault_gateways(envoy_binary, wasm, rig, tmp_path_factory):
    pool = GatewayPool(envoy_binary, wasm, rig, tmp_path_factory)
    yield pool
    pool.stop()


def request_lines(envoy: Envoy) -> list[str]:
    with open(envoy.log_path, encoding="utf-8", errors="replace") as f:
        return [line for line in f if "api-agent request #" in line]


@pytest.mark.parametrize("case, status", [
    ("cut-first-reply", 502),
    pytest.param("over-the-listener", 500, marks=pytest.mark.xfail(strict=True, reason=OVER_THE_LISTENER)),
])
def test_a_request_envoy_failed_is_counted_with_the_clients_status(fault_gateways, rig, case, status):
    rig.reset()
    q = f"Metrics: {case}?"
    if case == "cut-first-reply":
        gw = fault_gateways.get(("react", "response"), mode="react", loop="response")
        rig.llm.script(q, mid_body(final_turn_bytes("react", "Never whole.")))
    else:
        gw = fault_gateways.get(("react", "response", "raised"), mode="react", loop="response",
                                top={"maxResponseBytes": 4 * MiB})
        rig.llm.script(q, tool_turn("react", "Bergen"), reply(200, final_turn_bytes("react", "a" * (2 * MiB))))
    before, lines_before = counters(gw.envoy), len(request_lines(gw.envoy))
    out = chat(gw.port, q)
    assert (out.status, out.error) == (status, None), out.describe()     # what the client got (Envoy's reply)
    [line] = request_lines(gw.envoy)[lines_before:]
    outcome = line.split(" outcome=", 1)[1].split(" ", 1)[0]
    assert outcome not in ("answered", "cancelled") and f" status={status} " in line, line
    expected = {dm_stat("requests", (("mode", "react"), ("outcome", outcome))): 1}
    deadline = time.monotonic() + 3
    while True:    # counters reach Envoy at most 0.1 s late (`counted_when_flushed`)
        requests = {k: v for k, v in counted(gw.envoy, before).items() if "api_agent_requests." in k}
        if requests == expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert requests == expected, requests
