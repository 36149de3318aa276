"""Call rules in CEL (`policy.rules`, issue 33) in Envoy, behind Envoy's real `jwt_authn`: RS256 tokens
minted here carry `role` and `account` claims, which `claim_to_headers` copies to `x-role` and
`x-account`; the rules read them through `policy.headers`. A viewer's non-GET call is refused with the
operator's words and not offered; a station that is not the caller's own is refused; a refund above the
limit goes to the client for approval. The examples of docs/policy.md, run."""
from __future__ import annotations

import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from support import client
from support.agent import CHAT_PATH, CLIENT_MODEL, plugin_config
from support.envoy import Envoy, bootstrap, callout_cluster
from support.mocks import Response
from support.react import action, final

ISSUER = "https://idp.test"
AUDIENCE = "api-agent"

PAYMENTS = """openapi: 3.0.0
info: {title: Payments, version: "1"}
servers: [{url: "https://api.payments.example"}]
paths:
  /refunds:
    post:
      operationId: refund
      tags: [payments]
      description: Refund an amount to an account.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [account, amount]
              properties:
                account: {type: string}
                amount: {type: integer}
      responses:
        "200": {description: done}
"""

# docs/policy.md, "Envoy with jwt_authn".
POLICY = {
    "headers": ["x-role", "x-account"],
    "rules": [
        {"name": "viewers-read-only", "when": "headers['x-role'] == 'viewer' && tool.method != 'GET'",
         "decision": "deny", "reason": "Viewers may only read."},
        {"name": "own-account-only",
         "when": "has(args.account) && args.account != headers['x-account'] || "
                 "has(args.station_id) && args.station_id != headers['x-account']",
         "decision": "deny", "reason": "You may only act on your own account."},
        {"name": "large-refunds", "when": "tool.name == 'refund' && args.amount > 100", "decision": "confirm"},
    ],
}


class Idp:
    """An RSA key, its JWKS, and RS256 tokens with a role and an account."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]})

    def token(self, role: str, account: str) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": f"u-{account}", "role": role, "account": account,
                  "iat": now, "exp": now + 3600}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})


def jwt_authn(jwks: str) -> dict:
    claims = [{"header_name": "x-role", "claim_name": "role"}, {"header_name": "x-account", "claim_name": "account"}]
    return {
        "name": "envoy.filters.http.jwt_authn",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
            "providers": {"idp": {"issuer": ISSUER, "audiences": [AUDIENCE], "local_jwks": {"inline_string": jwks},
                                  "claim_to_headers": claims}},
            "rules": [{"match": {"prefix": "/"}, "requires": {"provider_name": "idp"}}],
        },
    }


@pytest.fixture(scope="module")
def idp():
    return Idp()


@pytest.fixture(scope="module")
def gateway(mocks, idp, wasm, envoy_binary, tmp_path_factory):
    plugin = plugin_config(mocks, policy=POLICY)
    plugin["apis"][1]["api"] = PAYMENTS
    clusters = {callout_cluster(f"{m.name}.dns", m.port): m.port for m in mocks.all()}
    config = bootstrap(wasm, plugin, mocks.llm.port, clusters)
    for listener in config["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                f["typed_config"]["http_filters"].insert(0, jwt_authn(idp.jwks))
    envoy = Envoy(envoy_binary, config, str(tmp_path_factory.mktemp("envoy")), wasm_log_level="trace").start()
    yield envoy
    envoy.stop()


def ask(envoy: Envoy, idp: Idp, role: str, account: str, messages: list[dict]) -> client.Reply:
    headers = {"Authorization": f"Bearer {idp.token(role, account)}"}
    body = {"model": CLIENT_MODEL, "messages": messages}
    return client.request(envoy.port, "POST", CHAT_PATH, body, headers)


def told(mocks, q: str, turn: int) -> str:
    return json.dumps(mocks.llm.requests_for(q)[turn].json()["messages"], ensure_ascii=False)


def test_a_viewer_is_not_offered_a_non_get_call_and_is_refused_it_with_the_operators_reason(gateway, mocks, idp):
    q = "Refund 5 to acc-7 (viewer)"
    mocks.llm.script(q, action("refund", {"account": "acc-7", "amount": 5}), final("I may not."))
    reply = ask(gateway, idp, "viewer", "acc-7", [{"role": "user", "content": q}])
    assert reply.status == 200, reply.text
    assert mocks.translate.requests == [], "the call is not made"
    assert "refund" not in told(mocks, q, 0), "a tool refused by identity is not offered"
    assert "get_weather_now" in told(mocks, q, 0)
    assert "The call to 'refund' was not made: Viewers may only read." in told(mocks, q, 1)
    # An editor is offered it and the call is made.
    q = "Refund 5 to acc-7 (editor)"
    mocks.translate.route("POST", "/refunds", Response.json({"refunded": 5}))
    mocks.llm.script(q, action("refund", {"account": "acc-7", "amount": 5}), final("Refunded."))
    reply = ask(gateway, idp, "editor", "acc-7", [{"role": "user", "content": q}])
    assert reply.json()["choices"][0]["message"]["content"] == "Refunded."
    assert "refund" in told(mocks, q, 0)
    assert [r.path for r in mocks.translate.requests] == ["/refunds"]


def test_an_argument_that_is_not_the_callers_own_account_is_refused(gateway, mocks, idp):
    q = "Show station acc-9"
    mocks.llm.script(q, action("get_station", {"station_id": "acc-9"}), final("I may not."))
    reply = ask(gateway, idp, "viewer", "acc-7", [{"role": "user", "content": q}])
    assert reply.status == 200, reply.text
    assert mocks.weather.requests == []
    assert "You may only act on your own account." in told(mocks, q, 1)
    q = "Show station acc-7"
    mocks.llm.script(q, action("get_station", {"station_id": "acc-7"}), final("Here."))
    ask(gateway, idp, "viewer", "acc-7", [{"role": "user", "content": q}])
    assert [r.path for r in mocks.weather.requests] == ["/v3/stations/acc-7"]


def test_a_refund_above_the_limit_goes_to_approval(gateway, mocks, idp):
    q = "Refund 500 to acc-7"
    mocks.translate.route("POST", "/refunds", Response.json({"refunded": 500}))
    mocks.llm.script(q, action("refund", {"account": "acc-7", "amount": 500}), final("Refunded."))
    messages = [{"role": "user", "content": q}]
    first = ask(gateway, idp, "editor", "acc-7", messages).json()
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    [call] = first["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "refund"
    assert mocks.translate.requests == [], "not on the model's word"
    messages += [first["choices"][0]["message"],
                 {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"approved": True})}]
    second = ask(gateway, idp, "editor", "acc-7", messages).json()
    assert second["choices"][0]["message"]["content"] == "Refunded."
    assert [r.path for r in mocks.translate.requests] == ["/refunds"]
