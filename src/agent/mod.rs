//! The agent loop as a sans-IO state machine: it reads events (the client's request, LLM replies, tool
//! replies, failed calls) and returns commands (forward, dispatch, reply). It never reads a clock or a
//! random source: ids and times come in. Each request has its own `Agent`; nothing is shared.

mod batch;
mod convo;
mod format;
mod native;
mod protocol;
mod react;

use crate::config::Config;
use crate::doc::truncate;
use crate::openai::answer::{self, Answer};
use crate::openai::ChatRequest;
use batch::Batch;
use convo::{Convo, Next};
use format::{Format, Target};
pub use protocol::{Call, CallId, Command, Event, Failure, Reply};
use serde_json::Value;
use std::rc::Rc;

/// Per-request inputs that would otherwise come from a clock or a random source.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    /// Unique per request; becomes the completion id.
    pub id: String,
    /// Milliseconds on the host's clock when the request arrived, for its deadline.
    pub now_ms: u64,
    /// Unix seconds, for `created`.
    pub unix_s: u64,
}

/// What the agent waits for next.
#[derive(Debug)]
enum State {
    AwaitRequest,
    /// The route's upstream answers the forwarded first turn.
    AwaitFirstLlm(Convo),
    AwaitLlm(CallId, Convo),
    AwaitTools(Convo, Batch),
    /// JSON mode: the answer is being turned into JSON; the finish reason is kept for the end.
    AwaitFormat(CallId, Convo, Box<Format>, &'static str),
    Done,
}

pub struct Agent {
    cfg: Rc<Config>,
    meta: RequestMeta,
    next_id: u32,
    stream: bool,
    include_usage: bool,
    /// JSON mode's target for this request, until the final answer needs it.
    json: Option<Target>,
    /// The client has response headers: its response (a stream, if it asked for one) has begun.
    responding: bool,
    state: State,
}

/// How a request ends badly: the status it means and an OpenAI error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

impl AgentError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        AgentError { status, code, message: message.into() }
    }

    fn kind(&self) -> &'static str {
        if self.status == 400 {
            "invalid_request_error"
        } else {
            "api_error"
        }
    }
}

type Step = (State, Vec<Command>);

impl Agent {
    pub fn new(cfg: Rc<Config>, meta: RequestMeta) -> Self {
        Agent {
            cfg,
            meta,
            next_id: 0,
            stream: false,
            include_usage: false,
            json: None,
            responding: false,
            state: State::AwaitRequest,
        }
    }

