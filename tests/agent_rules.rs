//! The operator's call rules (`policy.rules`, CEL) through the whole agent: a rule on the caller's
//! identity hides what it refuses and refuses it if called anyway, a rule on the arguments refuses a
//! call with the operator's words or sends it to the client for approval; an approval never lifts a
//! denial.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";

fn with_rules(rules: Value, mode: &str) -> String {
    config(
        &[("pets.svc", "oai-petstore.yaml", json!({}))],
        json!({"mode": mode, "policy": {"headers": ["x-role", "x-account"], "rules": rules}}),
    )
}

fn rules() -> Value {
    json!([
        {"name": "viewers-read", "when": "headers['x-role'] == 'viewer' && tool.method != 'GET'",
         "decision": "deny", "reason": "Viewers may only read."},
        {"name": "own-pets-only", "when": "has(args.petId) && args.petId != headers['x-account']",
         "decision": "deny", "reason": "You may only look at your own pet."},
        {"name": "big-ids-need-approval", "when": "tool.name == 'createPets' && args.id > 100",
         "decision": "confirm"},
    ])
}

fn harness(mode: &str, role: &str, turns: impl IntoIterator<Item = Turn>) -> Harness {
    let mut h = Harness::new(&with_rules(rules(), mode)).llm(turns).tool_json(PETS, r#"{"ok": true}"#);
    h.policy_headers = vec![("x-role".into(), role.into()), ("x-account".into(), "7".into())];
    h
}

fn call(mode: &str, name: &str, args: Value) -> Turn {
    if mode == "native" {
        native_calls(&[("call_1", name, args)])
    } else {
        classic_call("x", name, args)
    }
}

fn fin(mode: &str) -> Turn {
    if mode == "native" {
        Turn::Message(json!({"role": "assistant", "content": "Done."}))
    } else {
        classic_final("Done.")
    }
}

#[test]
fn a_viewer_is_not_offered_what_it_may_not_call_and_is_refused_it_with_the_operators_reason() {
    for mode in ["react", "native"] {
        let mut h = harness(mode, "viewer", [call(mode, "createPets", json!({"id": 1, "name": "Rex"})), fin(mode)]);
        let out = h.run(&user("Add Rex"));
        assert!(out.tool_calls.is_empty(), "{mode}: the call is not made");
        let first = out.llm_requests[0].to_string();
        assert!(!first.contains("createPets"), "{mode}: not offered: {first}");
        assert!(first.contains("listPets") && first.contains("showPetById"), "{mode}");
        let told = out.llm_requests[1]["messages"].to_string();
        assert!(told.contains("The call to 'createPets' was not made: Viewers may only read."), "{mode}: {told}");
        assert_eq!(out.answer(), "Done.");
        // An editor is offered it and the call is made.
        let mut h = harness(mode, "editor", [call(mode, "createPets", json!({"id": 1, "name": "Rex"})), fin(mode)]);
        let out = h.run(&user("Add Rex"));
        assert!(out.llm_requests[0].to_string().contains("createPets"), "{mode}");
        assert_eq!(out.tool_calls.len(), 1, "{mode}");
    }
}

#[test]
fn an_argument_that_is_not_the_callers_own_account_is_refused() {
    for mode in ["react", "native"] {
        let mut h = harness(mode, "viewer", [call(mode, "showPetById", json!({"petId": "8"})), fin(mode)]);
        let out = h.run(&user("Show pet 8"));
        assert!(out.tool_calls.is_empty(), "{mode}");
        let told = out.llm_requests[1]["messages"].to_string();
        assert!(told.contains("You may only look at your own pet."), "{mode}: {told}");
        let mut h = harness(mode, "viewer", [call(mode, "showPetById", json!({"petId": "7"})), fin(mode)]);
        let out = h.run(&user("Show pet 7"));
        assert_eq!(out.tool_calls.len(), 1, "{mode}: the caller's own");
        assert!(out.tool_calls[0].path.ends_with("/pets/7"), "{}", out.tool_calls[0].path);
    }
}

#[test]
fn a_call_above_the_limit_goes_to_approval_and_runs_once_approved() {
    for mode in ["react", "native"] {
        let mut h = harness(mode, "editor", [call(mode, "createPets", json!({"id": 500, "name": "Rex"}))]);
        let first = h.run(&user("Add Rex as 500"));
        assert!(first.tool_calls.is_empty(), "{mode}: not on the model's word");
        assert_eq!(first.finish_reason(), "tool_calls", "{mode}");
        let message = first.json()["choices"][0]["message"].clone();
        let id = message["tool_calls"][0]["id"].as_str().unwrap().to_string();
        let conversation = |answer: &str| {
            json!({"model": "m", "messages": [
                {"role": "user", "content": "Add Rex as 500"}, message.clone(),
                {"role": "tool", "tool_call_id": id, "content": answer}]})
        };
        let mut h = harness(mode, "editor", [fin(mode)]);
        let second = h.run(&conversation(r#"{"approved": true}"#));
        assert_eq!(second.tool_calls.len(), 1, "{mode}: approved, it runs");
        // A viewer's approval of the same call does not lift the denial.
        let mut h = harness(mode, "viewer", [fin(mode)]);
        let denied = h.run(&conversation(r#"{"approved": true}"#));
        assert!(denied.tool_calls.is_empty(), "{mode}");
        let told = denied.llm_requests[0]["messages"].to_string();
        assert!(told.contains("policy rule 'viewers-read' denies it"), "{mode}: {told}");
        // Below the limit: no approval asked.
        let mut h = harness(mode, "editor", [call(mode, "createPets", json!({"id": 5, "name": "Rex"})), fin(mode)]);
        assert_eq!(h.run(&user("Add Rex as 5")).tool_calls.len(), 1, "{mode}");
    }
}

#[test]
fn a_rule_that_fails_to_evaluate_refuses_the_call_and_no_rules_change_nothing() {
    let cfg = with_rules(json!([{"name": "r", "when": "int(args.limit) / 0 == 1", "decision": "allow"}]), "react");
    let mut h = Harness::new(&cfg).llm([classic_call("x", "listPets", json!({"limit": 3})), classic_final("Done.")]);
    let out = h.run(&user("List"));
    assert!(out.tool_calls.is_empty());
    assert!(out.llm_requests[1].to_string().contains("the operator's policy could not decide on this call"));
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"mode": "react"}));
    let mut h = Harness::new(&cfg).llm([classic_call("x", "listPets", json!({"limit": 3})), classic_final("Done.")]);
    assert_eq!(h.run(&user("List")).tool_calls.len(), 1);
}

#[test]
fn rule_mistakes_name_the_rule_and_the_column() {
    let err = |rules: Value| Config::from_slice(with_rules(rules, "react").as_bytes()).unwrap_err().to_string();
    let rule = |when: &str| json!([{"name": "r", "when": when, "decision": "allow"}]);
    assert_eq!(err(rule("tool.name == ")), "policy.rules[0].when: at column 14: unexpected end of expression");
    assert_eq!(
        err(rule("tool.name == user")),
        "policy.rules[0].when: at column 14: unknown name 'user' (a rule reads tool, args, headers)"
    );
    assert_eq!(
        err(rule("args.x.matches('a')")),
        "policy.rules[0].when: at column 8: unknown function 'matches' (regular expressions are not supported)"
    );
    assert_eq!(
        err(rule("headers['x-tenant'] == 'a'")),
        "policy.rules[0].when: reads header 'x-tenant', which policy.headers does not list (it lists x-role, x-account)"
    );
    assert_eq!(
        err(json!([{"name": "r", "when": "true", "decision": "deny"}])),
        "policy.rules[0].reason: required for 'deny': the model is told it"
    );
    assert_eq!(
        err(json!([{"name": "r", "when": "true", "decision": "block"}])),
        "policy.rules[0].decision: must be 'allow', 'deny', 'confirm' or 'sensitive', found 'block'"
    );
}

#[test]
fn the_decision_is_in_the_steps_the_span_and_the_report() {
    let mut h =
        harness("react", "viewer", [call("react", "createPets", json!({"id": 1, "name": "Rex"})), fin("react")]);
    h.steps = true;
    h.spans = true;
    let out = h.run(&user("Add Rex"));
    let steps = out.json()["api_agent_steps"].clone();
    let policy: Vec<&Value> = steps.as_array().unwrap().iter().filter(|s| s["type"] == "policy").collect();
    assert_eq!(policy, [&json!({"type": "policy", "tool": "createPets", "rule": "viewers-read", "decision": "deny"})]);
    assert!(out.spans.iter().any(|s| s.ends_with("api_agent.policy.rule=viewers-read")), "{:?}", out.spans);
    assert!(out.spans.iter().any(|s| s.ends_with("api_agent.policy.decision=deny")));
    // No rule held: no decision recorded.
    let mut h = harness("react", "editor", [call("react", "listPets", json!({})), fin("react")]);
    h.steps = true;
    let out = h.run(&user("List"));
    assert!(!out.json()["api_agent_steps"].to_string().contains("\"policy\""));
}

/// docs/policy.md, "Higress consumers", as written there.
#[test]
fn a_higress_consumer_rule_reads_x_mse_consumer() {
    let policy = json!({"headers": ["x-mse-consumer"], "rules": [
        {"name": "partners-read-only",
         "when": "headers['x-mse-consumer'].startsWith('partner-') && tool.method != 'GET'",
         "decision": "deny", "reason": "Partner keys may only read."},
        {"name": "no-refunds-for-trial", "when": "headers['x-mse-consumer'] == 'trial' && 'payments' in tool.tags",
         "decision": "deny", "reason": "Trial accounts cannot move money."}]});
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"mode": "react", "policy": policy}));
    let run = |consumer: &str| {
        let mut h = Harness::new(&cfg)
            .llm([classic_call("x", "createPets", json!({"id": 1, "name": "Rex"})), classic_final("Done.")])
            .tool_json(PETS, "{}");
        h.policy_headers = vec![("x-mse-consumer".into(), consumer.into())];
        h.run(&user("Add Rex"))
    };
    let out = run("partner-acme");
    assert!(out.tool_calls.is_empty());
    assert!(out.llm_requests[1].to_string().contains("Partner keys may only read."));
    assert!(!out.llm_requests[0].to_string().contains("createPets"), "not offered");
    assert_eq!(run("gold").tool_calls.len(), 1);
}

/// Without rules, guard or headers the configuration holds no policy (`None`): the request then never
/// enters the rules' code (turn/rules.rs, tools/approval.rs); a run without rules is
/// `a_rule_that_fails_to_evaluate_refuses_the_call_and_no_rules_change_nothing`'s second half.
/// Headers alone keep one (they are read).
#[test]
fn a_policy_with_nothing_in_it_is_none() {
    let policy = |p: Option<Value>| {
        let mut extra = json!({"mode": "native"});
        if let Some(p) = p {
            extra["policy"] = p;
        }
        let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra);
        Config::from_slice(cfg.as_bytes()).unwrap().call_policy
    };
    assert!(policy(None).is_none());
    assert!(policy(Some(json!({}))).is_none());
    assert!(policy(Some(json!({"rules": [], "headers": []}))).is_none());
    assert_eq!(policy(Some(json!({"headers": ["x-role"]}))).unwrap().headers, vec!["x-role".to_string()]);
    let rules = json!({"headers": ["x-role", "x-account"], "rules": rules()});
    assert_eq!(policy(Some(rules)).map(|p| p.rules.len()), Some(3));
    assert!(policy(Some(json!({"guard": {}}))).is_some_and(|p| p.guard.is_some()));
}
