"""A raw HTTP client for the gateway, for what the openai SDK hides: exact status, headers, bytes."""
from __future__ import annotations

import http.client
import json
from dataclasses import dataclass

TIMEOUT_S = 10      # every request; a hang fails the test fast


@dataclass
class Reply:
    status: int
    headers: dict[str, str]     # lower-case names
    body: bytes

    def json(self):
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def request(port: int, method: str, path: str, body: bytes | dict | None = None,
            headers: dict[str, str] | None = None) -> Reply:
    """One request to 127.0.0.1:port on a fresh connection; a dict body is sent as JSON."""
    hdrs = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body, ensure_ascii=False).encode()
        hdrs.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def sse_events(text: str) -> list[str]:
    """The `data:` payloads of an SSE body, checking the framing the OpenAI SDKs need: every event a
    single `data: ` line ended by a blank line (a single newline between events makes them see
    nothing). Raises AssertionError on any other shape."""
    assert text.endswith("\n\n"), f"the SSE body does not end with a blank line: {text[-80:]!r}"
    events = text[:-2].split("\n\n")
    for e in events:
        assert e.startswith("data: ") and "\n" not in e, f"not a single 'data: ' line event: {e[:120]!r}"
    return [e[len("data: "):] for e in events]
