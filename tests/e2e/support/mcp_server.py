"""A small MCP server (the official Python SDK, Streamable HTTP, stateful sessions) for the e2e tests:
python mcp_server.py PORT."""
from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("e2e-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def forecast(city: str, days: int = 1) -> str:
    """The weather forecast for a city."""
    return f"{city}: sunny for {days} day(s), 21 °C"


@server.tool()
def explode(why: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {why}")


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
