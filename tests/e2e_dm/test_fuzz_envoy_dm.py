"""tests/e2e/test_fuzz_envoy.py on the dynamic module: the same seeded cases and invariants (the module
itself tells the hosts apart where they differ by design)."""
from test_fuzz_envoy import *  # noqa: F401,F403
