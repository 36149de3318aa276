"""The fault matrix of tests/e2e/test_faults.py on the dynamic module: the same 408 cells, mocks, short
timeouts and checks (one Envoy per (mode, loop), 102 cells each), with this host's expectations.

What differs from Proxy-Wasm: the module holds the request until its body is read and, in `loop:
response`, holds the LLM reply's response headers while the loop runs. So nothing is `late` here: a
failure after the first turn is a real 502/504 with a JSON error, and the first turn's unusable 2xx
replies too; and where Envoy itself gives up on the held first reply (its body broken, too slow, over
the listener's buffer limit), Envoy answers with its own text reply and a real status instead of the
Wasm build's 200-then-reset. Streaming clients get their answer live (`expect_dm_stream`): every turn
is a streamed callout, so the first turn is `loop: request`'s column for them in both loops, and a
later failure is an SSE error event after the role chunk the stream started with (then [DONE]).

What a plain client sees (`real`: a JSON OpenAI error with that status;
`passthrough`: the provider's status and bytes; `ENVOY`: Envoy's own `text/plain` local reply, which no
filter sees; N×: requests for the faulted turn, retries included):

| fault | later LLM turn (both loops) | first turn, loop request | first turn, loop response | tool (both loops) |
|---|---|---|---|---|
| 400 | real 502 llm_error, 1× | 400 passthrough, 1× | 400 passthrough, 1× | as on Wasm |
| 429 | real 502 llm_error, 2× | 429 passthrough, 2× | 429 passthrough, 1× | as on Wasm |
| 500 | real 502 llm_error, 2× | 500 passthrough, 2× | 500 passthrough, 1× | as on Wasm |
| 503 (HTML) | real 502 llm_error, 2× | real 503 upstream_error (wrapped), 2× | real 503 upstream_error (wrapped), 1× | as on Wasm |
| timeout | real 504 llm_timeout, 2× | real 504 llm_timeout, 2× | real 504 upstream_error (Envoy's route timeout, wrapped), 1× | as on Wasm |
| reset | real 502 llm_unavailable, 2× | real 502 llm_unavailable, 2× | real 503 upstream_error (`upstream connect error ...`, wrapped), 1× | as on Wasm |
| mid-body-reset, mid-body-close | real 502 llm_unavailable, 2× | real 502 llm_unavailable, 2× | ENVOY 502 `upstream connect error or disconnect/reset before headers. reset reason: protocol error` | as on Wasm |
| not-json, no-choices, empty-choices, empty-200, gzip | real 502 llm_bad_reply, 1× | real 502 llm_bad_reply, 1× | real 502 llm_bad_reply, 1× (Wasm: late) | as on Wasm |
| headers-only, 204 | real 502 llm_bad_reply, 1× | real 502 llm_bad_reply, 1× | real 502 llm_bad_reply, 1× | as on Wasm |
| over-limit | real 502 response_too_large, 1× | real 502 response_too_large, 1× | ENVOY 500 `Internal Server Error` (the held body passed the listener's 1 MiB limit) | as on Wasm |
| trickle | real 504 llm_timeout, 2× | real 504 llm_timeout, 2× | ENVOY 504 `upstream request timeout` (route timeout, 1 s) | as on Wasm |

Tool cells (both loops): as on Wasm, the observation the model gets is exact and the client gets the
model's final answer (200).

Where a cell is the Wasm build's, the Wasm expectation is used (`expect` of test_faults.py), so the two
tables cannot drift apart silently: `loop: request` is the same on both hosts, and a later turn on this
host is what `loop: request` is on both.

The ENVOY cells give a real status but no OpenAI error body: Envoy resets the held upstream stream and
sends its local reply directly, past the filter (README, "Hosts": Envoy's own upstream failures on the
held LLM reply). The filter's request log line for them says `outcome=cancelled status=0` although the
client did not leave: see test_metrics_dm.py.

Every cell checks that Envoy is still alive; the last test checks every gateway answers an ordinary
request and logged no panic, segfault or Envoy bug.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from test_faults import (  # noqa: F401
    Expect,
    cells,
    expect,
    fresh_rig,
    gateways,
    rig,
    run_cell,
    test_native_empty_reply_is_asked_again,
)

# Envoy's local replies when it gives up on the held first reply (loop response, first turn).
PROTOCOL_RESET = "upstream connect error or disconnect/reset before headers. reset reason: protocol error"
ENVOY_REPLIES = {
    "mid-body-reset": Expect("envoy-reply", 502, message=PROTOCOL_RESET),
    "mid-body-close": Expect("envoy-reply", 502, message=PROTOCOL_RESET),
    "over-limit": Expect("envoy-reply", 500, message="Internal Server Error"),
    "trickle": Expect("envoy-reply", 504, message="upstream request timeout"),
}

# Cells whose behaviour contradicts the contract: {test id: exact symptom} (strict xfails). None.
DM_KNOWN_BUGS: dict[str, str] = {}


def expect_dm_plain(loop: str, position: str, fault: str) -> Expect:
    """A plain (non-streaming) client on the dynamic module."""
    if position == "later":
        # The reply headers are held while the loop runs: the real status in both loops, which is what
        # loop request gives on either host.
        return expect("request", position, fault)
    wasm = expect(loop, position, fault)
    if loop == "response" and position == "first":
        if wasm.envoy:
            return ENVOY_REPLIES[fault]
        if wasm.late:
            return replace(wasm, status=502, late=False)
    return wasm


def expect_dm_stream(loop: str, position: str, fault: str) -> Expect:
    """A streaming client (`stream: true`) on the dynamic module: live streaming. Every turn is a
    streamed callout whichever the loop, so the first turn is what `loop: request` gives (real
    statuses: nothing was sent yet); the stream starts (200, the role chunk) when the loop goes on to
    tools, so a later failure is an error event in it after that chunk, then [DONE]."""
    base = expect("request", position, fault)
    if position == "later" and base.kind == "error":
        return replace(base, status=200, late=True, prelude=True)
    return base


def expect_dm(loop: str, position: str, fault: str, stream: bool) -> Expect:
    return expect_dm_stream(loop, position, fault) if stream else expect_dm_plain(loop, position, fault)


@pytest.mark.parametrize("loop, mode, position, fault, stream", list(cells(expect_dm, DM_KNOWN_BUGS)))
def test_fault(gateways, rig, loop, mode, position, fault, stream):  # noqa: F811
    run_cell(gateways, rig, loop, mode, position, fault, stream, expect_dm)


# Imported last: pytest runs a module's tests in the order their names were bound, and this one must
# come after the matrix.
from test_faults import test_envoy_is_alive_after_the_matrix  # noqa: E402,F401
