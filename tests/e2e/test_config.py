"""Plugin configuration checked by `envoy --mode validate` (which runs the plugin's on_configure), and
the demo's Envoy configuration kept valid and in step with openapi-examples/."""
import os

import pytest
import yaml

from support.agent import ROOT, envoy_config, plugin_config, spec_text
from support.envoy import validate, with_wasm


def without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


def break_api_provider(cfg: dict, change) -> dict:
    provider = cfg["apis"][0]["apiProvider"]
    cfg["apis"][0]["apiProvider"] = change(provider)
    return cfg


@pytest.mark.parametrize("change, message", [
    (lambda p: without(p, "servicePort"), "apis[0].apiProvider.servicePort: required"),
    (lambda p: {**p, "timeoutMs": 100}, "apis[0].apiProvider.timeoutMs: unknown key"),
], ids=["missing-servicePort", "unknown-key"])
def test_bad_plugin_config_is_rejected(envoy_binary, wasm, mocks, tmp_path, change, message):
    cfg = break_api_provider(plugin_config(mocks), change)
    result = validate(envoy_binary, envoy_config(wasm, mocks, cfg), str(tmp_path))
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


def test_good_plugin_config_passes_validation(envoy_binary, wasm, mocks, tmp_path):
    result = validate(envoy_binary, envoy_config(wasm, mocks, plugin_config(mocks)), str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def demo_config() -> dict:
    with open(os.path.join(ROOT, "envoy", "demo.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_demo_config_is_valid(envoy_binary, wasm, tmp_path):
    result = validate(envoy_binary, with_wasm(demo_config(), wasm), str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_demo_config_embeds_the_example_specs():
    """The demo's plugin configuration carries the OpenAPI documents inline; they must not drift from
    openapi-examples/, which the tests use."""
    [listener] = demo_config()["static_resources"]["listeners"]
    [hcm] = listener["filter_chains"][0]["filters"]
    wasm_filter = hcm["typed_config"]["http_filters"][0]
    plugin = yaml.safe_load(wasm_filter["typed_config"]["config"]["configuration"]["value"])
    embedded = [yaml.safe_load(api["api"]) for api in plugin["apis"]]
    assert embedded == [yaml.safe_load(spec_text("weather.yaml")), yaml.safe_load(spec_text("translate.yaml"))]
