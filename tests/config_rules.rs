//! Higress's `_rules_`: each rule validated at start with errors named by path, one matcher a rule,
//! the first matching rule wins, then the global part, then nothing (the request passes through).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

use api_agent::config::{Matcher, Plugin, RequestKeys};
use serde_json::{json, Value};

const SPEC: &str = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: 'https://api.example.com'}]\npaths:\n  /weather:\n    get:\n      operationId: getWeather\n      parameters: [{name: city, in: query, required: true, schema: {type: string}}]\n";

fn agent(model: &str) -> Value {
    json!({
        "llm": {"serviceName": "llm-service", "servicePort": 8080, "path": "/v1/chat/completions", "model": model},
        "apis": [{"apiProvider": {"serviceName": "api-service", "servicePort": 9090, "domain": "api.example.com"}, "api": SPEC}],
    })
}

fn rule(model: &str, key: &str, values: Value) -> Value {
    let mut r = agent(model);
    r[key] = values;
    r
}

fn error(v: Value) -> String {
    Plugin::from_value(&v).map(|_| ()).unwrap_err().to_string()
}

fn model_for(p: &Plugin, route: &str, host: &str, cluster: &str) -> Option<String> {
    p.select(RequestKeys { route, host, cluster, consumer: "" }).map(|(_, c)| c.llm.model.clone().unwrap_or_default())
}

#[test]
fn what_higress_delivers_for_default_config_disable_loads() {
    let p = Plugin::from_value(&json!({"_rules_": [rule("a", "_match_route_", json!(["llm-route"]))]})).unwrap();
    assert!(p.global.is_none());
    assert_eq!(p.rules[0].matcher, Matcher::Routes { routes: vec!["llm-route".into()], services: vec![] });
    assert_eq!(model_for(&p, "llm-route", "", "").as_deref(), Some("a"));
    assert_eq!(model_for(&p, "other", "x.example.com", ""), None, "no configuration: pass through");
}

#[test]
fn first_matching_rule_wins_then_the_global_part() {
    let mut cfg = agent("global");
    cfg["_rules_"] = json!([
        rule("by-domain", "_match_domain_", json!(["*.example.com"])),
        rule("by-route", "_match_route_", json!(["llm-route"])),
        rule("by-service", "_match_service_", json!(["llm.svc:443"])),
        rule("by-prefix", "_match_route_prefix_", json!(["llm-"])),
    ]);
    let p = Plugin::from_value(&cfg).unwrap();
    assert_eq!(model_for(&p, "llm-route", "a.example.com", "").as_deref(), Some("by-domain"), "order decides");
    assert_eq!(model_for(&p, "llm-route", "a.example.org", "").as_deref(), Some("by-route"));
    assert_eq!(model_for(&p, "x", "h", "outbound|443||llm.svc").as_deref(), Some("by-service"));
    assert_eq!(model_for(&p, "llm-other", "h", "").as_deref(), Some("by-prefix"));
    assert_eq!(model_for(&p, "other", "h", "outbound|80||llm.svc").as_deref(), Some("global"));
    assert!(p.needs_route() && p.needs_cluster());
}

/// The place `select` gives is the chosen configuration's in `configs()` (what the instance's memory
/// is kept by), with the global part first or without it.
#[test]
fn select_names_the_place_of_the_configuration_in_configs() {
    let rules = json!([rule("r0", "_match_route_", json!(["r0"])), rule("r1", "_match_route_", json!(["r1"]))]);
    let mut with_global = agent("global");
    with_global["_rules_"] = rules.clone();
    for p in [Plugin::from_value(&with_global).unwrap(), Plugin::from_value(&json!({"_rules_": rules})).unwrap()] {
        for route in ["r0", "r1", "other"] {
            let Some((i, cfg)) = p.select(RequestKeys { route, host: "", cluster: "", consumer: "" }) else {
                assert!(p.global.is_none() && route == "other");
                continue;
            };
            let at = p.configs().position(|c| std::rc::Rc::ptr_eq(c, cfg));
            assert_eq!(Some(i), at, "route {route}");
        }
    }
}

