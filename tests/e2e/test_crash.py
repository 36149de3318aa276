"""Nothing an upstream sends can crash Envoy: answers larger than the listener's buffer limit.

Before the fix, each of these crashed the whole Envoy process: the filter wrote an answer larger
than the listener's `per_connection_buffer_limit_bytes` (Envoy's default, 1 MiB, used here: the
listener sets none); Envoy reset the stream inside `proxy_set_buffer_bytes` and called `proxy_on_log`
re-entrantly, the SDK's dispatcher panicked, the VM trapped, and Envoy could segfault. Now every
answer is bounded by `maxResponseBytes` (768 KiB by default) and the client gets a clean
`response_too_large` error, delivered as late errors are: in `loop: response` a 200 with the error
in the body (JSON with `choices: []`, or an SSE error event then `[DONE]`), in `loop: request` a real
502 with a JSON error.

- a later LLM turn whose final answer is 2 MiB;
- a later LLM turn whose final answer is 300 KiB of U+0001 (JSON escaping makes it 1.8 MB);
- native mode, a streaming client, a first-turn reply just under 1 MiB whose SSE answer is just over;
- `maxResponseBytes: 4194304` with the 1 MiB listener: the filter then writes past the limit, Envoy
  resets the stream inside the write and calls back into the module. What that client sees is
  Envoy's decision and is recorded (printed; `pytest -rP` shows it); Envoy must survive it.

After each: the Envoy process runs, its admin `/ready` answers LIVE, the next ordinary request (a tool
call and an answer, plain and streamed) is answered correctly, and the log has no `panicked`,
`RuntimeError`, `Caught Segmentation fault` or `envoy bug`.
"""
from __future__ import annotations

import json

import pytest

from support.faults import (MiB, GatewayPool, Rig, alive, answer_content, chat, error_of, final_turn,
                            final_turn_bytes, log_problems, reply, tool_turn)

LOOPS = ("response", "request")
MODES = ("react", "native")
STREAMS = (False, True)
MAX_RESPONSE_BYTES = 786432          # the default
RAISED_MAX_RESPONSE_BYTES = 4194304
ANSWER_2MIB = "a" * (2 * MiB)
ANSWER_U0001 = "\u0001" * (300 * 1024)
ORDINARY_ANSWER = "It is -3 °C and snowing in Oslo."


@pytest.fixture(scope="module")
def rig():
    r = Rig.start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def gateways(envoy_binary, wasm, rig, tmp_path_factory):
    pool = GatewayPool(envoy_binary, wasm, rig, tmp_path_factory)
    yield pool
    pool.stop()


@pytest.fixture(autouse=True)
def fresh_rig(rig):
    rig.reset()
    yield


def default_gateway(gateways, mode: str, loop: str):
    """Envoy's default listener buffer limit (1 MiB: no per_connection_buffer_limit_bytes), default
    maxResponseBytes."""
    return gateways.get((mode, loop), mode=mode, loop=loop)


def assert_survives(gw, rig, mode: str, label: str) -> None:
    """Envoy runs, is ready, answers an ordinary request correctly (plain and streamed), and logged no
    trap, panic, segfault or Envoy bug."""
    assert gw.envoy.proc.poll() is None, f"Envoy exited ({gw.envoy.proc.returncode}): {gw.envoy.log_tail(40)}"
    assert alive(gw.envoy), "admin /ready does not answer LIVE"
    q = f"Crash: an ordinary question after {label}?"
    rig.llm.script(q, tool_turn(mode, "Oslo"), final_turn(mode, ORDINARY_ANSWER))
    for stream in STREAMS:
        assert answer_content(chat(gw.port, q, stream=stream), stream) == ORDINARY_ANSWER
    assert [r.target for r in rig.weather.requests if "Oslo" in r.target], "the ordinary request called its tool"
    assert log_problems(gw.envoy) == []


def assert_too_large(out, loop: str, stream: bool) -> dict:
    """A clean response_too_large, as late errors are delivered in this loop."""
    if loop == "response":
        assert out.status == 200, out.describe()
    else:
        assert out.status == 502, out.describe()
    err = error_of(out, stream, late=loop == "response")
    assert (err["code"], err["type"]) == ("response_too_large", "api_error"), err
    assert f"more than maxResponseBytes ({MAX_RESPONSE_BYTES})" in err["message"], err["message"]
    return err


def later_answer(gateways, rig, loop: str, mode: str, stream: bool, answer: str):
    """A tool turn, then `answer` as the later LLM turn: (gateway, question, label, what the client got)."""
    gw = default_gateway(gateways, mode, loop)
    label = f"a {len(answer.encode())}-byte later answer ({loop}, {mode}, stream={stream})"
    q = f"Crash: {label}?"
    rig.llm.script(q, tool_turn(mode, "Bergen"), reply(200, final_turn_bytes(mode, answer)))
    out = chat(gw.port, q, stream=stream)
    print(f"{label}: the client saw {out.describe()}")
    return gw, q, label, out


