"""The reference MCP server, `@modelcontextprotocol/server-everything` (npm, run with npx in its
Streamable HTTP mode), as a tool source in Envoy: its own `tools/list` pinned, its text, structured,
image and resource-link results read as observations. Skipped without npx."""
from __future__ import annotations

import os
import shutil

import pytest

from support import mcp_servers as mcp
from support.agent import answer_of
from support.mcp_servers import tool_calls, tool_results

PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"


@pytest.fixture(scope="module")
def running(mocks, wasm, envoy_binary, tmp_path_factory):
    npx = shutil.which("npx")
    if not npx:
        pytest.skip("npx is not installed")
    port = mcp.free_port()
    server = mcp.Running([npx, "-y", PACKAGE, "streamableHttp"], port, env={**os.environ, "PORT": str(port)})
    gw, envoy = mcp.gateway(mocks, wasm, envoy_binary, port, str(tmp_path_factory.mktemp("envoy")),
                            tools=["echo", "get-sum", "get-tiny-image", "get-structured-content",
                                   "get-resource-links"])
    yield gw, server
    envoy.stop()
    server.stop()


@pytest.fixture
def gateway(running):
    return running[0]


def test_text_results(gateway, mocks):
    q = "Everything: echo and sum"
    mocks.llm.script(q, tool_calls(("c1", "echo", {"message": "hi"}), ("c2", "get-sum", {"a": 2, "b": 3})), "ok")
    assert answer_of(gateway.chat(q)) == "ok"
    assert tool_results(mocks, q) == {"c1": "Echo: hi", "c2": "The sum of 2 and 3 is 5."}
    names = {t["function"]["name"] for t in mocks.llm.requests_for(q)[0].json()["tools"]}
    assert {"echo", "get-sum"} <= names and "get-env" not in names, "only the allowed tools"


def test_images_are_described_and_links_named(gateway, mocks):
    q = "Everything: image and links"
    mocks.llm.script(q, tool_calls(("c1", "get-tiny-image", {}), ("c2", "get-resource-links", {"count": 1})), "ok")
    assert answer_of(gateway.chat(q)) == "ok"
    results = tool_results(mocks, q)
    image = results["c1"]
    assert image.startswith("Here's the image you requested:\n[image of type image/png, about ") and "iVBOR" not in image
    assert "[resource link: demo://resource/dynamic/blob/1 Blob Resource 1]" in results["c2"]


def test_structured_content_and_schema_checks(gateway, mocks):
    q = "Everything: weather"
    mocks.llm.script(q, tool_calls(("c1", "get-structured-content", {"location": "Chicago"}),
                                   ("c2", "get-structured-content", {"location": "Atlantis"})), "ok")
    assert answer_of(gateway.chat(q)) == "ok"
    results = tool_results(mocks, q)
    assert '"temperature"' in results["c1"]
    assert results["c2"].startswith("Invalid arguments for 'get-structured-content'"), results["c2"]


def test_a_restarted_server_gets_a_new_session(running, mocks):
    """Requests share the worker's session; a server that lost it (restarted) gets a new one."""
    gateway, server = running
    for round in ("before", "after"):
        if round == "after":
            server.restart()
        q = f"MCP restart: {round}"
        mocks.llm.script(q, tool_calls(("c1", NAME, ARGS)), "ok")
        assert answer_of(gateway.chat(q)) == "ok"
        assert tool_results(mocks, q)["c1"] == EXPECTED
    assert "is gone (HTTP" in gateway.envoy.log_tail(400), "the lost session was noticed and reopened"


NAME, ARGS, EXPECTED = "echo", {"message": "again"}, "Echo: again"
