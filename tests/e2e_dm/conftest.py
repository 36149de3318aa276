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

import support.envoy  # noqa: E402


def as_dynamic_module(config: dict) -> dict:
    """Every Wasm filter of an Envoy configuration replaced by the dynamic-module one."""
    return support.envoy.as_dynamic_module(config, LIB)


# Every test's Envoy goes through this class, whichever way its configuration was built.
_envoy_start = support.envoy.Envoy.start


def _dm_envoy_start(self, *args, **kwargs):
    self.config = as_dynamic_module(self.config)
    # The module logs as Envoy's `dynamic_modules` component: give it the level asked for `wasm`.
    popen = support.envoy.subprocess.Popen

    def dm_popen(argv, *a, **kw):
        argv = [f"{x},dynamic_modules:{x.split(':', 1)[1]}" if x.startswith("wasm:") else x for x in argv]
        return popen(argv, *a, **kw)

    support.envoy.subprocess.Popen = dm_popen
    try:
        return _envoy_start(self, *args, **kwargs)
    finally:
        support.envoy.subprocess.Popen = popen


support.envoy.Envoy.start = _dm_envoy_start

_spec = importlib.util.spec_from_file_location("e2e_conftest", os.path.join(E2E, "conftest.py"))
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
globals().update({k: v for k, v in vars(_e2e).items() if not k.startswith("__")})