def first_reply_under_1mib(gateways, rig, loop: str):
    """A native streaming request whose first reply is just under 1 MiB and whose SSE answer would be
    over it: (gateway, question, label, what the client got)."""
    body, content, sse_size = just_under_1mib_reply()
    assert len(body) < MiB < sse_size, (len(body), sse_size)
    gw = default_gateway(gateways, "native", loop)
    label = f"a {len(body)}-byte first reply whose SSE answer is ~{sse_size} bytes ({loop})"
    q = f"Crash: {label}?"
    rig.llm.script(q, reply(200, body))
    out = chat(gw.port, q, stream=True)
    print(f"{label}: the client saw {out.describe()}")
    return gw, q, label, out


def raised_limit_answer(gateways, rig, loop: str, stream: bool):
    """A 2 MiB answer with maxResponseBytes over the 1 MiB listener: (gateway, label, the client's reply)."""
    gw = gateways.get(("react", loop, "raised"), mode="react", loop=loop,
                      top={"maxResponseBytes": RAISED_MAX_RESPONSE_BYTES})
    label = (f"a 2 MiB answer with maxResponseBytes {RAISED_MAX_RESPONSE_BYTES} and a 1 MiB listener "
             f"({loop}, stream={stream})")
    q = f"Crash: {label}?"
    rig.llm.script(q, tool_turn("react", "Bergen"), reply(200, final_turn_bytes("react", ANSWER_2MIB)))
    out = chat(gw.port, q, stream=stream)
    print(f"{label}: the client saw {out.describe()}; first bytes {out.body[:120]!r}")
    return gw, label, out


@pytest.mark.parametrize("stream", STREAMS, ids=["plain", "stream"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("answer", [ANSWER_2MIB, ANSWER_U0001], ids=["2mib", "300kib-u0001"])
def test_oversized_later_answer(gateways, rig, loop, mode, stream, answer):
    """A later LLM turn (a callout, so no listener limit applies to it) returns the final answer."""
    gw, q, label, out = later_answer(gateways, rig, loop, mode, stream, answer)
    err = assert_too_large(out, loop, stream)
    as_sent = int(err["message"].split("the answer is ", 1)[1].split(" ", 1)[0])
    assert as_sent > MiB, f"the answer as sent ({as_sent} bytes) is over the listener's 1 MiB limit"
    assert len(rig.llm.requests_for(q)) == 2
    assert_survives(gw, rig, mode, label)


def just_under_1mib_reply() -> tuple[bytes, str, int]:
    """A minimal valid completion of 1 MiB - 160 bytes, its content, and the size of the SSE answer the
    filter would write for it (role, content and finish chunks, then [DONE]), which is over 1 MiB."""
    shell = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}
    overhead = len(json.dumps(shell, separators=(",", ":")))
    content = "s" * (MiB - 160 - overhead)
    shell["choices"][0]["message"]["content"] = content
    body = json.dumps(shell, separators=(",", ":")).encode()

    def chunk(delta, finish):
        return {"id": "chatcmpl-" + "0" * 15, "object": "chat.completion.chunk", "created": 1795000000,
                "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                     "finish_reason": finish}]}
    events = [chunk({"role": "assistant", "content": ""}, None), chunk({"content": content}, None),
              chunk({}, "stop")]
    sse = sum(len("data: \n\n") + len(json.dumps(e, separators=(",", ":"))) for e in events) + len("data: [DONE]\n\n")
    return body, content, sse


@pytest.mark.parametrize("loop", LOOPS)
def test_native_stream_first_reply_just_under_1mib(gateways, rig, loop):
    """In loop response the reply is the route's upstream answer, held by the filter: under the listener
    limit, it is read; the SSE answer made of it would be over the limit (and is over maxResponseBytes)."""
    gw, q, label, out = first_reply_under_1mib(gateways, rig, loop)
    err = assert_too_large(out, loop, stream=True)
    as_sent = int(err["message"].split("the answer is ", 1)[1].split(" ", 1)[0])
    assert as_sent > MiB, as_sent
    assert len(rig.llm.requests_for(q)) == 1
    assert_survives(gw, rig, "native", label)


@pytest.mark.parametrize("stream", STREAMS, ids=["plain", "stream"])
@pytest.mark.parametrize("loop", LOOPS)
def test_answer_past_the_listener_limit_with_raised_max_response_bytes(gateways, rig, loop, stream):
    """maxResponseBytes above the listener's limit: the 2 MiB answer is written; Envoy's reaction is its
    own (recorded); Envoy must survive it and answer the next request."""
    gw, label, out = raised_limit_answer(gateways, rig, loop, stream)
    if loop == "response":
        # The dangerous path was taken: Envoy closed the stream inside the module's write.
        assert "the host closed the stream while the answer was written" in open(gw.envoy.log_path).read()
    assert_survives(gw, rig, "react", label)


def test_no_gateway_died(gateways):
    """Runs last: no gateway of this file had to be replaced after a crash."""
    assert not gateways.dead, [g.envoy.log_tail(40) for g in gateways.dead]
    assert all(alive(g.envoy) and log_problems(g.envoy) == [] for g in gateways.running.values())
