"""`loop: request` on the dynamic module: the same checks as on Proxy-Wasm (tests/e2e/test_request_loop.py),
but a streaming client's answer is live here: a failure after the loop went on to tools is an error
event in the stream that already started (the official client raises APIError with the message)."""
import openai
import pytest

from support.mocks import Response
from support.react import action
from test_request_loop import *  # noqa: F401,F403
from test_request_loop import ask


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_late_failure_is_a_real_status_the_client_raises_on(gw, mocks, stream):
    q = f"Request loop: the LLM fails after a tool call (stream={stream})?"
    overloaded = Response.json({"error": {"message": "overloaded"}}, 503)
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}), overloaded)
    with pytest.raises(openai.InternalServerError if not stream else openai.APIError) as raised:
        ask(gw, q, stream=stream)
    assert "the LLM answered HTTP 503" in raised.value.message
    if not stream:
        assert raised.value.status_code == 502 and raised.value.body["code"] == "llm_error"
    # Turn 2 was sent 1 + llm.maxRetries (2) times.
    assert len(mocks.llm.requests_for(q)) == 4
