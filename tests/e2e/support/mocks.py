"""Recording HTTP mocks on 127.0.0.1: tool APIs and an OpenAI-compatible LLM.

Every request is recorded as the mock saw it (raw path and query, headers, body) together with the
reply, so tests can assert exactly what the filter sent, and the demo can print the agent's steps.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Union
from urllib.parse import parse_qs, urlsplit

from .react import conversation_position

# What the mock LLM reports for every completion; tests add these up to check the summed usage.
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@dataclass
class Recorded:
    """One request as a mock received it."""
    method: str
    target: str                  # raw path and query, exactly as sent
    headers: dict[str, str]      # lower-case names
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def path(self) -> str:
        """The raw (not percent-decoded) path, so encoding mistakes stay visible."""
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        """Decoded query parameters (one value each; a repeated name would be a bug we want to see)."""
        return {k: v[0] if len(v) == 1 else v
                for k, v in parse_qs(urlsplit(self.target).query, keep_blank_values=True).items()}

    def json(self):
        return json.loads(self.body)


@dataclass
class Response:
    """A canned reply; `delay_s` makes the mock wait before answering (to provoke timeouts)."""
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)   # extra response headers
    # A model that produces its text slowly: these content deltas, `gap_s` apart. A request with
    # `stream: true` gets them as SSE chunks as they are produced; any other gets `body` at the end.
    deltas: list[str] | None = None
    gap_s: float = 0.0

    @classmethod
    def json(cls, obj, status: int = 200, delay_s: float = 0.0) -> "Response":
        return cls(status, json.dumps(obj, ensure_ascii=False).encode(), delay_s=delay_s)

    @classmethod
    def slow(cls, text: str, model: str, deltas: int = 20, gap_s: float = 0.05) -> "Response":
        """A completion of `text` that takes `deltas` x `gap_s` to produce (streamed if asked)."""
        size = max(1, -(-len(text) // deltas))
        parts = [text[i:i + size] for i in range(0, len(text), size)]
        return cls(200, json.dumps(completion(text, model), ensure_ascii=False).encode(), deltas=parts, gap_s=gap_s)

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


Answer = Union[Response, Callable[[Recorded], Response]]


@dataclass
class Exchange:
    request: Recorded
    response: Response


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive, as Envoy's upstream connections expect
    # Envoy's streamed callouts meet Nagle (40 ms stalls with delayed ACKs) where real servers set TCP_NODELAY.
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, *args) -> None:
        """Quiet: the recorded exchanges are the log."""

    def _read_body(self) -> tuple[bytes, bool]:
        """(body, complete). Content-Length or chunked: Envoy sends chunked once the filter dropped
        content-length. Incomplete means the peer closed the connection mid-body (an aborted request)."""
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size)
            return body, len(body) == size
        body = b""
        while True:
            line = self.rfile.readline()
            if not line:
                return body, False
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body, True
            body += self.rfile.read(size)
            self.rfile.readline()

    def _handle(self) -> None:
        body, complete = self._read_body()
        rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if not complete:
            self.server.mock.record_aborted(rec)
            self.close_connection = True
            return
        resp = self.server.mock.answer(rec)
        if resp.delay_s:
            time.sleep(resp.delay_s)
        if resp.deltas is not None:
            if _asks_stream(rec):
                self._stream(resp)
                return
            time.sleep(resp.gap_s * len(resp.deltas))
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(resp.body)))
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(resp.body)

    def _stream(self, resp: Response) -> None:
        """The deltas as chat.completion.chunk events, each flushed when it is produced."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {"id": f"chatcmpl-mock-{time.monotonic_ns()}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": json.loads(resp.body).get("model", "mock-model")}
        chunks = [{"role": "assistant", "content": ""}] + [{"content": d} for d in resp.deltas]
        for i, delta in enumerate(chunks):
            if i > 0:
                time.sleep(resp.gap_s)
            self._chunk({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        self._chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": dict(USAGE)})
        self._chunk(None)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, obj) -> None:
        data = b"data: " + (json.dumps(obj).encode() if obj is not None else b"[DONE]") + b"\n\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128    # the default backlog of 5 drops connections under 50 concurrent conversations
    mock: "MockServer"

    def handle_error(self, request, client_address) -> None:
        """A client (Envoy) that gave up, e.g. on a timeout, is expected; no traceback on stderr."""


class MockServer:
    """A threaded HTTP server on a loopback port (0: the kernel picks one) that answers from a route
    table ({(method, raw path): Response or function}) and records every exchange."""

    def __init__(self, name: str, routes: dict[tuple[str, str], Answer] | None = None, port: int = 0):
        self.name = name
        self._default_routes = dict(routes or {})
        self.routes = dict(self._default_routes)
        self.exchanges: list[Exchange] = []
        self.aborted: list[Recorded] = []     # requests whose body never completed; not answered
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.mock = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=name, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> "MockServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def route(self, method: str, path: str, answer: Answer) -> None:
        """Answer `method path` (raw path, no query) with `answer` until the next reset()."""
        self.routes[(method.upper(), path)] = answer

    def reset(self) -> None:
        """Forget the exchanges and any route a test set, so tests do not see each other's traffic."""
        with self.lock:
            self.exchanges = []
            self.aborted = []
            self.routes = dict(self._default_routes)

    @property
    def requests(self) -> list[Recorded]:
        with self.lock:
            return [e.request for e in self.exchanges]

    def answer(self, rec: Recorded) -> Response:
        route = self.routes.get((rec.method, rec.path))
        if route is None:
            resp = self.fallback(rec)
        else:
            resp = route(rec) if callable(route) else route
        with self.lock:
            self.exchanges.append(Exchange(rec, resp))
        return resp

    def record_aborted(self, rec: Recorded) -> None:
        with self.lock:
            self.aborted.append(rec)

    def fallback(self, rec: Recorded) -> Response:
        return Response.json({"error": f"{self.name} mock: no route for {rec.method} {rec.path}"}, 404)


# A scripted LLM turn: the assistant's text, or a whole HTTP reply (to script provider failures).
Turn = Union[str, Response]


class MockLLM(MockServer):
    """OpenAI chat-completions mock.

    A conversation is recognised by its question (the `Question: ...` user message the filter writes)
    and its turn by the number of assistant messages after it, so the mock is stateless and many
    conversations can run at once. Scripted questions get their scripted turns; any other question
    goes to `model` (a function from the messages to the assistant's text), if given.
    """

    def __init__(self, model: Callable[[list[dict]], str] | None = None,
                 routes: dict[tuple[str, str], Answer] | None = None, port: int = 0):
        super().__init__("llm", routes, port)
        self.model = model
        self.scripts: dict[str, list[Turn]] = {}

    def script(self, question: str, *turns: Turn) -> None:
        """The replies to the 1st, 2nd, ... LLM request of the conversation asking `question`."""
        with self.lock:
            self.scripts[question] = list(turns)

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.scripts = {}

    def requests_for(self, question: str) -> list[Recorded]:
        """The chat requests of one conversation, in arrival order."""
        return [r for r in self.requests if _question_of(r) == question]

    def fallback(self, rec: Recorded) -> Response:
        if rec.method != "POST" or not rec.path.endswith("/chat/completions"):
            return super().fallback(rec)
        try:
            body = rec.json()
            question, turn = conversation_position(body["messages"])
        except (ValueError, KeyError, TypeError) as e:
            return _llm_error(400, f"mock LLM: not a chat request from the agent ({e})")
        with self.lock:
            script = self.scripts.get(question)
        if script is not None:
            if turn >= len(script):
                return _llm_error(400, f"mock LLM: no scripted turn {turn + 1} for {question!r}")
            reply = script[turn]
        elif self.model is not None:
            reply = self.model(body["messages"])
        else:
            return _llm_error(400, f"mock LLM: no script for the question {question!r}")
        if callable(reply):
            reply = reply(rec)   # a turn that looks at the request it answers
        if isinstance(reply, Response):
            return reply
        return Response.json(completion(reply, body.get("model") or "mock-model"))


def completion(content: str, model: str) -> dict:
    """A complete, schema-valid chat.completion, as a real provider sends it."""
    return {"id": f"chatcmpl-mock-{time.monotonic_ns()}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": dict(USAGE)}


def _llm_error(status: int, message: str) -> Response:
    return Response.json({"error": {"message": message, "type": "invalid_request_error",
                                    "param": None, "code": None}}, status)


def _asks_stream(rec: Recorded) -> bool:
    try:
        return rec.json().get("stream") is True
    except (ValueError, AttributeError):
        return False


def _question_of(rec: Recorded) -> str | None:
    try:
        return conversation_position(rec.json()["messages"])[0]
    except (ValueError, KeyError, TypeError):
        return None