    /// Whether the client asked for SSE; known once the request was read.
    pub fn wants_stream(&self) -> bool {
        self.stream
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    pub fn handle(&mut self, event: Event<'_>, now_ms: u64) -> Vec<Command> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let (state, commands) = self.step(state, event, now_ms);
        self.state = state;
        commands
    }

    fn step(&mut self, state: State, event: Event<'_>, now_ms: u64) -> Step {
        match (state, event) {
            (State::AwaitRequest, Event::ClientRequest { body }) => self.start(body),
            (State::AwaitFirstLlm(c), Event::UpstreamReply { status, body, headers_sent }) => {
                self.responding = headers_sent;
                self.on_llm(c, status, body, now_ms)
            }
            (State::AwaitLlm(id, c), Event::CallReply { id: got, status, body }) if id == got => {
                self.on_llm(c, status, body, now_ms)
            }
            (State::AwaitFormat(id, c, f, reason), Event::CallReply { id: got, status, body }) if id == got => {
                self.on_format(c, f, reason, status, body, now_ms)
            }
            (State::AwaitLlm(id, _) | State::AwaitFormat(id, ..), Event::CallFailed { id: got, failure })
                if id == got =>
            {
                let (status, code) =
                    if *failure == Failure::Timeout { (504, "llm_timeout") } else { (502, "llm_unavailable") };
                self.fail(AgentError::new(status, code, format!("the LLM call {failure}")))
            }
            (State::AwaitTools(c, mut b), Event::CallReply { id, status, body }) if b.waits_for(id) => {
                b.reply(id, |name| convo::tool_observation(&self.cfg, name, status, body));
                self.on_tool_done(c, b, now_ms)
            }
            (State::AwaitTools(c, mut b), Event::CallFailed { id, failure }) if b.waits_for(id) => {
                b.reply(id, |name| format!("The call to '{name}' {failure}."));
                self.on_tool_done(c, b, now_ms)
            }
            (state, event) => {
                log::warn!("#{} ignored an event the agent does not wait for: {}", self.meta.id, describe(&event));
                (state, Vec::new())
            }
        }
    }

    fn start(&mut self, body: &[u8]) -> Step {
        let req = match ChatRequest::parse(body) {
            Ok(r) => r,
            Err(e) => return self.fail(AgentError::new(400, "invalid_request", e)),
        };
        self.stream = req.stream;
        self.include_usage = req.include_usage;
        match Target::for_request(&self.cfg, &req) {
            Ok(t) => self.json = t,
            Err(e) => return self.fail(e),
        }
        match Convo::start(&self.cfg, req) {
            Ok((c, body)) => (State::AwaitFirstLlm(c), vec![Command::Forward { body }]),
            Err(e) => self.fail(e),
        }
    }

    fn on_llm(&mut self, mut c: Convo, status: u16, body: &[u8], now_ms: u64) -> Step {
        if let Some(e) = llm_status_error(status, body) {
            return self.fail(e);
        }
        match c.on_reply(&self.cfg, body) {
            Ok(Next::Answer { content, finish_reason }) => match self.json.take() {
                Some(target) => {
                    let f = Box::new(Format::start(target, &c.question, &content));
                    let body = f.body(&self.cfg, &c.model);
                    let (id, call) = self.llm_call(body, now_ms);
                    (State::AwaitFormat(id, c, f, finish_reason), vec![Command::Dispatch(call)])
                }
                None => self.finish(&c, &content, finish_reason, None),
            },
            Ok(Next::ClientTools(message)) => {
                let content = message.get("content").and_then(Value::as_str).unwrap_or("").to_string();
                self.finish(&c, &content, "tool_calls", message.get("tool_calls"))
            }
            Ok(Next::Tools(work)) => {
                if let Some(e) = self.deadline_error(now_ms) {
                    return self.fail(e);
                }
                let batch = Batch::new(work, self.cfg.llm.max_parallel_tool_calls);
                self.on_tool_done(c, batch, now_ms)
            }
            Err(e) => self.fail(e),
        }
    }

    /// Dispatches what the batch may start now; once every call of the turn is answered, feeds the
    /// observations back and asks the LLM again.
    fn on_tool_done(&mut self, c: Convo, mut b: Batch, now_ms: u64) -> Step {
        let mut commands = Vec::new();
        while let Some((id, name, call)) = b.take(|| self.mint()) {
            let timeout = self.bounded(call.timeout_ms, now_ms);
            let call = call.into_call(id, timeout);
            log::debug!(
                "#{} tool {name}: {} {} {}",
                self.meta.id,
                call.cluster,
                call.method,
                truncate(&call.path, 200)
            );
            commands.push(Command::Dispatch(call));
        }
        match b.into_observations() {
            Ok(observations) => self.next_turn(c, observations, now_ms),
            Err(b) => (State::AwaitTools(c, b), commands),
        }
    }

    /// Feeds the observations back and asks the LLM again, by callout.
    fn next_turn(&mut self, mut c: Convo, observations: Vec<String>, now_ms: u64) -> Step {
        if let Some(e) = self.deadline_error(now_ms) {
            return self.fail(e);
        }
        let body = c.observe(&self.cfg, observations);
        let (id, call) = self.llm_call(body, now_ms);
        (State::AwaitLlm(id, c), vec![Command::Dispatch(call)])
    }

    fn on_format(
        &mut self,
        mut c: Convo,
        mut f: Box<Format>,
        reason: &'static str,
        status: u16,
        body: &[u8],
        now_ms: u64,
    ) -> Step {
        if let Some(e) = llm_status_error(status, body) {
            return self.fail(e);
        }
        match f.on_reply(&self.cfg, &c.model, body, &mut c.usage) {
            Ok(format::Outcome::Json(text)) => self.finish(&c, &text, reason, None),
            Ok(format::Outcome::Retry(body)) => {
                if let Some(e) = self.deadline_error(now_ms) {
                    return self.fail(e);
                }
                let (id, call) = self.llm_call(body, now_ms);
                (State::AwaitFormat(id, c, f, reason), vec![Command::Dispatch(call)])
            }
            Err(e) => self.fail(e),
        }
    }

    /// An LLM callout carrying `body`.
    fn llm_call(&mut self, body: Vec<u8>, now_ms: u64) -> (CallId, Call) {
        let id = self.mint();
        let cfg = Rc::clone(&self.cfg);
        let llm = &cfg.llm;
        let mut headers = vec![("content-type".to_string(), answer::JSON.to_string())];
        if let Some(key) = &llm.api_key {
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        let call = Call {
            id,
            cluster: llm.upstream.cluster.clone(),
            method: "POST",
            path: llm.path.clone(),
            authority: llm.upstream.authority_or_service(),
            headers,
            body: Some(body),
            timeout_ms: self.bounded(llm.upstream.timeout_ms, now_ms),
        };
        (id, call)
    }

    fn finish(&mut self, c: &Convo, content: &str, finish_reason: &str, tool_calls: Option<&Value>) -> Step {
        let id = format!("chatcmpl-{}", self.meta.id);
        let a = Answer {
            id: &id,
            created: self.meta.unix_s,
            model: &c.model,
            content,
            finish_reason,
            usage: c.usage,
            tool_calls,
        };
        let (content_type, body) = if self.stream {
            (answer::SSE, answer::chunks(&a, self.include_usage))
        } else {
            (answer::JSON, answer::completion(&a))
        };
        (State::Done, vec![Command::Reply(Reply { status: 200, content_type, body })])
    }

    fn fail(&mut self, e: AgentError) -> Step {
        log::info!("#{} request failed ({}): {}", self.meta.id, e.status, truncate(&e.message, 300));
        let err = answer::error(&e.message, e.kind(), e.code);
        // Before the upstream answered, the status is still ours to set: a plain JSON error, as
        // OpenAI sends for a rejected request, even when a stream was asked for.
        let (content_type, body) = if self.stream && self.responding {
            (answer::SSE, answer::error_sse(&err))
        } else {
            (answer::JSON, err.to_string().into_bytes())
        };
        (State::Done, vec![Command::Reply(Reply { status: e.status, content_type, body })])
    }

    fn mint(&mut self) -> CallId {
        self.next_id += 1;
        CallId(self.next_id)
    }

    fn deadline(&self) -> u64 {
        self.meta.now_ms.saturating_add(self.cfg.llm.max_request_time_ms)
    }

    fn deadline_error(&self, now_ms: u64) -> Option<AgentError> {
        (now_ms >= self.deadline()).then(|| {
            AgentError::new(
                504,
                "request_timeout",
                format!("the request took longer than llm.maxRequestTime ({} ms)", self.cfg.llm.max_request_time_ms),
            )
        })
    }

    /// A call's timeout, cut so that it ends by the request's deadline.
    fn bounded(&self, timeout_ms: u64, now_ms: u64) -> u64 {
        timeout_ms.min(self.deadline().saturating_sub(now_ms)).max(1)
    }
}

/// A non-2xx LLM reply ends the request; the provider's status and body say why.
fn llm_status_error(status: u16, body: &[u8]) -> Option<AgentError> {
    (!(200..300).contains(&status)).then(|| {
        let text = String::from_utf8_lossy(body);
        AgentError::new(502, "llm_error", format!("the LLM answered HTTP {status}: {}", truncate(&text, 300)))
    })
}

fn describe(e: &Event<'_>) -> String {
    match e {
        Event::ClientRequest { .. } => "client request".into(),
        Event::UpstreamReply { status, .. } => format!("upstream reply {status}"),
        Event::CallReply { id, status, .. } => format!("reply {status} to call {}", id.0),
        Event::CallFailed { id, .. } => format!("failure of call {}", id.0),
    }
}
