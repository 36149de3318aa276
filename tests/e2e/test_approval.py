"""yaa's approval gate in Envoy with the official client: a `policy.confirm` tool comes back as a tool
call (finish_reason tool_calls), and runs only when the client sends the conversation back with
{"approved": true} for that call id."""
from __future__ import annotations

import json

import pytest

from support.agent import CLIENT_MODEL, Gateway, envoy_config, plugin_config
from support.envoy import Envoy
from support.react import final


@pytest.fixture(scope="module")
def gated(mocks, envoy_binary, wasm, tmp_path_factory):
    plugin = plugin_config(mocks)
    plugin["apis"][1]["policy"] = {"confirm": ["translate_text"]}
    envoy = Envoy(envoy_binary, envoy_config(wasm, mocks, plugin), str(tmp_path_factory.mktemp("envoy"))).start()
    yield Gateway(envoy)
    envoy.stop()


@pytest.mark.parametrize("answer, runs", [({"approved": True}, True), ({"approved": False}, False)],
                         ids=["approved", "refused"])
def test_the_client_approves_the_call(gated, mocks, answer, runs):
    q = f"Approval: translate 'good morning' to German ({'yes' if runs else 'no'})?"
    blob = {"action": "translate_text", "action_input": {"text": "good morning", "target_lang": "DE"}}
    mocks.llm.script(q, f"Thought: translate it.\nAction:\n```json\n{json.dumps(blob)}\n```", final("Guten Morgen."))
    messages = [{"role": "user", "content": q}]
    with gated.openai() as client:
        first = client.chat.completions.create(model=CLIENT_MODEL, messages=messages)
        assert first.choices[0].finish_reason == "tool_calls"
        [call] = first.choices[0].message.tool_calls
        assert call.function.name == "translate_text"
        assert mocks.translate.requests == [], "nothing runs on the model's word"
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps(answer)}]
        second = client.chat.completions.create(model=CLIENT_MODEL, messages=messages)
    assert second.choices[0].message.content == "Guten Morgen."
    assert len(mocks.translate.requests) == (1 if runs else 0)
    seen = json.dumps(mocks.llm.requests[-1].json()["messages"], ensure_ascii=False)
    assert ("Guten Morgen" in seen) == runs and ("did not approve" in seen) != runs
