#![allow(dead_code)] // each includer uses its own part of it
//! The generated OpenAPI document of a large catalog (verbs × nouns × regions): the same one as
//! tests/e2e/support/catalog.py writes, for tests/catalog.rs and examples/catalog_bench.rs.

use serde_json::json;

pub const NOUNS: [&str; 40] = [
    "invoice",
    "customer",
    "order",
    "shipment",
    "product",
    "warehouse",
    "employee",
    "payroll",
    "ticket",
    "incident",
    "server",
    "cluster",
    "volume",
    "snapshot",
    "bucket",
    "certificate",
    "domain",
    "record",
    "campaign",
    "lead",
    "contract",
    "vendor",
    "asset",
    "license",
    "device",
    "sensor",
    "alert",
    "report",
    "dashboard",
    "budget",
    "project",
    "task",
    "sprint",
    "release",
    "build",
    "artifact",
    "repository",
    "branch",
    "review",
    "policy",
];
pub const VERBS: [&str; 6] = ["list", "get", "create", "update", "delete", "archive"];

/// An OpenAPI document of `n` operations (verbs × nouns × regions), as the e2e tests generate it.
pub fn big_spec(n: usize) -> String {
    let mut paths = serde_json::Map::new();
    for i in 0..n {
        let (verb, noun, region) = (VERBS[i % 6], NOUNS[(i / 6) % 40], i / 240);
        let op = json!({"operationId": format!("{verb}{}R{region}", cap(noun)),
            "summary": format!("{} {noun} records in region {region}", cap(verb)),
            "parameters": [{"name": format!("{noun}Id"), "in": "query", "description": format!("the {noun}'s identifier"),
                            "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}});
        paths.insert(format!("/r{region}/{noun}/{verb}"), json!({"get": op}));
    }
    json!({"openapi": "3.0.0", "info": {"title": "big", "version": "1"}, "servers": [{"url": "http://big.example"}],
           "paths": paths})
    .to_string()
}

/// `s` with its first letter in upper case (ASCII words).
pub fn cap(s: &str) -> String {
    s[..1].to_uppercase() + &s[1..]
}
