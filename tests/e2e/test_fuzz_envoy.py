"""Envoy-level fuzzing: random client requests, LLM replies and tool replies through the real filter in a
real Envoy, on either host (tests/e2e_dm/test_fuzz_envoy_dm.py runs this module on the dynamic module).

Each case is drawn from `random.Random(f"{seed}/{index}")` (support/fuzz.py) and is one of:
- `client`: a request the filter must refuse, pass on or survive: a valid chat body mutated byte-wise,
  random bytes, invalid UTF-8, JSON nested 129 to 100 000 deep, a body of 900 KiB to 2 MiB (over the
  listener's 1 MiB buffer limit), valid JSON that is no chat request, odd headers (70 KiB, 150 of them,
  bytes ≥ 0x80, control characters, odd content types, a second content-type), odd methods and paths,
  a body that claims to be compressed;
- `llm`: a valid request whose LLM turns (1 to 3, then the mock's own 400) are drawn from: valid answers
  and tool calls, broken tool calls, ReAct garbage, mutated, truncated, binary, non-UTF-8, SSE instead of
  JSON, 1.1–2 MiB, over maxResponseBytes, deeply nested, wrong JSON types, error statuses with odd bodies,
  resets (before and within the body), gzip, chunked, 204, headers only, odd content types, other 2xx,
  hangs and trickles;
- `tool`: a valid request whose model calls the weather tool, which answers with a random one of the like.

Per case, across both modes and loops, plain and streaming clients (one Envoy per (mode, loop), the
fault matrix's short timeouts), the invariants:
1. the client gets a complete HTTP response (on Proxy-Wasm alone, in `loop: response`, Envoy may send the
   200 then reset when the first LLM reply breaks mid-body, trickles past the route timeout or passes the
   listener's limit: test_faults.py's ENVOY cells);
2. its status is in SENSIBLE;
3. unless it is the LLM's own reply passed through (same status and bytes) or Envoy's own text reply, it
   is the filter's: an error is an OpenAI error JSON (a late one in a 200: JSON with `choices: []`, or an
   SSE error event then [DONE]), an answer a chat.completion or a well-framed SSE stream, as the client
   asked, never with a content-encoding;
4. Envoy is alive (admin /ready is LIVE) and logged no panic, trap, segfault or Envoy bug meanwhile.
The last test: every gateway answers an ordinary request, plain and streamed, and its whole log is clean.

Found by the fuzz and fixed, each with a deterministic test in the last section: a chat body over the
listener's buffer limit hung in `loop: response` (Envoy's 413 came before the request was read; both
hosts now pass it on), and Proxy-Wasm answered with the first LLM reply's 201/206 (now 200).

ENVOY_FUZZ_CASES (default 150) sets the number of cases, ENVOY_FUZZ_SEED the seed (default fixed, so CI
is reproducible; `random` draws one). A failing case prints the command that runs it alone.
"""
from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from dataclasses import dataclass

import pytest

from support.agent import CHAT_PATH
from support.faults import (CLIENT_TIMEOUT_S, LOG_PROBLEMS, GatewayPool, MiB, Rig, alive, answer_content, chat,
                            final_turn, log_problems, reply, tool_turn, tool_turn_bytes)
from support.fuzz import ClientRequest, chat_body, client_garbage, dumps, llm_act, send, std_headers, tool_act

_seed = os.environ.get("ENVOY_FUZZ_SEED", "20261122")
SEED = str(random.SystemRandom().randrange(2 ** 32)) if _seed == "random" else _seed
CASES = int(os.environ.get("ENVOY_FUZZ_CASES", "150"))

LOOPS = ("response", "request")
MODES = ("react", "native")
KINDS = {"client": 35, "llm": 40, "tool": 25}
SLOW_SHARE = 0.25                 # cases in which a mock may hang or trickle
LLM_TIMEOUT_MS, TOOL_TIMEOUT_MS, ROUTE_TIMEOUT, MAX_RETRIES = 400, 400, "1s", 1

SENSIBLE = {200, 400, 401, 403, 404, 405, 408, 409, 411, 413, 415, 422, 429, 431, 500, 502, 503, 504}
# Envoy's own local replies (no filter sees them): text/plain, one of these bodies.
ENVOY_TEXT = re.compile(r"upstream connect error or disconnect/reset before headers\.[^\n]*|upstream request timeout|"
                        r"Internal Server Error|Payload Too Large|Bad Request|Request Header Fields Too Large|")
