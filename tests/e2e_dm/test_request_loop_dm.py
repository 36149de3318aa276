"""`loop: request` on the dynamic module: the same checks as on Proxy-Wasm (tests/e2e/test_request_loop.py)."""
from test_request_loop import *  # noqa: F401,F403
