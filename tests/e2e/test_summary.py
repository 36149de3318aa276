"""The request's summary in Envoy's own access log, on both hosts, set before the access log is
written, for plain and streamed answers, in both loops: filter state `wasm.api_agent.<field>` on
Proxy-Wasm; dynamic metadata `api_agent` on the dynamic module (none with `summary.metadata: false`),
with the filter state too only when `summary.filterState` asks for it (each filter-state object is an
Envoy call per field)."""
from __future__ import annotations

import os
import time

import pytest

from support import client
from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, Gateway, envoy_config, plugin_config
from support.envoy import Envoy
from test_native import tool_calls

FIELDS = ["turns", "tool_calls", "tool_errors", "input_tokens", "output_tokens", "total_tokens", "model",
          "outcome", "duration_ms"]
STATE = " ".join(f"{f}=%FILTER_STATE(wasm.api_agent.{f}:PLAIN)%" for f in FIELDS)
METADATA = " ".join(f"md_{f}=%DYNAMIC_METADATA(api_agent:{f})%" for f in FIELDS)


def with_access_log(config: dict, path: str) -> dict:
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["access_log"] = [{
        "name": "envoy.access_loggers.file",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                         "path": path,
                         "log_format": {"text_format_source": {"inline_string": f"q=%REQ(X-Q)% {STATE} {METADATA}\n"}}},
    }]
    return config


@pytest.fixture(scope="module",
                params=[("response", False, True), ("request", False, True), ("response", True, True),
                        ("response", False, False)],
                ids=["response", "request", "response-filter-state", "response-no-metadata"])
def logged(request, mocks, wasm, envoy_binary, tmp_path_factory):
    loop, filter_state, metadata = request.param
    workdir = str(tmp_path_factory.mktemp("summary"))
    path = os.path.join(workdir, "access.log")
    forms = {**({"filterState": True} if filter_state else {}), **({} if metadata else {"metadata": False})}
    extra = {"summary": forms} if forms else {}
    plugin = plugin_config(mocks, mode="native", loop=loop, **extra)
    envoy = Envoy(envoy_binary, with_access_log(envoy_config(wasm, mocks, plugin), path), workdir).start()
    dm = wasm.endswith(".so")
    # Proxy-Wasm has only filter state: it always sets it. The module's metadata is on unless turned off.
    yield Gateway(envoy), path, dm and metadata, filter_state or not dm
    envoy.stop()


def line_of(path: str, q: str, timeout_s: float = 15) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(path):
            for line in open(path, encoding="utf-8").read().splitlines():
                if line.startswith(f"q={q} "):
                    return dict(kv.split("=", 1) for kv in line.split(" ")[1:])
        time.sleep(0.05)
    raise AssertionError(f"no access-log line for {q}")


@pytest.mark.parametrize("stream", [False, True])
def test_the_summary_is_in_the_access_log(logged, mocks, stream):
    gw, path, md, state = logged
    q = f"summary-{stream}-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "Cold.")
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": stream}
    reply = client.request(gw.port, "POST", CHAT_PATH, body, {**CLIENT_HEADERS, "x-q": q})
    assert reply.status == 200 and b"Cold." in reply.body, reply.text[:300]
    fields = line_of(path, q)
    want = {"turns": "2", "tool_calls": "1", "tool_errors": "0", "input_tokens": "20", "output_tokens": "10",
            "total_tokens": "30", "outcome": "answer"}
    if state:
        assert {k: fields[k] for k in want} == want, fields
        assert fields["model"] not in ("", "-") and int(fields["duration_ms"]) >= 0, fields
    else:
        # Envoy's access log shows '-' for a filter-state key that is not set.
        assert all(fields[k] == "-" for k in FIELDS), fields
    if md:
        assert {k: fields[f"md_{k}"] for k in want} == want, fields
        assert fields["md_model"] not in ("", "-") and int(fields["md_duration_ms"]) >= 0, fields
        if state:
            assert fields["md_model"] == fields["model"]
    else:
        assert all(fields[f"md_{k}"] == "-" for k in FIELDS), fields


def test_an_error_is_summarised_with_its_code(logged, mocks):
    gw, path, md, state = logged
    if not (md or state):
        pytest.skip("no summary is set in this configuration")
    q = f"summary-error-{time.monotonic_ns()}"
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "not json at all {")
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}]}
    client.request(gw.port, "POST", CHAT_PATH, body, {**CLIENT_HEADERS, "x-q": q})
    fields = line_of(path, q)
    md = "md_" if md else ""
    assert fields[f"{md}outcome"] in ("answer", "limit") or fields[f"{md}outcome"].startswith("error:"), fields
    assert fields[f"{md}turns"] == "2" and fields[f"{md}tool_calls"] == "1", fields
