//! What a plugin instance learns across requests (`host::memory`), driven through the host-neutral
//! layer (`host::StreamRun` and its `on_*` host facts) as both shims drive it: what one client's request teaches is
//! kept per configuration and model, bounded and for a while, and never changes another client's
//! requests to another model; one answer that mentions `</think>` changes no other request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use api_agent::agent::{Call, Reply};
use api_agent::config::{Plugin, SummaryForms};
use api_agent::host::admit::Arrival;
use api_agent::host::port::Refusal;
use api_agent::host::{Attr, Headers, Host, Instance, Port, Start, StreamRun};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// The stream; what the client got: the answer's body, or what a live response sent.
#[derive(Default)]
struct FakePort {
    answer: RefCell<Vec<u8>>,
    status: Cell<Option<u16>>,
}

impl Port for FakePort {
    fn header(&self, map: Headers, name: &str) -> Option<String> {
        let request = [(":method", "POST"), (":path", "/v1/chat/completions"), (":authority", "agent.local")];
        let response = [(":status", "200"), ("content-type", "application/json")];
        let m: &[(&str, &str)] = if map == Headers::Request { &request } else { &response };
        m.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_string())
    }
    fn set_header(&self, _map: Headers, _name: &str, _value: Option<&str>) -> bool {
        true
    }
    fn attribute(&self, _attr: Attr) -> Option<String> {
        None
    }
    fn local_reply(&self, status: u16, _headers: &[(&str, &str)], body: &[u8]) {
        self.status.set(self.status.get().or(Some(status)));
        self.answer.borrow_mut().extend_from_slice(body);
    }
    fn set_summary(&self, _fields: &[(&'static str, api_agent::agent::SummaryValue)], _forms: SummaryForms) {}
    fn traced(&self) -> bool {
        false
    }
}

/// One request: the layer's exchange, and the host it runs through.
struct FakeHost {
    ex: StreamRun,
    io: Io,
}

impl FakeHost {
    fn status(&self) -> Option<u16> {
        self.io.port.status.get()
    }
    fn answer(&self) -> Vec<u8> {
        self.io.port.answer.borrow().clone()
    }
}

struct Io {
    now: u64,
    sent: Vec<Call>,
    port: FakePort,
}

impl Host for Io {
    type Action = bool;
    type Port = FakePort;
    fn port(&self) -> &FakePort {
        &self.port
    }
    fn holding(&self) -> bool {
        false
    }
    fn passing(&self) -> bool {
        true
    }
    fn forward(&mut self, _rid: &str, _body: &[u8]) -> bool {
        panic!("loop: request forwards nothing");
    }
    fn dispatch(&mut self, call: &Call) -> Result<u64, Refusal> {
        self.sent.push(call.clone());
        Ok(u64::from(call.id.0))
    }
    fn answer_body(&mut self, _rid: &str, _body: &[u8]) -> bool {
        panic!("loop: request holds no upstream response");
    }
    fn open(&mut self, _rid: &str, reply: &Reply) -> Option<bool> {
        self.port.status.set(Some(reply.status));
        self.port.answer.borrow_mut().extend_from_slice(&reply.body);
        Some(false)
    }
    fn send(&mut self, data: &[u8], _end: bool) {
        self.port.answer.borrow_mut().extend_from_slice(data);
    }
    fn now_ms(&self) -> u64 {
        self.now
    }
}

fn plugin_json(mode: &str) -> String {
    let spec = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: 'http://pets.local'}]\npaths:\n  /pets:\n    get:\n      operationId: listPets\n      summary: List pets\n      responses: {'200': {description: ok}}\n";
    let config = json!({
        "mode": mode, "loop": "request",
        "llm": {"apiKey": "sk-llm", "serviceName": "llm.svc", "servicePort": 443, "domain": "llm.local",
                "path": "/v1/chat/completions", "maxIterations": 3, "maxRetries": 0},
        "apis": [{"apiProvider": {"serviceName": "pets.svc", "servicePort": 8080}, "api": spec}],
    });
    config.to_string()
}

fn plugin(mode: &str) -> Plugin {
    Plugin::from_slice(plugin_json(mode).as_bytes()).unwrap()
}

