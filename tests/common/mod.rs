//! The native harness: drives the same agent core the Wasm filter drives, with scripted LLM turns and
//! fake tools, under plain `cargo test`. Bounded: a loop that does not end within `MAX_STEPS` fails
//! with its transcript.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use api_agent::agent::spans::SpanNote;
use api_agent::agent::{Agent, Call, ClientHeaders, Command, Event, Failure, Reply, RequestMeta};
use api_agent::config::Config;
use api_agent::host::memory::Memory;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;

pub mod front;

const MAX_STEPS: usize = 200;
pub const START_MS: u64 = 1_000_000;

/// One scripted answer of the LLM.
#[derive(Debug, Clone)]
pub enum Turn {
    /// A normal chat.completion with this content.
    Text(String),
    /// A raw HTTP reply.
    Raw(u16, String),
    /// A raw HTTP reply with headers (lower-case names).
    RawWith(u16, Vec<(String, String)>, String),
    /// A chat.completion whose message is this (native tool calls).
    Message(Value),
    /// The call fails (only for callouts: the first turn comes from the route).
    Fail(Failure),
}

pub fn text(s: &str) -> Turn {
    Turn::Text(s.to_string())
}

/// A fake tool's answer.
#[derive(Debug, Clone)]
pub enum ToolReply {
    Http(u16, String),
    HttpWith(u16, Vec<(String, String)>, String),
    Fail(Failure),
}

type ToolFn = Box<dyn Fn(&Call) -> ToolReply>;

pub struct Harness {
    pub cfg: Rc<Config>,
    turns: VecDeque<Turn>,
    tools: Vec<(String, ToolFn)>,
    /// Milliseconds each step takes, to exercise deadlines.
    pub step_ms: u64,
    /// Answer a turn's tool calls last-sent first, to check results keep the order of the calls.
    pub reverse_tools: bool,
    /// The agent's jitter seed.
    pub seed: u64,
    /// The client asks for the agent's steps.
    pub steps: bool,
    /// The request headers `context.headers` names, as the shim reads them.
    pub context_headers: Vec<(String, String)>,
    /// The request headers `policy.headers` names.
    pub policy_headers: Vec<(String, String)>,
    /// The client's headers that APIs forward or exchange, as admission reads them.
    pub client_headers: Vec<(String, String)>,
    /// The plugin instance's memory (exchanged tokens, MCP sessions, what the LLM server taught):
    /// recalled into the request's inputs and taught by its `Command::Learn`s, as the host does.
    pub memory: Rc<RefCell<Memory>>,
    /// The host streams (the dynamic module): streamed LLM calls get their turn as SSE, in pieces of
    /// `sse_piece` bytes.
    pub live: bool,
    /// The API the client speaks (the path the host admitted).
    pub api: api_agent::agent::Api,
    pub sse_piece: usize,
    /// Live: end a 2xx SSE reply with an empty `CallReply` body, as the dynamic module does.
    pub sse_body_left_out: bool,
    /// The host makes spans (`Agent::trace`): the agent's notes are in `Outcome::spans`.
    pub spans: bool,
}

