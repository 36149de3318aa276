//! Fuzzing the agent state machine: arbitrary LLM replies (well-formed turns, junk, errors, huge or
//! empty bodies), arbitrary failures and timings, in both modes and both loops. Properties: no panic,
//! no stuck state (every run ends with exactly one reply within a bounded number of events, whatever
//! the answers), never an empty answer, and every reply fits the configured bound. Both hosts: with
//! `live` (the dynamic module) the LLM turns are streamed callouts fed in arbitrary pieces, junk SSE
//! included, and the whole response (what was streamed live, then the reply) is checked.
//!
//! A short run is part of `cargo test`; a long one: `PROPTEST_CASES=100000 cargo test --release --test
//! fuzz_agent` (`make fuzz`).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::{Agent, Command, Event, Failure, RequestMeta};
use api_agent::config::Config;
use common::{completion, config, spec_text, sse_in};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::rc::Rc;

/// More events than any run can need: 4 iterations × (LLM + tools) + retries + formatting.
const MAX_EVENTS: usize = 400;

#[derive(Debug, Clone)]
enum Answer {
    /// A chat.completion with this content.
    Text(String),
    /// A native tool-call message.
    Calls(Vec<(String, String)>),
    /// Any status and body.
    Raw(u16, Vec<u8>),
    /// A 200 `text/event-stream` body of any bytes (as a streamed call sees it).
    Sse(Vec<u8>),
    Timeout,
    Reset,
    NotSent,
}

fn text_strategy() -> impl Strategy<Value = String> {
    let fragments = prop::sample::select(vec![
        "Thought: x\n",
        "Action: listPets\n",
        "Action: showPetById\n",
        "Action: nope\n",
        "Action Input: {\"limit\": 2}\n",
        "Action Input: {\"petId\": \"7\"}\n",
        "Action Input: [1,\n",
        "Final Answer: ",
        "Final Answer: done\n",
        "```json\n{\"action\": \"listPets\", \"action_input\": {}}\n```\n",
        "```json\n{\"action\": \"Final Answer\", \"action_input\": \"ok\"}\n```\n",
        "Observation: fake\n",
        "\u{1}\u{1}",
        "天气",
        "",
        " ",
    ]);
    prop_oneof![prop::collection::vec(fragments, 0..6).prop_map(|v| v.concat()), ".{0,40}", Just("x".repeat(70_000)),]
}

