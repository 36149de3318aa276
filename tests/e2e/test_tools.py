"""Tool calls: how the filter turns the model's actions into API requests (auth, query, JSON body,
path encoding), and what it feeds back as the next observation when a call works, fails or hangs."""
import time

import pytest

from support.agent import (TRANSLATE_AUTH, TRANSLATE_KEY, TRANSLATE_TIMEOUT_MS, WEATHER_KEY,
                           answer_of, last_message)
from support.apis import TRANSLATE, WEATHER_NOW
from support.mocks import USAGE, Response
from support.react import action, blob_action, final


def test_query_api_key(gateway, mocks):
    q = "What is the weather in Oslo, in Fahrenheit?"
    mocks.llm.script(q, action("get_weather_now", {"location": "Oslo", "unit": "f"}), final("27 °F and snowing."))
    assert answer_of(gateway.chat(q)) == "27 °F and snowing."

    [call] = mocks.weather.exchanges
    tool = call.request
    assert (tool.method, tool.path) == ("GET", WEATHER_NOW)
    assert tool.query == {"location": "Oslo", "unit": "f", "key": WEATHER_KEY}
    assert tool.headers["host"] == "api.weather.example"
    assert "authorization" not in tool.headers and tool.body == b""
    assert mocks.translate.requests == []
    # A 2xx body goes back to the model verbatim.
    assert last_message(mocks.llm.requests_for(q)[1]) == f"Observation: {call.response.text()}"


def test_header_api_key_and_provider_headers(gateway, mocks):
    q = "Say good morning in French."
    mocks.llm.script(q, blob_action("translate_text", {"text": "Good morning", "target_lang": "FR"}),
                     blob_action("Final Answer", "Bonjour"))
    assert answer_of(gateway.chat(q)) == "Bonjour"

    [tool] = mocks.translate.requests
    assert tool.headers["x-api-key"] == TRANSLATE_KEY
    assert tool.headers["authorization"] == TRANSLATE_AUTH      # apiProvider.headers, not the client's key
    assert tool.headers["host"] == "api.translate.example"
    assert tool.query == {}


def test_post_json_body(gateway, mocks):
    q = 'Translate "Good morning" into Japanese.'
    mocks.llm.script(q, action("translate_text", {"text": "Good morning", "target_lang": "JA"}),
                     final("おはようございます"))
    assert answer_of(gateway.chat(q)) == "おはようございます"

    [tool] = mocks.translate.requests
    assert (tool.method, tool.target) == ("POST", TRANSLATE)
    assert tool.headers["content-type"].startswith("application/json")
    assert tool.json() == {"text": "Good morning", "target_lang": "JA"}
    assert "おはようございます" in last_message(mocks.llm.requests_for(q)[1])


def test_two_sequential_tool_calls(gateway, mocks):
    q = "What is the weather in Berlin? Answer in German."
    mocks.llm.script(q,
                     action("get_weather_now", {"location": "Berlin"}),
                     action("translate_text", {"text": "It is 12 °C and cloudy in Berlin.", "target_lang": "DE"}),
                     final("In Berlin sind es 12 °C und bewölkt."))
    reply = gateway.chat(q)
    assert answer_of(reply) == "In Berlin sind es 12 °C und bewölkt."
    assert reply.json()["usage"] == {k: 3 * v for k, v in USAGE.items()}    # summed over the 3 LLM turns

    [weather], [translate] = mocks.weather.exchanges, mocks.translate.exchanges
    assert weather.request.at < translate.request.at
    assert translate.request.json() == {"text": "It is 12 °C and cloudy in Berlin.", "target_lang": "DE"}
    first, second, third = [r.json()["messages"] for r in mocks.llm.requests_for(q)]
    assert second[-1]["content"] == f"Observation: {weather.response.text()}"
    assert third[-1]["content"] == f"Observation: {translate.response.text()}"
    # Each turn extends the previous conversation: the model's step, then its observation.
    assert third[:len(second)] == second and second[:len(first)] == first
    assert [m["role"] for m in third[len(second):]] == ["assistant", "user"]


@pytest.mark.parametrize("city", ["C++ Town", "Rio & São Paulo=1?#", "a%20b", "semi;colon,comma/slash"],
                         ids=["plus", "ampersand-non-ascii", "percent", "separators"])
