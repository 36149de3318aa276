"""An MCP server that speaks ONLY the stateless revision 2026-07-28, built from its specification
(basic/versioning, basic/transports/streamable-http, server/discover, server/utilities/caching) with the
standard library: python mcp_modern.py PORT TTL_MS.

- Every POST carries its version in `_meta` (`io.modelcontextprotocol/protocolVersion`, with
  `clientCapabilities`) and mirrors it in `MCP-Protocol-Version`, with `Mcp-Method` (and `Mcp-Name` for
  `tools/call`, base64 in `=?base64?…?=` when it is not plain ASCII): a missing or different header is
  400 `HeaderMismatch` (-32020); another version is 400 `UnsupportedProtocolVersionError` (-32022).
- There is no `initialize` and no session: a 2025 client's `initialize` (no `_meta`, no headers) is
  refused with 400 and -32022 naming the versions the server speaks, as the specification asks;
  `Mcp-Session-Id` is ignored and never minted; GET and DELETE are 405.
- `server/discover` describes the server; `tools/list` carries `ttlMs` (argv) and `cacheScope`;
  unknown methods are 404 with -32601.
- POST /control {"add": NAME} adds a tool (a list that changes); GET /control tells what was received.
"""
from __future__ import annotations

import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "2026-07-28"
SERVER_INFO = {"name": "e2e-modern", "version": "1.0.0"}


def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required}}


class State:
    def __init__(self, ttl_ms: int):
        self.ttl_ms = ttl_ms
        self.lock = threading.Lock()
        self.tools = [
            tool("add", "Adds two integers.", {"a": {"type": "integer"}, "b": {"type": "integer"}}, ["a", "b"]),
            tool("forecast", "The weather forecast for a city.", {"city": {"type": "string"}}, ["city"]),
        ]
        self.seen: list[dict] = []   # method, headers that matter, per request

    def record(self, method: str, headers) -> None:
        with self.lock:
            self.seen.append({"method": method, "session": headers.get("mcp-session-id"),
                              "name": headers.get("mcp-name"), "version": headers.get("mcp-protocol-version")})


def decoded(value: str | None) -> str | None:
    if value and value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[9:-2]).decode()
    return value


def result(id_, body: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": {"resultType": "complete", "_meta": {
        "io.modelcontextprotocol/serverInfo": SERVER_INFO}, **body}}


def error(id_, code: int, message: str, data=None) -> dict:
    e = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": e}


class Handler(BaseHTTPRequestHandler):
    state: State

    def log_message(self, *_):   # quiet
        pass

    def send(self, status: int, message: dict | None, sse: bool = False) -> None:
        body = b"" if message is None else json.dumps(message).encode()
        if sse:
            body = b"event: message\ndata: " + body + b"\n\n"
        self.send_response(status)
        self.send_header("content-type", "text/event-stream" if sse else "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/control":
            with self.state.lock:
                return self.send(200, {"seen": list(self.state.seen)})
        self.send(405, None)

    def do_DELETE(self):
        self.send(405, None)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            msg = json.loads(raw)
        except ValueError:
            return self.send(400, error(None, -32700, "Parse error"))
        if self.path == "/control":
            with self.state.lock:
                self.state.tools.append(tool(msg["add"], "Added later.", {}, []))
            return self.send(200, {})
        if self.path != "/mcp" or not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return self.send(400, error(None, -32600, "Invalid Request"))
        self.state.record(msg["method"], self.headers)
        self.serve(msg, msg.get("id"), msg.get("params") or {})

    def serve(self, msg: dict, id_, params: dict):
        method = msg["method"]
        meta = params.get("_meta") or {}
        requested = meta.get("io.modelcontextprotocol/protocolVersion")
        if method == "initialize" or requested is None:
            asked = params.get("protocolVersion") if method == "initialize" else requested
            return self.send(400, error(id_, -32022, f"This server speaks only MCP {VERSION} (no initialize)",
                                        {"supported": [VERSION], "requested": asked}))
        header_version = self.headers.get("mcp-protocol-version")
        if header_version != requested or self.headers.get("mcp-method") != method:
            return self.send(400, error(id_, -32020, "Header mismatch: MCP-Protocol-Version or Mcp-Method"))
        if method in ("tools/call", "resources/read", "prompts/get"):
            if decoded(self.headers.get("mcp-name")) != (params.get("name") or params.get("uri")):
                return self.send(400, error(id_, -32020, "Header mismatch: Mcp-Name"))
        if requested != VERSION:
            return self.send(400, error(id_, -32022, "Unsupported protocol version",
                                        {"supported": [VERSION], "requested": requested}))
        if not isinstance(meta.get("io.modelcontextprotocol/clientCapabilities"), dict):
            return self.send(400, error(id_, -32602, "clientCapabilities are required in _meta"))
        if id_ is None:
            return self.send(202, None)
        if method == "server/discover":
            return self.send(200, result(id_, {"supportedVersions": [VERSION], "capabilities": {"tools": {}},
                                               "ttlMs": self.state.ttl_ms, "cacheScope": "public"}))
        if method == "tools/list":
            with self.state.lock:
                tools = list(self.state.tools)
            return self.send(200, result(id_, {"tools": tools, "ttlMs": self.state.ttl_ms, "cacheScope": "public"}))
        if method == "tools/call":
            return self.call(id_, params.get("name"), params.get("arguments") or {})
        self.send(404, error(id_, -32601, f"Method not found: {method}"))

    def call(self, id_, name, args: dict):
        if name == "add":
            text = str(int(args["a"]) + int(args["b"]))
        elif name == "forecast":
            # An SSE-framed answer, a notification before it, as a streaming server sends it.
            text = f"{args['city']}: clear skies (stateless)"
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
            body = (b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n" + b"event: message\ndata: "
                    + json.dumps(result(id_, {"content": [{"type": "text", "text": text}]})).encode() + b"\n\n")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        elif any(t["name"] == name for t in self.state.tools):
            text = f"{name} ran"
        else:
            return self.send(200, error(id_, -32602, f"Unknown tool: {name}"))
        self.send(200, result(id_, {"content": [{"type": "text", "text": text}], "isError": False}))


def main() -> None:
    port, ttl_ms = int(sys.argv[1]), int(sys.argv[2])
    Handler.state = State(ttl_ms)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