fn completion(content: &str) -> String {
    json!({"id": "x", "object": "chat.completion", "created": 1, "model": "served",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
}

fn refusal(param: &str) -> String {
    json!({"error": {"message": format!("Unsupported parameter: '{param}' is not supported with this model."),
                     "type": "invalid_request_error", "param": param, "code": "unsupported_parameter"}})
    .to_string()
}

/// SSE of one streamed turn whose content comes in these pieces.
fn sse(pieces: &[&str]) -> String {
    let mut out = String::new();
    for p in pieces {
        let chunk = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "served",
                           "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    let end = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "served",
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    out.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
    out
}

/// One client request through the layer at `now` (ms); the LLM answers each callout in turn with
/// `(status, body)` (streamed calls get their body as SSE data). Returns the host: its calls and the
/// client's answer.
fn request(instance: &Rc<Instance>, now: u64, body: Value, live: bool, llm: &[(u16, String)]) -> FakeHost {
    let mut host = FakeHost {
        ex: StreamRun::new(Some(Rc::clone(instance))),
        io: Io { now, sent: Vec::new(), port: FakePort::default() },
    };
    let start = host.ex.start(&host.io.port, false, || Arrival { now_ns: now * 1_000_000, seq: 1, live });
    assert_eq!(start, Start::Run);
    host.ex.on_request_body(&mut host.io, body.to_string().as_bytes());
    let mut replies: VecDeque<&(u16, String)> = llm.iter().collect();
    let mut answered = 0;
    while host.status().is_none() || !host.ex.is_done() {
        let call =
            host.io.sent.get(answered).cloned().unwrap_or_else(|| panic!("no call to answer: {:?}", host.status()));
        answered += 1;
        let (status, reply) = replies.pop_front().expect("an LLM reply left");
        let sse_type = [("content-type".to_string(), "text/event-stream".to_string())];
        let json_type = [("content-type".to_string(), "application/json".to_string())];
        if call.stream && *status == 200 {
            let token = u64::from(call.id.0);
            host.ex.on_callout_head(&mut host.io, token, *status, &sse_type);
            host.ex.on_callout_data(&mut host.io, token, reply.as_bytes());
            host.ex.on_callout_reply(&mut host.io, token, Some(*status), &sse_type, reply.as_bytes());
        } else {
            let token = u64::from(call.id.0);
            host.ex.on_callout_reply(&mut host.io, token, Some(*status), &json_type, reply.as_bytes());
        }
    }
    host
}

/// (content, reasoning_content) a streaming client got.
fn streamed(host: &FakeHost) -> (String, String) {
    let text = String::from_utf8_lossy(&host.answer()).to_string();
    let (mut content, mut reasoning) = (String::new(), String::new());
    for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
        let v: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
        let delta = &v["choices"][0]["delta"];
        content.push_str(delta["content"].as_str().unwrap_or(""));
        reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or(""));
    }
    (content, reasoning)
}

fn llm_bodies(host: &FakeHost) -> Vec<Value> {
    host.io.sent.iter().map(|c| serde_json::from_slice(c.body.as_ref().unwrap().as_ref()).unwrap()).collect()
}

fn ask(model: &str) -> Value {
    json!({"model": model, "temperature": 0.3, "messages": [{"role": "user", "content": "Hi"}]})
}

#[test]
fn a_refused_parameter_is_learnt_for_its_model_only_and_for_ten_minutes() {
    let instance = Rc::new(Instance::new(plugin("native")));
    let t0 = 1_000_000;
    // Client A with model X: X refuses temperature; the turn goes again without it.
    let a = request(&instance, t0, ask("model-x"), false, &[(400, refusal("temperature")), (200, completion("Hi A"))]);
    let bodies = llm_bodies(&a);
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["temperature"], 0.3);
    assert!(bodies[1].get("temperature").is_none());
    // Client B with model Y: its temperature is sent.
    let b = request(&instance, t0 + 1_000, ask("model-y"), false, &[(200, completion("Hi B"))]);
    assert_eq!(llm_bodies(&b)[0]["temperature"], 0.3, "A's model's refusal changed B's request");
    // Another request to model X does not send it again (no refused round trip) ...
    let c = request(&instance, t0 + 2_000, ask("model-x"), false, &[(200, completion("Hi C"))]);
    assert!(llm_bodies(&c)[0].get("temperature").is_none(), "{:?}", llm_bodies(&c));
    // ... until what was learnt expires: then it is tried again.
    let d = request(&instance, t0 + 10 * 60_000 + 1, ask("model-x"), false, &[(200, completion("Hi D"))]);
    assert_eq!(llm_bodies(&d)[0]["temperature"], 0.3);
}

