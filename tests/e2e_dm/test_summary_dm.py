"""The request's summary on the dynamic module: tests/e2e/test_summary.py as it is (this host also
sets the dynamic metadata `api_agent`, which that module checks here)."""
from test_summary import *  # noqa: F401,F403
