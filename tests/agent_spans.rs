//! The run's spans as the agent notes them for a host with a tracer (`agent::spans`): one
//! `invoke_agent` span, a `chat` span per LLM turn (retries and a stepped-down parameter inside it),
//! an `execute_tool` span per tool call, each call carrying its own span, and everything closed at
//! the end however the run ends. Off unless the host asks: no notes at all.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Failure;
use common::*;
use serde_json::json;

const PETS: &str = "outbound|8080||pets.svc";

fn pets(extra: serde_json::Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

fn traced(cfg: &str) -> Harness {
    let mut h = Harness::new(cfg);
    h.spans = true;
    h
}

#[test]
fn a_native_run_is_a_tree_of_spans() {
    let cfg = pets(json!({"mode": "native", "tracing": {"agentName": "pets"}}));
    let mut h = traced(&cfg)
        .llm([native_calls(&[("c1", "listPets", json!({"limit": 1}))]), text("None.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "None.");
    let tool_call = out.tool_calls[0].id.0;
    let llm_call = out.llm_calls[0].id.0;
    let want = [
        "open 1<- invoke_agent pets",
        "tag 1 gen_ai.operation.name=invoke_agent",
        "tag 1 gen_ai.agent.name=pets",
        // The first turn goes through the route: no callout carries its span.
        "open 2<1 chat client-model",
        "tag 2 gen_ai.operation.name=chat",
        "tag 2 gen_ai.request.model=client-model",
        "tag 2 api_agent.turn=1",
        "tag 2 http.response.status_code=200",
        "tag 2 gen_ai.response.model=mock-llm",
        "tag 2 gen_ai.usage.input_tokens=10",
        "tag 2 gen_ai.usage.output_tokens=5",
        "tag 2 gen_ai.response.finish_reasons=tool_calls",
        "close 2",
        "open 3<1 execute_tool listPets",
        "tag 3 gen_ai.operation.name=execute_tool",
        "tag 3 gen_ai.tool.name=listPets",
        "tag 3 gen_ai.tool.type=function",
        "tag 3 gen_ai.tool.call.id=c1",
        &format!("carry 3 call {tool_call}"),
        "tag 3 http.response.status_code=200",
        "close 3",
        "open 4<1 chat callout-model",
        "tag 4 gen_ai.operation.name=chat",
        "tag 4 gen_ai.request.model=callout-model",
        "tag 4 api_agent.turn=2",
        &format!("carry 4 call {llm_call}"),
        "tag 4 http.response.status_code=200",
        "tag 4 gen_ai.response.model=mock-llm",
        "tag 4 gen_ai.usage.input_tokens=10",
        "tag 4 gen_ai.usage.output_tokens=5",
        "tag 4 gen_ai.response.finish_reasons=stop",
        "close 4",
        "tag 1 api_agent.outcome=answer",
        "tag 1 gen_ai.response.model=mock-llm",
        "tag 1 gen_ai.usage.input_tokens=20",
        "tag 1 gen_ai.usage.output_tokens=10",
        "tag 1 api_agent.turns=2",
        "tag 1 api_agent.tool_calls=1",
        "close 1",
    ];
    assert_eq!(out.spans, want);
}

/// The lines of span `n` (its open, tags, carries and close).
fn of(spans: &[String], n: u32) -> Vec<String> {
    let open = format!("open {n}<");
    let mine = [format!("tag {n} "), format!("carry {n} "), format!("close {n}")];
    spans.iter().filter(|l| l.starts_with(&open) || mine.iter().any(|m| l.starts_with(m.as_str()))).cloned().collect()
}

#[test]
fn spans_are_off_unless_the_host_traces() {
    let cfg = pets(json!({"tracing": {"content": true}}));
    let mut h = Harness::new(&cfg)
        .llm([classic_call("t", "listPets", json!({})), classic_final("None.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "None.");
    assert!(out.spans.is_empty(), "{:?}", out.spans);
}

#[test]
fn a_retried_turn_and_a_stepped_down_parameter_stay_in_one_span() {
    let refused = r#"{"error":{"message":"Unsupported parameter: 'stop' is not supported with this model.","type":"invalid_request_error","param":"stop","code":"unsupported_parameter"}}"#;
    let cfg = pets(json!({"loop": "request"}));
    let mut h =
        traced(&cfg).llm([Turn::Raw(400, refused.into()), Turn::Fail(Failure::Timeout), classic_final("Done.")]);
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "Done.");
    let ids: Vec<u32> = out.llm_calls.iter().map(|c| c.id.0).collect();
    assert_eq!(ids.len(), 3);
    let chat = of(&out.spans, 2);
    assert_eq!(chat[0], "open 2<1 chat callout-model");
    for id in ids {
        assert!(chat.contains(&format!("carry 2 call {id}")), "every send of the turn carries its span: {chat:?}");
    }
    assert!(chat.contains(&"tag 2 api_agent.stepped_down=stop".to_string()), "{chat:?}");
    assert!(chat.contains(&"tag 2 api_agent.retries=1".to_string()), "{chat:?}");
    assert_eq!(chat.last().map(String::as_str), Some("close 2"));
    assert!(!out.spans.iter().any(|l| l.starts_with("open 3")), "one turn, one span: {:?}", out.spans);
}

#[test]
fn a_failed_run_ends_every_span_with_its_error() {
    let cfg = pets(json!({"loop": "request", "llm": {"maxRetries": 0}}));
    let mut h = traced(&cfg).llm([Turn::Fail(Failure::Timeout)]);
    let out = h.run(&user("Pets?"));
    assert_eq!(out.reply.status, 504);
    let chat = of(&out.spans, 2);
    assert!(chat.contains(&"tag 2 error.type=llm_timeout".to_string()), "{chat:?}");
    let agent = of(&out.spans, 1);
    assert!(agent.contains(&"tag 1 api_agent.outcome=error:llm_timeout".to_string()), "{agent:?}");
    assert!(agent.contains(&"tag 1 error.type=llm_timeout".to_string()), "{agent:?}");
    let closes: Vec<&String> = out.spans.iter().filter(|l| l.starts_with("close")).collect();
    assert_eq!(closes, ["close 2", "close 1"]);
}

#[test]
fn tool_failures_and_refusals_are_error_spans() {
    let cfg = pets(json!({"mode": "native"}));
    let mut h = traced(&cfg)
        .llm([
            native_calls(&[("c1", "listPets", json!({"limit": 1})), ("c2", "noSuchTool", json!({}))]),
            text("Sorry."),
        ])
        .tool(PETS, |_| ToolReply::Http(503, "busy".into()));
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "Sorry.");
    let refused = of(&out.spans, 3);
    assert_eq!(refused[0], "open 3<1 execute_tool _unknown_", "{:?}", out.spans);
    assert!(refused.contains(&"tag 3 error.type=refused".to_string()), "{refused:?}");
    let failed = of(&out.spans, 4);
    assert_eq!(failed[0], "open 4<1 execute_tool listPets");
    assert!(failed.contains(&"tag 4 gen_ai.tool.call.id=c1".to_string()), "{failed:?}");
    assert!(failed.contains(&"tag 4 error.type=503".to_string()), "{failed:?}");
    assert!(failed.contains(&"tag 4 http.response.status_code=503".to_string()), "{failed:?}");
}

#[test]
fn content_is_noted_only_when_asked_and_masked() {
    let cfg = config(
        &[("pets.svc", "oai-petstore.yaml", json!({"forwardHeaders": ["x-user-token"]}))],
        json!({"mode": "native", "tracing": {"content": true}}),
    );
    let mut h = traced(&cfg).llm([native_calls(&[("c1", "listPets", json!({"limit": 2}))]), text("None.")]).tool(
        PETS,
        |call| {
            let token =
                call.headers.iter().find(|(k, _)| k == "x-user-token").map(|(_, v)| v.clone()).unwrap_or_default();
            ToolReply::Http(200, format!("[] (you are {token}, key sk-llm)"))
        },
    );
    h.client_headers = vec![("x-user-token".into(), "user-secret-77".into())];
    let out = h.run(&user("Pets?"));
    let tool = of(&out.spans, 3);
    assert!(tool.contains(&r#"tag 3 gen_ai.tool.call.arguments={"limit":2}"#.to_string()), "{tool:?}");
    let result = tool.iter().find(|l| l.starts_with("tag 3 gen_ai.tool.call.result=")).expect("result");
    assert!(result.contains("you are [redacted], key [redacted]"), "{result}");
    assert!(!out.spans.iter().any(|l| l.contains("user-secret-77") || l.contains("sk-llm")), "{:?}", out.spans);
}

#[test]
fn json_mode_formats_in_a_turn_of_its_own() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let cfg = pets(json!({"jsonResp": {"enable": true, "jsonSchema": schema}}));
    let mut h = traced(&cfg).llm([classic_final("three"), text(r#"{"n": 3}"#)]);
    let out = h.run(&user("How many?"));
    assert_eq!(out.answer(), r#"{"n":3}"#);
    let format = of(&out.spans, 3);
    assert_eq!(format[0], "open 3<1 chat callout-model", "{:?}", out.spans);
    assert!(format.contains(&"tag 3 api_agent.turn=2".to_string()), "{format:?}");
    assert!(format.contains(&format!("carry 3 call {}", out.llm_calls[0].id.0)), "{format:?}");
    assert_eq!(format.last().map(String::as_str), Some("close 3"));
}

#[test]
fn a_request_the_host_ends_closes_its_spans_as_cancelled() {
    use api_agent::agent::{Agent, Command, Event};
    let cfg =
        std::rc::Rc::new(api_agent::config::Config::from_slice(pets(json!({"loop": "request"})).as_bytes()).unwrap());
    let meta = request_meta("r1", START_MS, 1);
    let mut agent = Agent::new(cfg, meta);
    agent.trace();
    let body = user("Pets?").to_string();
    let commands = agent.handle(Event::ClientRequest { body: body.as_bytes() }, START_MS);
    assert!(matches!(commands.as_slice(), [Command::Dispatch(_)]), "{commands:?}");
    let started: Vec<String> = agent.poll_spans().iter().map(span_line).collect();
    assert!(started.iter().any(|l| l.starts_with("carry 2 call")), "{started:?}");
    agent.handle(Event::Closed { host_status: None }, 0);
    let ended: Vec<String> = agent.poll_spans().iter().map(span_line).collect();
    let want = ["tag 2 error.type=cancelled", "close 2", "tag 1 api_agent.outcome=cancelled"];
    assert_eq!(&ended[..3], want, "{ended:?}");
    assert_eq!(ended.last().map(String::as_str), Some("close 1"));
    assert!(ended.contains(&"tag 1 error.type=cancelled".to_string()), "{ended:?}");
    agent.handle(Event::Closed { host_status: None }, 0);
    assert!(agent.poll_spans().is_empty(), "ended once");
}

#[test]
fn every_turn_names_the_model_requested_not_the_one_the_last_reply_named() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let cfg =
        pets(json!({"mode": "native", "llm": {"model": null}, "jsonResp": {"enable": true, "jsonSchema": schema}}));
    let mut h = traced(&cfg)
        .llm([native_calls(&[("c1", "listPets", json!({"limit": 1}))]), text("three"), text(r#"{"n": 3}"#)])
        .tool_json(PETS, "[]");
    let out = h.run(&user("How many?"));
    assert_eq!(out.answer(), r#"{"n":3}"#, "{:?}", out.spans);
    let opens: Vec<&String> = out.spans.iter().filter(|l| l.contains(" chat ")).collect();
    assert_eq!(opens.len(), 3, "{:?}", out.spans);
    assert!(opens.iter().all(|l| l.ends_with("chat client-model")), "{opens:?}");
    let requested: Vec<&String> = out.spans.iter().filter(|l| l.contains("gen_ai.request.model=")).collect();
    assert_eq!(requested.len(), 3);
    assert!(requested.iter().all(|l| l.ends_with("=client-model")), "{requested:?}");
    // Every call asked for the client's model too, the formatting call included.
    assert!(out.llm_requests.iter().all(|r| r["model"] == "client-model"), "{:?}", out.llm_requests);
}

#[test]
fn a_model_name_in_a_span_is_bounded_and_printable() {
    let cfg = pets(json!({"mode": "native", "llm": {"model": null}}));
    // The request's own check refuses a model over 256 bytes or with control characters (a 400, tested
    // in agent_responses.rs); one within it is still too long for a span name.
    let long = format!("m-x{}", "é".repeat(120));
    let mut req = user("Pets?");
    req["model"] = json!(long);
    let mut h = traced(&cfg)
        .llm([native_calls(&[("c1", "listPets", json!({"limit": 1}))]), text("None.")])
        .tool_json(PETS, "[]");
    let out = h.run(&req);
    assert_eq!(out.answer(), "None.");
    let named: Vec<&String> = out.spans.iter().filter(|l| l.contains(" chat ") || l.contains(".model=")).collect();
    assert!(named.len() >= 4, "{named:?}");
    for line in named {
        let model = line.split_once(" chat ").or_else(|| line.split_once(".model=")).unwrap().1;
        assert!(model.len() <= 128, "{} bytes", model.len());
        assert!(model.chars().all(|c| !c.is_control()), "{model:?}");
    }
    let first = out.spans.iter().find(|l| l.contains(" chat ")).unwrap();
    assert!(first.contains(" chat m-xéé"), "{first}");
}

#[test]
fn the_run_span_ends_with_the_answer_and_says_how_it_ended() {
    use api_agent::agent::{Agent, Event};
    use api_agent::config::Config;
    use std::rc::Rc;
    let cfg = Rc::new(Config::from_slice(pets(json!({"mode": "native"})).as_bytes()).unwrap());
    let mut a = Agent::new(cfg, request_meta("r1", START_MS, 1));
    a.trace();
    a.handle(Event::ClientRequest { body: user("Hi?").to_string().as_bytes() }, START_MS);
    let reply = completion(json!({"role": "assistant", "content": "Hello."}));
    a.handle(Event::UpstreamReply { status: 200, body: reply.as_bytes(), headers_sent: true }, START_MS + 5);
    // Before the stream closes: the span ends with the event that answered, after the report's end.
    let notes: Vec<String> = a.poll_spans().iter().map(span_line).collect();
    let end = notes.iter().position(|l| l == "close 1").unwrap_or_else(|| panic!("{notes:?}"));
    assert!(notes[..end].contains(&"tag 1 api_agent.outcome=answer".to_string()), "{notes:?}");
}