ERROR_KEYS = {"message", "type", "param", "code"}


@dataclass
class Case:
    index: int
    kind: str
    mode: str
    loop: str
    stream: bool
    question: str
    location: str
    request: ClientRequest
    llm: list          # [(Act, label)] the LLM's turns in order (then its own 400: no such turn)
    tool: tuple | None  # (Act, label) the weather API's reply to `location`

    @property
    def id(self) -> str:
        return case_id(self.index, self.kind, self.mode, self.loop, self.stream)

    def describe(self) -> str:
        parts = [f"{self.id}: {self.request.describe()}"]
        parts += [f"LLM turn {i + 1}: {label} ({act.kind} {act.status}, {len(act.body)} B {act.body[:100]!r})"
                  for i, (act, label) in enumerate(self.llm)]
        if self.tool:
            act, label = self.tool
            parts.append(f"tool {self.location!r}: {label} ({act.kind} {act.status}, {len(act.body)} B "
                         f"{act.body[:100]!r})")
        return "\n  ".join(parts)


def case_id(index: int, kind: str, mode: str, loop: str, stream: bool) -> str:
    return f"case-{index:03d}-{kind}-{mode}-{loop}-{'stream' if stream else 'plain'}"


def case_head(rng: random.Random) -> tuple[str, str, str, bool]:
    return (rng.choices(list(KINDS), weights=list(KINDS.values()))[0], rng.choice(MODES), rng.choice(LOOPS),
            rng.random() < 0.4)


def build_case(index: int) -> Case:
    rng = random.Random(f"{SEED}/{index}")
    kind, mode, loop, stream = case_head(rng)
    slow_ok = rng.random() < SLOW_SHARE
    question = f"Fuzz case {index} (seed {SEED}): what is the weather?"
    location = f"fz-{index}"
    llm, tool = [], None
    if kind == "client":
        request = client_garbage(rng, question)
    else:
        request = ClientRequest(headers=std_headers(), body=dumps(chat_body(rng, question, stream), rng),
                                stream=stream, label="client valid")
        if kind == "llm":
            llm = [llm_act(rng, mode, location, slow_ok) for _ in range(rng.randint(1, 3))]
        else:
            tool = tool_act(rng, location, slow_ok)
            after = llm_act(rng, mode, location, slow_ok) if rng.random() < 0.3 else (
                final_turn(mode, "Fuzz: answered after the tool."), "final")
            llm = [(tool_turn(mode, location), "tool"), after]
    return Case(index, kind, mode, loop, stream, question, location, request, llm, tool)


CLIENT_TIMEOUT_413_S = 3     # the 413 comes in milliseconds
# Which host this run loads (the DM conftest points WASM at the .so).
HOST = "dm" if os.environ.get("WASM", "").endswith(".so") else "wasm"
FILE = "tests/e2e_dm/test_fuzz_envoy_dm.py" if HOST == "dm" else "tests/e2e/test_fuzz_envoy.py"


def over_limit_chat_body(request: ClientRequest, loop: str) -> bool:
    ctype = dict(request.headers).get(b"Content-Type", b"")
    return (loop == "response" and request.method == b"POST" and request.path == CHAT_PATH.encode()
            and ctype == b"application/json" and len(request.body) > MiB)


def params():
    for i in range(CASES):
        case = build_case(i)
        yield pytest.param(i, id=case.id)


# --- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rig():
    r = Rig.start()
    yield r
    r.stop()


class FuzzGateways(GatewayPool):
    """One Envoy per (mode, loop), with the fault matrix's short timeouts."""

    def get(self, mode: str, loop: str):
        return super().get((mode, loop), mode=mode, loop=loop,
                           llm={"maxExecutionTime": LLM_TIMEOUT_MS, "maxRetries": MAX_RETRIES},
                           weather={"maxExecutionTime": TOOL_TIMEOUT_MS},
                           route_timeout=ROUTE_TIMEOUT if loop == "response" else None)


@pytest.fixture(scope="module")
def gateways(envoy_binary, wasm, rig, tmp_path_factory):
    pool = FuzzGateways(envoy_binary, wasm, rig, tmp_path_factory)
    yield pool
    pool.stop()


@pytest.fixture(scope="module")
def host(wasm) -> str:
    assert HOST == ("dm" if wasm.endswith(".so") else "wasm"), (HOST, wasm)
    return HOST


