"""The conversation with the LLM: what the first (route) and later (callout) LLM requests carry, how
the client's history is folded in, and the chat.completion the client gets back."""
import time

from support.agent import (CHAT_PATH, CLIENT_KEY, CLIENT_MODEL, LLM_DOMAIN, LLM_KEY, LLM_MODEL, answer_of)
from support.apis import weather_for
from support.mocks import USAGE


def weather_answer(city: str) -> str:
    """What ReactModel answers from the fake weather API for `city`."""
    celsius, condition = weather_for(city)
    return f"It is {celsius} °C and {condition} in {city}."


def test_llm_requests_and_final_completion(gateway, mocks):
    q = "What is the weather in Jinan?"
    reply = gateway.chat(q, temperature=0.2, stop="END")

    first, second = mocks.llm.requests_for(q)
    body = first.json()
    assert (first.method, first.path) == ("POST", CHAT_PATH)
    # llm.apiKey replaces the consumer's key on the first turn too: it never reaches the provider.
    assert first.headers["authorization"] == f"Bearer {LLM_KEY}" and CLIENT_KEY not in str(first.headers)
    assert body["model"] == CLIENT_MODEL and body["temperature"] == 0.2     # client fields are kept
    assert body["stream"] is False and body["stop"] == ["END", "Observation:", "\nQuestion:"]
    system, question = body["messages"]
    assert system["role"] == "system"
    for tool in ("get_weather_now", "get_station", "translate_text"):
        assert tool in system["content"]
    assert '"enum":["c","f"]' in system["content"]                           # the tools' JSON Schemas
    assert question == {"role": "user", "content": f"Question: {q}"}

    later = second.json()
    assert second.headers["authorization"] == f"Bearer {LLM_KEY}"
    assert second.headers["host"] == LLM_DOMAIN and second.path == CHAT_PATH
    assert later["model"] == LLM_MODEL and later["stream"] is False and "Observation:" in later["stop"]
    assert CLIENT_KEY not in str(second.headers)

    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    completion = reply.json()
    assert completion["id"].startswith("chatcmpl-") and completion["object"] == "chat.completion"
    assert abs(completion["created"] - time.time()) < 60
    assert completion["model"] == LLM_MODEL        # the model that wrote the answer
    assert completion["choices"] == [{"index": 0, "message": {"role": "assistant", "content": weather_answer("Jinan"),
                                                              "refusal": None},
                                      "logprobs": None, "finish_reason": "stop"}]
    assert completion["usage"] == {k: 2 * v for k, v in USAGE.items()}


def test_multi_turn_history_reaches_the_llm(gateway, mocks):
    history = [{"role": "system", "content": "Answer in one short sentence."},
               {"role": "user", "content": "Hi, I am planning a trip."},
               {"role": "assistant", "content": "Great! Where are you going?"}]
    q = "What is the weather in Paris?"
    assert answer_of(gateway.chat(history + [{"role": "user", "content": q}])) == weather_answer("Paris")

    messages = mocks.llm.requests_for(q)[0].json()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"].startswith("Answer in one short sentence.\n\n")
    assert "get_weather_now" in messages[0]["content"]
    assert messages[1:3] == history[1:]
    assert messages[3]["content"] == f"Question: {q}"


def test_official_client_gets_the_answer(gateway, mocks):
    q = 'Translate "Good morning" into German.'
    with gateway.openai() as client:
        completion = client.chat.completions.create(model=CLIENT_MODEL, messages=[{"role": "user", "content": q}])
    assert completion.choices[0].message.content == "The translation is: Guten Morgen"
    assert completion.choices[0].finish_reason == "stop"
    [tool] = mocks.translate.requests
    assert tool.json() == {"text": "Good morning", "target_lang": "DE"}