/// Everything the run did, in order.
#[derive(Debug)]
pub struct Outcome {
    pub reply: Reply,
    /// Every LLM request body (the first one forwarded, the rest by callout).
    pub llm_requests: Vec<Value>,
    /// Every LLM callout (not the forwarded first request).
    pub llm_calls: Vec<Call>,
    pub tool_calls: Vec<Call>,
    /// The most tool calls that were in flight at once.
    pub max_parallel: usize,
    /// The first LLM request's body as the agent wrote it (parsing would hide duplicate keys).
    pub first_body: Vec<u8>,
    /// Every `WakeAt` the agent asked for, with the time it was asked at: (now, at).
    pub wakes: Vec<(u64, u64)>,
    /// The clock when the reply came.
    pub end_ms: u64,
    /// Live streaming: the status `Open` sent, and every byte sent before the reply, with the time.
    pub opened: Option<u16>,
    pub sent: Vec<(u64, Vec<u8>)>,
    /// The request's summary fields as the host hands them to Envoy: `k=v` joined by spaces.
    pub summary: String,
    /// The agent's span notes, in order, one line each (`Harness::spans`).
    pub spans: Vec<String>,
    /// The report's token exchanges: (`apis[]` index, outcome).
    pub exchanges: Vec<(usize, &'static str)>,
    /// A reply did not say its usage and nothing estimated it (`Report::tokens_unread`).
    pub tokens_unread: bool,
}

impl Outcome {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.reply.body).expect("reply is JSON")
    }

    pub fn answer(&self) -> String {
        self.json()["choices"][0]["message"]["content"].as_str().expect("content").to_string()
    }

    pub fn finish_reason(&self) -> String {
        self.json()["choices"][0]["finish_reason"].as_str().unwrap_or("").to_string()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8(self.reply.body.clone()).expect("utf-8")
    }

    /// The text of the last message of LLM request `n` (1-based).
    pub fn last_message(&self, n: usize) -> String {
        let msgs = self.llm_requests[n - 1]["messages"].as_array().expect("messages");
        msgs.last().and_then(|m| m["content"].as_str()).unwrap_or("").to_string()
    }

    /// One line per tool request: `METHOD :authority path`, with headers and body; for golden files.
    pub fn tool_transcript(&self) -> String {
        let mut out = String::new();
        for c in &self.tool_calls {
            out.push_str(&format!("{} {} {}{}\n", c.method, c.cluster, c.authority, c.path));
            for (k, v) in &c.headers {
                out.push_str(&format!("  {k}: {v}\n"));
            }
            if let Some(b) = &c.body {
                out.push_str(&format!("  body: {}\n", String::from_utf8_lossy(b)));
            }
        }
        out
    }
}

impl Harness {
    pub fn new(config: &str) -> Self {
        let cfg = Config::from_slice(config.as_bytes()).unwrap_or_else(|e| panic!("config: {e}"));
        Harness {
            cfg: Rc::new(cfg),
            turns: VecDeque::new(),
            tools: Vec::new(),
            step_ms: 10,
            reverse_tools: false,
            seed: 42,
            steps: false,
            context_headers: Vec::new(),
            policy_headers: Vec::new(),
            client_headers: Vec::new(),
            memory: Rc::new(RefCell::new(Memory::default())),
            live: false,
            api: Default::default(),
            sse_piece: 16,
            sse_body_left_out: false,
            spans: false,
        }
    }

    pub fn llm(mut self, turns: impl IntoIterator<Item = Turn>) -> Self {
        self.turns.extend(turns);
        self
    }

    /// Answers every request to `cluster` with `f`.
    pub fn tool(mut self, cluster: &str, f: impl Fn(&Call) -> ToolReply + 'static) -> Self {
        self.tools.push((cluster.to_string(), Box::new(f)));
        self
    }

    /// Answers every tool request to `cluster` with status 200 and `body`.
    pub fn tool_json(self, cluster: &str, body: &str) -> Self {
        let body = body.to_string();
        self.tool(cluster, move |_| ToolReply::Http(200, body.clone()))
    }

    pub fn run(&mut self, request: &Value) -> Outcome {
        self.run_body(request.to_string().as_bytes())
    }

