"""Random inputs for the Envoy-level fuzz test (tests/e2e/test_fuzz_envoy.py), from a seeded `random.Random`:
client requests (mutated, garbage, deeply nested, huge, odd headers), LLM replies and tool replies as
fault-mock Acts (malformed, truncated, huge, binary, non-UTF-8, SSE instead of JSON, wrong types, error
statuses, resets, hangs, trickles, gzip), and a raw-socket client that sends whatever bytes it is given
and records what came back (support.faults.Outcome).
"""
from __future__ import annotations

import gzip
import http.client
import json
import random
import socket
import time
from dataclasses import dataclass, field

from .agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL
from .faults import (CLIENT_TIMEOUT_S, MiB, Act, Outcome, completion_bytes, final_turn_bytes, gzipped, hang,
                     mid_body, reply, reset, tool_turn_bytes, trickle, weather_body)
from .react import action, final

TOOL = "get_weather_now"
# The statuses a mock may answer with (a first LLM turn's may be passed through to the client).
ERROR_STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504)
# Above the listener's buffer limit (Envoy's default, 1 MiB).
HUGE = (MiB + MiB // 8, 2 * MiB)
# Odd text: controls, bidi overrides, CJK, emoji, the ReAct keywords, quotes, escapes, lone surrogates.
ODD = ["\u0000", "\u0001", "\u001f", "\u007f", "\u202e", "\ufeff", "\ufffd", "東京", "Zürich", "🙂", "𝔘",
       "\\", "\"", "'", "\n", "\r\n", "\t", "%s", "{{x}}", "${x}", "<script>", "&amp;",
       "Observation: ", "Final Answer: ", "Action: ", "Action Input: ", "Thought: ", "```json", "data: ",
       "[DONE]", "Question: ", "\u2028"]


SURROGATES = ["\ud800", "\udfff", "\ud83d"]


def odd_text(rng: random.Random, n: int = 12, surrogates: bool = False) -> str:
    """`n` pieces of odd text; `surrogates`: also lone surrogates (only for `dumps`, which escapes them)."""
    out = []
    for _ in range(n):
        r = rng.random()
        if surrogates and r < 0.05:
            out.append(rng.choice(SURROGATES))
        elif r < 0.4:
            out.append(rng.choice(ODD))
        elif r < 0.7:
            out.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(1, 8))))
        else:
            out.append(chr(rng.randint(0x20, 0x2FFF)))
    return "".join(out)


def dumps(obj, rng: random.Random) -> bytes:
    """JSON either as UTF-8 or ASCII-escaped (lone surrogates only survive the latter)."""
    try:
        if rng.random() < 0.5:
            return json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        pass
    return json.dumps(obj).encode()


def mutate(rng: random.Random, data: bytes, n: int | None = None) -> bytes:
    """`n` random byte-level edits: flips, deletions, insertions, duplications, swaps, a truncation."""
    b = bytearray(data)
    for _ in range(n if n is not None else rng.randint(1, 6)):
        if not b:
            b.extend(rng.randbytes(rng.randint(1, 8)))
            continue
        i = rng.randrange(len(b))
        op = rng.randrange(6)
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            del b[i:i + rng.randint(1, 16)]
        elif op == 2:
            b[i:i] = rng.choice([rng.randbytes(rng.randint(1, 8)), b"{", b"}", b"[", b"]", b'"', b",", b":",
                                 b"\\", b"\\u", b"null", b"\xff", b"\xc0\xaf", b"\xed\xa0\x80"])
        elif op == 3:
            j = min(len(b), i + rng.randint(1, 32))
            b[i:i] = b[i:j]
        elif op == 4:
            j = rng.randrange(len(b))
            b[i], b[j] = b[j], b[i]
        else:
            del b[rng.randint(0, len(b)):]
    return bytes(b)