#[test]
fn a_react_turn_without_stop_is_still_cut_at_its_observation() {
    let instance = Rc::new(Instance::new(plugin("react")));
    let t0 = 1_000_000;
    let first = request(
        &instance,
        t0,
        ask("model-x"),
        false,
        &[(400, refusal("stop")), (200, completion("Final Answer: hello"))],
    );
    assert!(llm_bodies(&first)[1].get("stop").is_none());
    // The next request to that model goes without `stop`; a model that runs on invents the tool's
    // answer and a final answer from it: the filter cuts the turn at `Observation:` and calls the tool.
    let invented = "Thought: I need the pets.\nAction: listPets\nAction Input: {}\nObservation: a unicorn\nThought: done\nFinal Answer: You have a unicorn.";
    let instance2 = Rc::clone(&instance);
    let mut host = FakeHost {
        ex: StreamRun::new(Some(instance2)),
        io: Io { now: t0 + 1_000, sent: Vec::new(), port: FakePort::default() },
    };
    assert_eq!(
        host.ex.start(&host.io.port, false, || Arrival { now_ns: (t0 + 1_000) * 1_000_000, seq: 2, live: false }),
        Start::Run
    );
    host.ex.on_request_body(&mut host.io, ask("model-x").to_string().as_bytes());
    let llm = host.io.sent[0].clone();
    let body: Value = serde_json::from_slice(llm.body.as_ref().unwrap().as_ref()).unwrap();
    assert!(body.get("stop").is_none(), "learnt: {body}");
    let json_type = [("content-type".to_string(), "application/json".to_string())];
    let token = u64::from(llm.id.0);
    host.ex.on_callout_reply(&mut host.io, token, Some(200), &json_type, completion(invented).as_bytes());
    assert!(
        host.status().is_none(),
        "the invented answer went to the client: {}",
        String::from_utf8_lossy(&host.answer())
    );
    let tool = host.io.sent.last().unwrap().clone();
    assert_eq!(tool.cluster, "outbound|8080||pets.svc", "the tool is called: {tool:?}");
    // Nor is an answer read past an invented observation.
    let invented =
        "Thought: I know the pets.\nObservation: a unicorn\nThought: done\nFinal Answer: You have a unicorn.";
    let again = completion("Final Answer: I could not tell.");
    let c = request(&instance, t0 + 2_000, ask("model-x"), false, &[(200, completion(invented)), (200, again)]);
    assert_eq!(llm_bodies(&c).len(), 2, "the invented answer was taken");
    assert!(!String::from_utf8_lossy(&c.answer()).contains("unicorn"));
}

#[test]
fn one_answer_that_mentions_the_closing_tag_changes_no_other_request() {
    let instance = Rc::new(Instance::new(plugin("native")));
    let t0 = 1_000_000;
    let mut live = ask("model-x");
    live["stream"] = json!(true);
    // An ordinary answer that explains the tag, mid-text: its text is the answer, all of it.
    let mention = "Close the block with </think> and then write the reply.";
    let a = request(&instance, t0, live.clone(), true, &[(200, sse(&[mention]))]);
    assert_eq!(streamed(&a), (mention.to_string(), String::new()), "the answer lost its start");
    // Another client's plain answer, live: not read as thinking.
    let b = request(&instance, t0 + 1_000, live, true, &[(200, sse(&["Hello ", "there."]))]);
    assert_eq!(streamed(&b), ("Hello there.".to_string(), String::new()));
}

#[test]
fn a_template_that_opens_think_blocks_is_learnt_for_its_model_only() {
    let instance = Rc::new(Instance::new(plugin("native")));
    let t0 = 1_000_000;
    let live = |model: &str| {
        let mut r = ask(model);
        r["stream"] = json!(true);
        r
    };
    let opened = sse(&["The user greets me.\n</think>", "\n\nHello."]);
    // Undeclared, the first such turn is known only at its `</think>`, after its text went out live.
    let a = request(&instance, t0, live("model-x"), true, &[(200, opened)]);
    assert!(streamed(&a).0.ends_with("Hello."));
    // Model X's later turns are thinking until their lone `</think>`, from the first byte.
    let b =
        request(&instance, t0 + 1_000, live("model-x"), true, &[(200, sse(&["Thinking", " more.\n</think>\nHi."]))]);
    assert_eq!(streamed(&b), ("Hi.".to_string(), "Thinking more.".to_string()));
    // Model Y's are not.
    let c = request(&instance, t0 + 2_000, live("model-y"), true, &[(200, sse(&["Hello ", "there."]))]);
    assert_eq!(streamed(&c), ("Hello there.".to_string(), String::new()));
}

#[test]
fn the_memory_is_bounded_in_models_and_name_length() {
    use api_agent::agent::Lesson;
    use api_agent::host::memory::{Memory, MODELS, MODEL_NAME_BYTES};
    let cfg = api_agent::config::Config::from_slice(plugin_json("native").as_bytes()).unwrap();
    let mut m = Memory::default();
    for i in 0..MODELS + 40 {
        m.learn(0, &cfg, Lesson::Refused { model: format!("m{i}"), param: "temperature" }, 1_000 + i as u64);
    }
    assert_eq!(m.models(), MODELS);
    let long = "x".repeat(MODEL_NAME_BYTES + 1);
    m.learn(0, &cfg, Lesson::Refused { model: long.clone(), param: "stop" }, 5_000);
    let recalled = m.recall(0, &cfg, &Default::default(), 5_000);
    assert!(recalled.models.iter().all(|(name, _)| *name != long));
    assert!(recalled.models.iter().any(|(name, _)| name == &format!("m{}", MODELS + 39)), "the newest is kept");
    assert!(recalled.models.iter().all(|(name, _)| name != "m0"), "the one that expires first went");
    // Another configuration recalls nothing of this one's.
    assert!(m.recall(1, &cfg, &Default::default(), 5_000).models.is_empty());
}
