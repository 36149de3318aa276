//! yaa's tool safety: per-API allow/deny/methods decide which tools the model ever sees; `confirm`
//! tools run only after the client approves the call, in both modes, tested through the whole flow.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";

fn with_policy(policy: Value, mode: &str) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"mode": mode}))
        .replace("\"api\":", &format!("\"policy\":{policy},\"api\":"))
}

#[test]
fn denied_tools_never_reach_the_model() {
    for mode in ["react", "native"] {
        let cfg = Config::from_slice(with_policy(json!({"deny": ["createPets"], "methods": ["get"]}), mode).as_bytes())
            .unwrap();
        let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["listPets", "showPetById"], "{mode}");
        assert!(!cfg.react_prompt.contains("createPets") && !cfg.native_tools_json.contains("createPets"));
    }
    let cfg = with_policy(json!({"allow": ["listPets"]}), "react");
    let mut h = Harness::new(&cfg)
        .llm([classic_call("x", "createPets", json!({"id": 1, "name": "Rex"})), classic_final("No.")]);
    let out = h.run(&user("Add Rex"));
    assert!(out.tool_calls.is_empty());
    assert!(out.last_message(2).contains("Unknown tool 'createPets'. The tools are: listPets."));
}

#[test]
fn policy_mistakes_are_named() {
    let err = |p: Value| Config::from_slice(with_policy(p, "react").as_bytes()).unwrap_err().to_string();
    assert_eq!(err(json!({"allow": ["listPet"]})), "apis[0].policy.allow[0]: no operation 'listPet' in this API");
    assert_eq!(
        err(json!({"methods": ["FETCH"]})),
        "apis[0].policy.methods[0]: 'FETCH' is not one of GET, HEAD, POST, PUT, PATCH, DELETE"
    );
    assert_eq!(
        err(json!({"deny": ["listPets", "createPets", "showPetById"]})),
        "apis[0].policy: leaves no tool of this API"
    );
    assert_eq!(
        err(json!({"deny": ["createPets"], "confirm": ["createPets"]})),
        "apis[0].policy.confirm[0]: 'createPets' is not allowed by the policy"
    );
}

fn approval_round(mode: &str, answer: &str) -> (Outcome, Outcome) {
    let cfg = with_policy(json!({"confirm": ["createPets"]}), mode);
    let args = json!({"id": 7, "name": "Rex"});
    let call_turn = if mode == "native" {
        native_calls(&[("call_9", "createPets", args.clone())])
    } else {
        blob_call("I should add Rex.", "createPets", args.clone())
    };
    // 1. The model wants the tool: the call goes back to the client, nothing runs.
    let mut h = Harness::new(&cfg).llm([call_turn]).tool_json(PETS, r#"{"created": 7}"#);
    let first = h.run(&user("Add Rex as pet 7"));
    // 2. The client sends the conversation back with its answer.
    let message = first.json()["choices"][0]["message"].clone();
    let call_id = message["tool_calls"][0]["id"].as_str().unwrap().to_string();
    let final_turn = if mode == "native" {
        Turn::Message(json!({"role": "assistant", "content": "Done."}))
    } else {
        classic_final("Done.")
    };
    let mut h = Harness::new(&cfg).llm([final_turn]).tool_json(PETS, r#"{"created": 7}"#);
    let second = h.run(&json!({"model": "m", "messages": [
        {"role": "user", "content": "Add Rex as pet 7"},
        message,
        {"role": "tool", "tool_call_id": call_id, "content": answer},
    ]}));
    (first, second)
}

#[test]
fn a_confirm_tool_runs_only_after_the_client_approves_it() {
    for mode in ["react", "native"] {
        let (first, second) = approval_round(mode, r#"{"approved": true}"#);
        assert!(first.tool_calls.is_empty(), "{mode}: not run on the model's word");
        assert_eq!(first.finish_reason(), "tool_calls");
        let call = &first.json()["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "createPets");
        assert_eq!(
            serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
            json!({"id": 7, "name": "Rex"})
        );
        if mode == "native" {
            assert_eq!(call["id"], "call_9", "the model's own call id");
        }
        // Approved: the tool ran first, and the model saw its result in place of the approval.
        assert_eq!(second.tool_calls.len(), 1, "{mode}");
        assert_eq!(second.tool_calls[0].method, "POST");
        assert!(second.first_body.is_empty(), "{mode}: the first turn is a callout after approved calls");
        let sent = second.llm_requests[0]["messages"].to_string();
        assert!(sent.contains(r#"{\"created\": 7}"#), "{mode}: {sent}");
        assert!(!sent.contains("approved"), "{mode}: {sent}");
        assert_eq!(second.answer(), "Done.");
    }
}

#[test]
fn anything_but_an_approval_is_a_refusal_the_model_is_told() {
    for mode in ["react", "native"] {
        for answer in [r#"{"approved": false}"#, "no", r#"{"approved": "yes"}"#] {
            let (_, second) = approval_round(mode, answer);
            assert!(second.tool_calls.is_empty(), "{mode} {answer}: not run");
            let sent = second.llm_requests[0]["messages"].to_string();
            assert!(
                sent.contains("The user did not approve this call to 'createPets'; it was not run."),
                "{mode}: {sent}"
            );
        }
    }
}
