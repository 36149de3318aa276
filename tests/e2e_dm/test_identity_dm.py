"""Tools called on behalf of the client on the dynamic module: tests/e2e/test_identity.py as it is,
behind the same jwt_authn filter, token service and mock APIs."""
from test_identity import *  # noqa: F401,F403