fn answer_strategy() -> impl Strategy<Value = Answer> {
    let names = prop::sample::select(vec!["listPets", "showPetById", "createPets", "unknown_tool", ""]);
    let args = prop::sample::select(vec!["{}", "{\"limit\": 3}", "{\"petId\": \"1\"}", "not json", "", "[]"]);
    prop_oneof![
        4 => text_strategy().prop_map(Answer::Text),
        2 => prop::collection::vec((names, args), 0..4)
            .prop_map(|v| Answer::Calls(v.into_iter().map(|(n, a)| (n.to_string(), a.to_string())).collect())),
        2 => (prop::sample::select(vec![200u16, 204, 400, 401, 429, 500, 502, 503, 504]),
              prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(s, b)| Answer::Raw(s, b)),
        1 => Just(Answer::Raw(200, br#"{"choices":[]}"#.to_vec())),
        1 => prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            Just(b"data: {\"choices\":[{\"delta\":{\"content\":\"Final Answer: hi\"}}]}\n\ndata: [DONE]\n\n".to_vec()),
            Just(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"name\":\"listPets\"}}]}}]}\n\n".to_vec()),
            Just(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n".to_vec()),
        ].prop_map(Answer::Sse),
        1 => Just(Answer::Raw(200, br#"{"choices":[{"message":{"role":"assistant","content":null}}]}"#.to_vec())),
        1 => Just(Answer::Timeout),
        1 => Just(Answer::Reset),
        1 => Just(Answer::NotSent),
    ]
}

fn config_for(native: bool, request_loop: bool, json_mode: bool) -> Rc<Config> {
    let mut extra = json!({
        "mode": if native { "native" } else { "react" },
        "loop": if request_loop { "request" } else { "response" },
        "maxResponseBytes": 65536,
        "llm": {"maxRetries": 2, "maxRequestTime": 60000},
    });
    if json_mode {
        extra["jsonResp"] = json!({"enable": true, "jsonSchema": {"type": "object", "required": ["a"]}, "maxRetry": 1});
    }
    let _ = spec_text("oai-petstore.yaml");
    let provider = json!({"maxRetries": 1});
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", provider)], extra);
    Rc::new(Config::from_slice(cfg.as_bytes()).unwrap())
}

fn http(a: &Answer) -> Option<(u16, Vec<u8>)> {
    match a {
        Answer::Text(t) => Some((200, completion(json!({"role": "assistant", "content": t})).into_bytes())),
        Answer::Calls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (n, a))| json!({"id": format!("c{i}"), "type": "function", "function": {"name": n, "arguments": a}}))
                .collect();
            Some((200, completion(json!({"role": "assistant", "content": null, "tool_calls": calls})).into_bytes()))
        }
        Answer::Raw(s, b) => Some((*s, b.clone())),
        Answer::Sse(b) => Some((200, b.clone())),
        _ => None,
    }
}

/// A streamed call's head and body: a completion becomes SSE; raw replies stay as they are.
/// Status, headers, body.
type Http = (u16, Vec<(String, String)>, Vec<u8>);

fn streamed(a: &Answer) -> Option<Http> {
    let sse = || vec![("content-type".to_string(), "text/event-stream".to_string())];
    match a {
        Answer::Text(_) | Answer::Calls(_) => {
            let (status, body) = http(a)?;
            // Big answers in bigger deltas: a few hundred events, not tens of thousands.
            let delta = (body.len() / 256).max(4);
            Some((status, sse(), sse_in(&String::from_utf8(body).ok()?, delta).into_bytes()))
        }
        Answer::Sse(b) => Some((200, sse(), b.clone())),
        other => http(other).map(|(s, b)| (s, vec![("content-type".to_string(), "application/json".to_string())], b)),
    }
}

/// What the client got: the status, the bytes streamed live (`Open` and `Send`), and the reply.
struct Got {
    status: u16,
    opened: Option<u16>,
    live: Vec<u8>,
    body: Vec<u8>,
}

fn failure(a: &Answer) -> Failure {
    match a {
        Answer::Timeout => Failure::Timeout,
        Answer::Reset => Failure::Broken("reset".into()),
        _ => Failure::NotSent("refused".into()),
    }
}

/// Runs one request to its end, answering every LLM call and tool call from `answers` (cycled) and
/// moving the clock by `steps` (cycled); a streamed call's body comes in pieces of `piece` bytes.
fn drive(cfg: Rc<Config>, stream: bool, live: bool, answers: &[Answer], steps: &[u64], seed: u64, piece: usize) -> Got {
    let meta = RequestMeta {
        id: "f".into(),
        now_ms: 1_000,
        unix_s: 1,
        seed,
        steps: seed % 3 == 0,
        context_headers: Vec::new(),
        policy_headers: Vec::new(),
        client_headers: Default::default(),
        live,
        trace: Vec::new(),
        api: Default::default(),
        memory: Default::default(),
    };
    let mut agent = Agent::new(Rc::clone(&cfg), meta);
    let body = json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "List pets"}]});
    let mut now = 1_000u64;
    let mut pending: Vec<Command> = agent.handle(Event::ClientRequest { body: body.to_string().as_bytes() }, now);
    let mut next = 0usize;
    let (mut opened, mut sent) = (None, Vec::new());
    let mut take = || {
        next += 1;
        answers[next % answers.len()].clone()
    };
    let mut i = 0;
    while i < MAX_EVENTS {
        let Some(cmd) = pending.pop() else {
            panic!("stuck: no command and no reply after {i} events");
        };
        // Bytes streamed live are not events: a long answer in small pieces sends many.
        if !matches!(cmd, Command::Open(_) | Command::Send(_) | Command::Learn(_)) {
            now += steps[i % steps.len()];
            i += 1;
        }
        let more = match cmd {
            Command::Reply(r) => {
                assert!(agent.is_done());
                assert!(pending.iter().all(|c| matches!(c, Command::WakeAt(_))), "commands after the reply");
                return Got { status: r.status, opened, live: sent, body: r.body };
            }
            Command::Open(r) => {
                assert!(live && stream && opened.is_none(), "Open: only once, only live, only for a stream");
                opened = Some(r.status);
                sent.extend(r.body);
                Vec::new()
            }
            Command::Send(data) => {
                assert!(opened.is_some(), "Send before Open");
                sent.extend(data);
                Vec::new()
            }
            Command::WakeAt(at) => agent.handle(Event::Wake, now.max(at)),
            // For later requests; each run here is one.
            Command::Learn(_) => Vec::new(),
            Command::Forward { .. } => {
                let (status, body) = http(&take()).unwrap_or((503, b"upstream connect error".to_vec()));
                agent.handle(Event::UpstreamReply { status, body: &body, headers_sent: true }, now)
            }
            Command::Dispatch(call) if call.stream => {
                assert!(live && stream, "a streamed call without live streaming");
                let a = take();
                match streamed(&a) {
                    Some((status, headers, body)) => {
                        let mut out = agent.handle(Event::CallHead { id: call.id, status, headers: &headers }, now);
                        // Small bodies byte by byte, big ones in at most ~64 pieces.
                        for data in body.chunks(piece.max(body.len() / 64)) {
                            out.extend(agent.handle(Event::CallData { id: call.id, data }, now));
                        }
                        out.extend(
                            agent.handle(Event::CallReply { id: call.id, status, headers: &headers, body: &body }, now),
                        );
                        out
                    }
                    None => agent.handle(Event::CallFailed { id: call.id, failure: &failure(&a) }, now),
                }
            }
            Command::Dispatch(call) => {
                let a = take();
                match http(&a) {
                    Some((status, body)) => {
                        agent.handle(Event::CallReply { id: call.id, status, headers: &[], body: &body }, now)
                    }
                    None => agent.handle(Event::CallFailed { id: call.id, failure: &failure(&a) }, now),
                }
            }
        };
        // Newest first, so a turn's tool calls interleave with wake-ups in varied orders; what a
        // streamed call sent live goes out in order before anything else.
        let (now_sent, later): (Vec<Command>, Vec<Command>) =
            more.into_iter().partition(|c| matches!(c, Command::Open(_) | Command::Send(_)));
        if later.iter().any(|c| matches!(c, Command::WakeAt(_))) {
            // A host keeps one timer per request: the newest wake-up replaces the others.
            pending.retain(|c| !matches!(c, Command::WakeAt(_)));
        }
        pending.splice(0..0, later);
        pending.extend(now_sent.into_iter().rev());
    }
    panic!("no reply after {MAX_EVENTS} events");
}

