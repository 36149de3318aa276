"""Fault-capable HTTP/1.1 mocks on raw sockets, a client that records what it got even when the
stream breaks, and gateways with short timeouts for the fault and crash tests.

`http.server` always answers a whole, well-formed reply. The faults here need the socket itself:
an RST before any byte (SO_LINGER 0), headers then part of the body then an RST, a reply that never
comes, a body trickled slower than the caller's timeout, a gzip body, a 204, a headers-only 200, an
empty chunked 200, a body over Envoy's 1 MiB buffer limit. Every server listens on 127.0.0.1, reads
one request per connection, records it (complete requests in `requests`, ones whose body never came in
`aborted`), answers with `Connection: close`, and stops with `stop()`.
"""
from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Union
from urllib.parse import parse_qs, urlsplit

from .agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, Gateway, Mocks, plugin_config
from .apis import weather_api
from .envoy import ROUTE_CLUSTER, Envoy, bootstrap, callout_cluster
from .mocks import Recorded, completion
from .react import QUESTION, action, conversation_position, final

MiB = 1024 * 1024
# What the test client waits at most for one reply (a hang fails fast instead of stalling the run).
CLIENT_TIMEOUT_S = 15
# Lines in an Envoy log that mean the module trapped or Envoy itself broke.
LOG_PROBLEMS = re.compile(r"panicked|RuntimeError|Caught Segmentation fault|envoy bug", re.I)


# --- what a mock does with a request -------------------------------------------------------------

@dataclass(frozen=True)
class Act:
    """One way of answering (or not answering) a request.

    kind: `reply` (status, headers, body; chunked or with content-length), `reset` (RST before any
    byte), `mid_body` / `mid_body_close` (headers with the full content-length, `cut` body bytes,
    then an RST / a FIN), `hang`
    (read the request, never answer; close when the peer does or after `max_s`), `trickle` (headers
    at once, then `step` body bytes every `interval_s`)."""
    kind: str
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    chunked: bool = False
    cut: int = 0
    interval_s: float = 0.1
    step: int = 8
    max_s: float = 10.0


def reply(status: int = 200, body: bytes = b"", content_type: str | None = "application/json",
          headers: tuple[tuple[str, str], ...] = (), chunked: bool = False) -> Act:
    hdrs = ((("Content-Type", content_type),) if content_type else ()) + tuple(headers)
    return Act("reply", status, body, hdrs, chunked)


def json_reply(obj, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Act:
    return reply(status, json.dumps(obj, ensure_ascii=False).encode(), headers=headers)


def reset() -> Act:
    return Act("reset")


def mid_body(body: bytes, status: int = 200, cut: int | None = None, rst: bool = True) -> Act:
    """Headers with the full content-length, `cut` bytes of the body, then an RST (or a FIN)."""
    return Act("mid_body" if rst else "mid_body_close", status, body, cut=len(body) // 2 if cut is None else cut)


def hang(max_s: float = 10.0) -> Act:
    return Act("hang", max_s=max_s)


def trickle(body: bytes, interval_s: float = 0.1, step: int = 8, max_s: float = 10.0) -> Act:
    return Act("trickle", 200, body, interval_s=interval_s, step=step, max_s=max_s)


def gzipped(body: bytes) -> Act:
    return Act("reply", 200, gzip.compress(body), (("Content-Type", "application/json"),
                                                   ("Content-Encoding", "gzip")))


_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


# --- the server ----------------------------------------------------------------------------------

@dataclass
class Exchange:
    request: Recorded
    act: Act
    ended_at: float | None = None     # when the act ended (for a hang or a trickle: when the peer gave up)


class FaultServer:
    """A threaded raw-socket HTTP/1.1 server; `decide(request) -> Act` picks what happens."""

    def __init__(self, name: str, decide: Callable[[Recorded], Act]):
        self.name = name
        self.decide = decide
        self.lock = threading.Lock()
        self.exchanges: list[Exchange] = []
        self.aborted: list[Recorded] = []
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self._thread = threading.Thread(target=self._accept_loop, name=f"fault-{name}", daemon=True)

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1]

    def start(self) -> "FaultServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self._conns)
        for c in conns:
            _close(c, rst=True)
        self._thread.join(timeout=2)

    def reset(self) -> None:
        with self.lock:
            self.exchanges = []
            self.aborted = []

    @property
    def requests(self) -> list[Recorded]:
        with self.lock:
            return [e.request for e in self.exchanges]

    def _accept_loop(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(CLIENT_TIMEOUT_S)
            rec = _read_request(conn)
            if rec is None:
                return
            rec, complete = rec
            if not complete:
                with self.lock:
                    self.aborted.append(rec)
                return
            act = self.decide(rec)
            exchange = Exchange(rec, act)
            with self.lock:
                self.exchanges.append(exchange)
            try:
                self._act(conn, act)
            finally:
                exchange.ended_at = time.monotonic()
        except OSError:
            pass            # the peer (Envoy) gave up: expected for timeouts and resets
        finally:
            with self.lock:
                self._conns.discard(conn)
            _close(conn, rst=False)

    def _act(self, conn: socket.socket, act: Act) -> None:
        if act.kind == "reset":
            _close(conn, rst=True)
            return
        if act.kind == "hang":
            _wait_for_close(conn, act.max_s, self._stop)
            return
        chunked = act.chunked and act.kind == "reply"
        head = [f"HTTP/1.1 {act.status} {_REASONS.get(act.status, 'Status')}"]
        head += [f"{k}: {v}" for k, v in act.headers]
        if chunked:
            head.append("Transfer-Encoding: chunked")
        elif act.status != 204 and not 100 <= act.status < 200:
            head.append(f"Content-Length: {len(act.body)}")
        head.append("Connection: close")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if act.kind == "reply":
            if chunked:
                if act.body:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(act.body), act.body))
                conn.sendall(b"0\r\n\r\n")
            elif act.status != 204:
                conn.sendall(act.body)
            conn.shutdown(socket.SHUT_WR)
            _wait_for_close(conn, 2.0, self._stop)
        elif act.kind in ("mid_body", "mid_body_close"):
            conn.sendall(act.body[:act.cut])
            time.sleep(0.05)
            _close(conn, rst=act.kind == "mid_body")
        elif act.kind == "trickle":
            deadline = time.monotonic() + act.max_s
            for i in range(0, len(act.body), act.step):
                if self._stop.is_set() or time.monotonic() > deadline:
                    break
                conn.sendall(act.body[i:i + act.step])
                time.sleep(act.interval_s)
        else:
            raise ValueError(f"unknown act {act.kind}")


