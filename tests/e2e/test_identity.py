"""Tools called on behalf of the client (issue 21), with Envoy's real `jwt_authn` in front of the plugin:
RS256 tokens minted here, the JWKS inline, `forward: true` (the plugin reads the client's token) and
`claim_to_headers` (`sub` as `x-user`). The weather API forwards `x-user`; the translate API gets a token
exchanged for the client's (RFC 8693) from a mock token service that checks the form and the Basic
credentials. The filter logs at trace level, and no credential may appear in its log."""
from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import threading
import time
from urllib.parse import parse_qs, quote

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from support import client
from support.agent import CHAT_PATH, CLIENT_MODEL, last_message, plugin_config
from support.envoy import Envoy, bootstrap, callout_cluster
from support.mocks import MockServer, Recorded, Response
from support.react import action, final

ISSUER = "https://idp.test"
AUDIENCE = "api-agent"
STS_CLIENT = "api-agent"
STS_SECRET = "sts-s3cret/+key"
STS_PATH = "/oauth2/token"
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"
REFUSED_USER = "mallory"


class Idp:
    """An RSA key, its JWKS, and RS256 tokens for a user."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]})

    def token(self, user: str) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": user, "iat": now, "exp": now + 3600}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})


class TokenService(MockServer):
    """RFC 8693: checks the form and the client's Basic credentials; issues `xtok-<sub>` (the subject
    token's `sub`, read without verification: jwt_authn verified it) or refuses `mallory`."""

    def __init__(self):
        super().__init__("sts", {("POST", STS_PATH): self.exchange})
        self.count = 0
        self.count_lock = threading.Lock()

    def exchange(self, rec: Recorded) -> Response:
        with self.count_lock:
            self.count += 1
        basic = base64.b64encode(f"{STS_CLIENT}:{quote(STS_SECRET, safe='')}".encode()).decode()
        if rec.headers.get("authorization") != f"Basic {basic}":
            return Response.json({"error": "invalid_client"}, 401)
        form = {k: v[0] for k, v in parse_qs(rec.body.decode()).items()}
        if rec.headers.get("content-type") != "application/x-www-form-urlencoded" or \
                form.get("grant_type") != GRANT or form.get("subject_token_type") != ACCESS or \
                form.get("audience") != "translate-api" or form.get("scope") != "translate":
            return Response.json({"error": "invalid_request"}, 400)
        sub = jwt.decode(form["subject_token"], options={"verify_signature": False})["sub"]
        if sub == REFUSED_USER:
            return Response.json({"error": "invalid_grant", "error_description": "no"}, 400)
        return Response.json({"access_token": f"xtok-{sub}", "issued_token_type": ACCESS,
                              "token_type": "Bearer", "expires_in": 600})


def jwt_authn(jwks: str, header: str = "x-user") -> dict:
    return {
        "name": "envoy.filters.http.jwt_authn",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
            "providers": {"idp": {
                "issuer": ISSUER, "audiences": [AUDIENCE], "local_jwks": {"inline_string": jwks},
                "forward": True, "claim_to_headers": [{"header_name": header, "claim_name": "sub"}],
            }},
            "rules": [{"match": {"prefix": "/"}, "requires": {"provider_name": "idp"}}],
        },
    }


def identity_plugin(mocks, sts: TokenService) -> dict:
    plugin = plugin_config(mocks)
    weather = plugin["apis"][0]["apiProvider"]
    weather["forwardHeaders"] = ["x-user"]
    translate = plugin["apis"][1]["apiProvider"]
    del translate["apiKey"], translate["headers"]
    translate["tokenExchange"] = {
        "serviceName": "sts.dns", "servicePort": sts.port, "path": STS_PATH, "audience": "translate-api",
        "scope": "translate", "clientId": STS_CLIENT, "clientSecret": STS_SECRET}
    return plugin