class LogWatch:
    """The problem lines each Envoy logged since the last look."""

    def __init__(self):
        self.offsets: dict[str, int] = {}

    def new_problems(self, envoy) -> list[str]:
        try:
            with open(envoy.log_path, "rb") as f:
                f.seek(self.offsets.get(envoy.log_path, 0))
                data = f.read()
                self.offsets[envoy.log_path] = f.tell()
        except OSError:
            return []
        return [line for line in data.decode("utf-8", "replace").splitlines() if LOG_PROBLEMS.search(line)]


@pytest.fixture(scope="module")
def watch():
    return LogWatch()


OUTCOMES: Counter = Counter()


# --- the invariants ------------------------------------------------------------------------------

def envoy_may_reset(case: Case) -> bool:
    """Proxy-Wasm, loop response: the first LLM reply is the route's; if its body breaks, trickles past
    the route timeout or passes the listener's limit, Envoy has sent the 200 and resets the stream."""
    if case.loop != "response" or not case.llm:
        return False
    act = case.llm[0][0]
    return act.kind in ("mid_body", "mid_body_close", "trickle") or (act.kind == "reply" and len(act.body) > MiB)


def openai_error(obj) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("error"), dict) and set(obj["error"]) == ERROR_KEYS
            and isinstance(obj["error"]["message"], str) and isinstance(obj["error"]["type"], str))


def sse_problems(text: str) -> list[str]:
    if not text.endswith("\n\n"):
        return [f"SSE body does not end with a blank line: {text[-80:]!r}"]
    events = text[:-2].split("\n\n")
    if any(not e.startswith("data: ") or "\n" in e for e in events):
        return [f"SSE event not a single 'data: ' line: {[e[:80] for e in events if not e.startswith('data: ')][:3]}"]
    data = [e[len("data: "):] for e in events]
    if data[-1] != "[DONE]":
        return [f"SSE does not end with [DONE]: {data[-1][:120]!r}"]
    try:
        chunks = [json.loads(d) for d in data[:-1]]
    except ValueError as e:
        return [f"SSE event not JSON: {e}"]
    errors = [i for i, c in enumerate(chunks) if "error" in c]
    if errors and (errors != [len(chunks) - 1] or not openai_error(chunks[-1])):
        return [f"SSE error event not a last OpenAI error: {chunks[errors[0]]}"]
    if any(c.get("object") != "chat.completion.chunk" for c in chunks if "error" not in c):
        return ["SSE event not a chat.completion.chunk"]
    return []


def check(case: Case, out, llm_sent: list, host: str) -> tuple[str, list[str]]:
    """(what kind of response it was, the invariants it broke)."""
    if out.status is None or out.error:
        if host == "wasm" and envoy_may_reset(case) and out.status == 200 and out.body == b"":
            return "envoy 200-then-reset", []
        return "incomplete", [f"no complete HTTP response: {out.describe()}"]
    problems = [] if out.status in SENSIBLE else [f"status {out.status} is not in SENSIBLE"]
    if any(a.kind == "reply" and (a.status, a.body) == (out.status, out.body) for a in llm_sent):
        return "passthrough", problems
    ctype = out.headers.get("content-type", "")
    if (ctype.startswith("text/plain") or not ctype) and out.status != 200 and ENVOY_TEXT.fullmatch(out.text):
        return "envoy reply", problems
    if "content-encoding" in out.headers:
        problems.append(f"the filter's body sent with content-encoding {out.headers['content-encoding']}")
    if out.status != 200:
        try:
            ok = ctype.startswith("application/json") and openai_error(json.loads(out.body))
        except ValueError:
            ok = False
        return "error", problems + ([] if ok else [f"an error that is no OpenAI error JSON ({ctype}): {out.text[:200]!r}"])
    if ctype.startswith("text/event-stream"):
        if case.kind != "client" and not case.stream:
            problems.append("SSE for a client that did not ask for a stream")
        return "sse", problems + sse_problems(out.text)
    if not ctype.startswith("application/json"):
        return "200 other", problems + [f"a 200 with content-type {ctype!r}: {out.text[:200]!r}"]
    if case.kind != "client" and case.stream:
        problems.append("a JSON 200 for a client that asked for a stream")
    try:
        body = json.loads(out.body)
    except ValueError:
        return "200 json", problems + [f"a 200 whose JSON does not parse: {out.text[:200]!r}"]
    if openai_error(body) and body.get("choices") == []:
        return "late error", problems
    choices = body.get("choices") if isinstance(body, dict) else None
    if not (body.get("object") == "chat.completion" and isinstance(choices, list) and choices
            and isinstance(choices[0], dict) and (choices[0].get("message") or {}).get("role") == "assistant"):
        problems.append(f"a 200 that is neither a chat.completion nor a late error: {out.text[:200]!r}")
    return "completion", problems