def _close(conn: socket.socket, rst: bool) -> None:
    try:
        if rst:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    except OSError:
        pass


def _wait_for_close(conn: socket.socket, max_s: float, stop: threading.Event) -> None:
    """Until the peer closes (or resets) the connection, `max_s` passes or the server stops."""
    deadline = time.monotonic() + max_s
    conn.settimeout(0.1)
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            if not conn.recv(65536):
                return
        except socket.timeout:
            continue
        except OSError:
            return


def _read_request(conn: socket.socket) -> tuple[Recorded, bool] | None:
    """(request, complete), or None if the peer closed before sending headers."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body, complete = b"", True
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body, complete = _read_chunked(conn, rest)
        else:
            size = int(headers.get("content-length") or 0)
            body = rest
            while len(body) < size:
                data = conn.recv(65536)
                if not data:
                    complete = False
                    break
                body += data
    except OSError:
        complete = False
    return Recorded(method, target, headers, body), complete


def _read_chunked(conn: socket.socket, buf: bytes) -> tuple[bytes, bool]:
    body = b""

    def need(n_or_marker) -> bool:
        nonlocal buf
        while (len(buf) < n_or_marker) if isinstance(n_or_marker, int) else (n_or_marker not in buf):
            data = conn.recv(65536)
            if not data:
                return False
            buf += data
        return True

    while True:
        if not need(b"\r\n"):
            return body, False
        line, buf = buf.split(b"\r\n", 1)
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            need(b"\r\n")       # the (empty) trailer section
            return body, True
        if not need(size + 2):
            return body, False
        body += buf[:size]
        buf = buf[size + 2:]


# --- the LLM and tool mocks ----------------------------------------------------------------------

TurnAct = Union[Act, Callable[[Recorded], Act]]


def position(messages: list[dict], questions: set[str]) -> tuple[str, int]:
    """(question, turn) as `react.conversation_position` reads it, except that a user message holding
    one of `questions` wins over later user messages, and that native mode's reminder after an empty
    reply counts as a turn (the empty assistant message itself is not kept in the history)."""
    for i, m in enumerate(messages):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str) and content.removeprefix(QUESTION) in questions:
            return content.removeprefix(QUESTION), sum(1 for later in messages[i + 1:] if _is_turn(later))
    return conversation_position(messages)


# Native mode keeps no assistant message for an empty reply; it asks again with this user message.
EMPTY_REPLY_REMINDER = "Your reply was empty."


def _is_turn(m: dict) -> bool:
    """A model turn in the history: an assistant message, or the filter's reminder after an empty one."""
    content = m.get("content")
    return m.get("role") == "assistant" or (
        m.get("role") == "user" and isinstance(content, str) and content.startswith(EMPTY_REPLY_REMINDER))


