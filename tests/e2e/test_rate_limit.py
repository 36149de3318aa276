"""Tokens per consumer with Envoy's own rate limit filter: a limit of the filter's own applied when
the stream is done (`apply_on_stream_done`) spends the run's summed tokens (`hits_addend` formatted from the
summary: filter state on Proxy-Wasm, dynamic metadata on the dynamic module) against the consumer's
descriptor, at a rate limit service in the test that speaks Envoy's gRPC protocol
(`envoy.service.ratelimit.v3`, decoded from the wire: no generated code). This is what docs/operating.md tells operators to configure."""
from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import pytest

from support import client
from support.agent import CHAT_PATH, CLIENT_HEADERS, CLIENT_MODEL, Gateway, envoy_config, plugin_config
from support.envoy import Envoy, grpc_cluster
from test_native import tool_calls

RLS_CLUSTER = "ratelimit"
SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
# RateLimitResponse{overall_code: OK}: field 1, varint 1.
ALLOWED = bytes([0x08, 0x01])


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The top-level fields of a protobuf message: (number, varint or bytes). Only the wire types
    Envoy's RateLimitRequest uses (varint, length-delimited)."""
    out, i = [], 0

    def varint() -> int:
        nonlocal i
        value, shift = 0, 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            length = varint()
            out.append((number, data[i:i + length]))
            i += length
        else:
            raise ValueError(f"unexpected wire type {wire} in a RateLimitRequest")
    return out


def descriptors(request: bytes) -> list[tuple[dict[str, str], int]]:
    """A RateLimitRequest's descriptors (field 2): their entries (field 1: key 1, value 2) and their
    `hits_addend` (field 3, a UInt32Value)."""
    out = []
    for number, descriptor in fields(request):
        if number != 2:
            continue
        entries, hits = {}, 0
        for n, value in fields(descriptor):
            if n == 1:
                entry = dict(fields(value))
                entries[entry[1].decode()] = entry[2].decode()
            elif n == 3:
                hits = dict(fields(value)).get(1, 0)
        out.append((entries, hits))
    return out


class RateLimitService:
    """A rate limit service speaking Envoy's gRPC protocol (`envoy.service.ratelimit.v3`): it records
    every ShouldRateLimit call's descriptors and allows it."""

    def __init__(self):
        self.calls: list[list[tuple[dict[str, str], int]]] = []
        self.lock = threading.Lock()

    def should_rate_limit(self, request: bytes, context) -> bytes:
        with self.lock:
            self.calls.append(descriptors(request))
        return ALLOWED

    def spent_by(self, consumer: str, timeout_s: float = 10) -> list[int]:
        """The hits each call charged to `consumer`'s descriptor."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                hits = [h for call in self.calls for d, h in call if d == {"consumer": consumer}]
            if hits or time.monotonic() > deadline:
                return hits
            time.sleep(0.05)


class Handler(grpc.GenericRpcHandler):
    def __init__(self, service: RateLimitService):
        self.method = grpc.unary_unary_rpc_method_handler(service.should_rate_limit)

    def service(self, details):
        return self.method if details.method == SHOULD_RATE_LIMIT else None


@pytest.fixture(scope="module")
def rls():
    service = RateLimitService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[Handler(service)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield service, port
    server.stop(grace=None)


def with_token_rate_limit(config: dict, rls_port: int, dm: bool) -> dict:
    """The rate limit filter before the agent, with its own limit spent with the run's tokens when the
    stream is done, per the consumer's header. (Envoy 1.40 sends `hits_addend` for the filter's own
    `rate_limits`; a route's `rate_limits` with the same fields reach the service without it.)"""
    tokens = "%DYNAMIC_METADATA(api_agent:total_tokens)%" if dm else "%FILTER_STATE(wasm.api_agent.total_tokens:PLAIN)%"
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"].insert(0, {
        "name": "envoy.filters.http.ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
            "domain": "ai-gateway", "failure_mode_deny": False, "timeout": "1s",
            "rate_limit_service": {"transport_api_version": "V3",
                                   "grpc_service": {"envoy_grpc": {"cluster_name": RLS_CLUSTER}}},
        },
    })
    hcm["http_filters"][0]["typed_config"]["rate_limits"] = [{
        "actions": [{"request_headers": {"header_name": "x-consumer", "descriptor_key": "consumer"}}],
        "apply_on_stream_done": True,
        "hits_addend": {"format": tokens},
    }]
    config["static_resources"]["clusters"].append(grpc_cluster(RLS_CLUSTER, rls_port))
    return config


@pytest.fixture(scope="module", params=["response", "request"])
def limited(request, rls, mocks, wasm, envoy_binary, tmp_path_factory):
    _, port = rls
    dm = wasm.endswith(".so")
    plugin = plugin_config(mocks, mode="native", loop=request.param)
    config = with_token_rate_limit(envoy_config(wasm, mocks, plugin), port, dm)
    envoy = Envoy(envoy_binary, config, str(tmp_path_factory.mktemp("ratelimit"))).start()
    yield Gateway(envoy)
    envoy.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_the_runs_tokens_are_spent_per_consumer(limited, rls, mocks, stream):
    service, _ = rls
    consumer = f"team-{time.monotonic_ns()}"
    q = f"ratelimit-{consumer}"
    # Two LLM turns of 15 tokens each (the mock's usage): the run spent 30.
    mocks.llm.script(q, tool_calls(("c1", "get_weather_now", {"location": "Oslo"})), "Cold.")
    body = {"model": CLIENT_MODEL, "messages": [{"role": "user", "content": q}], "stream": stream}
    reply = client.request(limited.port, "POST", CHAT_PATH, body, {**CLIENT_HEADERS, "x-consumer": consumer})
    assert reply.status == 200 and b"Cold." in reply.body, reply.text[:300]
    assert service.spent_by(consumer) == [30], service.calls[-3:]
