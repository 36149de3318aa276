//! JSON mode in the harness: the formatting call after the final answer, validation, retries, the
//! client's own response_format, and schemas checked at configuration time.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";
const QUESTION: &str = "List the names of two pets from the store as data.";

fn schema() -> Value {
    json!({"type": "object", "properties": {"pets": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"}}, "required": ["pets", "count"]})
}

fn cfg(mode: &str, json_resp: Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"mode": mode, "jsonResp": json_resp}))
}

fn enabled(mode: &str) -> String {
    cfg(mode, json!({"enable": true, "jsonSchema": schema(), "maxRetry": 1}))
}

/// The loop's turns for `mode`: one tool call, then the prose answer.
fn loop_turns(mode: &str) -> Vec<Turn> {
    if mode == "native" {
        vec![
            native_calls(&[("c1", "listPets", json!({"limit": 2}))]),
            Turn::Message(json!({"role": "assistant", "content": "Two pets: Rex and Whiskers."})),
        ]
    } else {
        vec![classic_call("List.", "listPets", json!({"limit": 2})), classic_final("Two pets: Rex and Whiskers.")]
    }
}

fn run(config: &str, mode: &str, format_turns: Vec<Turn>, request: Value) -> Outcome {
    let mut turns = loop_turns(mode);
    turns.extend(format_turns);
    let mut h = Harness::new(config).llm(turns).tool_json(PETS, r#"[{"name": "Rex"}, {"name": "Whiskers"}]"#);
    h.run(&request)
}

#[test]
fn valid_the_first_time_in_both_modes() {
    for mode in ["react", "native"] {
        let out = run(&enabled(mode), mode, vec![text(r#"{"pets": ["Rex", "Whiskers"], "count": 2}"#)], user(QUESTION));
        assert_eq!(out.reply.status, 200, "{mode}: {}", out.body_text());
        assert_eq!(
            serde_json::from_str::<Value>(&out.answer()).unwrap(),
            json!({"pets": ["Rex", "Whiskers"], "count": 2})
        );
        assert_eq!(out.finish_reason(), "stop");
        assert_eq!(out.llm_requests.len(), 3);
        assert_eq!(out.json()["usage"]["total_tokens"], 45, "usage of all three calls");
        let format = &out.llm_requests[2];
        let text = format["messages"].to_string();
        assert!(text.contains(QUESTION) && text.contains("Two pets: Rex and Whiskers.") && text.contains("count"));
        assert!(format.get("tools").is_none() && !text.contains("Action:"), "a plain request, no tools, no ReAct");
        assert_eq!(format["model"], "callout-model");
        assert!(format.get("response_format").is_none(), "useResponseFormat is off by default");
    }
}

#[test]
fn invalid_then_fixed() {
    let out = run(
        &enabled("react"),
        "react",
        vec![text(r#"{"pets": "Rex", "count": 2}"#), text("```json\n{\"pets\": [\"Rex\"], \"count\": 1}\n```")],
        user(QUESTION),
    );
    assert_eq!(serde_json::from_str::<Value>(&out.answer()).unwrap(), json!({"pets": ["Rex"], "count": 1}));
    let retry = out.last_message(4);
    assert!(retry.contains("at /pets: expected array, found string"), "{retry}");
    let msgs = out.llm_requests[3]["messages"].as_array().unwrap();
    assert_eq!(msgs[msgs.len() - 2]["content"], r#"{"pets": "Rex", "count": 2}"#, "the model sees its own reply");
}

#[test]
fn never_valid_is_a_clear_error_not_prose() {
    for stream in [false, true] {
        let mut req = user(QUESTION);
        req["stream"] = json!(stream);
        let out = run(&enabled("react"), "react", vec![text("Rex and Whiskers"), text(r#"{"pets": ["Rex"]}"#)], req);
        assert_eq!(out.llm_requests.len(), 4, "one try plus maxRetry 1");
        assert_eq!(out.reply.status, 502);
        let body = out.body_text();
        assert!(body.contains("json_schema_mismatch") && body.contains("missing required property 'count'"), "{body}");
        assert!(!body.contains("Two pets"), "never the prose answer");
        assert_eq!(body.ends_with("data: [DONE]\n\n"), stream);
    }
}

#[test]
fn streamed_json_answer() {
    let mut req = user(QUESTION);
    req["stream"] = json!(true);
    let out = run(&enabled("native"), "native", vec![text(r#"{"pets": [], "count": 0}"#)], req);
    assert!(out.body_text().contains(r#""delta":{"content":"{\"pets\":[],\"count\":0}"}"#), "{}", out.body_text());
}

#[test]
fn the_clients_response_format_wins_and_is_never_forwarded_on_loop_turns() {
    for mode in ["react", "native"] {
        let rf = json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}});
        let mut req = user(QUESTION);
        req["response_format"] = rf.clone();
        let out = run(&enabled(mode), mode, vec![text(r#"{"n": 2}"#)], req);
        assert_eq!(out.answer(), r#"{"n":2}"#, "{mode}");
        assert!(
            out.llm_requests[0].get("response_format").is_none()
                && out.llm_requests[1].get("response_format").is_none()
        );
        assert_eq!(out.llm_requests[2]["response_format"], rf, "the formatting call carries it");
    }
    // json_object without any configured schema.
    let mut req = user(QUESTION);
    req["response_format"] = json!({"type": "json_object"});
    let out = run(&cfg("react", json!({})), "react", vec![text("[1]"), text(r#"{"ok": true}"#)], req);
    assert_eq!(out.answer(), r#"{"ok":true}"#);
    assert!(out.last_message(4).contains("expected object, found array"));
}

#[test]
fn bad_response_formats_are_400() {
    for rf in [
        json!({"type": "xml"}),
        json!({"type": "json_schema"}),
        json!({"type": "json_schema", "json_schema": {"schema": {"type": "nope"}}}),
    ] {
        let mut h = Harness::new(&enabled("react"));
        let mut req = user(QUESTION);
        req["response_format"] = rf;
        let out = h.run(&req);
        assert_eq!(out.reply.status, 400);
        assert!(out.json()["error"]["message"].as_str().unwrap().contains("response_format"));
    }
}

#[test]
fn use_response_format_sends_the_schema() {
    let config = cfg("react", json!({"enable": true, "jsonSchema": schema(), "useResponseFormat": true}));
    let out = run(&config, "react", vec![text(r#"{"pets": [], "count": 0}"#)], user(QUESTION));
    assert_eq!(
        out.llm_requests[2]["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema(), "strict": false}})
    );
}

#[test]
fn schema_as_yaml_text_and_bad_schemas_at_configuration_time() {
    let yaml = "type: object\nproperties:\n  city: {type: string}\nrequired: [city]\n";
    let c = Config::from_slice(cfg("react", json!({"enable": true, "jsonSchema": yaml})).as_bytes()).unwrap();
    assert_eq!(c.json_resp.unwrap().schema.root()["required"], json!(["city"]));
    for (bad, says) in [
        (json!({"type": "strin"}), "jsonResp.jsonSchema: invalid JSON Schema: /type: must be one of"),
        (json!({"properties": {"a": {"pattern": "(unclosed"}}}), "jsonResp.jsonSchema: invalid JSON Schema: /properties/a/pattern: '(unclosed' is not a supported regular expression"),
        (json!({"$ref": "#/$defs/missing"}), "jsonResp.jsonSchema: invalid JSON Schema: schema: the reference '#/$defs/missing' points at nothing"),
        (json!({"$ref": "https://example.com/s.json"}), "remote references are not supported"),
        (json!({"unevaluatedProperties": false}), "unevaluatedProperties"),
        (json!("type: [oops"), "jsonResp.jsonSchema: the schema text is not valid JSON or YAML"),
    ] {
        let e = Config::from_slice(cfg("react", json!({"enable": true, "jsonSchema": bad})).as_bytes()).unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn enable_without_a_schema_means_any_json_object_as_higress_allows() {
    for mode in ["react", "native"] {
        let config = cfg(mode, json!({"enable": true, "useResponseFormat": true, "maxRetry": 1}));
        let out = run(&config, mode, vec![text("[\"Rex\"]"), text("{\"pets\": [\"Rex\"]}")], user(QUESTION));
        assert_eq!(out.answer(), r#"{"pets":["Rex"]}"#, "{mode}: an array is not an object; asked again");
        let formatting = out.llm_requests.last().unwrap();
        assert_eq!(formatting["response_format"], json!({"type": "json_object"}), "{mode}");
    }
}

#[test]
fn a_refused_response_format_is_stepped_down_then_dropped() {
    let refused = || Turn::Raw(500, r#"{"error": {"message": "response_format json_schema is not supported"}}"#.into());
    let config =
        cfg("react", json!({"enable": true, "jsonSchema": schema(), "useResponseFormat": true, "maxRetry": 1}));
    let out =
        run(&config, "react", vec![refused(), refused(), text(r#"{"pets": ["Rex"], "count": 1}"#)], user(QUESTION));
    assert_eq!(out.reply.status, 200, "{}", out.body_text());
    let kinds: Vec<Value> = out.llm_requests[2..].iter().map(|r| r["response_format"]["type"].clone()).collect();
    assert_eq!(kinds, [json!("json_schema"), json!("json_object"), Value::Null]);
    // A server that refuses even the plain call: the error, once nothing is left to drop.
    let out = run(&config, "react", vec![refused(), refused(), refused()], user(QUESTION));
    assert_eq!(out.reply.status, 502);
}

#[test]
fn every_client_parameter_the_filter_does_not_own_reaches_the_formatting_call() {
    for mode in ["react", "native"] {
        let mut req = user(QUESTION);
        req["seed"] = json!(7);
        req["user"] = json!("u-42");
        req["x_vendor_knob"] = json!({"a": 1});
        req["temperature"] = json!(0.2);
        let out = run(&enabled(mode), mode, vec![text(r#"{"pets": [], "count": 0}"#)], req);
        assert_eq!(out.llm_requests.len(), 3, "{mode}: {}", out.body_text());
        for (i, call) in out.llm_requests.iter().enumerate() {
            assert_eq!(call["seed"], 7, "{mode} call {i}: {call}");
            assert_eq!(call["user"], "u-42", "{mode} call {i}");
            assert_eq!(call["x_vendor_knob"], json!({"a": 1}), "{mode} call {i}");
            assert_eq!(call["temperature"], 0.2, "{mode} call {i}");
        }
        let format = &out.llm_requests[2];
        for owned in ["tools", "tool_choice", "stop", "stream_options"] {
            assert!(format.get(owned).is_none(), "{mode}: the filter owns {owned}: {format}");
        }
        assert_eq!(format["stream"], false);
    }
}
