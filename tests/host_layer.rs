//! The host layer's stream protocol (`host::StreamRun`'s `on_*` host facts) driven through a fake host,
//! as both shims drive it, without Envoy: the facts a host hands over (the request's body, the
//! upstream's head and body, callout replies and failures by the host's own token, wake-ups) and the
//! decisions that come back (forward, dispatch, the answer's head and body, a local reply, a live
//! response). Each shim only translates its ABI to these calls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use api_agent::agent::SummaryValue;
use api_agent::agent::{Call, Reply};
use api_agent::config::{Plugin, SummaryForms};
use api_agent::host::admit::Arrival;
use api_agent::host::port::Refusal;
use api_agent::host::{Attr, Head, Headers, Host, Instance, Lost, Port, Start, StreamRun};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;

/// What the fake host was asked to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Did {
    SetHeader(String, Option<String>),
    LocalReply(u16, Vec<u8>),
    Forward,
    Dispatch(u64),
    AnswerBody(Vec<u8>),
    Open(u16, &'static str),
    Send(Vec<u8>, bool),
}

#[derive(Default)]
struct FakePort {
    upstream_status: &'static str,
    upstream_type: &'static str,
    did: RefCell<Vec<Did>>,
}

impl Port for FakePort {
    fn header(&self, map: Headers, name: &str) -> Option<String> {
        let value = match (map, name) {
            (Headers::Request, ":method") => "POST",
            (Headers::Request, ":path") => "/v1/chat/completions",
            (Headers::Request, ":authority") => "agent.local",
            (Headers::Request, "content-type") => "application/json",
            (Headers::Response, ":status") => self.upstream_status,
            (Headers::Response, "content-type") => self.upstream_type,
            _ => return None,
        };
        Some(value.to_string())
    }
    fn set_header(&self, map: Headers, name: &str, value: Option<&str>) -> bool {
        if map == Headers::Response {
            self.did.borrow_mut().push(Did::SetHeader(name.into(), value.map(Into::into)));
        }
        true
    }
    fn attribute(&self, _attr: Attr) -> Option<String> {
        None
    }
    fn local_reply(&self, status: u16, _headers: &[(&str, &str)], body: &[u8]) {
        self.did.borrow_mut().push(Did::LocalReply(status, body.to_vec()));
    }
    fn set_summary(&self, _fields: &[(&'static str, SummaryValue)], _forms: SummaryForms) {}
}

/// A host: the calls it started (by its own tokens, from 1000 on), and whether it refuses them.
struct FakeHost {
    port: FakePort,
    now: u64,
    calls: Vec<(u64, Call)>,
    refuse: Option<Refusal>,
}

impl Host for FakeHost {
    type Action = &'static str;
    type Port = FakePort;
    fn port(&self) -> &FakePort {
        &self.port
    }
    fn holding(&self) -> &'static str {
        "hold"
    }
    fn passing(&self) -> &'static str {
        "pass"
    }
    fn forward(&mut self, _rid: &str, body: &[u8]) -> &'static str {
        assert!(!body.is_empty());
        self.port.did.borrow_mut().push(Did::Forward);
        "continue"
    }
    fn dispatch(&mut self, call: &Call) -> Result<u64, Refusal> {
        if let Some(r) = self.refuse {
            return Err(r);
        }
        let token = 1000 + self.calls.len() as u64;
        self.calls.push((token, call.clone()));
        self.port.did.borrow_mut().push(Did::Dispatch(token));
        Ok(token)
    }
    fn answer_body(&mut self, _rid: &str, body: &[u8]) -> &'static str {
        self.port.did.borrow_mut().push(Did::AnswerBody(body.to_vec()));
        "continue"
    }
    fn open(&mut self, _rid: &str, reply: &Reply) -> Option<&'static str> {
        self.port.did.borrow_mut().push(Did::Open(reply.status, reply.content_type));
        self.port.did.borrow_mut().push(Did::Send(reply.body.clone(), false));
        Some("hold")
    }
    fn send(&mut self, data: &[u8], end: bool) {
        self.port.did.borrow_mut().push(Did::Send(data.to_vec(), end));
    }
    fn now_ms(&self) -> u64 {
        self.now
    }
}

