"""Fixtures: one set of mocks for the session, one Envoy per plugin configuration, and the Envoy log
attached to every failing test's report (the filter's own log lines explain most failures)."""
from __future__ import annotations

import json
import os

import pytest

from support.agent import CLIENT_KEY, ROOT, Gateway, Mocks, envoy_config, plugin_config
from support.envoy import Envoy

ENVOY = os.path.abspath(os.environ.get("ENVOY") or os.path.join(ROOT, ".venv", "bin", "envoy"))
WASM = os.path.abspath(os.environ.get("WASM") or os.path.join(ROOT, "dist", "api_agent.wasm"))

_running: list[Envoy] = []


def pytest_configure(config) -> None:
    for what, path in (("ENVOY", ENVOY), ("WASM", WASM)):
        if not os.path.isfile(path):
            raise pytest.UsageError(f"{what}={path} does not exist (run `make setup build`)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for envoy in _running:
            report.sections.append((f"Envoy log tail ({envoy.workdir})", envoy.log_tail(60)))
    return report


@pytest.fixture(scope="session")
def envoy_binary() -> str:
    return ENVOY


@pytest.fixture(scope="session")
def wasm() -> str:
    return WASM


@pytest.fixture(scope="session")
def mocks():
    m = Mocks.start()
    yield m
    for s in m.all():
        s.stop()


@pytest.fixture(autouse=True)
def fresh_mocks(mocks):
    """Each test sees only its own traffic and starts from the default routes and no scripts; and in
    every test, the client's credentials must never reach a tool API."""
    for s in mocks.all():
        s.reset()
    yield
    leaked = [f"{r.method} {r.target}" for r in mocks.tool_requests() if CLIENT_KEY in str(r.headers)]
    assert not leaked, f"the client's key reached a tool: {leaked}"


@pytest.fixture(scope="session")
def gateways(mocks, tmp_path_factory):
    """gateways(**plugin_options) -> a Gateway whose filter has plugin_config(mocks, **plugin_options).
    One Envoy per configuration, started on first use, stopped at the end of the session."""
    started: dict[str, Gateway] = {}

    def get(**plugin_options) -> Gateway:
        key = json.dumps(plugin_options, sort_keys=True)
        if key not in started:
            config = envoy_config(WASM, mocks, plugin_config(mocks, **plugin_options))
            envoy = Envoy(ENVOY, config, str(tmp_path_factory.mktemp("envoy"))).start()
            _running.append(envoy)
            started[key] = Gateway(envoy)
        return started[key]

    yield get
    for g in started.values():
        _running.remove(g.envoy)
        g.envoy.stop()


@pytest.fixture(scope="session")
def gateway(gateways) -> Gateway:
    """The default configuration: English prompt, maxIterations 4."""
    return gateways()
