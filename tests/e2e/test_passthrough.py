"""Requests on the filter's route that the agent does not take (issue 30, item 2): another content type,
an empty body, another path, another method. With `passthrough: forward` (the default) they reach the
route's upstream as the agent's first turn would: without the client's identity headers (`forwardHeaders`)
and with `llm.apiKey` in place of the client's credentials. With `passthrough: refuse` they get an
OpenAI-shaped 4xx and nothing reaches the upstream."""
from __future__ import annotations

import json

import pytest

from support import client
from support.agent import CLIENT_KEY, LLM_KEY, envoy_config, plugin_config
from support.envoy import Envoy

IDENTITY = {"x-user": "alice", "x-tenant-secret": "tenant-s3cret-value"}

# (label, method, path, content type or None, body, refusal status)
NOT_TAKEN = [
    ("text-plain", "POST", "/v1/chat/completions", "text/plain", b"what is the weather", 415),
    ("form", "POST", "/v1/chat/completions", "application/x-www-form-urlencoded", b"q=weather", 415),
    ("empty-body", "POST", "/v1/chat/completions", "application/json", b"", 400),
    ("trailing-slash", "POST", "/v1/chat/completions/", "application/json", b'{"model": "m", "messages": []}', 404),
    ("embeddings", "POST", "/v1/embeddings", "application/json", b'{"model": "e", "input": "hi"}', 404),
    ("responses-text", "POST", "/v1/responses", "text/plain", b"hello", 415),
    ("models", "GET", "/v1/models", None, None, 405),
]


@pytest.fixture(scope="module")
def gateways(mocks, wasm, envoy_binary, tmp_path_factory):
    """One Envoy per `passthrough` setting, both with the weather API forwarding the identity headers."""
    envoys = {}
    for mode in ("forward", "refuse"):
        plugin = plugin_config(mocks, passthrough=mode)
        plugin["apis"][0]["apiProvider"]["forwardHeaders"] = list(IDENTITY)
        workdir = str(tmp_path_factory.mktemp(f"pass-{mode}"))
        envoys[mode] = Envoy(envoy_binary, envoy_config(wasm, mocks, plugin), workdir).start()
    yield envoys
    for envoy in envoys.values():
        envoy.stop()


def send(port: int, label: str, method: str, path: str, ctype: str | None, body: bytes | None) -> client.Reply:
    headers = {"Authorization": f"Bearer {CLIENT_KEY}", "x-q": label, **IDENTITY}
    if ctype:
        headers["Content-Type"] = ctype
    return client.request(port, method, path, body, headers)


@pytest.mark.parametrize("label,method,path,ctype,body,_status", NOT_TAKEN, ids=[c[0] for c in NOT_TAKEN])
def test_a_request_passed_on_carries_no_identity_and_the_provider_key(gateways, mocks, label, method, path,
                                                                      ctype, body, _status):
    reply = send(gateways["forward"].port, label, method, path, ctype, body)
    seen = [r for r in mocks.llm.requests if r.headers.get("x-q") == label]
    assert len(seen) == 1, f"HTTP {reply.status}: {reply.text[:200]}"
    headers = seen[0].headers
    assert headers.get("authorization") == f"Bearer {LLM_KEY}", headers
    for name in IDENTITY:
        assert name not in headers, f"{name} reached the LLM's upstream: {headers}"
    assert CLIENT_KEY not in json.dumps(headers)
    assert seen[0].path == path and seen[0].body == (body or b"")


@pytest.mark.parametrize("label,method,path,ctype,body,status", NOT_TAKEN, ids=[c[0] for c in NOT_TAKEN])
def test_a_request_refused_gets_a_clear_4xx_and_reaches_nothing(gateways, mocks, label, method, path, ctype, body,
                                                                status):
    reply = send(gateways["refuse"].port, label, method, path, ctype, body)
    assert reply.status == status, reply.text[:200]
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "not_an_agent_request", error
    assert "agent only" in error["message"]
    assert not [r for r in mocks.llm.requests if r.headers.get("x-q") == label]


def test_the_agent_still_answers_when_passthrough_is_refused(gateways):
    body = {"model": "m", "messages": [{"role": "user", "content": "What is the weather in Jinan?"}]}
    reply = client.request(gateways["refuse"].port, "POST", "/v1/chat/completions", body,
                           {"Authorization": f"Bearer {CLIENT_KEY}"})
    assert reply.status == 200, reply.text[:300]
    assert reply.json()["choices"][0]["message"]["content"]