impl FakeHost {
    fn did(&self) -> Vec<Did> {
        std::mem::take(&mut *self.port.did.borrow_mut())
    }
    fn last_call(&self) -> (u64, Call) {
        self.calls.last().cloned().expect("a call was dispatched")
    }
}

const SPEC: &str = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: 'http://pets.local'}]\npaths:\n  /pets:\n    get:\n      operationId: listPets\n      summary: List pets\n      responses: {'200': {description: ok}}\n";

fn exchange(loop_phase: &str, retries: u32) -> StreamRun {
    let config = json!({
        "mode": "native", "loop": loop_phase,
        "llm": {"apiKey": "sk-llm", "serviceName": "llm.svc", "servicePort": 443, "domain": "llm.local",
                "path": "/v1/chat/completions", "maxIterations": 3, "maxRetries": retries},
        "apis": [{"apiProvider": {"serviceName": "pets.svc", "servicePort": 8080}, "api": SPEC}],
    });
    let plugin = Plugin::from_slice(config.to_string().as_bytes()).unwrap();
    StreamRun::new(Some(Rc::new(Instance::new(plugin))))
}

fn fake_host() -> FakeHost {
    let port = FakePort { upstream_status: "200", upstream_type: "application/json", ..FakePort::default() };
    FakeHost { port, now: 1_000_000, calls: Vec::new(), refuse: None }
}

fn start(ex: &mut StreamRun, host: &FakeHost, live: bool) {
    let arrival = || Arrival { now_ns: 1_000_000 * 1_000_000, seq: 1, live };
    assert_eq!(ex.start(host.port(), false, arrival), Start::Run);
}

fn completion(message: Value) -> Vec<u8> {
    json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
    .into_bytes()
}

fn tool_turn() -> Vec<u8> {
    completion(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "listPets", "arguments": "{}"}}]}))
}

fn final_turn(text: &str) -> Vec<u8> {
    completion(json!({"role": "assistant", "content": text}))
}

fn ask(stream: bool) -> Vec<u8> {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Which pets?"}]})
        .to_string()
        .into_bytes()
}

fn json_type() -> Vec<(String, String)> {
    vec![("content-type".into(), "application/json".into())]
}

fn header(name: &str, value: Option<&str>) -> Did {
    Did::SetHeader(name.into(), value.map(Into::into))
}

/// The answer's head as the layer sets it: status (if any), content type, no length, no encoding.
fn answer_head(status: Option<&str>, content_type: &str) -> Vec<Did> {
    let mut head: Vec<Did> = status.map(|s| header(":status", Some(s))).into_iter().collect();
    head.extend([header("content-type", Some(content_type)), header("content-length", None)]);
    head.push(header("content-encoding", None));
    head
}

fn answer_text(did: &[Did]) -> String {
    let body = did.iter().rev().find_map(|d| match d {
        Did::AnswerBody(b) | Did::LocalReply(_, b) => Some(b.clone()),
        _ => None,
    });
    String::from_utf8(body.expect("an answer")).unwrap()
}

