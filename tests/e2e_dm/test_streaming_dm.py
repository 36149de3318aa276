"""tests/e2e/test_streaming.py on the dynamic module. One difference: a streaming client's turns are
asked of the LLM as streams here (live streaming), with their usage."""
import json

from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL
from support.client import request
from support.faults import sse_events
from test_streaming import *  # noqa: F401,F403
from test_streaming import ANSWER, script, user


def test_raw_sse_framing(gateway, mocks):
    q = "Stream me the weather in Jinan (raw)."
    script(mocks, q)
    reply = request(gateway.port, "POST", CHAT_PATH, {"model": CLIENT_MODEL, "messages": user(q), "stream": True},
                    CLIENT_HEADERS)
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = sse_events(reply.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == ANSWER
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop"
    turns = [r.json() for r in mocks.llm.requests_for(q)]
    assert [t["stream"] for t in turns] == [True, True]
    assert all(t["stream_options"] == {"include_usage": True} for t in turns)
