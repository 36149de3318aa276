//! Live streaming in the harness (a host that declares it, as the dynamic module does): every turn a
//! streamed callout, the client's stream opened by the first 2xx turn, the final answer's text relayed
//! as the model produces it, and the stream's end, errors and limits.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Failure;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";

fn cfg(mode: &str, extra: Value) -> String {
    let mut e = json!({"mode": mode});
    if let (Value::Object(a), Value::Object(b)) = (&mut e, extra) {
        a.extend(b);
    }
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], e)
}

fn live(mode: &str, extra: Value, turns: Vec<Turn>) -> Harness {
    let mut h = Harness::new(&cfg(mode, extra)).llm(turns).tool_json(PETS, r#"{"id": 7, "name": "Rex"}"#);
    h.live = true;
    h
}

fn streaming(q: &str) -> Value {
    json!({"model": "client-model", "stream": true, "messages": [{"role": "user", "content": q}]})
}

/// The SSE events the client got, in order (the bytes sent live, then the reply's).
fn events(out: &Outcome) -> Vec<Value> {
    let mut all: Vec<u8> = out.sent.iter().flat_map(|(_, b)| b.clone()).collect();
    all.extend_from_slice(&out.reply.body);
    let text = String::from_utf8(all).unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn content(events: &[Value]) -> String {
    events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect()
}

/// The content the client had before the reply (the stream's end) was sent.
fn live_content(out: &Outcome) -> String {
    let text: String = out.sent.iter().map(|(_, b)| String::from_utf8_lossy(b).into_owned()).collect();
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect()
}

const ANSWER: &str = "Rex is a good dog, seven years old, and he lives at the shelter.";

#[test]
fn native_answer_is_relayed_as_produced_after_a_streamed_tool_turn() {
    let turns = vec![
        native_calls(&[("c1", "showPetById", json!({"petId": "7"}))]),
        Turn::Message(json!({"role": "assistant", "content": ANSWER})),
    ];
    let out = live("native", json!({}), turns).run(&streaming("Who is pet 7?"));
    assert_eq!(out.opened, Some(200));
    assert_eq!(out.reply.status, 200);
    assert!(out.llm_calls.iter().all(|c| c.stream), "every turn is a streamed callout");
    assert_eq!(out.llm_requests[0]["stream"], true);
    assert_eq!(out.llm_requests[0]["stream_options"], json!({"include_usage": true}));
    // The second turn's arguments were assembled from the deltas.
    assert_eq!(out.tool_calls[0].path, "/v1/pets/7");
    assert_eq!(live_content(&out), ANSWER, "the whole answer went out before the turn ended");
    let ev = events(&out);
    assert_eq!(ev[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(content(&ev), ANSWER, "no text twice");
    assert!(ev.iter().filter(|e| e["choices"][0]["delta"]["content"].is_string()).count() > 5, "in many deltas");
    assert!(ev.iter().all(|e| e["id"] == "chatcmpl-test1" && e["model"] == "mock-llm"), "the model that answered");
    assert_eq!(ev.last().unwrap()["choices"][0]["finish_reason"], "stop");
    // The usage of both streamed turns was read.
    assert_eq!(out.llm_requests.len(), 2);
}

#[test]
fn react_relays_only_the_text_after_final_answer() {
    let turns = vec![classic_call("I need pet 7.", "showPetById", json!({"petId": "7"})), classic_final(ANSWER)];
    let out = live("react", json!({}), turns).run(&streaming("Who is pet 7?"));
    assert_eq!(out.opened, Some(200));
    let ev = events(&out);
    assert_eq!(content(&ev), ANSWER);
    assert!(live_content(&out).starts_with("Rex is a good dog"), "relayed: {:?}", live_content(&out));
    assert!(!live_content(&out).contains("Thought"));
}

#[test]
fn usage_chunk_and_include_usage_follow_the_client() {
    let turns = vec![Turn::Message(json!({"role": "assistant", "content": "Hi."}))];
    let mut req = streaming("Hello?");
    req["stream_options"] = json!({"include_usage": true});
    let out = live("native", json!({}), turns).run(&req);
    let ev = events(&out);
    assert!(ev.iter().all(|e| e.get("usage").is_some()));
    assert_eq!(ev.last().unwrap()["usage"]["total_tokens"], 15);
    assert_eq!(content(&ev), "Hi.");
}

#[test]
fn a_first_turn_error_keeps_its_status_and_a_retried_429_opens_late() {
    let err = r#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#;
    let out = live("native", json!({}), vec![Turn::Raw(401, err.into())]).run(&streaming("Hi?"));
    assert_eq!(out.opened, None);
    assert_eq!((out.reply.status, out.reply.content_type), (401, "application/json"));
    assert_eq!(out.json()["error"]["message"], "bad key");

    let turns = vec![
        Turn::Raw(429, r#"{"error":{"message":"slow down"}}"#.into()),
        Turn::Message(json!({"role": "assistant", "content": "Hi."})),
    ];
    let out = live("native", json!({}), turns).run(&streaming("Hi?"));
    assert_eq!(out.llm_calls.len(), 2);
    assert_eq!(out.opened, Some(200));
    assert_eq!(content(&events(&out)), "Hi.");
}

#[test]
fn a_later_failure_ends_the_open_stream_with_an_error_event() {
    let turns = vec![
        native_calls(&[("c1", "showPetById", json!({"petId": "7"}))]),
        Turn::Raw(500, r#"{"error":{"message":"boom"}}"#.into()),
        Turn::Raw(500, r#"{"error":{"message":"boom"}}"#.into()),
        Turn::Raw(500, r#"{"error":{"message":"boom"}}"#.into()),
    ];
    let out = live("native", json!({}), turns).run(&streaming("Who is pet 7?"));
    assert_eq!(out.opened, Some(200));
    assert_eq!(out.reply.content_type, "text/event-stream");
    let body = out.body_text();
    assert!(body.starts_with("data: {\"error\""), "{body}");
    assert!(body.contains("llm_error") && body.ends_with("data: [DONE]\n\n"), "{body}");
}

#[test]
fn a_turn_that_sent_text_is_not_asked_again() {
    let good = sse_of(&completion(json!({"role": "assistant", "content": "It is cold in Oslo today."})));
    // The stream breaks off after some content (no finish, no [DONE]) and the call then fails.
    let before = &good[..good.find("oday").unwrap()];
    let cut = &good[..before.rfind("data: ").unwrap()];
    let turns = vec![Turn::RawWith(200, vec![("content-type".into(), "text/event-stream".into())], cut.into())];
    let mut h = live("native", json!({}), turns);
    let out = h.run(&streaming("Weather?"));
    // A cut stream still assembles (the content so far): what was relayed is the answer.
    assert_eq!(content(&events(&out)), "It is cold in Oslo t");

    let turns = vec![
        Turn::RawWith(200, vec![("content-type".into(), "text/event-stream".into())], "data: {not json\n\n".into()),
        Turn::Message(json!({"role": "assistant", "content": "never asked"})),
    ];
    let out = live("native", json!({}), turns).run(&streaming("Weather?"));
    assert_eq!(out.llm_calls.len(), 1);
    assert!(out.body_text().contains("llm_bad_reply"), "{}", out.body_text());
}

#[test]
fn a_failed_call_after_relayed_text_is_not_retried() {
    // A turn relays text, then its connection breaks: the client has part of an answer that a retry
    // would write again, differently.
    let good = sse_of(&completion(json!({"role": "assistant", "content": "It is cold in Oslo today."})));
    let h = live("native", json!({}), vec![]);
    let cfg = std::rc::Rc::clone(&h.cfg);
    let meta = api_agent::agent::RequestMeta { live: true, ..request_meta("x", START_MS, 1) };
    let mut agent = api_agent::agent::Agent::new(cfg, meta);
    let cmds = agent.handle(
        api_agent::agent::Event::ClientRequest { body: streaming("Weather?").to_string().as_bytes() },
        START_MS,
    );
    let id = match &cmds[0] {
        api_agent::agent::Command::Dispatch(c) => c.id,
        other => panic!("{other:?}"),
    };
    let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
    let head = agent.handle(api_agent::agent::Event::CallHead { id, status: 200, headers: &headers }, START_MS + 5);
    assert!(head.is_empty(), "{head:?}");
    let sent =
        agent.handle(api_agent::agent::Event::CallData { id, data: &good.as_bytes()[..good.len() / 2] }, START_MS + 6);
    assert!(matches!(sent[0], api_agent::agent::Command::Open(_)), "the first text opens the stream: {sent:?}");
    let failure = Failure::Broken("reset".into());
    let end = agent.handle(api_agent::agent::Event::CallFailed { id, failure: &failure }, START_MS + 7);
    assert!(agent.is_done(), "{end:?}");
    match end.last() {
        Some(api_agent::agent::Command::Reply(r)) => {
            let body = String::from_utf8_lossy(&r.body);
            assert!(body.contains("llm_unavailable") && body.ends_with("data: [DONE]\n\n"), "{body}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn json_mode_sends_the_formatted_answer_whole() {
    let turns = vec![
        Turn::Message(json!({"role": "assistant", "content": "Rex, 7"})),
        Turn::Message(json!({"role": "assistant", "content": "{\"name\": \"Rex\"}"})),
    ];
    let mut req = streaming("Who is pet 7?");
    req["response_format"] = json!({"type": "json_object"});
    let out = live("native", json!({}), turns).run(&req);
    assert_eq!(out.opened, None, "no tools ran: the answer is the whole response");
    assert_eq!(live_content(&out), "", "nothing relayed before it is JSON");
    assert_eq!(content(&events(&out)), "{\"name\":\"Rex\"}");
    assert!(!out.llm_calls[1].stream, "the formatting call is not streamed");
}

#[test]
fn text_before_a_tool_call_stays_and_the_answer_starts_a_new_paragraph() {
    let first = json!({"role": "assistant", "content": "Let me look that up.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "showPetById", "arguments": "{\"petId\":\"7\"}"}}]});
    let turns = vec![Turn::Message(first), Turn::Message(json!({"role": "assistant", "content": "Rex."}))];
    let out = live("native", json!({}), turns).run(&streaming("Who is pet 7?"));
    assert_eq!(content(&events(&out)), "Let me look that up.\n\nRex.");
    // The conversation the model sees is unchanged: its own message, then the tool's result.
    assert_eq!(out.llm_requests[1]["messages"][1]["content"], "Let me look that up.");
}

#[test]
fn the_answer_limit_counts_what_was_streamed() {
    let long = "x".repeat(6000);
    let turns = vec![Turn::Message(json!({"role": "assistant", "content": long}))];
    let out = live("native", json!({"maxResponseBytes": 4096}), turns).run(&streaming("Long?"));
    assert_eq!(out.opened, Some(200));
    assert!(out.body_text().contains("response_too_large"), "{}", out.body_text());
    let streamed: usize = out.sent.iter().map(|(_, b)| b.len()).sum();
    assert!(streamed + out.reply.body.len() < 4096 + 1024, "the relay stops near the limit: {streamed}");
}

#[test]
fn a_plain_client_and_a_non_live_host_are_unchanged() {
    let turns = vec![Turn::Message(json!({"role": "assistant", "content": "Hi."}))];
    let out = live("native", json!({}), turns.clone()).run(&user("Hi?"));
    assert_eq!(out.opened, None);
    assert!(!out.llm_calls.is_empty() || !out.first_body.is_empty());
    assert!(out.llm_calls.iter().all(|c| !c.stream));
    assert_eq!(out.answer(), "Hi.");
    let mut h = Harness::new(&cfg("native", json!({}))).llm(turns);
    let out = h.run(&streaming("Hi?"));
    assert_eq!(out.opened, None);
    assert!(out.first_body.starts_with(b"{"), "the first turn goes through the route");
}

#[test]
fn a_host_may_leave_out_the_sse_body_it_streamed() {
    let turns = vec![
        native_calls(&[("c1", "showPetById", json!({"petId": "7"}))]),
        Turn::Message(json!({"role": "assistant", "content": ANSWER})),
    ];
    let mut h = live("native", json!({}), turns);
    h.sse_body_left_out = true;
    let out = h.run(&streaming("Who is pet 7?"));
    assert_eq!(out.tool_calls[0].path, "/v1/pets/7");
    assert_eq!(content(&events(&out)), ANSWER);
}

/// The reasoning the client got as `delta.reasoning_content`.
fn reasoning(events: &[Value]) -> String {
    events.iter().filter_map(|e| e["choices"][0]["delta"]["reasoning_content"].as_str()).collect()
}

#[test]
fn a_think_block_the_chat_template_opened_is_not_relayed_as_the_answer() {
    // DeepSeek-R1 and QwQ templates open the block: the reply carries only `</think>`.
    let turns = vec![
        native_calls(&[("c1", "showPetById", json!({"petId": "7"}))]),
        Turn::Message(json!({"role": "assistant", "content": format!("The user wants pet 7.\n</think>\n\n{ANSWER}")})),
    ];
    let out = live("native", json!({"reasoning": {"templateOpens": true}}), turns).run(&streaming("Who is pet 7?"));
    let ev = events(&out);
    assert_eq!(live_content(&out), ANSWER, "relayed live, without the thinking");
    assert_eq!(content(&ev), ANSWER);
    assert_eq!(reasoning(&ev), "The user wants pet 7.");
}

#[test]
fn a_lone_close_teaches_the_later_turns() {
    // Without `templateOpens`, the first such turn is only known at its `</think>`: its text went out
    // as it came (the turn before the tool call); every later turn is read as thinking until `</think>`.
    let turns = vec![
        Turn::Message(json!({"role": "assistant", "content": "Checking.\n</think>\n", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "showPetById", "arguments": "{\"petId\": \"7\"}"}}]})),
        Turn::Message(json!({"role": "assistant", "content": format!("Found him.\n</think>\n{ANSWER}")})),
    ];
    let out = live("native", json!({}), turns).run(&streaming("Who is pet 7?"));
    let all = content(&events(&out));
    assert!(all.ends_with(ANSWER), "{all:?}");
    assert!(!all.contains("Found him"), "the later turn's thinking is not the answer: {all:?}");
    assert_eq!(all.matches("</think>").count(), all.matches("Checking.").count(), "{all:?}");
}
