"""The ReAct text a model writes, and a deterministic stand-in for a ReAct model.

`action`, `blob_action` and `final` write the two syntaxes the filter parses, so tests script model
turns without spelling the format out. `ReactModel` plays a whole conversation by itself: it picks a
tool from the question and answers from the observation; the demo and the concurrency test use it.
"""
from __future__ import annotations

import json
import re

QUESTION = "Question: "
OBSERVATION = "Observation: "


def action(tool: str, args: dict, thought: str = "I should call a tool.") -> str:
    """A classic ReAct step: Thought / Action / Action Input."""
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {_dumps(args)}"


def blob_action(tool: str, args, thought: str = "I should call a tool.") -> str:
    """The JSON-blob syntax of the filter's own prompt."""
    blob = _dumps({"action": tool, "action_input": args})
    return f"Thought: {thought}\nAction:\n```json\n{blob}\n```"


def final(answer: str, thought: str = "I know what to respond.") -> str:
    return f"Thought: {thought}\nFinal Answer: {answer}"


def conversation_position(messages: list[dict]) -> tuple[str, int]:
    """(question, turn): the text of the `Question:` user message (ReAct), else of the last user message
    (native), and how many assistant replies follow it (0 for the first LLM request)."""
    for i, m in enumerate(messages):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str) and content.startswith(QUESTION):
            return _without_context(content[len(QUESTION):]), _assistants_after(messages, i)
    # Native mode sends the client's messages as they are: the question is the last user message.
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and isinstance(messages[i].get("content"), str):
            return _without_context(messages[i]["content"]), _assistants_after(messages, i)
    raise ValueError("no 'Question:' or user message")


def _without_context(question: str) -> str:
    """The question without the filter's `context` block, which it appends to the current message."""
    return question.split("\n\n[Context]\n")[0]


def _assistants_after(messages: list[dict], i: int) -> int:
    return sum(1 for later in messages[i + 1:] if later.get("role") == "assistant")


_WEATHER_WORDS = re.compile(r"\b(weather|temperature|forecast|warm|cold|hot|rain\w*|sunny)\b", re.I)
_CITY = re.compile(r"\bin ([A-Z][\w'-]*(?: [A-Z][\w'-]*)*)")
_QUOTED = re.compile(r"[\"“„]([^\"“”„]+)[\"”]")
_LANGUAGES = {"german": "DE", "english": "EN", "french": "FR", "chinese": "ZH", "japanese": "JA"}


class ReactModel:
    """A tiny rule-based ReAct model for the example APIs (openapi-examples/).

    Weather questions ("... weather in Jinan?") call get_weather_now for the city named after "in";
    "translate" questions call translate_text with the quoted text and the named language. Once an
    observation arrived, the final answer is written from its content, so a wrong observation shows
    up in the answer.
    """

    def __call__(self, messages: list[dict]) -> str:
        question, turn = conversation_position(messages)
        if turn == 0:
            return self.first_step(question)
        observation = str(messages[-1].get("content", ""))
        return final(answer_from(observation.removeprefix(OBSERVATION)))

    @staticmethod
    def first_step(question: str) -> str:
        if "translat" in question.lower():
            text = _QUOTED.search(question)
            lang = next((code for word, code in _LANGUAGES.items() if word in question.lower()), "EN")
            if text:
                return action("translate_text", {"text": text.group(1), "target_lang": lang},
                              f"I need to translate the text into {lang}.")
            return final('Please put the text to translate in quotes, e.g. Translate "Hello" into German.')
        if _WEATHER_WORDS.search(question):
            city = _CITY.search(question)
            if city:
                return action("get_weather_now", {"location": city.group(1), "unit": "c"},
                              f"I need the current weather in {city.group(1)}.")
            return final("Which city do you mean?")
        return final("I can tell you the current weather in a city or translate a text.")


def answer_from(observation: str) -> str:
    """A one-sentence answer from a tool's JSON result, or an apology quoting a failed call."""
    try:
        data, _ = json.JSONDecoder().raw_decode(observation.strip())
    except ValueError:
        data = None
    if isinstance(data, dict) and {"location", "temperature"} <= data.keys():
        unit = str(data.get("unit", "c")).upper()
        return f"It is {data['temperature']} °{unit} and {data.get('condition', 'fair')} in {data['location']}."
    if isinstance(data, dict) and "translation" in data:
        return f"The translation is: {data['translation']}"
    return f"Sorry, the tool did not help: {observation.strip()[:200]}"


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)
