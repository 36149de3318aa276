"""tests/e2e/test_policy_guard.py on the dynamic module: the same guard, the same injected reply."""
from test_policy_guard import *  # noqa: F401,F403
