"""MCP servers for the e2e tests: start one on a free port, read its `tools/list` as an operator would
pin it, and a gateway whose plugin has it as `apis[].mcpServer` next to the example OpenAPI APIs."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

from .agent import Gateway, plugin_config
from .envoy import Envoy, bootstrap, callout_cluster
from .mocks import Response

ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], port: int, env: dict | None = None, timeout_s: float = 120) -> subprocess.Popen:
    """Runs a server and waits until it accepts connections (npx may first download it)."""
    # A session of its own: npx runs the server as a child, which must stop with it.
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                stop(proc)
                raise RuntimeError(f"the MCP server {argv} did not start")
            time.sleep(0.2)


class Running:
    """A server process on a fixed port that can be restarted (it then forgets every session)."""

    def __init__(self, argv: list[str], port: int, env: dict | None = None):
        self.argv, self.port, self.env = argv, port, env
        self.proc = start(argv, port, env)

    def restart(self) -> None:
        self.stop()
        self.proc = start(self.argv, self.port, self.env)

    def stop(self) -> None:
        stop(self.proc)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:       # the port is free once the whole group is gone
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                time.sleep(0.1)
            except OSError:
                return


def stop(proc: subprocess.Popen) -> None:
    """Stops the server and its children (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def rpc(port: int, body: dict, session: str | None = None) -> tuple[dict, str | None]:
    """One JSON-RPC POST to the server, directly: the message of its (SSE-framed) reply, the session."""
    headers = {"content-type": "application/json", "accept": ACCEPT}
    if session:
        headers["mcp-session-id"] = session
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
        sid = r.headers.get("mcp-session-id")
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    if data:
        return json.loads(data[-1]), sid
    return (json.loads(text) if text.strip() else {}), sid


def listed_tools(port: int) -> dict:
    """The server's `tools/list` result, as an operator would pin it in `toolsList`."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}
    _, sid = rpc(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    rpc(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    message, _ = rpc(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
    return message["result"]


def gateway(mocks, wasm: str, envoy_binary: str, port: int, workdir: str, **server) -> tuple[Gateway, Envoy]:
    """Envoy with the example plugin (native mode) plus the MCP server on `port` as mcp.dns."""
    plugin = plugin_config(mocks, mode="native")
    entry = {"serviceName": "mcp.dns", "servicePort": port, "domain": f"127.0.0.1:{port}", "path": "/mcp",
             "maxExecutionTime": 5000, "toolsList": listed_tools(port), **server}
    plugin["apis"].append({"mcpServer": entry})
    clusters = {callout_cluster(f"{m.name}.dns", m.port): m.port for m in mocks.all()}
    clusters[callout_cluster("mcp.dns", port)] = port
    envoy = Envoy(envoy_binary, bootstrap(wasm, plugin, mocks.llm.port, clusters), workdir).start()
    return Gateway(envoy), envoy


def tool_calls(*calls: tuple[str, str, dict]) -> Response:
    """An LLM turn (native) calling tools: (id, name, arguments)."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]}
    return Response.json({"id": "chatcmpl-mcp", "object": "chat.completion", "created": 1, "model": "m",
                          "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def tool_results(mocks, q: str, n: int = 2) -> dict[str, str]:
    """The `tool` messages of LLM request `n` of the conversation: call id → content."""
    messages = mocks.llm.requests_for(q)[n - 1].json()["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