def with_jwt(config: dict, jwks: str, header: str = "x-user") -> dict:
    """jwt_authn first in every listener's filter chain."""
    for listener in config["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                f["typed_config"]["http_filters"].insert(0, jwt_authn(jwks, header))
    return config


@pytest.fixture(scope="module")
def idp():
    return Idp()


@pytest.fixture(scope="module")
def sts():
    s = TokenService().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def gateway(mocks, sts, idp, wasm, envoy_binary, tmp_path_factory):
    clusters = {callout_cluster(f"{m.name}.dns", m.port): m.port for m in [*mocks.all(), sts]}
    config = with_jwt(bootstrap(wasm, identity_plugin(mocks, sts), mocks.llm.port, clusters), idp.jwks)
    envoy = Envoy(envoy_binary, config, str(tmp_path_factory.mktemp("envoy")), wasm_log_level="trace").start()
    yield envoy
    envoy.stop()


@pytest.fixture(autouse=True)
def fresh_sts(sts):
    sts.reset()
    sts.count = 0


def ask(envoy: Envoy, idp: Idp, user: str | None, question: str) -> client.Reply:
    headers = {"Authorization": f"Bearer {idp.token(user)}"} if user else {}
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": question}]}
    return client.request(envoy.port, "POST", CHAT_PATH, body, headers)


def script_both(mocks, q: str, city: str, text: str) -> None:
    mocks.llm.script(q, action("get_weather_now", {"location": city}),
                     action("translate_text", {"text": text, "target_lang": "DE"}), final("Done."))


def test_the_right_token_reaches_the_right_api_only(gateway, mocks, sts, idp):
    q = "Identity: weather in Oslo for alice, then translate?"
    script_both(mocks, q, "Oslo", "cold")
    reply = ask(gateway, idp, "alice", q)
    assert reply.status == 200, reply.text
    weather, translate = mocks.weather.requests[0], mocks.translate.requests[0]
    assert weather.headers.get("x-user") == "alice"
    assert "authorization" not in weather.headers
    assert translate.headers.get("authorization") == "Bearer xtok-alice"
    assert "x-user" not in translate.headers
    for rec in mocks.llm.requests_for(q):
        seen = json.dumps(rec.headers) + rec.body.decode()
        assert "xtok-" not in seen and "alice" not in json.dumps(rec.headers), "identity reached the LLM"
        assert idp.token("alice").split(".")[0] not in json.dumps(rec.headers)


def test_the_cache_saves_the_second_exchange(gateway, mocks, sts, idp):
    """Token service calls per 100 requests of one user: one per worker at most (the cache is the
    plugin instance's, one per worker), against 100 without it."""
    # The gateway is the module's: earlier tests' exchanges are in its counters, or on their way.
    before = settled_exchange_counts(gateway)
    for i in range(100):
        q = f"Identity: cache {i}?"
        mocks.llm.script(q, action("translate_text", {"text": f"t{i}", "target_lang": "DE"}), final("Ok."))
        assert ask(gateway, idp, "carol", q).status == 200
    workers = os.cpu_count() or 1
    print(f"token service calls for 100 requests of one user: {sts.count} (Envoy workers: {workers})")
    assert 1 <= sts.count <= workers
    assert all(r.headers["authorization"] == "Bearer xtok-carol" for r in mocks.translate.requests)
    # api_agent_token_exchanges: each request either exchanged or used the kept token.
    exchanges = exchange_counts(gateway, at_least=100, since=before)
    assert exchanges == {"exchanged": sts.count, "cached": 100 - sts.count}, exchanges


def exchange_counts(envoy: Envoy, at_least: int = 0, since: dict[str, int] | None = None) -> dict[str, int]:
    """api_agent_token_exchanges by outcome, summed over APIs, from /stats (either host's naming), less
    `since` (counts read before, outcomes that did not move left out); read again for up to 3 s until
    they add up to `at_least` (the dynamic module's counters reach Envoy up to 0.1 s late:
    src/dm/tally.rs)."""
    since = since or {}
    deadline = time.monotonic() + 3
    while True:
        now = exchange_counts_now(envoy)
        counts = {k: n - since.get(k, 0) for k, n in now.items() if n != since.get(k, 0)}
        if sum(counts.values()) >= at_least or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


def settled_exchange_counts(envoy: Envoy) -> dict[str, int]:
    """The counts once two reads 0.15 s apart agree (the dynamic module's batches reach Envoy up to
    0.1 s late), for up to 3 s."""
    deadline = time.monotonic() + 3
    counts = exchange_counts_now(envoy)
    while time.monotonic() < deadline:
        time.sleep(0.15)
        again = exchange_counts_now(envoy)
        if again == counts:
            break
        counts = again
    return counts


def exchange_counts_now(envoy: Envoy) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in (envoy._admin_get("/stats") or "").splitlines():
        name, _, value = line.partition(": ")
        if "token_exchanges" in name and value.strip().isdigit():
            outcome = name.rsplit(".", 1)[-1]
            counts[outcome] = counts.get(outcome, 0) + int(value)
    return counts


def test_two_users_never_get_each_others_token(gateway, mocks, sts, idp):
    users = [f"user{n:02d}" for n in range(20)]
    jobs = [(users[i % 20], i) for i in range(200)]
    for user, i in jobs:
        script_both(mocks, f"Identity: {user} #{i}?", f"City-{user}-{i}", f"text-{user}-{i}")

    def one(job):
        user, i = job
        return ask(gateway, idp, user, f"Identity: {user} #{i}?").status

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(pool.map(one, jobs))
    assert statuses == [200] * 200
    assert len(mocks.weather.requests) == 200 and len(mocks.translate.requests) == 200
    for rec in mocks.weather.requests:
        user = rec.query["location"].split("-")[1]
        assert rec.headers["x-user"] == user
    for rec in mocks.translate.requests:
        user = rec.json()["text"].split("-")[1]
        assert rec.headers["authorization"] == f"Bearer xtok-{user}"
    assert sts.count <= 200


def test_a_refused_exchange_is_told_to_the_model(gateway, mocks, sts, idp):
    q = "Identity: translate for mallory?"
    mocks.llm.script(q, action("translate_text", {"text": "hi", "target_lang": "DE"}), final("Not allowed."))
    reply = ask(gateway, idp, REFUSED_USER, q)
    assert reply.status == 200, reply.text
    assert sts.count == 1
    assert mocks.translate.requests == [], "the API is not called"
    assert "not authorized to use 'translate_text'" in last_message(mocks.llm.requests_for(q)[-1])


def test_jwt_authn_refuses_a_client_without_a_token(gateway, mocks, idp):
    reply = ask(gateway, idp, None, "Identity: anonymous?")
    assert reply.status == 401
    assert mocks.translate.requests == [] and mocks.weather.requests == []


def test_no_secret_in_a_trace_level_log(gateway, mocks, sts, idp):
    q = "Identity: secrets for dave?"
    script_both(mocks, q, "Berlin", "warm")
    assert ask(gateway, idp, "dave", q).status == 200
    with open(gateway.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    assert "token exchange for apis[1]" in log, "the filter traced the exchange"
    token = idp.token("dave")
    for secret in (STS_SECRET, quote(STS_SECRET, safe=""), "xtok-", token.split(".")[2], token.split(".")[1][:40]):
        assert secret not in log, f"{secret!r} is in the log"


def test_consumers_get_their_own_tool_sets(mocks, sts, idp, wasm, envoy_binary, tmp_path_factory):
    """Higress's `_rules_` with `_match_consumer_`: the consumer header is set by the auth filter
    (here jwt_authn's `claim_to_headers` as `x-mse-consumer`), each consumer has its own `policy`."""
    base = plugin_config(mocks)
    weather_only = {**base["apis"][0], "policy": {"allow": ["get_weather_now"]}}
    # Higress matches consumers together with a route name prefix: the route is named `agent-chat`.
    rules = [{"_match_route_prefix_": ["agent"], "_match_consumer_": ["alice"], **base, "apis": [weather_only]},
             {"_match_route_prefix_": ["agent"], "_match_consumer_": ["bob"], **base, "apis": [base["apis"][1]]}]
    clusters = {callout_cluster(f"{m.name}.dns", m.port): m.port for m in mocks.all()}
    config = with_jwt(bootstrap(wasm, {"_rules_": rules}, mocks.llm.port, clusters), idp.jwks, "x-mse-consumer")
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["route_config"]["virtual_hosts"][0]["routes"][0]["name"] = "agent-chat"
    envoy = Envoy(envoy_binary, config, str(tmp_path_factory.mktemp("envoy"))).start()
    try:
        for user, sees, hidden in (("alice", "get_weather_now", "translate_text"),
                                   ("bob", "translate_text", "get_weather_now")):
            q = f"Identity: which tools for {user}?"
            mocks.llm.script(q, final("These."))
            assert ask(envoy, idp, user, q).status == 200
            prompt = mocks.llm.requests_for(q)[0].body.decode()
            assert sees in prompt and hidden not in prompt, user
        # A consumer no rule names is not the agent's: the request goes to the route as it is.
        q = "Identity: carol has no rule?"
        mocks.llm.script(q, final("Plain."))
        assert ask(envoy, idp, "carol", q).status == 200
        assert "get_weather_now" not in mocks.llm.requests_for(q)[0].body.decode()
    finally:
        envoy.stop()
