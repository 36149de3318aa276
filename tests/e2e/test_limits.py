"""llm.maxIterations: after that many actions the model is told to answer; if it still calls a tool,
the client gets what the agent has, with finish_reason "length"."""
import pytest

from support.agent import answer_of, last_message
from support.react import action, final

MAX_ITERATIONS = 2
LIMIT_NOTICE = "You have reached the maximum number of tool calls"


@pytest.fixture
def limited(gateways):
    return gateways(max_iterations=MAX_ITERATIONS)


def test_model_that_keeps_calling_tools_is_stopped(limited, mocks):
    q = "Compare the weather in Oslo, Bergen and Jinan."
    mocks.llm.script(q, *(action("get_weather_now", {"location": city}) for city in ("Oslo", "Bergen", "Jinan")))
    reply = limited.chat(q)

    assert reply.status == 200
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"].startswith(
        f"I could not finish: the limit of {MAX_ITERATIONS} tool calls was reached before a final answer.")
    assert [r.query["location"] for r in mocks.weather.requests] == ["Oslo", "Bergen"]
    llm_requests = mocks.llm.requests_for(q)
    assert len(llm_requests) == MAX_ITERATIONS + 1
    assert LIMIT_NOTICE not in last_message(llm_requests[1])
    assert LIMIT_NOTICE in last_message(llm_requests[2])


def test_final_answer_after_the_limit_notice(limited, mocks):
    q = "Compare the weather in Oslo and Bergen."
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo"}),
                     action("get_weather_now", {"location": "Bergen"}), final("Bergen is warmer."))
    reply = limited.chat(q)
    assert answer_of(reply) == "Bergen is warmer."
    assert reply.json()["choices"][0]["finish_reason"] == "stop"
    assert len(mocks.weather.requests) == MAX_ITERATIONS