/// A host that holds the response head (the dynamic module): request body → forward; the upstream's
/// tool turn → a callout with the host's token; its reply by that token → the next LLM turn; that
/// reply → the answer's head (set now, with the answer's status) and body.
#[test]
fn response_loop_on_a_host_that_holds_the_head() {
    let mut ex = exchange("response", 0);
    let mut host = fake_host();
    start(&mut ex, &host, false);
    host.did();
    assert_eq!(ex.on_request_body(&mut host, &ask(false)), "continue");
    assert_eq!(host.did(), [Did::Forward]);
    assert!(matches!(ex.response_head(&mut host, false, true), Head::Hold));
    assert!(host.did().is_empty(), "the head is held, not rewritten yet");
    assert!(ex.awaits_upstream_body());
    assert_eq!(ex.on_upstream_body(&mut host, &tool_turn()), "hold");
    let (tool, call) = host.last_call();
    assert_eq!(call.cluster, "outbound|8080||pets.svc");
    assert_eq!(host.did(), [Did::Dispatch(tool)]);
    let pets = br#"[{"name": "Rex"}]"#;
    assert_eq!(ex.on_callout_reply(&mut host, tool, Some(200), &json_type(), pets), "hold");
    let (llm, call) = host.last_call();
    assert_ne!(llm, tool);
    assert!(String::from_utf8_lossy(call.body.as_deref().unwrap()).contains("Rex"));
    host.did();
    // A second reply for the same token is unknown: nothing happens.
    assert_eq!(ex.on_callout_reply(&mut host, tool, Some(200), &json_type(), pets), "hold");
    assert!(host.did().is_empty());
    assert_eq!(ex.on_callout_reply(&mut host, llm, Some(200), &json_type(), &final_turn("Rex.")), "continue");
    let did = host.did();
    assert_eq!(did[..4], answer_head(Some("200"), "application/json")[..]);
    assert!(answer_text(&did).contains("Rex."), "{did:?}");
    assert!(ex.is_done());
}

/// A host that sends the head on (Proxy-Wasm): the answer's head is set when the upstream's comes
/// (the provider's 201 becomes 200), and a late error goes in the body with the status left alone.
#[test]
fn late_error_on_a_host_that_sent_the_head() {
    let mut ex = exchange("response", 0);
    let mut host = fake_host();
    host.port.upstream_status = "201";
    start(&mut ex, &host, false);
    ex.on_request_body(&mut host, &ask(false));
    host.did();
    assert!(matches!(ex.response_head(&mut host, false, false), Head::Hold));
    assert_eq!(host.did(), answer_head(Some("200"), "application/json"));
    ex.on_upstream_body(&mut host, &tool_turn());
    let (tool, _) = host.last_call();
    ex.on_callout_reply(&mut host, tool, Some(200), &json_type(), b"[]");
    let (llm, _) = host.last_call();
    host.did();
    // The LLM's callout is reset: with no retries left the agent answers 502, too late for the status.
    assert_eq!(ex.on_callout_failed(&mut host, llm, Lost::Reset), "continue");
    let did = host.did();
    assert!(!did.iter().any(|d| matches!(d, Did::SetHeader(..))), "the head went out already: {did:?}");
    let text = answer_text(&did);
    assert!(text.contains("error"), "{text}");
    assert!(ex.is_done());
}

/// The same failure on a host that holds the head: the answer goes out with its own status.
#[test]
fn late_error_on_a_host_that_holds_the_head_sets_its_status() {
    let mut ex = exchange("response", 0);
    let mut host = fake_host();
    start(&mut ex, &host, false);
    ex.on_request_body(&mut host, &ask(false));
    ex.response_head(&mut host, false, true);
    ex.on_upstream_body(&mut host, &tool_turn());
    let (tool, _) = host.last_call();
    ex.on_callout_reply(&mut host, tool, Some(200), &json_type(), b"[]");
    let (llm, _) = host.last_call();
    host.did();
    ex.on_callout_reply(&mut host, llm, Some(504), &[], b"upstream request timeout");
    let did = host.did();
    assert_eq!(did[0], header(":status", Some("504")), "{did:?}");
    assert!(matches!(did.last(), Some(Did::AnswerBody(_))));
}

