"""Two filter configurations in one Envoy on the dynamic module: tests/e2e/test_shared_vm.py as it is."""
from test_shared_vm import *  # noqa: F401,F403