    /// Runs one request to its reply. Each round answers everything the agent asked for in the
    /// previous one, so the tool calls of a turn are all in flight together.
    pub fn run_body(&mut self, body: &[u8]) -> Outcome {
        let client_headers = ClientHeaders(self.client_headers.clone());
        let memory = self.memory.borrow_mut().recall(0, &self.cfg, &client_headers, START_MS);
        let meta = RequestMeta {
            id: "test1".into(),
            now_ms: START_MS,
            unix_s: 1_700_000_000,
            seed: self.seed,
            steps: self.steps,
            context_headers: self.context_headers.clone(),
            policy_headers: self.policy_headers.clone(),
            client_headers,
            live: self.live,
            trace: Vec::new(),
            api: self.api,
            memory,
        };
        let mut agent = Agent::new(Rc::clone(&self.cfg), meta);
        if self.spans {
            agent.trace();
        }
        let mut now = START_MS;
        let mut out = Outcome {
            reply: Reply { status: 0, content_type: "", body: Vec::new() },
            llm_requests: Vec::new(),
            llm_calls: Vec::new(),
            tool_calls: Vec::new(),
            max_parallel: 0,
            first_body: Vec::new(),
            wakes: Vec::new(),
            end_ms: 0,
            opened: None,
            sent: Vec::new(),
            summary: String::new(),
            spans: Vec::new(),
            exchanges: Vec::new(),
            tokens_unread: false,
        };
        let mut round = agent.handle(Event::ClientRequest { body }, now);
        for _ in 0..MAX_STEPS {
            if round.is_empty() {
                panic!("the agent stopped without a reply; transcript: {out:#?}");
            }
            now += self.step_ms;
            let tools = round
                .iter()
                .filter(|c| matches!(c, Command::Dispatch(call) if call.cluster != self.cfg.llm.upstream.cluster))
                .count();
            out.max_parallel = out.max_parallel.max(tools);
            if self.reverse_tools {
                round.reverse();
            }
            let mut next = Vec::new();
            let mut live_wake = None;
            for cmd in round {
                if let Command::Learn(lesson) = cmd {
                    self.memory.borrow_mut().learn(0, &self.cfg, lesson, now);
                    continue;
                }
                if let Command::Reply(r) = cmd {
                    assert!(agent.is_done(), "a reply must end the request");
                    assert!(next.is_empty(), "commands beside the reply: {next:?}");
                    out.reply = r;
                    out.end_ms = now;
                    let fields = agent.report().fields();
                    out.summary = fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
                    out.exchanges.clone_from(&agent.report().exchanges);
                    out.tokens_unread = agent.report().tokens_unread;
                    agent.handle(Event::Closed { host_status: None }, 0);
                    out.spans = agent.poll_spans().iter().map(span_line).collect();
                    return out;
                }
                match cmd {
                    Command::Open(r) => {
                        assert!(out.opened.is_none(), "opened twice");
                        out.opened = Some(r.status);
                        out.sent.push((now, r.body));
                        continue;
                    }
                    Command::Send(data) => {
                        assert!(out.opened.is_some(), "sent before the stream was opened");
                        out.sent.push((now, data));
                        continue;
                    }
                    _ => {}
                }
                if let Command::WakeAt(at) = cmd {
                    if self.live {
                        // Live hosts always have a keep-alive due: wake only when nothing else is
                        // pending, as a real clock would.
                        live_wake = Some(at);
                        continue;
                    }
                    out.wakes.push((now, at));
                    now = now.max(at);
                    next.extend(agent.handle(Event::Wake, now));
                    continue;
                }
                next.extend(self.answer(&mut agent, cmd, now, &mut out));
            }
            if let (true, Some(at)) = (next.is_empty(), live_wake) {
                out.wakes.push((now, at));
                now = now.max(at);
                next.extend(agent.handle(Event::Wake, now));
            }
            round = next;
        }
        panic!("no reply after {MAX_STEPS} rounds; transcript: {out:#?}");
    }

    fn answer(&mut self, agent: &mut Agent, cmd: Command, now: u64, out: &mut Outcome) -> Vec<Command> {
        match cmd {
            Command::Reply(_) | Command::WakeAt(_) | Command::Open(_) | Command::Send(_) | Command::Learn(_) => {
                unreachable!("handled by run_body")
            }
            Command::Forward { body } => {
                out.first_body.clone_from(&body);
                out.llm_requests.push(serde_json::from_slice(&body).expect("forwarded body is JSON"));
                match self.next_turn() {
                    Turn::Fail(f) => panic!("the first turn comes from the route and cannot fail as a callout: {f}"),
                    turn => {
                        let (status, _, b) = http_of(turn);
                        agent.handle(Event::UpstreamReply { status, body: b.as_bytes(), headers_sent: true }, now)
                    }
                }
            }
            Command::Dispatch(call) if call.cluster == self.cfg.llm.upstream.cluster => {
                out.llm_requests
                    .push(serde_json::from_slice(call.body.as_deref().unwrap_or(b"null")).expect("LLM body is JSON"));
                let id = call.id;
                out.llm_calls.push(call);
                let stream = out.llm_calls.last().is_some_and(|c| c.stream);
                match self.next_turn() {
                    Turn::Fail(f) => agent.handle(Event::CallFailed { id, failure: &f }, now),
                    turn if stream => self.streamed(agent, id, turn, now),
                    turn => {
                        let (status, headers, b) = http_of(turn);
                        agent.handle(Event::CallReply { id, status, headers: &headers, body: b.as_bytes() }, now)
                    }
                }
            }
            Command::Dispatch(call) => {
                let reply = match self.tools.iter().find(|(c, _)| *c == call.cluster) {
                    Some((_, f)) => f(&call),
                    None => ToolReply::Fail(Failure::NotSent(format!("unknown cluster {}", call.cluster))),
                };
                let id = call.id;
                out.tool_calls.push(call);
                match reply {
                    ToolReply::Http(status, b) => {
                        agent.handle(Event::CallReply { id, status, headers: &[], body: b.as_bytes() }, now)
                    }
                    ToolReply::HttpWith(status, headers, b) => {
                        agent.handle(Event::CallReply { id, status, headers: &headers, body: b.as_bytes() }, now)
                    }
                    ToolReply::Fail(f) => agent.handle(Event::CallFailed { id, failure: &f }, now),
                }
            }
        }
    }