/// `loop: request`: every turn a callout, the answer a local reply; a callout the host refuses goes
/// back to the agent as a failed call at once.
#[test]
fn request_loop_answers_with_a_local_reply_and_a_refused_call_fails_at_once() {
    let mut ex = exchange("request", 0);
    let mut host = fake_host();
    start(&mut ex, &host, false);
    host.did();
    ex.on_request_body(&mut host, &ask(false));
    let (llm, _) = host.last_call();
    assert_eq!(host.did(), [Did::Dispatch(llm)]);
    ex.on_callout_reply(&mut host, llm, Some(200), &json_type(), &final_turn("No pets."));
    let did = host.did();
    assert!(matches!(&did[..], [Did::LocalReply(200, _)]), "{did:?}");
    assert!(answer_text(&did).contains("No pets."));

    let mut ex = exchange("request", 0);
    let mut host = fake_host();
    host.refuse = Some(Refusal::NoCluster);
    start(&mut ex, &host, false);
    host.did();
    ex.on_request_body(&mut host, &ask(false));
    let did = host.did();
    assert!(matches!(&did[..], [Did::LocalReply(status, _)] if status >= &500), "{did:?}");
    assert!(answer_text(&did).contains("not defined"), "{did:?}");
}

/// A failed callout the agent retries: it asks for a wake-up, and the wake-up sends the call again.
#[test]
fn a_retry_waits_for_its_wake_up() {
    let mut ex = exchange("request", 1);
    let mut host = fake_host();
    start(&mut ex, &host, false);
    ex.on_request_body(&mut host, &ask(false));
    let (llm, _) = host.last_call();
    assert_eq!(ex.on_callout_failed(&mut host, llm, Lost::Reset), "hold");
    let at = ex.wake_at().expect("a wake-up for the retry");
    assert!(at > host.now);
    assert_eq!(host.calls.len(), 1);
    host.now = at;
    ex.on_wake(&mut host);
    let (again, _) = host.last_call();
    assert_ne!(again, llm);
    assert_eq!(host.calls.len(), 2);
}

/// Live streaming (a host that declares it): a streamed turn's head and data by token open the
/// client's response and relay the text as it comes; the end of the call ends the response.
#[test]
fn live_stream_opens_the_response_and_relays_it() {
    let mut ex = exchange("request", 0);
    let mut host = fake_host();
    start(&mut ex, &host, true);
    ex.on_request_body(&mut host, &ask(true));
    let (llm, call) = host.last_call();
    assert!(call.stream, "the turn is a streamed callout");
    host.did();
    let sse = vec![("content-type".to_string(), "text/event-stream".to_string())];
    ex.on_callout_head(&mut host, llm, 200, &sse);
    let chunk = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                       "choices": [{"index": 0, "delta": {"content": "Rex"}, "finish_reason": null}]});
    let end = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let body = format!("data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n");
    ex.on_callout_data(&mut host, llm, body.as_bytes());
    assert!(ex.opened());
    ex.on_callout_reply(&mut host, llm, Some(200), &sse, body.as_bytes());
    let did = host.did();
    assert!(matches!(did.first(), Some(Did::Open(200, "text/event-stream"))), "{did:?}");
    let sent: String = did
        .iter()
        .filter_map(|d| match d {
            Did::Send(b, _) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .collect();
    assert!(sent.contains("Rex"), "{sent}");
    assert!(matches!(did.last(), Some(Did::Send(_, true))), "the response ends: {did:?}");
    assert!(ex.is_done());
}

/// Headers only from the upstream: the agent reads the empty reply at once (`Head::Read`).
#[test]
fn an_empty_upstream_reply_is_read_at_head_time() {
    let mut ex = exchange("response", 0);
    let mut host = fake_host();
    host.port.upstream_status = "204";
    start(&mut ex, &host, false);
    ex.on_request_body(&mut host, &ask(false));
    host.did();
    assert!(matches!(ex.response_head(&mut host, true, true), Head::Read("hold")));
    let did = host.did();
    assert!(matches!(&did[..], [Did::LocalReply(status, _)] if status >= &500), "{did:?}");
}
