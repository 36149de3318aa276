"""A generated OpenAPI document of many operations (verbs x nouns x regions), the same shape as
tests/catalog.rs's `big_spec`: the large catalogs of issue 31 (tests/e2e/test_catalog.py,
scripts/catalog_bench.py)."""

import json

NOUNS = [
    "invoice", "customer", "order", "shipment", "product", "warehouse", "employee", "payroll", "ticket", "incident",
    "server", "cluster", "volume", "snapshot", "bucket", "certificate", "domain", "record", "campaign", "lead",
    "contract", "vendor", "asset", "license", "device", "sensor", "alert", "report", "dashboard", "budget",
    "project", "task", "sprint", "release", "build", "artifact", "repository", "branch", "review", "policy",
]
VERBS = ["list", "get", "create", "update", "delete", "archive"]


def op_name(i: int) -> str:
    verb, noun, region = VERBS[i % 6], NOUNS[(i // 6) % 40], i // 240
    return f"{verb}{noun[0].upper()}{noun[1:]}R{region}"


def big_spec(n: int, server: str = "http://big.example") -> str:
    paths = {}
    for i in range(n):
        verb, noun, region = VERBS[i % 6], NOUNS[(i // 6) % 40], i // 240
        op = {
            "operationId": op_name(i),
            "summary": f"{verb[0].upper()}{verb[1:]} {noun} records in region {region}",
            "parameters": [{"name": f"{noun}Id", "in": "query", "description": f"the {noun}'s identifier",
                            "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}},
        }
        paths[f"/r{region}/{noun}/{verb}"] = {"get": op}
    return json.dumps({"openapi": "3.0.0", "info": {"title": "big", "version": "1"}, "servers": [{"url": server}],
                       "paths": paths})
