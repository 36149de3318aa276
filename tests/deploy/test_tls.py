"""The provider cluster of envoy/provider.yaml verifies the server before the key goes out.

A mock provider on 127.0.0.1 speaks TLS with a certificate made here. Envoy runs provider.yaml as
shipped (key and model filled in), only with its clusters pointed at 127.0.0.1 instead of the DNS
names. A self-signed certificate for api.openai.com is refused against the system CA bundle; a
certificate from a CA the cluster trusts, but for another name, is refused by the SAN match; in both
cases the request fails with 503 and the mock never receives a request, so never the key. The control:
the same cluster trusting the test's CA, with a certificate for api.openai.com, answers.
"""
from __future__ import annotations

import ssl

import pytest

from deploykit import SYSTEM_CA, admin_stats, localize_clusters, make_ca, make_server_cert
from support.client import request
from support.envoy import with_wasm
from support.mocks import MockLLM
from test_provider import VALUES, provider

PROVIDER_HOST = "api.openai.com"
TRUST_SYSTEM, TRUST_TEST_CA = "system CA bundle", "the test's CA"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pki"))
    ca = make_ca(d, "api-agent-test-ca")
    return {"ca": ca,
            "self-signed": make_server_cert(d, "self-signed", PROVIDER_HOST),
            "wrong name": make_server_cert(d, "wrong-name", "not-the-provider.example", ca),
            "right name": make_server_cert(d, "right-name", PROVIDER_HOST, ca)}


def tls_llm(cert) -> MockLLM:
    """The mock LLM behind TLS with `cert`; `llm.sni` collects the server names clients asked for."""
    llm = MockLLM()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert.cert, cert.key)
    llm.sni = []
    ctx.sni_callback = lambda sock, name, context: llm.sni.append(name)
    llm._server.socket = ctx.wrap_socket(llm._server.socket, server_side=True)
    return llm.start()


def gateway(wasm: str, llm_port: int, trusted_ca: str) -> dict:
    config = localize_clusters(with_wasm(provider(), wasm), {"openai": llm_port})
    [openai] = [c for c in config["static_resources"]["clusters"] if c["name"] == "openai"]
    validation = openai["transport_socket"]["typed_config"]["common_tls_context"]["validation_context"]
    assert validation["trusted_ca"] == {"filename": SYSTEM_CA}, "as shipped"
    validation["trusted_ca"] = {"filename": trusted_ca}
    return config


@pytest.mark.parametrize("cert, trust, failure", [
    ("self-signed", TRUST_SYSTEM, "ssl.fail_verify_error"),
    ("wrong name", TRUST_TEST_CA, "ssl.fail_verify_san"),
    ("right name", TRUST_TEST_CA, None),
])
def test_the_provider_is_verified_before_the_key_is_sent(pki, wasm, start_envoy, cert, trust, failure):
    llm = tls_llm(pki[cert])
    try:
        trusted_ca = SYSTEM_CA if trust == TRUST_SYSTEM else pki["ca"].cert
        envoy = start_envoy(gateway(wasm, llm.port, trusted_ca))
        q = "Which provider is this?"
        llm.script(q, "A verified one.")
        body = {"model": VALUES["OPENAI_MODEL"], "messages": [{"role": "user", "content": q}]}
        reply = request(envoy.port, "POST", "/v1/chat/completions", body, {"Authorization": "Bearer sk-consumer"})
        assert llm.sni and set(llm.sni) == {PROVIDER_HOST}, "SNI is the provider's name"
        stats = admin_stats(envoy, "cluster.openai.ssl.")
        if failure:
            assert reply.status == 503, reply.text
            assert llm.requests == [] and llm.aborted == [], "no request, so no key, reached the server"
            assert stats.get(f"cluster.openai.{failure}", 0) >= 1, stats
        else:
            assert reply.status == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] == "A verified one."
            [seen] = llm.requests
            assert seen.headers["authorization"] == f"Bearer {VALUES['OPENAI_API_KEY']}"
            assert (seen.path, seen.headers["host"]) == ("/v1/chat/completions", PROVIDER_HOST)
            assert stats.get("cluster.openai.ssl.handshake", 0) >= 1 and not stats.get("cluster.openai.ssl.fail_verify_error")
    finally:
        llm.stop()
