//! Reasoning models, with replies shaped exactly as their servers send them: think blocks in content
//! (closed, opened by the chat template, cut by the token limit), `reasoning_content` and `reasoning`
//! (text or object), streamed reasoning deltas, tool calls written as text, and the 400 that refuses
//! a parameter. Both modes; the live path as the dynamic module runs it.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";

fn pets(extra: Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

fn message(m: Value) -> Turn {
    Turn::Message(m)
}

fn sse(events: &[Value]) -> Turn {
    let mut body: String = events
        .iter()
        .map(|d| format!("data: {}\n\n", json!({"model": "m", "choices": [{"index": 0, "delta": d}]})))
        .collect();
    body.push_str("data: [DONE]\n\n");
    Turn::RawWith(200, vec![("content-type".into(), "text/event-stream".into())], body)
}

#[test]
fn react_never_acts_on_a_think_block() {
    let thinking = "Maybe Action: listPets with {\"limit\": 99}? Or Final Answer: none.";
    for (reply, why) in [
        (format!("<think>\n{thinking}\n</think>\n\nFinal Answer: Three pets."), "closed"),
        (format!("{thinking}\n</think>\nFinal Answer: Three pets."), "opened by the template"),
    ] {
        let mut h = Harness::new(&pets(json!({}))).llm([text(&reply)]);
        let out = h.run(&user("Pets?"));
        assert_eq!(out.answer(), "Three pets.", "{why}");
        assert_eq!(out.json()["choices"][0]["message"]["reasoning_content"], thinking, "{why}");
        assert!(out.tool_calls.is_empty(), "{why}: nothing considered was run");
    }
}

#[test]
fn react_acts_after_the_block_and_keeps_no_reasoning_in_the_scratchpad() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([
            text("<think>Final Answer: a draft</think>\nAction: listPets\nAction Input: {\"limit\": 1}"),
            classic_final("One."),
        ])
        .tool_json(PETS, "[]");
    let out = h.run(&user("One pet?"));
    assert_eq!(out.answer(), "One.");
    assert_eq!(out.tool_calls[0].path, "/v1/pets?limit=1");
    let second = out.llm_requests[1]["messages"].to_string();
    assert!(!second.contains("think") && !second.contains("a draft"), "{second}");
}

#[test]
fn a_turn_cut_while_thinking_is_no_answer() {
    let cut = Turn::Raw(
        200,
        completion(json!({"role": "assistant", "content": "<think>Final Answer: 42, maybe"}))
            .replace("\"stop\"", "\"length\""),
    );
    let mut h = Harness::new(&pets(json!({}))).llm([cut, classic_final("Seven.")]);
    let out = h.run(&user("Number?"));
    assert_eq!(out.answer(), "Seven.");
    assert_eq!(out.llm_requests.len(), 2);
}

#[test]
fn native_turns_go_back_with_their_reasoning_in_the_servers_field() {
    for (field, value, text) in [
        ("reasoning_content", json!("Need pets."), "Need pets."),
        ("reasoning", json!("Need pets."), "Need pets."),
        ("reasoning", json!({"content": "Need pets."}), "Need pets."),
        ("reasoning", json!({"text": "Need pets."}), "Need pets."),
    ] {
        let call = json!({"id": "c1", "type": "function", "function": {"name": "listPets", "arguments": "{}"}});
        let first = json!({"role": "assistant", "content": null, field: value, "tool_calls": [call]});
        let last = json!({"role": "assistant", "content": "None.", "reasoning_content": "Empty list."});
        let mut h =
            Harness::new(&pets(json!({"mode": "native"}))).llm([message(first), message(last)]).tool_json(PETS, "[]");
        let out = h.run(&user("Pets?"));
        assert_eq!(out.answer(), "None.");
        let echoed = &out.llm_requests[1]["messages"][1];
        assert_eq!(echoed["role"], "assistant");
        assert_eq!(echoed[field], value, "{field}: sent back as the server wrote it");
        assert_eq!(out.json()["choices"][0]["message"]["reasoning_content"], "Empty list.");
        let _ = text;
    }
}