def test_query_values_are_percent_encoded(gateway, mocks, city):
    q = f"What is the weather in the city called {city!r}?"
    mocks.llm.script(q, action("get_weather_now", {"location": city}), final("Done."))
    assert answer_of(gateway.chat(q)) == "Done."
    [tool] = mocks.weather.requests
    assert tool.query == {"location": city, "key": WEATHER_KEY}


@pytest.mark.parametrize("station, sent", [
    ("../x", "/v3/stations/..%2Fx"),
    ("..", "/v3/stations/%2E%2E"),
    ("a b/c?d#e", "/v3/stations/a%20b%2Fc%3Fd%23e"),
], ids=["dot-dot-slash", "dot-dot", "reserved"])
def test_path_parameter_is_one_encoded_segment(gateway, mocks, station, sent):
    q = f"Which station is {station!r}?"
    mocks.llm.script(q, action("get_station", {"station_id": station}), final("No such station."))
    assert answer_of(gateway.chat(q)) == "No such station."
    [tool] = mocks.weather.requests
    assert tool.target == f"{sent}?key={WEATHER_KEY}"


def test_tool_error_reaches_the_model(gateway, mocks):
    q = 'Translate "Good night" into German.'
    failure = Response.json({"error": "quota exceeded"}, 500)
    mocks.translate.route("POST", TRANSLATE, failure)
    mocks.llm.script(q, action("translate_text", {"text": "Good night", "target_lang": "DE"}),
                     final("The translation service is over its quota."))
    assert answer_of(gateway.chat(q)) == "The translation service is over its quota."
    assert len(mocks.translate.requests) == 1
    assert last_message(mocks.llm.requests_for(q)[1]) == \
        f"Observation: HTTP 500: 'translate_text' failed: {failure.text()}"


def test_tool_timeout_reaches_the_model(gateway, mocks):
    q = 'Translate "Slowly" into French.'
    delay_s = 1.5
    mocks.translate.route("POST", TRANSLATE, Response.json({"translation": "Lentement"}, delay_s=delay_s))
    mocks.llm.script(q, action("translate_text", {"text": "Slowly", "target_lang": "FR"}),
                     final("The translation service did not answer in time."))
    start = time.monotonic()
    assert answer_of(gateway.chat(q)) == "The translation service did not answer in time."
    elapsed = time.monotonic() - start
    assert elapsed < delay_s, f"the filter must give up after maxExecutionTime ({TRANSLATE_TIMEOUT_MS} ms)"
    assert len(mocks.translate.requests) == 1
    assert last_message(mocks.llm.requests_for(q)[1]) == "Observation: The call to 'translate_text' timed out."


def test_malformed_output_then_recovery(gateway, mocks):
    q = "Is it cold in Oslo?"
    mocks.llm.script(q,
                     "Thought: I need the weather.\nAction: get_weather_now\nAction Input: {location: Oslo}",
                     action("get_weather_now", {"location": "Oslo"}),
                     final("Yes: -3 °C."))
    assert answer_of(gateway.chat(q)) == "Yes: -3 °C."
    assert len(mocks.weather.requests) == 1, "a malformed action must not call the tool"
    second, third = mocks.llm.requests_for(q)[1:]
    assert last_message(second).startswith("Observation: Invalid format:")
    assert last_message(third).startswith("Observation: {")


@pytest.mark.parametrize("tool, args, observation", [
    ("get_forecast", {"location": "Oslo"}, "Unknown tool 'get_forecast'"),
    ("get_weather_now", {"unit": "c"}, "Invalid arguments for 'get_weather_now'"),
    ("get_weather_now", {"location": "Oslo", "unit": "k"}, "Invalid arguments for 'get_weather_now'"),
    ("translate_text", {"text": 42, "target_lang": "DE"}, "Invalid arguments for 'translate_text'"),
], ids=["unknown-tool", "missing-required", "not-in-enum", "wrong-type"])
def test_invalid_action_is_reported_not_sent(gateway, mocks, request, tool, args, observation):
    q = f"Please use a tool ({request.node.name})."
    mocks.llm.script(q, action(tool, args), final("I could not use the tool."))
    assert answer_of(gateway.chat(q)) == "I could not use the tool."
    assert mocks.tool_requests() == []
    assert last_message(mocks.llm.requests_for(q)[1]).startswith(f"Observation: {observation}")