class FaultLLM(FaultServer):
    """Chat completions scripted per conversation: the question (ReAct `Question:` message, or the last
    user message in native mode) and the turn (assistant messages after it) pick the Act, so a retried
    turn gets the same Act again and many conversations can run at once."""

    def __init__(self):
        super().__init__("llm", self._decide)
        self.scripts: dict[str, list[TurnAct]] = {}

    def script(self, question: str, *turns: TurnAct) -> None:
        with self.lock:
            self.scripts[question] = list(turns)

    def _decide(self, rec: Recorded) -> Act:
        with self.lock:
            known = set(self.scripts)
        try:
            question, turn = position(rec.json()["messages"], known)
        except (ValueError, KeyError, TypeError) as e:
            return json_reply({"error": {"message": f"fault LLM: not a chat request ({e})"}}, 400)
        with self.lock:
            script = self.scripts.get(question)
        if script is None or turn >= len(script):
            return json_reply({"error": {"message": f"fault LLM: no turn {turn + 1} for {question!r}"}}, 400)
        act = script[turn]
        return act(rec) if callable(act) else act

    def requests_for(self, question: str, turn: int | None = None) -> list[Recorded]:
        out = []
        for r in self.requests:
            try:
                q, t = position(r.json()["messages"], {question})
            except (ValueError, KeyError, TypeError):
                continue
            if q == question and (turn is None or t == turn):
                out.append(r)
        return out


class FaultTools(FaultServer):
    """The weather API: the Act for a call is picked by its `location` argument (`faults[location]`),
    so every test cell has its own; other locations get the normal weather reply."""

    def __init__(self, name: str = "weather"):
        super().__init__(name, self._decide)
        self.faults: dict[str, Act] = {}

    def _decide(self, rec: Recorded) -> Act:
        location = (parse_qs(urlsplit(rec.target).query).get("location") or [""])[0]
        with self.lock:
            act = self.faults.get(location)
        if act is not None:
            return act
        normal = weather_api(rec)
        return reply(normal.status, normal.body)

    def for_location(self, location: str) -> list[Recorded]:
        return [r for r in self.requests
                if (parse_qs(urlsplit(r.target).query).get("location") or [""])[0] == location]


def weather_body(location: str) -> bytes:
    """What the weather API answers for `location` (the body a fault cuts, trickles or compresses)."""
    return weather_api(Recorded("GET", f"/v3/weather/now?location={location}&unit=c", {}, b"")).body


# --- model turns in either mode -------------------------------------------------------------------

TOOL = "get_weather_now"


def completion_bytes(content: str | None, tool_calls: list | None = None, model: str = "mock-model") -> bytes:
    c = completion(content or "", model)
    msg = c["choices"][0]["message"]
    msg["content"] = content
    if tool_calls:
        msg["tool_calls"] = tool_calls
        c["choices"][0]["finish_reason"] = "tool_calls"
    return json.dumps(c, ensure_ascii=False).encode()


def tool_turn_bytes(mode: str, location: str, call_id: str = "call_1") -> bytes:
    """A model turn that calls get_weather_now for `location`."""
    if mode == "native":
        return completion_bytes(None, [{"id": call_id, "type": "function",
                                        "function": {"name": TOOL, "arguments": json.dumps({"location": location})}}])
    return completion_bytes(action(TOOL, {"location": location}))


def final_turn_bytes(mode: str, answer: str) -> bytes:
    """A model turn whose answer (the client's content) is exactly `answer`."""
    return completion_bytes(answer if mode == "native" else final(answer))


def tool_turn(mode: str, location: str) -> Act:
    return reply(200, tool_turn_bytes(mode, location))


def final_turn(mode: str, answer: str) -> Act:
    return reply(200, final_turn_bytes(mode, answer))


def observation_of(mode: str, rec: Recorded) -> str:
    """The tool result the filter fed back in an LLM request: the `tool` message (native) or the
    `Observation: ` user message (ReAct)."""
    last = rec.json()["messages"][-1]
    if mode == "native":
        assert last["role"] == "tool", last
        return last["content"]
    assert last["role"] == "user" and last["content"].startswith("Observation: "), last
    return last["content"][len("Observation: "):]


# --- gateways ------------------------------------------------------------------------------------