#[test]
fn streamed_turns_keep_their_reasoning_and_the_client_sees_it_live() {
    let first = sse(&[
        json!({"role": "assistant", "reasoning_content": "Need "}),
        json!({"reasoning_content": "pets."}),
        json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "listPets", "arguments": "{}"}}]}),
    ]);
    let last = sse(&[json!({"reasoning_content": "Empty."}), json!({"content": "None."})]);
    let mut h = Harness::new(&pets(json!({"mode": "native"}))).llm([first, last]).tool_json(PETS, "[]");
    h.live = true;
    let mut req = user("Pets?");
    req["stream"] = json!(true);
    let out = h.run(&req);
    assert_eq!(out.llm_requests[1]["messages"][1]["reasoning_content"], "Need pets.");
    let all: String =
        out.sent.iter().map(|(_, b)| String::from_utf8_lossy(b).into_owned()).collect::<String>() + &out.body_text();
    let thought = all.find("\"reasoning_content\":\"Empty.\"").expect("the final turn's reasoning, live");
    let said = all.find("\"content\":\"None.\"").expect("the answer");
    assert!(thought < said, "reasoning before content: {all}");
    assert!(all.contains("\"reasoning_content\":\"Need \""), "every turn's thinking streams live: {all}");
}

#[test]
fn reasoning_return_false_keeps_it_from_the_client() {
    let last = json!({"role": "assistant", "content": "None.", "reasoning_content": "private"});
    let mut h = Harness::new(&pets(json!({"mode": "native", "reasoning": {"return": false}}))).llm([message(last)]);
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "None.");
    assert!(!out.body_text().contains("private"));
}

#[test]
fn earlier_turns_reasoning_is_in_the_steps_cut_to_max_observation_bytes() {
    let call = json!({"id": "c1", "type": "function", "function": {"name": "listPets", "arguments": "{}"}});
    let long = "x".repeat(5000);
    let first = json!({"role": "assistant", "content": null, "reasoning_content": long, "tool_calls": [call]});
    let cfg = pets(json!({"mode": "native", "returnSteps": true, "llm": {"maxObservationBytes": 1000}}));
    let mut h = Harness::new(&cfg).llm([message(first), text("None.")]).tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    let steps = &out.json()["api_agent_steps"];
    let reasoning = steps[0]["reasoning"].as_str().unwrap();
    assert!(reasoning.len() < 1100 && reasoning.starts_with("xxx"), "cut near 1000 bytes: {}", reasoning.len());
    assert!(steps[2].get("reasoning").is_none(), "a turn without reasoning has none");
}

