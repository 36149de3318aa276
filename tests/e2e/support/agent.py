"""The system under test: the mocks, the plugin configuration pointing at them, and a running gateway
(Envoy with the filter) with the two ways a client talks to it (raw HTTP and the openai SDK)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from openai import OpenAI

from . import client
from .apis import translate_routes, weather_routes
from .envoy import Envoy, bootstrap, callout_cluster
from .mocks import MockLLM, MockServer, Recorded, Response
from .react import ReactModel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CHAT_PATH = "/v1/chat/completions"
CLIENT_KEY = "sk-client-secret"            # the client's key: must never reach a tool
CLIENT_HEADERS = {"Authorization": f"Bearer {CLIENT_KEY}"}
CLIENT_MODEL = "gpt-4o-mini"               # what the client asks for: the first LLM turn keeps it
LLM_KEY = "sk-llm"
LLM_MODEL = "mock-model"                   # llm.model: later LLM turns use it
LLM_DOMAIN = "llm.local"
WEATHER_KEY = "wk-123"                     # weather API: apiKey in the query, as `key`
TRANSLATE_KEY = "tk-456"                   # translate API: apiKey in the header X-Api-Key
TRANSLATE_AUTH = "Bearer translate-token"  # translate API: apiProvider.headers.Authorization
TRANSLATE_TIMEOUT_MS = 500


def spec_text(name: str) -> str:
    with open(os.path.join(ROOT, "openapi-examples", name), encoding="utf-8") as f:
        return f.read()


@dataclass
class Mocks:
    llm: MockLLM
    weather: MockServer
    translate: MockServer

    @classmethod
    def start(cls) -> "Mocks":
        """The LLM plays ReactModel for questions no test scripted; GET /v1/models is a passthrough target."""
        models = Response.json({"object": "list", "data": [{"id": LLM_MODEL, "object": "model", "owned_by": "mock"}]})
        m = cls(MockLLM(ReactModel(), {("GET", "/v1/models"): models}),
                MockServer("weather", weather_routes()), MockServer("translate", translate_routes()))
        for s in m.all():
            s.start()
        return m

    def all(self) -> list[MockServer]:
        return [self.llm, self.weather, self.translate]

    def tool_requests(self) -> list[Recorded]:
        return [r for s in (self.weather, self.translate) for r in s.requests]


def plugin_config(mocks: Mocks, max_iterations: int = 4, language: str = "EN", mode: str = "react",
                  **extra) -> dict:
    """The Higress ai-agent configuration: the LLM and the two example APIs, each on its mock; `extra`
    top-level keys are added as they are."""
    llm = {"apiKey": LLM_KEY, "serviceName": "llm.dns", "servicePort": mocks.llm.port, "domain": LLM_DOMAIN,
           "path": CHAT_PATH, "model": LLM_MODEL, "maxIterations": max_iterations, "maxExecutionTime": 5000,
           "maxTokens": 1000, "maxRequestTime": 300000}
    weather = {"serviceName": "weather.dns", "servicePort": mocks.weather.port, "domain": "api.weather.example",
               "maxExecutionTime": 2000, "apiKey": {"in": "query", "name": "key", "value": WEATHER_KEY}}
    translate = {"serviceName": "translate.dns", "servicePort": mocks.translate.port,
                 "domain": "api.translate.example", "maxExecutionTime": TRANSLATE_TIMEOUT_MS,
                 "apiKey": {"in": "header", "name": "X-Api-Key", "value": TRANSLATE_KEY},
                 "headers": {"Authorization": TRANSLATE_AUTH}}
    return {"llm": llm,
            "apis": [{"apiProvider": weather, "api": spec_text("weather.yaml")},
                     {"apiProvider": translate, "api": spec_text("translate.yaml")}],
            "promptTemplate": {"language": language}, "mode": mode, **extra}


def envoy_config(wasm: str, mocks: Mocks, plugin: dict) -> dict:
    """Route to the LLM mock, and a callout cluster per mock, named as the plugin derives it."""
    clusters = {callout_cluster(f"{m.name}.dns", m.port): m.port for m in mocks.all()}
    return bootstrap(wasm, plugin, mocks.llm.port, clusters)


class Gateway:
    """A running Envoy with the filter, and the client side of it."""

    def __init__(self, envoy: Envoy):
        self.envoy = envoy

    @property
    def port(self) -> int:
        return self.envoy.port

    def chat(self, question_or_messages: str | list[dict], **fields) -> client.Reply:
        """POST a chat-completions request as an OpenAI client would, with the client's own key."""
        messages = question_or_messages if isinstance(question_or_messages, list) else \
            [{"role": "user", "content": question_or_messages}]
        body = {"model": CLIENT_MODEL, "messages": messages, **fields}
        return client.request(self.port, "POST", CHAT_PATH, body, CLIENT_HEADERS)

    def openai(self) -> OpenAI:
        return OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=CLIENT_KEY,
                      max_retries=0, timeout=client.TIMEOUT_S)


def answer_of(reply: client.Reply) -> str:
    """The assistant's content of a non-streamed chat.completion (fails loudly on any other body)."""
    assert reply.status == 200, f"HTTP {reply.status}: {reply.text[:300]}"
    return reply.json()["choices"][0]["message"]["content"]


def last_message(rec: Recorded) -> str:
    """The content of the last message of a recorded LLM request: the observation fed back to the model."""
    return rec.json()["messages"][-1]["content"]
