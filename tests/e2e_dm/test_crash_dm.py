"""Nothing an upstream sends can crash Envoy, on the dynamic module: the answers of tests/e2e/test_crash.py
that are larger than the listener's buffer limit (1 MiB, Envoy's default), with the same rig, gateways
and survival checks (Envoy runs, /ready is LIVE, the next ordinary request is answered plain and
streamed, no `panicked`, `RuntimeError`, `Caught Segmentation fault` or `envoy bug` in the log).

What the client gets on this host (`expect_dm_plain`, `expect_dm_stream`):

| case | loop response | loop request |
|---|---|---|
| a later LLM turn's 2 MiB answer, or 300 KiB of U+0001 (1.8 MB as JSON) | real 502 response_too_large (Wasm: a 200 with the error in the body) | real 502 response_too_large |
| native, streaming, a first reply just under 1 MiB whose SSE answer is just over | real 502 response_too_large (Wasm: late) | real 502 response_too_large |
| a 2 MiB answer with maxResponseBytes 4 MiB over a 1 MiB listener | ENVOY 500 `Internal Server Error` (the answer went into the held reply body, past the listener's limit) | 200 with the whole 2 MiB answer (a local reply: no listener limit applies) |

Streaming clients (`expect_dm_stream`) get their answer live, every turn a streamed callout in both
loops: the later answer's response_too_large is an error event after the role chunk the stream started
with when the loop went on to the tool; the first reply's is a real 502 (nothing was sent yet); and
with the raised limit the whole 2 MiB answer arrives as a 200 stream in both loops (the filter sends it
itself: no held body against the listener's limit).
"""
from __future__ import annotations

import pytest

from support.faults import MiB
from test_crash import (  # noqa: F401
    ANSWER_2MIB,
    ANSWER_U0001,
    LOOPS,
    MODES,
    STREAMS,
    assert_survives,
    first_reply_under_1mib,
    fresh_rig,
    gateways,
    later_answer,
    raised_limit_answer,
    rig,
)
from test_faults import Expect, check_outcome

TOO_LARGE = Expect("error", 502, "response_too_large", "the answer is ")
LATER_ANSWER, FIRST_REPLY_UNDER_1MIB, RAISED_LIMIT = "later-answer", "first-reply-under-1mib", "raised-limit"


def expect_dm_plain(case: str, loop: str) -> Expect:
    """A plain client on the dynamic module."""
    if case == RAISED_LIMIT:
        return Expect("envoy-reply", 500, message="Internal Server Error") if loop == "response" else Expect("answer")
    return TOO_LARGE


def expect_dm_stream(case: str, loop: str) -> Expect:
    """A streaming client on the dynamic module (live streaming, every turn a callout in both loops):
    a later answer comes after the stream started with the tool call, so too large is an error event
    after the role chunk; a too-large first reply has sent nothing yet (a real 502); and the filter's
    own stream is not held against the listener's limit, so the raised limit gets the whole answer."""
    if case == LATER_ANSWER:
        return Expect("error", 200, "response_too_large", "the answer is ", late=True, prelude=True)
    if case == RAISED_LIMIT:
        return Expect("answer")
    return TOO_LARGE


def expect_dm(case: str, loop: str, stream: bool) -> Expect:
    return expect_dm_stream(case, loop) if stream else expect_dm_plain(case, loop)


def assert_as_sent_over_1mib(err: dict | None) -> None:
    """A response_too_large error names the answer's size as it would have been sent: over 1 MiB here."""
    if err is not None and err["code"] == "response_too_large":
        as_sent = int(err["message"].split("the answer is ", 1)[1].split(" ", 1)[0])
        assert as_sent > MiB, f"the answer as sent ({as_sent} bytes) is over the listener's 1 MiB limit"


@pytest.mark.parametrize("stream", STREAMS, ids=["plain", "stream"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("answer", [ANSWER_2MIB, ANSWER_U0001], ids=["2mib", "300kib-u0001"])
def test_oversized_later_answer(gateways, rig, loop, mode, stream, answer):
    gw, q, label, out = later_answer(gateways, rig, loop, mode, stream, answer)
    assert_as_sent_over_1mib(check_outcome(out, expect_dm(LATER_ANSWER, loop, stream), stream, label=label))
    assert len(rig.llm.requests_for(q)) == 2
    assert_survives(gw, rig, mode, label)


@pytest.mark.parametrize("loop", LOOPS)
def test_native_stream_first_reply_just_under_1mib(gateways, rig, loop):
    gw, q, label, out = first_reply_under_1mib(gateways, rig, loop)
    assert_as_sent_over_1mib(check_outcome(out, expect_dm(FIRST_REPLY_UNDER_1MIB, loop, True), True, label=label))
    assert len(rig.llm.requests_for(q)) == 1
    assert_survives(gw, rig, "native", label)


@pytest.mark.parametrize("stream", STREAMS, ids=["plain", "stream"])
@pytest.mark.parametrize("loop", LOOPS)
def test_answer_past_the_listener_limit_with_raised_max_response_bytes(gateways, rig, loop, stream):
    gw, label, out = raised_limit_answer(gateways, rig, loop, stream)
    check_outcome(out, expect_dm(RAISED_LIMIT, loop, stream), stream, answer=ANSWER_2MIB, label=label)
    assert_survives(gw, rig, "react", label)


# Imported last: it must run after every test above.
from test_crash import test_no_gateway_died  # noqa: E402,F401
