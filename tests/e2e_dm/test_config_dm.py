"""A bad configuration fails loading the dynamic module with the Wasm build's message; a good one and
the demo's pass `envoy --mode validate` (tests/e2e/test_config.py, with the dynamic-module filter)."""
import pytest

from conftest import as_dynamic_module
from support.agent import envoy_config, plugin_config
from support.envoy import validate, with_wasm
from test_config import break_api_provider, demo_config, without


@pytest.mark.parametrize("change, message", [
    (lambda p: without(p, "servicePort"), "apis[0].apiProvider.servicePort: required"),
    (lambda p: {**p, "timeoutMs": 100}, "apis[0].apiProvider.timeoutMs: unknown key"),
], ids=["missing-servicePort", "unknown-key"])
def test_bad_plugin_config_is_rejected(envoy_binary, wasm, mocks, tmp_path, change, message):
    cfg = break_api_provider(plugin_config(mocks), change)
    result = validate(envoy_binary, as_dynamic_module(envoy_config(wasm, mocks, cfg)), str(tmp_path))
    assert result.returncode != 0
    assert f"api-agent configuration rejected: {message}" in result.stdout + result.stderr


def test_good_plugin_config_passes_validation(envoy_binary, wasm, mocks, tmp_path):
    result = validate(envoy_binary, as_dynamic_module(envoy_config(wasm, mocks, plugin_config(mocks))), str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_demo_config_is_valid(envoy_binary, wasm, tmp_path):
    result = validate(envoy_binary, as_dynamic_module(with_wasm(demo_config(), wasm)), str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