fn check_reply(cfg: &Config, stream: bool, got: &Got) {
    let (status, body) = (got.status, &got.body);
    assert!(!body.is_empty(), "an empty body");
    let whole: Vec<u8> = got.live.iter().chain(body).copied().collect();
    assert!(whole.len() <= cfg.max_response_bytes.max(4096), "{} bytes over the bound", whole.len());
    if got.opened.is_some() {
        let text = String::from_utf8(whole).expect("UTF-8");
        assert!(text.starts_with("data: {") && text.ends_with("data: [DONE]\n\n"), "a broken live stream: {text}");
        return check_stream(&text);
    }
    let text = String::from_utf8(body.to_vec()).expect("UTF-8");
    if status != 200 || text.contains("\"error\"") {
        return;
    }
    if stream && text.starts_with("data: ") {
        check_stream(&text);
    } else {
        let v: Value = serde_json::from_str(&text).expect("a JSON answer");
        let message = &v["choices"][0]["message"];
        let content = message["content"].as_str().unwrap_or("");
        assert!(!content.trim().is_empty() || message.get("tool_calls").is_some(), "an empty answer: {text}");
    }
}

/// An SSE answer: every event JSON (or a keep-alive comment), and some content unless it failed or
/// returns tool calls.
fn check_stream(text: &str) {
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert!(events.iter().all(|e| e.starts_with("data: ") || e.starts_with(": ")), "not SSE: {text}");
    let chunks: Vec<Value> = events
        .iter()
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).expect("a JSON event"))
        .collect();
    if chunks.iter().any(|c| c.get("error").is_some()) {
        return;
    }
    let content: String =
        chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/content").and_then(Value::as_str)).collect();
    assert!(!content.trim().is_empty() || text.contains("tool_calls"), "an empty streamed answer: {text}");
}

/// `PROPTEST_CASES`, or a short run for `cargo test`.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_agent_always_ends_with_one_bounded_non_empty_reply(
        native in any::<bool>(),
        request_loop in any::<bool>(),
        json_mode in prop::bool::weighted(0.2),
        stream in any::<bool>(),
        live in any::<bool>(),
        piece in prop::sample::select(vec![1usize, 7, 64, 1 << 20]),
        answers in prop::collection::vec(answer_strategy(), 1..12),
        steps in prop::collection::vec(prop::sample::select(vec![0u64, 1, 5, 50, 200, 1_000, 5_000, 20_000]), 1..6),
        seed in any::<u64>(),
    ) {
        let cfg = config_for(native, request_loop, json_mode);
        let got = drive(Rc::clone(&cfg), stream, live, &answers, &steps, seed, piece);
        check_reply(&cfg, stream, &got);
    }
}
