//! The front doors other than chat completions (Responses, Messages) in the harness: one pets API,
//! answers scripted as plain messages, and their event streams read back.

use super::{config, Harness, Outcome, Turn};
use api_agent::agent::Api;
use serde_json::{json, Value};

/// The pets API's cluster.
pub const PETS: &str = "outbound|8080||pets.svc";

/// A harness for a client speaking `api`, in `mode`, with `extra` configuration keys.
pub fn front_harness(api: Api, mode: &str, extra: Value, turns: Vec<Turn>) -> Harness {
    let mut e = json!({"mode": mode});
    if let (Value::Object(a), Value::Object(b)) = (&mut e, extra) {
        a.extend(b);
    }
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], e);
    let mut h = Harness::new(&cfg).llm(turns).tool_json(PETS, r#"{"id": 7, "name": "Rex"}"#);
    h.api = api;
    h
}

/// The LLM's plain answer.
pub fn answer(text: &str) -> Turn {
    Turn::Message(json!({"role": "assistant", "content": text}))
}

/// The events of a named-event stream (comment lines skipped), each `event:` name checked against its
/// data's `type`.
pub fn events(bytes: &[u8]) -> Vec<Value> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .map(|e| {
            let (name, data) = e.split_once("\ndata: ").unwrap();
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(name.strip_prefix("event: ").unwrap(), data["type"], "{e}");
            data
        })
        .collect()
}

pub fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// What a live answer sent, then the end of its reply.
pub fn live_and_end(out: &Outcome) -> Vec<u8> {
    let mut all: Vec<u8> = out.sent.iter().flat_map(|(_, b)| b.clone()).collect();
    all.extend_from_slice(&out.reply.body);
    all
}

/// `<key>.path` (a front door's path) loads when it is `good` and refuses, naming the field, a path
/// without its leading '/', a number and an unknown key; the loaded configuration, for its field.
pub fn front_path_is_validated(key: &str, good: &str) -> api_agent::config::Config {
    let with = |v: Value| config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({ key: v }));
    let load = |v: Value| api_agent::config::Config::from_slice(with(v).as_bytes());
    let relative = good.rsplit('/').next().unwrap();
    for (bad, says) in [
        (json!({"path": relative}), format!("{key}.path: must be a path starting with '/', found '{relative}'")),
        (json!({"path": 3}), format!("{key}.path")),
        (json!({"paths": "/x"}), format!("{key}.paths")),
    ] {
        let err = load(bad).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains(&says), "{err}");
    }
    load(json!({ "path": good })).unwrap()
}
