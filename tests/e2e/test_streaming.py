"""stream:true from the client: the LLM is asked with stream:false (the dynamic module: stream:true, to
relay the answer live), and the answer comes back as
chat.completion.chunk SSE events that the official client and its .stream() helper both accept."""
import json
import os

from support.agent import CLIENT_HEADERS, CLIENT_MODEL, CHAT_PATH
from support.client import request, sse_events
from support.mocks import USAGE
from support.react import action, final

# The host under test streams live (tests/e2e_dm points WASM at the dynamic module).
LIVE = os.environ.get("WASM", "").endswith(".so")
# Quotes, a newline and non-ASCII: the answer must survive JSON escaping inside the SSE events.
ANSWER = 'Jinan: "sunny", 21 °C.\nEnjoy!'


def script(mocks, q):
    mocks.llm.script(q, action("get_weather_now", {"location": "Jinan"}), final(ANSWER))


def user(q):
    return [{"role": "user", "content": q}]


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
    sent = mocks.llm.requests_for(q)
    if LIVE:
        # Streamed callouts carry their length (Envoy would send them chunked, which not every LLM
        # server reads); Proxy-Wasm's forwarded first turn is the route's request and goes chunked.
        assert all(r.headers.get("content-length") == str(len(r.body)) for r in sent), [r.headers for r in sent]
        assert all("transfer-encoding" not in r.headers for r in sent)
    turns = [r.json() for r in sent]
    # The dynamic module streams the answer live: it asks for every turn as a stream, with its usage.
    assert [t["stream"] for t in turns] == [LIVE, LIVE]
    assert all(t.get("stream_options") == ({"include_usage": True} if LIVE else None) for t in turns)


def test_official_client_create_stream(gateway, mocks):
    q = "Stream me the weather in Jinan (create)."
    script(mocks, q)
    with gateway.openai() as client:
        chunks = list(client.chat.completions.create(model=CLIENT_MODEL, messages=user(q), stream=True,
                                                     stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.total_tokens == 2 * USAGE["total_tokens"]


def test_official_client_stream_helper(gateway, mocks):
    q = "Stream me the weather in Jinan (helper)."
    script(mocks, q)
    with gateway.openai() as client:
        with client.chat.completions.stream(model=CLIENT_MODEL, messages=user(q)) as stream:
            deltas = [e.delta for e in stream if e.type == "content.delta"]
            completion = stream.get_final_completion()
    assert "".join(deltas) == ANSWER
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