    /// A streamed LLM call's turn: its head, its body in pieces (SSE for a completion), its end.
    fn streamed(&self, agent: &mut Agent, id: api_agent::agent::CallId, turn: Turn, now: u64) -> Vec<Command> {
        let (status, mut headers, body) = match turn {
            Turn::Text(_) | Turn::Message(_) => {
                let (_, _, b) = http_of(turn);
                (200, vec![("content-type".to_string(), "text/event-stream".to_string())], sse_of(&b))
            }
            other => http_of(other),
        };
        if !headers.iter().any(|(k, _)| k == "content-type") {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let mut commands = agent.handle(Event::CallHead { id, status, headers: &headers }, now);
        for piece in body.as_bytes().chunks(self.sse_piece.max(1)) {
            commands.extend(agent.handle(Event::CallData { id, data: piece }, now));
        }
        let sse = status == 200 && headers.iter().any(|(k, v)| k == "content-type" && v == "text/event-stream");
        let body = if sse && self.sse_body_left_out { "" } else { body.as_str() };
        commands.extend(agent.handle(Event::CallReply { id, status, headers: &headers, body: body.as_bytes() }, now));
        commands
    }

    fn next_turn(&mut self) -> Turn {
        self.turns
            .pop_front()
            .unwrap_or_else(|| Turn::Raw(400, r#"{"error":{"message":"the script has no more turns"}}"#.into()))
    }
}

/// A request's inputs as a host gives them, for tests that drive an `Agent` by hand: id `id`, arrived
/// at `now_ms`, jitter seed `seed`, no headers, chat completions.
pub fn request_meta(id: &str, now_ms: u64, seed: u64) -> RequestMeta {
    RequestMeta { id: id.into(), now_ms, unix_s: 1, seed, ..Default::default() }
}

/// A span note as one line: `open 2<1 chat m`, `tag 2 k=v`, `carry 2 call 7`, `close 2`.
pub fn span_line(note: &SpanNote) -> String {
    match note {
        SpanNote::Open { span, parent, operation } => {
            format!("open {}<{} {operation}", span.0, parent.map_or("-".to_string(), |p| p.0.to_string()))
        }
        SpanNote::Tag { span, key, value } => format!("tag {} {key}={value}", span.0),
        SpanNote::Carry { span, call } => format!("carry {} call {}", span.0, call.0),
        SpanNote::Close { span } => format!("close {}", span.0),
    }
}

fn http_of(turn: Turn) -> (u16, Vec<(String, String)>, String) {
    match turn {
        Turn::Text(t) => (200, Vec::new(), completion(json!({"role": "assistant", "content": t}))),
        Turn::Message(m) => (200, Vec::new(), completion(m)),
        Turn::Raw(status, b) => (status, Vec::new(), b),
        Turn::RawWith(status, headers, b) => (status, headers, b),
        Turn::Fail(_) => unreachable!("failures are not HTTP replies"),
    }
}

/// A chat.completion as OpenAI streams it: role, content in 4-character deltas, tool calls (name,
/// then arguments in two halves), finish reason, usage, `[DONE]`.
pub fn sse_of(completion: &str) -> String {
    sse_in(completion, 4)
}

/// `sse_of` with content deltas of `delta_chars` characters.
pub fn sse_in(completion: &str, delta_chars: usize) -> String {
    let c: Value = serde_json::from_str(completion).expect("completion");
    let m = &c["choices"][0]["message"];
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "up", "object": "chat.completion.chunk", "model": c["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    let text: Vec<char> = m["content"].as_str().unwrap_or("").chars().collect();
    for piece in text.chunks(delta_chars.max(1)) {
        out.push_str(&chunk(json!({"content": piece.iter().collect::<String>()}), Value::Null));
    }
    for (i, call) in m["tool_calls"].as_array().into_iter().flatten().enumerate() {
        let args = call["function"]["arguments"].as_str().unwrap_or("");
        let half = args.char_indices().nth(args.chars().count() / 2).map_or(args.len(), |(i, _)| i);
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": &args[..half]}}]}),
            Value::Null,
        ));
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": &args[half..]}}]}),
            Value::Null,
        ));
    }
    out.push_str(&chunk(json!({}), c["choices"][0]["finish_reason"].clone()));
    out.push_str(&format!("data: {}\n\n", json!({"choices": [], "usage": c["usage"]})));
    out.push_str("data: [DONE]\n\n");
    out
}