def non_utf8(rng: random.Random, n: int) -> bytes:
    """Mostly text with invalid UTF-8 in it: stray continuation bytes, overlongs, surrogates, 0xFF."""
    bad = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xff",
           b"\xfe", b"\xc3", b"\xe2\x82"]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(bad) if rng.random() < 0.3 else odd_text(rng, 2).encode("utf-8", "surrogatepass")
    return bytes(out[:n])


def nested(rng: random.Random, depth: int, inner: bytes = b"1") -> bytes:
    if rng.random() < 0.5:
        return b"[" * depth + inner + b"]" * depth
    return b'{"a":' * depth + inner + b"}" * depth


def sse_of(rng: random.Random, content: str, done: bool = True) -> bytes:
    """A streamed completion (what a provider sends for stream: true), as SSE events."""
    def chunk(delta, finish=None):
        return {"id": "chatcmpl-sse", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    parts = [content[i:i + 7] for i in range(0, len(content), 7)] or [""]
    events = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in parts] + \
             [chunk({}, "stop")]
    body = b"".join(b"data: " + dumps(e, rng) + b"\n\n" for e in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


# --- the client's request -------------------------------------------------------------------------

@dataclass
class ClientRequest:
    method: bytes = b"POST"
    path: bytes = CHAT_PATH.encode()
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    chunked: bool = False
    stream: bool = False          # the client asked for SSE (for requests that are valid chat requests)
    label: str = ""

    def describe(self) -> str:
        hdrs = ", ".join(f"{k.decode('latin-1')}: {v[:40]!r}{'…' if len(v) > 40 else ''} ({len(v)} B)"
                         for k, v in self.headers)
        return (f"{self.label}: {self.method.decode('latin-1')} {self.path[:80]!r} [{hdrs}] "
                f"{'chunked ' if self.chunked else ''}body {len(self.body)} B {self.body[:160]!r}")


def std_headers() -> list[tuple[bytes, bytes]]:
    return [(b"Content-Type", b"application/json")] + [(k.encode(), v.encode()) for k, v in CLIENT_HEADERS.items()]


def chat_body(rng: random.Random, question: str, stream: bool, extras: bool = True) -> dict:
    messages = [{"role": "user", "content": question}]
    if extras and rng.random() < 0.3:
        messages.insert(0, {"role": "system", "content": odd_text(rng, 6, surrogates=True)})
    body = {"model": CLIENT_MODEL, "messages": messages}
    if stream:
        body["stream"] = True
    if extras and rng.random() < 0.3:
        body.update(rng.choice([{"temperature": 0.2}, {"max_tokens": 50}, {"user": odd_text(rng, 3)},
                                {"stream_options": {"include_usage": True}}, {"n": 1}, {"top_p": 1}]))
    return body


def weird_json_body(rng: random.Random, question: str) -> dict:
    """Valid JSON a chat-completions request should not be."""
    base = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": question}]}
    change = rng.randrange(16)
    if change == 0:
        base["messages"] = {"role": "user", "content": question}
    elif change == 1:
        base["messages"] = []
    elif change == 2:
        base["messages"][0]["role"] = rng.choice(["robot", "", None, 5, "tool", "assistant", "function"])
    elif change == 3:
        base["messages"][0]["content"] = rng.choice([None, 5, True, {"text": question}, [], [{"type": "text"}],
                                                     [{"type": "image_url", "image_url": {"url": "data:,x"}}]])
    elif change == 4:
        base["model"] = rng.choice([None, 5, "", ["x"], odd_text(rng, 4)])
    elif change == 5:
        base["stream"] = rng.choice(["yes", 1, None, {}, "true"])
    elif change == 6:
        base["n"] = rng.choice([0, 2, -1, 10 ** 20, "1"])
    elif change == 7:
        base["tools"] = rng.choice([[], "x", [{"type": "function"}], [{"type": "function", "function": {
            "name": odd_text(rng, 3), "parameters": {"type": "nope"}}}]])
    elif change == 8:
        base["tool_choice"] = rng.choice(["required", "bogus", {"type": "function", "function": {"name": "nope"}}, 5])
    elif change == 9:
        base["max_tokens"] = rng.choice([-1, 0, 10 ** 30, 1.5, "many"])
    elif change == 10:
        base["messages"] = [{"role": "user", "content": odd_text(rng, 3)} for _ in range(rng.choice([200, 5000]))]
    elif change == 11:
        base["response_format"] = rng.choice([{"type": "json_schema"}, {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}}}, "json", {"type": 5}])
    elif change == 12:
        base[odd_text(rng, 3)] = odd_text(rng, 5)
    elif change == 13:
        base["messages"].append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": TOOL, "arguments": "{not json"}}]})
        base["messages"].append({"role": "tool", "tool_call_id": "y", "content": odd_text(rng, 4)})
    elif change == 14:
        return rng.choice([[], "x", 5, None, [base]])
    else:
        base["messages"][0]["content"] = odd_text(rng, 40, surrogates=True)
    return base


def client_garbage(rng: random.Random, question: str) -> ClientRequest:
    """A request the filter must refuse, pass on or survive: its kind is in `label`."""
    kind = rng.choice(["mutated", "mutated", "garbage", "non-utf8", "nested", "huge", "weird-json", "weird-json",
                       "headers", "headers", "method-path", "encoding"])
    stream = rng.random() < 0.4
    good = dumps(chat_body(rng, question, stream), rng)
    req = ClientRequest(headers=std_headers(), stream=stream, label=f"client {kind}")
    if kind == "mutated":
        req.body = mutate(rng, good)
    elif kind == "garbage":
        req.body = rng.randbytes(rng.choice([0, 1, 7, 100, 4096]))
    elif kind == "non-utf8":
        req.body = good.replace(question.encode(), non_utf8(rng, 40), 1)
    elif kind == "nested":
        depth = rng.choice([129, 1000, 100_000])
        if rng.random() < 0.5:
            req.body = nested(rng, depth)
        else:
            req.body = (b'{"model":"m","messages":[{"role":"user","content":' + nested(rng, depth, b'"x"') + b"}]}")
    elif kind == "huge":
        size = rng.choice([900 * 1024, *HUGE])
        req.body = dumps(chat_body(rng, question + "x" * size, stream, extras=False), rng)
        req.chunked = rng.random() < 0.3
    elif kind == "weird-json":
        req.body = dumps(weird_json_body(rng, question), rng)
    elif kind == "headers":
        req.body = good
        for _ in range(rng.randint(1, 3)):
            h = rng.randrange(9)
            if h == 0:
                req.headers.append((b"X-Big", b"v" * rng.choice([8 * 1024, 70 * 1024])))
            elif h == 1:
                req.headers += [(b"X-Many-%d" % i, b"1") for i in range(rng.choice([50, 150]))]
            elif h == 2:
                req.headers.append((b"X-Bytes", bytes(rng.randrange(0x80, 0x100) for _ in range(12))))
            elif h == 3:
                req.headers.append((b"X-Ctl", b"a\x01b\x7fc"))
            elif h == 4:
                req.headers[0] = (b"Content-Type", rng.choice([b"text/plain", b"application/json; charset=latin-1",
                                                               b"multipart/form-data; boundary=x", b"",
                                                               b"application/x-www-form-urlencoded",
                                                               b"APPLICATION/JSON", b"application/json, text/html"]))
            elif h == 5:
                req.headers.append((b"Content-Type", b"text/html"))       # a second content-type
            elif h == 6:
                req.headers.append((b"Authorization", rng.choice([b"", b"Bearer", b"Basic \xff\xfe", b"x" * 5000])))
            elif h == 7:
                req.headers.append((b"Accept-Encoding", rng.choice([b"gzip", b"br, zstd", b"*"])))
            else:
                req.headers.append((b"X-Name\x01Odd", b"1"))
        req.chunked = rng.random() < 0.3
    elif kind == "method-path":
        req.body = good
        req.method = rng.choice([b"GET", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"POST"])
        req.path = rng.choice([b"/v1/chat/completions?x=1&stream=true", b"//v1/chat/completions",
                               b"/v1/chat/completions/", b"/V1/CHAT/COMPLETIONS", b"/v1/chat/completions%00",
                               b"/v1/chat/completions/../completions", b"/v1/chat/completions#frag",
                               b"/" + b"a" * 5000 + b"/chat/completions", b"/v1/models"])
    else:                                   # "encoding": a body that says it is compressed
        req.headers.append((b"Content-Encoding", rng.choice([b"gzip", b"deflate", b"br", b"identity"])))
        req.body = gzip.compress(good) if rng.random() < 0.5 else good
    return req


# --- what the mocks answer ------------------------------------------------------------------------

def completion_dict(content, tool_calls=None) -> dict:
    return json.loads(completion_bytes(content, tool_calls))


def tool_call(name: str, arguments: str, call_id: str = "call_1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def llm_act(rng: random.Random, mode: str, location: str, slow_ok: bool) -> tuple[Act, str]:
    """A random LLM reply: (Act, label)."""
    kinds = {"final": 12, "tool": 10, "bad-tool-call": 6, "react-garbage": 4, "mutated": 8, "truncated": 4,
             "binary": 3, "non-utf8": 3, "sse": 4, "huge": 2, "over-max-response": 1, "nested": 3,
             "wrong-types": 5, "error-status": 8, "reset": 2, "mid-body": 2, "mid-body-close": 1, "gzip": 2,
             "chunked": 2, "204": 1, "headers-only": 1, "content-type": 2, "2xx": 1}
    if slow_ok:
        kinds.update({"hang": 2, "trickle": 2})
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    answer = odd_text(rng, rng.randint(1, 30))
    good = final_turn_bytes(mode, answer) if rng.random() < 0.6 else tool_turn_bytes(mode, location)
    if kind == "final":
        return reply(200, final_turn_bytes(mode, answer)), kind
    if kind == "tool":
        return reply(200, tool_turn_bytes(mode, location)), kind
    if kind == "bad-tool-call":
        calls = rng.choice([
            [tool_call("no_such_tool", "{}")],
            [tool_call(TOOL, "{not json")],
            [tool_call(TOOL, "[1, 2]")],
            [tool_call(TOOL, json.dumps({"location": location, "extra": odd_text(rng, 3)}))],
            [tool_call("", "{}")],
            [tool_call(TOOL, json.dumps({"location": location}), f"c{i}") for i in range(rng.choice([2, 40]))],
            [{"type": "function", "function": {"name": TOOL}}],
            [tool_call(TOOL, json.dumps({"location": "x" * 100_000}))],
            "not a list",
        ])
        if mode == "native":
            c = completion_dict(None)
            c["choices"][0]["message"]["tool_calls"] = calls
            return reply(200, dumps(c, rng)), kind
        text = rng.choice([f"Action: {TOOL}\nAction Input: {{not json", "Action: no_such_tool\nAction Input: {}",
                           f"Thought: x\nAction: {TOOL}", "Action:\n```json\n{\"action\": 5}\n```",
                           f"Action: {TOOL}\nAction Input: " + json.dumps({"location": location}) * 3])
        return reply(200, completion_bytes(text)), kind
    if kind == "react-garbage":
        text = rng.choice([odd_text(rng, 20), "Final Answer:", "Thought:\nThought:\nFinal Answer: " + answer,
                           action(TOOL, {"location": location}) + "\n" + final(answer), "", " " * 1000,
                           "Observation: " + answer])
        return reply(200, completion_bytes(text)), kind
    if kind == "mutated":
        return reply(200, mutate(rng, good)), kind
    if kind == "truncated":
        return reply(200, good[:rng.randrange(len(good))]), kind
    if kind == "binary":
        return reply(200, rng.randbytes(rng.choice([1, 64, 4096]))), kind
    if kind == "non-utf8":
        return reply(200, good.replace(b"Thought", non_utf8(rng, 30), 1) if b"Thought" in good
                     else non_utf8(rng, 200)), kind
    if kind == "sse":
        return reply(200, sse_of(rng, answer, done=rng.random() < 0.8), "text/event-stream"), kind
    if kind == "huge":
        return reply(200, final_turn_bytes(mode, "h" * rng.randint(*HUGE))), kind
    if kind == "over-max-response":       # over maxResponseBytes (768 KiB), under the listener's limit
        return reply(200, final_turn_bytes(mode, "m" * (800 * 1024))), kind
    if kind == "nested":
        depth = rng.choice([129, 5000, 200_000])
        inner = nested(rng, depth)
        return reply(200, rng.choice([inner, good.replace(b'"content"', b'"x":' + inner + b',"content"', 1)])), kind
    if kind == "wrong-types":
        c = completion_dict(answer)
        target = rng.randrange(9)
        if target == 0:
            c["choices"] = rng.choice([{}, "x", 5, None, [None], [5]])
        elif target == 1:
            c["choices"][0]["message"] = rng.choice([None, [], "x", 5])
        elif target == 2:
            c["choices"][0]["message"]["content"] = rng.choice([5, True, {}, [{"type": "text", "text": answer}], [1]])
        elif target == 3:
            c["choices"][0]["message"]["role"] = rng.choice(["user", None, 5])
        elif target == 4:
            c["choices"][0]["finish_reason"] = rng.choice([5, "length", "content_filter", None])
        elif target == 5:
            c["usage"] = rng.choice(["x", {"prompt_tokens": -1, "completion_tokens": 10 ** 30}, {"total_tokens": "a"}])
        elif target == 6:
            c["choices"][0]["message"]["tool_calls"] = rng.choice(["x", [5], {}, [{"function": None}]])
        elif target == 7:
            c = rng.choice([[c], "x", 5, None, {"error": {"message": "in a 200"}}])
        else:
            c["choices"][0]["message"]["refusal"] = odd_text(rng, 5)
            c["choices"][0]["message"]["content"] = None
        return reply(200, dumps(c, rng)), kind
    if kind == "error-status":
        status = rng.choice(ERROR_STATUSES)
        body, ctype = rng.choice([
            (json.dumps({"error": {"message": odd_text(rng, 5), "type": "x", "param": None, "code": None}}).encode(),
             "application/json"),
            (b"<html><body>down</body></html>", "text/html"), (b"", None), (rng.randbytes(50), "application/json"),
            (non_utf8(rng, 80), "text/plain"), (b'{"error": "plain string"}', "application/json")])
        return reply(status, body, ctype), f"{kind} {status}"
    if kind == "reset":
        return reset(), kind
    if kind == "mid-body":
        return mid_body(good, cut=rng.randrange(len(good))), kind
    if kind == "mid-body-close":
        return mid_body(good, cut=rng.randrange(len(good)), rst=False), kind
    if kind == "gzip":
        return gzipped(good), kind
    if kind == "chunked":
        return reply(200, good, chunked=True), kind
    if kind == "204":
        return reply(204, b"", None), kind
    if kind == "headers-only":
        return reply(200, b""), kind
    if kind == "content-type":
        ctype, body = rng.choice([(None, good), ("text/plain", good), ("application/octet-stream", good),
                                  ("application/json; charset=utf-16", good.decode().encode("utf-16")),
                                  ("text/event-stream", good)])
        return reply(200, body, ctype), kind
    if kind == "2xx":
        return reply(rng.choice([201, 202, 206]), good), kind
    if kind == "hang":
        return hang(max_s=3), kind
    if kind == "trickle":
        return trickle(good[:200], max_s=3), kind
    raise AssertionError(kind)


def tool_act(rng: random.Random, location: str, slow_ok: bool) -> tuple[Act, str]:
    """A random reply of the weather API to the call for `location`."""
    kinds = {"normal": 8, "error-status": 6, "binary": 3, "non-utf8": 3, "huge": 2, "nested": 2, "sse": 2,
             "gzip": 2, "reset": 2, "mid-body": 2, "204": 1, "headers-only": 1, "empty-200": 1, "mutated": 3}
    if slow_ok:
        kinds.update({"hang": 2, "trickle": 2})
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    good = weather_body(location)
    if kind == "normal":
        return reply(200, good), kind
    if kind == "error-status":
        status = rng.choice(ERROR_STATUSES)
        return reply(status, rng.choice([b'{"error": "x"}', b"<html>no</html>", b"", non_utf8(rng, 40)])), \
            f"{kind} {status}"
    if kind == "binary":
        return reply(200, rng.randbytes(rng.choice([1, 100, 20_000])), "application/octet-stream"), kind
    if kind == "non-utf8":
        return reply(200, non_utf8(rng, rng.choice([20, 20_000]))), kind
    if kind == "huge":
        return reply(200, json.dumps({"data": "w" * rng.randint(*HUGE)}).encode()), kind
    if kind == "nested":
        return reply(200, nested(rng, rng.choice([129, 100_000]))), kind
    if kind == "sse":
        return reply(200, sse_of(rng, odd_text(rng, 5)), "text/event-stream"), kind
    if kind == "gzip":
        return gzipped(good), kind
    if kind == "reset":
        return reset(), kind
    if kind == "mid-body":
        return mid_body(good, cut=rng.randrange(len(good)), rst=rng.random() < 0.5), kind
    if kind == "204":
        return reply(204, b"", None), kind
    if kind == "headers-only":
        return reply(200, b""), kind
    if kind == "empty-200":
        return reply(200, b"", chunked=True), kind
    if kind == "mutated":
        return reply(200, mutate(rng, good)), kind
    if kind == "hang":
        return hang(max_s=3), kind
    if kind == "trickle":
        return trickle(good, max_s=3), kind
    raise AssertionError(kind)


# --- the raw client -------------------------------------------------------------------------------

def send(port: int, req: ClientRequest, timeout_s: float = CLIENT_TIMEOUT_S):
    """Sends `req` as it is (no validation of names or values) on a fresh connection; the Outcome."""
    start = time.monotonic()
    out = Outcome(None)
    head = [req.method + b" " + req.path + b" HTTP/1.1", b"Host: fuzz.local"]
    head += [k + b": " + v for k, v in req.headers]
    if req.chunked:
        head.append(b"Transfer-Encoding: chunked")
        body, rest = b"", req.body
        while rest:
            piece, rest = rest[:65536], rest[65536:]
            body += b"%x\r\n%s\r\n" % (len(piece), piece)
        body += b"0\r\n\r\n"
    else:
        head.append(b"Content-Length: %d" % len(req.body))
        body = req.body
    head.append(b"Connection: close")
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    try:
        try:
            sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        except OSError as e:        # Envoy may answer (413, 431) and close before the body is all sent
            out.error = f"send: {type(e).__name__}"
        resp = http.client.HTTPResponse(sock, method=req.method.decode("latin-1"))
        try:
            resp.begin()
            out.status = resp.status
            out.headers = {k.lower(): v for k, v in resp.getheaders()}
            out.error = None
            try:
                out.body = resp.read()
            except http.client.IncompleteRead as e:
                out.body, out.error = e.partial, f"IncompleteRead({len(e.partial)} bytes)"
            except OSError as e:
                out.error = type(e).__name__
        except (http.client.HTTPException, OSError) as e:
            out.error = (out.error + ", then " if out.error else "") + type(e).__name__
    finally:
        sock.close()
        out.elapsed_s = time.monotonic() - start
    return out
