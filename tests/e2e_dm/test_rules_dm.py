"""`_rules_` on the dynamic module: route names (xds.route_name), hosts and the global part select the
configuration as on Proxy-Wasm. Not here: one filter per route enabled by typed_per_filter_config (the
module has no per-route configuration yet)."""
from test_rules import (  # noqa: F401
    start,
    test_a_rule_applies_on_its_route_only,
    test_the_first_matching_rule_wins_and_the_global_part_applies_elsewhere,
)
