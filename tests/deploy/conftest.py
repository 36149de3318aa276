"""Fixtures of the deployment tests: Envoy and the module (as tests/e2e finds them), the OCI layout
`make oci` wrote, and the Envoy logs and registry log attached to a failing test's report.

tests/e2e is put on sys.path: its `support` package (mocks, the Envoy process, `envoy --mode validate`)
is imported, never copied or changed.
"""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from deploykit import ENVOY, RUNNING, WASM  # noqa: E402
from support.envoy import Envoy  # noqa: E402


def pytest_configure(config) -> None:
    for what, path in (("ENVOY", ENVOY), ("WASM", WASM)):
        if not os.path.isfile(path):
            raise pytest.UsageError(f"{what}={path} does not exist (run `make setup build`)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for proc in RUNNING:
            report.sections.append((f"log tail ({proc.log_path})", proc.log_tail(60)))
    return report


@pytest.fixture(scope="session")
def envoy_binary() -> str:
    return ENVOY


@pytest.fixture(scope="session")
def wasm() -> str:
    return WASM


@pytest.fixture
def start_envoy(tmp_path_factory):
    """start_envoy(config) -> a running support.envoy.Envoy, stopped after the test."""
    started: list[Envoy] = []

    def start(config: dict) -> Envoy:
        envoy = Envoy(ENVOY, config, str(tmp_path_factory.mktemp("envoy")))
        RUNNING.append(envoy)
        started.append(envoy)
        return envoy.start()

    yield start
    for envoy in started:
        envoy.stop()
        RUNNING.remove(envoy)