#[test]
fn tool_calls_written_as_text_are_run() {
    for content in [
        "<tool_call>\n{\"name\": \"listPets\", \"arguments\": {\"limit\": 2}}\n</tool_call>",
        "<think>Two pets.</think><tool_call>{\"name\": \"listPets\", \"arguments\": \"{\\\"limit\\\": 2}\"}</tool_call>",
        "[TOOL_CALLS][{\"name\": \"listPets\", \"arguments\": {\"limit\": 2}}]",
        "[TOOL_CALLS]listPets[ARGS]{\"limit\": 2}",
    ] {
        let mut h = Harness::new(&pets(json!({"mode": "native"})))
            .llm([message(json!({"role": "assistant", "content": content})), text("Two.")])
            .tool_json(PETS, "[]");
        let out = h.run(&user("Two pets?"));
        assert_eq!(out.answer(), "Two.", "{content}");
        assert_eq!(out.tool_calls.len(), 1, "{content}");
        assert_eq!(out.tool_calls[0].path, "/v1/pets?limit=2", "{content}");
        let echoed = &out.llm_requests[1]["messages"][1];
        assert_eq!(echoed["tool_calls"][0]["function"]["name"], "listPets", "{content}");
        assert_eq!(out.llm_requests[1]["messages"][2]["tool_call_id"], echoed["tool_calls"][0]["id"]);
    }
    // Two calls in one turn.
    let two = "<tool_call>{\"name\": \"listPets\", \"arguments\": {\"limit\": 1}}</tool_call>\n\
               <tool_call>{\"name\": \"listPets\", \"arguments\": {\"limit\": 3}}</tool_call>";
    let mut h = Harness::new(&pets(json!({"mode": "native"})))
        .llm([message(json!({"role": "assistant", "content": two})), text("Done.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    let mut paths: Vec<&str> = out.tool_calls.iter().map(|c| c.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["/v1/pets?limit=1", "/v1/pets?limit=3"]);
}

fn refusal(param: &str) -> Turn {
    let body = json!({"error": {"message": format!("Unsupported parameter: '{param}' is not supported with this model."),
        "type": "invalid_request_error", "param": param, "code": "unsupported_parameter"}});
    Turn::Raw(400, body.to_string())
}

#[test]
fn a_refused_parameter_is_left_out_and_the_turn_goes_again() {
    for (mode, param) in [("react", "stop"), ("react", "max_tokens"), ("native", "temperature"), ("native", "top_p")] {
        let cfg = pets(json!({"mode": mode, "loop": "request"}));
        let fine = if mode == "react" { "Final Answer: fine" } else { "fine" };
        let mut h = Harness::new(&cfg).llm([refusal(param), text(fine)]);
        let mut req = user("Params?");
        req["temperature"] = json!(0.2);
        req["top_p"] = json!(0.9);
        let out = h.run(&req);
        assert_eq!(out.answer(), "fine", "{mode} {param}");
        let (first, second) = (&out.llm_requests[0], &out.llm_requests[1]);
        assert!(first.get(param).is_some() && second.get(param).is_none(), "{param}: {second}");
        if param == "max_tokens" {
            assert_eq!(second["max_completion_tokens"], first["max_tokens"]);
        }
    }
}

#[test]
fn a_refusal_of_something_else_or_of_a_parameter_not_sent_is_an_error() {
    let cfg = pets(json!({"loop": "request"}));
    let mut h = Harness::new(&cfg).llm([refusal("logit_bias")]);
    let out = h.run(&user("Params?"));
    assert_eq!(out.reply.status, 400, "the provider's error, as it is");
    let mut h = Harness::new(&pets(json!({"mode": "native", "loop": "request"}))).llm([refusal("top_p")]);
    assert_eq!(h.run(&user("Params?")).reply.status, 400, "top_p was not sent: nothing to step down");
}

#[test]
fn the_clients_reasoning_controls_reach_every_turn() {
    let controls = json!({"reasoning_effort": "high", "reasoning": {"effort": "low"}, "thinking": {"type": "enabled"},
        "enable_thinking": true, "chat_template_kwargs": {"enable_thinking": true}});
    let mut h = Harness::new(&pets(json!({})))
        .llm([classic_call("pets", "listPets", json!({"limit": 1})), classic_final("One.")])
        .tool_json(PETS, "[]");
    let mut req = user("One pet?");
    for (k, v) in controls.as_object().unwrap() {
        req[k] = v.clone();
    }
    let out = h.run(&req);
    for body in &out.llm_requests {
        for (k, v) in controls.as_object().unwrap() {
            assert_eq!(&body[k], v, "{k}");
        }
    }
}

#[test]
fn json_modes_formatting_call_carries_the_controls_and_the_stepped_down_limit() {
    let cfg = pets(json!({"loop": "request", "jsonResp": {"enable": true}}));
    let mut h = Harness::new(&cfg).llm([refusal("max_tokens"), classic_final("one pet"), text("{\"pets\": 1}")]);
    let mut req = user("Pets as JSON?");
    req["reasoning_effort"] = json!("low");
    let out = h.run(&req);
    assert_eq!(out.answer(), "{\"pets\":1}");
    let format_call = out.llm_requests.last().unwrap();
    assert_eq!(format_call["reasoning_effort"], "low", "{format_call}");
    assert!(format_call.get("max_tokens").is_none(), "{format_call}");
    assert!(format_call.get("max_completion_tokens").is_some(), "{format_call}");
}