@dataclass
class Rig:
    """The fault mocks as `agent.Mocks` (so plugin_config names their clusters), started."""
    llm: FaultLLM
    weather: FaultTools
    translate: FaultTools

    @classmethod
    def start(cls) -> "Rig":
        r = cls(FaultLLM(), FaultTools("weather"), FaultTools("translate"))
        for s in r.all():
            s.start()
        return r

    def all(self) -> list[FaultServer]:
        return [self.llm, self.weather, self.translate]

    def stop(self) -> None:
        for s in self.all():
            s.stop()

    def reset(self) -> None:
        for s in self.all():
            s.reset()
        self.llm.scripts = {}
        self.weather.faults = {}

    def as_mocks(self) -> Mocks:
        return Mocks(self.llm, self.weather, self.translate)   # duck-typed: name, port


def gateway_config(wasm: str, rig: Rig, *, mode: str = "react", loop: str = "response",
                   llm: dict | None = None, weather: dict | None = None, top: dict | None = None,
                   buffer_limit: int | None = None, route_timeout: str | None = None) -> dict:
    """The standard plugin configuration on the fault mocks, with `llm` / weather apiProvider /
    top-level keys merged in, in a bootstrap whose listener has Envoy's default buffer limit (1 MiB)
    unless `buffer_limit` is given, and whose route has `route_timeout` if given."""
    plugin = plugin_config(rig.as_mocks(), mode=mode)
    plugin["loop"] = loop
    plugin["llm"].update(llm or {})
    plugin["apis"][0]["apiProvider"].update(weather or {})
    plugin.update(top or {})
    clusters = {callout_cluster(f"{s.name}.dns", s.port): s.port for s in rig.all()}
    config = bootstrap(wasm, plugin, rig.llm.port, clusters)
    listener = config["static_resources"]["listeners"][0]
    if buffer_limit is None:
        listener.pop("per_connection_buffer_limit_bytes", None)
    else:
        listener["per_connection_buffer_limit_bytes"] = buffer_limit
    if route_timeout is not None:
        hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
        for vh in hcm["route_config"]["virtual_hosts"]:
            for route in vh["routes"]:
                if route["route"].get("cluster") == ROUTE_CLUSTER:
                    route["route"]["timeout"] = route_timeout
    return config


def start_gateway(envoy_binary: str, config: dict, workdir: str) -> Gateway:
    os.makedirs(workdir, exist_ok=True)
    return Gateway(Envoy(envoy_binary, config, workdir).start())


class GatewayPool:
    """Gateways on one Rig, one per configuration (a key), started on first use. One that died is
    replaced (and kept in `dead`), so that a crash fails its own test and the others still run.
    Their logs are attached to failing tests' reports, as conftest does for its own gateways."""

    def __init__(self, envoy_binary: str, wasm: str, rig: Rig, tmp_path_factory):
        self.envoy_binary, self.wasm, self.rig, self.tmp = envoy_binary, wasm, rig, tmp_path_factory
        self.running: dict[tuple, Gateway] = {}
        self.dead: list[Gateway] = []

    def get(self, key: tuple, **config) -> Gateway:
        """The gateway for `key`; started with gateway_config(wasm, rig, **config) when needed."""
        g = self.running.get(key)
        if g is not None and not alive(g.envoy):
            self.dead.append(g)
            g.envoy.stop()
            g = None
        if g is None:
            name = "-".join(str(k) for k in key)
            g = start_gateway(self.envoy_binary, gateway_config(self.wasm, self.rig, **config),
                              str(self.tmp.mktemp(f"envoy-{name}")))
            self.running[key] = g
            _show_log_on_failure(g.envoy, True)
        return g

    def stop(self) -> None:
        for g in list(self.running.values()) + self.dead:
            _show_log_on_failure(g.envoy, False)
            g.envoy.stop()


def _show_log_on_failure(envoy: Envoy, show: bool) -> None:
    try:
        import conftest
        if show:
            conftest._running.append(envoy)
        else:
            conftest._running.remove(envoy)
    except (ImportError, AttributeError, ValueError):
        pass


# --- the client side -----------------------------------------------------------------------------

@dataclass
class Outcome:
    """What a client got: the status and headers if they came, the body bytes that came, and how the
    exchange ended if not cleanly (the exception's class and text)."""
    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    error: str | None = None
    elapsed_s: float = 0.0

    def json(self):
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def describe(self) -> str:
        ct = self.headers.get("content-type", "-")
        tail = f", then {self.error}" if self.error else ""
        return f"HTTP {self.status} ({ct}), {len(self.body)} body bytes{tail}"


