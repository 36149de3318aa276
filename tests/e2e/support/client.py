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


def named_events(text: str) -> list[dict]:
    """The events of a named-event SSE body (Responses, Messages): each block an `event:` line then a
    `data:` line, the name checked against the data's `type`; comment lines (`:`) skipped."""
    out = []
    for block in text.strip("\n").split("\n\n"):
        if block.startswith(":"):
            continue
        name, data = block.split("\n", 1)
        event = json.loads(data[len("data: "):])
        assert name == f"event: {event['type']}", block[:200]
        out.append(event)
    return out


def timed_stream(port: int, path: str, body: dict, headers: dict[str, str],
                 is_text_delta) -> tuple[float | None, float, list[dict]]:
    """A streamed request read line by line as it arrives: (seconds to the first event that
    `is_text_delta`, seconds to the end of the stream, every event's data)."""
    import time
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {**headers, "content-type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
    first, events = None, []
    while line := resp.readline():
        if not line.startswith(b"data: "):
            continue
        event = json.loads(line[6:])
        if first is None and is_text_delta(event):
            first = time.perf_counter() - t0
        events.append(event)
    conn.close()
    return first, time.perf_counter() - t0, events
