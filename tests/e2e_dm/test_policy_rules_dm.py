"""tests/e2e/test_policy_rules.py on the dynamic module: the same rules behind the same jwt_authn."""
from test_policy_rules import *  # noqa: F401,F403