def chat(port: int, question: str, stream: bool = False, timeout_s: float = CLIENT_TIMEOUT_S) -> Outcome:
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": question}]}
    if stream:
        body["stream"] = True
    return post(port, CHAT_PATH, json.dumps(body).encode(), timeout_s)


def post(port: int, path: str, body: bytes, timeout_s: float = CLIENT_TIMEOUT_S) -> Outcome:
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    out = Outcome(None)
    try:
        conn.request("POST", path, body=body, headers={**CLIENT_HEADERS, "Content-Type": "application/json"})
        resp = conn.getresponse()
        out.status = resp.status
        out.headers = {k.lower(): v for k, v in resp.getheaders()}
        try:
            out.body = resp.read()
        except http.client.IncompleteRead as e:
            out.body, out.error = e.partial, f"IncompleteRead({len(e.partial)} bytes)"
        except OSError as e:
            out.error = type(e).__name__
    except (http.client.HTTPException, OSError) as e:
        out.error = type(e).__name__
    finally:
        conn.close()
        out.elapsed_s = time.monotonic() - start
    return out


def sse_events(text: str) -> list[str]:
    """The `data:` payloads of a well-framed SSE body (each event one `data: ` line and a blank line)."""
    assert text.endswith("\n\n"), f"the SSE body does not end with a blank line: {text[-80:]!r}"
    events = text[:-2].split("\n\n")
    for e in events:
        assert e.startswith("data: ") and "\n" not in e, f"not a single 'data: ' line event: {e[:120]!r}"
    return [e[len("data: "):] for e in events]


def answer_content(out: Outcome, stream: bool) -> str:
    """The answer of a successful reply, JSON or SSE (checked for its framing)."""
    assert out.status == 200 and out.error is None, out.describe() + " " + out.text[:300]
    if not stream:
        assert out.headers["content-type"].startswith("application/json"), out.headers
        return out.json()["choices"][0]["message"]["content"]
    assert out.headers["content-type"].startswith("text/event-stream"), out.headers
    events = sse_events(out.text)
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("error" not in c for c in chunks), chunks
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


def error_of(out: Outcome, stream: bool, late: bool, prelude: bool = False) -> dict:
    """The OpenAI error object of a failed reply: a late one (status 200 already out: JSON with
    `choices: []`, or an SSE error event then [DONE]) or one with its real status (always JSON).
    `prelude`: in a late SSE error, chunks without answer content (the role chunk a live stream sends
    first) may come before the error event."""
    assert out.error is None, out.describe()
    assert "content-encoding" not in out.headers, f"an error body sent as {out.headers['content-encoding']}"
    if late and stream:
        assert out.headers["content-type"].startswith("text/event-stream"), out.headers
        events = sse_events(out.text)
        assert len(events) >= 2 and events[-1] == "[DONE]", events
        if prelude:
            for lead in map(json.loads, events[:-2]):
                assert "error" not in lead and not any((c.get("delta") or {}).get("content")
                                                       for c in lead.get("choices") or []), lead
        else:
            assert len(events) == 2, events
        err = json.loads(events[-2])
    else:
        assert out.headers["content-type"].startswith("application/json"), out.headers
        err = out.json()
        if late:
            assert err.get("choices") == [], "a late error in a 200 body carries choices: []"
    assert set(err["error"]) == {"message", "type", "param", "code"}, err
    return err["error"]


# --- Envoy's health ------------------------------------------------------------------------------

def alive(envoy: Envoy) -> bool:
    """The process runs and its admin API answers /ready with LIVE."""
    return envoy.proc is not None and envoy.proc.poll() is None and envoy._admin_get("/ready") == "LIVE"


def log_problems(envoy: Envoy) -> list[str]:
    """Lines of the Envoy log that mean a trap, a panic, a segfault or an Envoy bug."""
    try:
        with open(envoy.log_path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip() for line in f if LOG_PROBLEMS.search(line)]
    except OSError:
        return []


def log_excerpt(envoy: Envoy, pattern: str, context: int = 3, limit: int = 40) -> str:
    """The log lines matching `pattern` (a regex), with `context` lines around each."""
    try:
        with open(envoy.log_path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return "(no log)"
    rx = re.compile(pattern)
    keep: set[int] = set()
    for i, line in enumerate(lines):
        if rx.search(line):
            keep.update(range(max(0, i - context), min(len(lines), i + context + 1)))
    return "".join(lines[i] for i in sorted(keep)[:limit])