#[test]
fn several_matchers_in_one_rule_as_higress_go_sdk_reads_them() {
    // Route and service: both must match (what Higress's controller writes for a matchRule with both).
    let mut r = rule("route+service", "_match_route_", json!(["llm-route"]));
    r["_match_service_"] = json!(["llm.svc"]);
    // Route wins over domain; a domain-only rule after it.
    let mut d = rule("route-not-domain", "_match_route_", json!(["other-route"]));
    d["_match_domain_"] = json!(["*.example.com"]);
    // Route prefix and consumer.
    let mut c = rule("prefix+consumer", "_match_route_prefix_", json!(["team-"]));
    c["_match_consumer_"] = json!(["alice"]);
    let p = Plugin::from_value(&json!({"_rules_": [r, d, c]})).unwrap();
    assert_eq!(model_for(&p, "llm-route", "", "outbound|443||llm.svc").as_deref(), Some("route+service"));
    assert_eq!(model_for(&p, "llm-route", "", "outbound|443||other.svc"), None);
    assert_eq!(model_for(&p, "x", "a.example.com", ""), None, "the domain of a route rule is not used");
    assert_eq!(model_for(&p, "other-route", "", "").as_deref(), Some("route-not-domain"));
    let keys = |consumer| RequestKeys { route: "team-a", host: "", cluster: "", consumer };
    assert_eq!(p.select(keys("alice")).and_then(|(_, c)| c.llm.model.clone()).as_deref(), Some("prefix+consumer"));
    assert!(p.select(keys("bob")).is_none());
    assert!(p.needs_consumer() && p.needs_cluster() && p.needs_route());
}

#[test]
fn a_configuration_without_rules_is_the_global_one() {
    let p = Plugin::from_value(&agent("g")).unwrap();
    assert!(p.rules.is_empty() && !p.needs_route() && !p.needs_cluster());
    assert_eq!(model_for(&p, "", "", "").as_deref(), Some("g"));
}

#[test]
fn bad_rules_are_named_by_path() {
    let mut broken = rule("b", "_match_route_", json!(["r"]));
    broken["llm"].as_object_mut().unwrap().remove("path");
    let cases = [
        (json!({"_rules_": [rule("a", "_match_route_", json!(["r"])), broken]}), "_rules_[1].llm.path: required"),
        (json!({"_rules_": {"a": 1}}), "_rules_: must be a list, found object"),
        (
            json!({"_rules_": [agent("a")]}),
            "_rules_[0]: needs one of _match_route_, _match_route_prefix_, _match_domain_, _match_service_ (not empty)",
        ),
        (
            json!({"_rules_": [rule("a", "_match_route_", json!([]))]}),
            "_rules_[0]: needs one of _match_route_, _match_route_prefix_, _match_domain_, _match_service_ (not empty)",
        ),
        (
            json!({"_rules_": [rule("a", "_match_route_", json!("r"))]}),
            "_rules_[0]._match_route_: must be a list of strings, found string",
        ),
        (
            json!({"_rules_": [rule("a", "_match_domain_", json!(["ok", 3]))]}),
            "_rules_[0]._match_domain_[1]: must be a non-empty string",
        ),
        (json!({"_rules_": ["x"]}), "_rules_[0]: must be an object, found string"),
        // A global part next to rules must be valid too.
        (
            json!({"llm": {"path": "/x"}, "_rules_": [rule("a", "_match_route_", json!(["r"]))]}),
            "llm.serviceName: required (or name the Envoy cluster in 'cluster')",
        ),
        (json!({}), "llm: required"),
    ];
    for (cfg, message) in cases {
        assert_eq!(error(cfg), message);
    }
}

#[test]
fn secrets_of_every_rule_once_longest_first() {
    // Repeats that are not neighbours after sorting by length alone (sk-k2, sk-k3, sk-k2).
    let mut a = rule("a", "_match_route_", json!(["r"]));
    a["llm"]["apiKey"] = json!("sk-long-key-1");
    let mut b = rule("b", "_match_route_", json!(["s"]));
    b["llm"]["apiKey"] = json!("sk-k3");
    let mut g = agent("g");
    g["llm"]["apiKey"] = json!("sk-k2");
    g["_rules_"] = json!([a, b, {"llm": {"apiKey": "sk-k2", "serviceName": "x", "servicePort": 1, "path": "/p"}, "apis": agent("z")["apis"], "_match_route_": ["t"]}]);
    let p = Plugin::from_value(&g).unwrap();
    assert_eq!(p.secrets(), ["sk-long-key-1", "sk-k2", "sk-k3"]);
    let (warnings, lines) = p.startup_lines();
    assert!(warnings.is_empty());
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].starts_with("api-agent configured (global)")
            && lines[3].starts_with("api-agent configured (_rules_[2])")
    );
}
