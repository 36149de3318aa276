"""promptTemplate.language CH: the Chinese prompt, and non-ASCII text intact on every hop (question,
tool query, observation, answer as JSON and as SSE)."""
import pytest

from support.agent import CLIENT_MODEL, answer_of, last_message
from support.apis import WEATHER_NOW
from support.mocks import Response
from support.react import action, final

CITY = "济南"
OBSERVATION = Response.json({"location": CITY, "temperature": 21, "unit": "c", "condition": "晴"})
ANSWER = "济南现在晴，气温 21 °C。"


@pytest.fixture
def chinese(gateways, mocks):
    mocks.weather.route("GET", WEATHER_NOW, OBSERVATION)
    return gateways(language="CH")


def script(mocks, q):
    mocks.llm.script(q, action("get_weather_now", {"location": CITY}, "我需要查询济南的天气。"),
                     final(ANSWER, "我知道该回应什么。"))


def test_chinese_question_and_answer(chinese, mocks):
    q = "济南现在的天气怎么样？"
    script(mocks, q)
    assert answer_of(chinese.chat(q)) == ANSWER

    first, second = mocks.llm.requests_for(q)
    system, question = first.json()["messages"]
    assert "你可以使用以下工具" in system["content"] and "get_weather_now" in system["content"]
    assert question["content"] == f"Question: {q}"
    [tool] = mocks.weather.requests
    assert tool.query["location"] == CITY
    assert "location=%E6%B5%8E%E5%8D%97" in tool.target
    assert last_message(second) == f"Observation: {OBSERVATION.text()}"


def test_chinese_answer_streamed(chinese, mocks):
    q = "请用流式回答：济南现在的天气怎么样？"
    script(mocks, q)
    with chinese.openai() as client:
        chunks = client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}],
                                                stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER
