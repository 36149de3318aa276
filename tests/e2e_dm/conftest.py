"""The e2e suite's fixtures (tests/e2e/conftest.py) with the filter loaded as an Envoy dynamic module:
`envoy.filters.http.dynamic_modules`, `dynamic_module_config: {name: api_agent}`, the same configuration
text as a StringValue, and the library found through ENVOY_DYNAMIC_MODULES_SEARCH_PATH."""
from __future__ import annotations

import importlib.util
import os
import sys

E2E = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e")
sys.path.insert(0, os.path.abspath(E2E))

LIB = os.path.abspath(os.environ.get("WASM") or os.path.join(E2E, "..", "..", "dist", "libapi_agent.so"))
os.environ["WASM"] = LIB
# Envoy inherits this from the test process.
os.environ["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = os.path.dirname(LIB)

import support.agent  # noqa: E402
from support.envoy import WASM_FILTER  # noqa: E402

_wasm_bootstrap = support.agent.bootstrap


def dynamic_module_filter(wasm_filter: dict) -> dict:
    """The Wasm filter's configuration, as the dynamic-module filter takes it."""
    name = os.path.basename(LIB)[len("lib"):-len(".so")]
    return {
        "name": "envoy.filters.http.dynamic_modules",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
            "dynamic_module_config": {"name": name},
            "filter_name": "api-agent",
            "filter_config": wasm_filter["typed_config"]["config"]["configuration"],
        },
    }


def dm_bootstrap(*args, **kwargs) -> dict:
    config = _wasm_bootstrap(*args, **kwargs)
    for listener in config["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                filters = f.get("typed_config", {}).get("http_filters", [])
                filters[:] = [dynamic_module_filter(h) if h["name"] == WASM_FILTER else h for h in filters]
    return config


support.agent.bootstrap = dm_bootstrap

_spec = importlib.util.spec_from_file_location("e2e_conftest", os.path.join(E2E, "conftest.py"))
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
globals().update({k: v for k, v in vars(_e2e).items() if not k.startswith("__")})
