//! The request's token budget (`llm.maxTotalTokens`) and the summary a host hands to Envoy, in both
//! modes: a run that spends its budget ends with the best-effort answer, as at the iteration limit.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use common::*;
use serde_json::json;

const PETS: &str = "outbound|8080||pets.svc";

fn pets(extra: serde_json::Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

#[test]
fn a_spent_budget_ends_the_loop_with_the_last_result() {
    for mode in ["react", "native"] {
        let call = || match mode {
            "react" => classic_call("more", "listPets", json!({"limit": 1})),
            _ => native_calls(&[("c1", "listPets", json!({"limit": 1}))]),
        };
        // Each scripted turn costs 15 tokens: the budget of 40 is spent by the third.
        let cfg = pets(json!({"mode": mode, "llm": {"maxTotalTokens": 40, "maxIterations": 10}}));
        let mut h = Harness::new(&cfg).llm([call(), call(), call(), call()]).tool_json(PETS, "[{\"id\": 1}]");
        let out = h.run(&user("Pets?"));
        assert_eq!(out.llm_requests.len(), 3, "{mode}: no turn after the budget");
        assert_eq!(out.finish_reason(), "length", "{mode}");
        let answer = out.answer();
        assert!(answer.contains("budget of 40 tokens") && answer.contains("[{\"id\": 1}]"), "{mode}: {answer}");
        assert!(out.summary.contains("outcome=budget") && out.summary.contains("total_tokens=45"), "{}", out.summary);
        assert!(out.summary.contains("turns=3 tool_calls=2 tool_errors=0"), "{}", out.summary);
    }
}

#[test]
fn an_answer_within_the_budget_is_an_answer() {
    let cfg = pets(json!({"llm": {"maxTotalTokens": 40}}));
    let mut h = Harness::new(&cfg)
        .llm([classic_call("t", "listPets", json!({})), classic_final("None.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "None.");
    assert!(out.summary.starts_with("turns=2 tool_calls=1 tool_errors=0 input_tokens=20 output_tokens=10 total_tokens=30 model=mock-llm outcome=answer"), "{}", out.summary);
}

#[test]
fn the_summary_says_how_a_run_ended() {
    let limited = pets(json!({"llm": {"maxIterations": 1}}));
    let mut h = Harness::new(&limited)
        .llm([classic_call("t", "listPets", json!({})), classic_call("t", "listPets", json!({}))])
        .tool_json(PETS, "[]");
    assert!(h.run(&user("Pets?")).summary.contains("outcome=limit"));
    let mut h = Harness::new(&pets(json!({"loop": "request"}))).llm([Turn::Raw(500, "{}".into())]);
    let out = h.run(&user("Pets?"));
    assert!(out.summary.contains("outcome=error:"), "{}", out.summary);
    let mut h = Harness::new(&pets(json!({})))
        .llm([classic_call("t", "listPets", json!({})), classic_final("Busy.")])
        .tool(PETS, |_| ToolReply::Http(503, "busy".into()));
    assert!(h.run(&user("Pets?")).summary.contains("tool_calls=1 tool_errors=1"));
}

#[test]
fn a_bad_budget_is_refused_naming_the_field() {
    let err =
        api_agent::config::Config::from_slice(pets(json!({"llm": {"maxTotalTokens": 0}})).as_bytes()).unwrap_err();
    assert!(err.to_string().contains("llm.maxTotalTokens"), "{err}");
}