/// A chat.completion holding `message`, with a fixed usage of 10 + 5 tokens.
pub fn completion(message: Value) -> String {
    let finish = if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" };
    json!({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "mock-llm",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

/// A native turn calling tools: `(id, name, arguments)`.
pub fn native_calls(calls: &[(&str, &str, Value)]) -> Turn {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    Turn::Message(json!({"role": "assistant", "content": null, "tool_calls": calls}))
}

pub fn user(question: &str) -> Value {
    json!({"model": "client-model", "messages": [{"role": "user", "content": question}]})
}

/// A plugin configuration with one API per `(cluster-service, spec file, extra apiProvider keys)`.
pub fn config(apis: &[(&str, &str, Value)], extra: Value) -> String {
    let apis: Vec<Value> = apis
        .iter()
        .map(|(service, spec, provider)| {
            let mut p = json!({"serviceName": service, "servicePort": 8080, "maxExecutionTime": 3000});
            if let (Value::Object(p), Value::Object(extra)) = (&mut p, provider) {
                p.extend(extra.clone());
            }
            json!({"apiProvider": p, "api": spec_text(spec)})
        })
        .collect();
    let mut cfg = json!({
        "llm": {"apiKey": "sk-llm", "serviceName": "llm.svc", "servicePort": 443, "domain": "llm.example.com",
                "path": "/v1/chat/completions", "model": "callout-model", "maxIterations": 4},
        "apis": apis,
    });
    merge(&mut cfg, extra);
    cfg.to_string()
}

fn merge(into: &mut Value, extra: Value) {
    match (into, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

pub fn spec_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi-examples").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compares `actual` with `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file instead.
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()));
    assert_eq!(actual, expected, "golden file {} differs (UPDATE_GOLDEN=1 rewrites it)", path.display());
}

/// A ReAct tool call in the classic syntax.
pub fn classic_call(thought: &str, name: &str, args: Value) -> Turn {
    text(&format!("Thought: {thought}\nAction: {name}\nAction Input: {args}"))
}

/// A ReAct tool call as a fenced JSON blob.
pub fn blob_call(thought: &str, name: &str, args: Value) -> Turn {
    let blob = json!({"action": name, "action_input": args});
    text(&format!("Thought: {thought}\nAction:\n```json\n{blob}\n```"))
}

pub fn classic_final(answer: &str) -> Turn {
    text(&format!("Thought: I now know the final answer.\nFinal Answer: {answer}"))
}

pub fn blob_final(answer: &str) -> Turn {
    let blob = json!({"action": "Final Answer", "action_input": answer});
    text(&format!("Thought: I now know the final answer.\nAction:\n```json\n{blob}\n```"))
}

/// Both ReAct syntaxes, for tests that must hold in each.
pub type CallFn = fn(&str, &str, Value) -> Turn;
pub type FinalFn = fn(&str) -> Turn;
pub const SYNTAXES: [(&str, CallFn, FinalFn); 2] =
    [("classic", classic_call, classic_final), ("json-blob", blob_call, blob_final)];
