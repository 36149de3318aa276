"""Reasoning models on the dynamic module: tests/e2e/test_reasoning.py as it is, and what only this
host does: a parameter refused on the forwarded first turn (`loop: response`) is stepped down too,
because the module holds the reply's headers until it has read the body."""
from __future__ import annotations

from support.agent import LLM_MODEL, answer_of
from support.mocks import Response, completion
from test_reasoning import *  # noqa: F401,F403


def test_a_refused_parameter_on_the_forwarded_first_turn_is_stepped_down(gateways, mocks):
    gw = gateways()   # loop: response
    q = "Reasoning: refuses stop on the first turn"

    def strict(rec):
        if "stop" in rec.json():
            return Response.json({"error": {"message": "Unsupported parameter: 'stop' is not supported with this "
                                            "model.", "type": "invalid_request_error", "param": "stop",
                                            "code": "unsupported_parameter"}}, 400)
        return Response.json(completion("Final Answer: fine", LLM_MODEL))
    mocks.llm.script(q, strict)
    assert answer_of(gw.chat(q)) == "fine"
    later = "Reasoning: refuses stop, learned"
    mocks.llm.script(later, strict)
    assert answer_of(gw.chat(later)) == "fine"
    assert len(mocks.llm.requests_for(later)) == 1, "the instance remembers: no refused first try"