# --- the cases -----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def fresh_rig(rig):
    rig.reset()
    yield


@pytest.mark.parametrize("index", list(params()))
def test_envoy_fuzz_case(gateways, rig, host, watch, index):
    case = build_case(index)
    gw = gateways.get(case.mode, case.loop)
    watch.new_problems(gw.envoy)            # only this case's lines count
    if case.llm:
        rig.llm.script(case.question, *(act for act, _ in case.llm))
    if case.tool:
        rig.weather.faults[case.location] = case.tool[0]
    out = send(gw.port, case.request, CLIENT_TIMEOUT_S)
    llm_sent = [e.act for e in rig.llm.exchanges]
    what, problems = check(case, out, llm_sent, host)
    OUTCOMES[(what, out.status)] += 1
    problems += [f"Envoy logged: {line[:300]}" for line in watch.new_problems(gw.envoy)]
    if not alive(gw.envoy):
        problems.append(f"Envoy is not alive: {gw.envoy.log_tail(20)}")
    assert not problems, (
        f"\nreplay: ENVOY_FUZZ_SEED={SEED} ENVOY_FUZZ_CASES={CASES} ENVOY=... WASM={os.environ.get('WASM', '')} "
        f".venv/bin/python -m pytest {FILE} -k '{case.id}'\n"
        f"  {case.describe()}\nthe client got {out.describe()} after {out.elapsed_s * 1000:.0f} ms: "
        f"{out.headers} {out.body[:300]!r}\n" + "\n".join(problems))


# --- found by the fuzz ----------------------------------------------------------------------------

@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_chat_body_over_the_listener_limit_gets_a_413(gateways, loop, stream):
    """A 1.1 MiB chat request (the listener keeps Envoy's 1 MiB buffer limit) is refused with a complete
    413: Envoy's own 'Payload Too Large', or the filter's OpenAI error."""
    gw = gateways.get("react", loop)
    body = chat_body(random.Random(0), "Too long: " + "x" * (1100 * 1024), stream, extras=False)
    request = ClientRequest(headers=std_headers(), body=json.dumps(body).encode(), stream=stream)
    assert over_limit_chat_body(request, "response")
    out = send(gw.port, request, CLIENT_TIMEOUT_413_S)
    assert (out.status, out.error) == (413, None), f"{out.describe()} after {out.elapsed_s * 1000:.0f} ms"
    assert out.text == "Payload Too Large" or out.json()["error"]["code"] == "request_too_large", out.text[:300]
    assert alive(gw.envoy)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("status", [201, 206])
def test_a_first_reply_with_another_2xx_is_answered_200(request, gateways, rig, loop, stream, status):
    """The first LLM turn answers 201 or 206 with a usable completion: the client's answer is a 200."""
    gw = gateways.get("react", loop)
    q = f"Fuzz: a first reply with HTTP {status} ({loop}, stream={stream})?"
    rig.llm.script(q, reply(status, tool_turn_bytes("react", "Oslo")), final_turn("react", "Cold in Oslo."))
    assert answer_content(chat(gw.port, q, stream=stream), stream) == "Cold in Oslo."


def test_gateways_survive_the_fuzz(gateways, rig):
    """Runs last: no gateway died, each answers an ordinary request (plain and streamed), no log problem."""
    print(f"seed {SEED}, {CASES} cases; outcomes: " +
          ", ".join(f"{what} {status}: {n}" for (what, status), n in sorted(OUTCOMES.items(), key=str)))
    assert not gateways.dead, [g.envoy.log_tail(40) for g in gateways.dead]
    for (mode, loop), g in gateways.running.items():
        assert alive(g.envoy), f"{mode}/{loop}: {g.envoy.log_tail(30)}"
        q = f"Fuzz: an ordinary question after the fuzz ({mode}, {loop})?"
        rig.llm.script(q, tool_turn(mode, "Oslo"), final_turn(mode, "Cold in Oslo."))
        for stream in (False, True):
            assert answer_content(chat(g.port, q, stream=stream), stream) == "Cold in Oslo."
        assert log_problems(g.envoy) == [], f"{mode}/{loop}"
