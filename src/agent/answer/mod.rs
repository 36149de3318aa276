//! The client's answer. Its format is chosen once from what the request was (`RequestMeta::api`):
//! chat completions (`chat.completion` and its chunks), the Responses API (`response` and its events)
//! or Anthropic Messages (`message` and its events) (`Wire`). Every answer, stream and late error is
//! written through it, never by asking the API: the answer as a completion, as SSE chunks or as the
//! rest of a live stream (`live`); the error as a status of its own while nothing was sent, else in
//! the body (`Response`).

mod live;

use crate::agent::error::{AgentError, ErrorCode};
use crate::agent::protocol::{Api, CallId, Command, Reply, RequestMeta};
use crate::agent::turn::convo::Convo;
use crate::anthropic;
use crate::config::{Config, Mode};
use crate::doc::truncate;
use crate::openai::answer::{self, Answer, ChunkHead, FinishReason};
use crate::openai::responses::translate;
use crate::openai::responses_out::{Echo, Events};
use crate::openai::ChatRequest;
use live::Live;
use serde_json::Value;

/// What the answer repeats from the request, by the API the client spoke.
#[derive(Debug, Clone)]
pub enum Front {
    Chat,
    Responses(Echo),
    Messages(anthropic::Echo),
}

impl Front {
    /// Before the body is read: a Messages client's errors are in Anthropic's shape already.
    pub fn before_reading(api: Api) -> Front {
        match api {
            Api::Messages => Front::Messages(anthropic::Echo::default()),
            Api::ChatCompletions | Api::Responses => Front::Chat,
        }
    }
}

/// The client's body as the chat request the loop runs, and what its answer echoes; `Err` is a 400.
pub fn read_request(api: Api, body: &[u8]) -> Result<(ChatRequest, Front), AgentError> {
    match api {
        Api::ChatCompletions => ChatRequest::parse(body).map(|r| (r, Front::Chat)).map_err(AgentError::from),
        Api::Responses => translate(body).map(|(r, echo)| (r, Front::Responses(echo))).map_err(AgentError::from),
        Api::Messages => {
            anthropic::translate(body).map(|(r, echo)| (r, Front::Messages(echo))).map_err(AgentError::from)
        }
    }
}

/// The answer's format; `Responses` and `Messages` carry what the answer echoes and the stream's state.
#[derive(Debug, Clone)]
pub enum Wire {
    Chat(Chat),
    Responses(Box<Events>),
    Messages(Box<anthropic::Events>),
}

/// What every chunk of a chat stream repeats.
#[derive(Debug, Clone)]
pub struct Chat {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
}

impl Chat {
    fn head(&self) -> ChunkHead<'_> {
        ChunkHead { id: &self.id, created: self.created, model: &self.model, include_usage: self.include_usage }
    }
}

impl Wire {
    /// `id`: the request's; each API prefixes it its own way.
    pub fn new(id: &str, created: u64, include_usage: bool, front: &Front) -> Wire {
        match front {
            Front::Responses(echo) => {
                Wire::Responses(Box::new(Events::new(format!("resp_{id}"), created, echo.clone())))
            }
            Front::Messages(echo) => Wire::Messages(Box::new(anthropic::Events::new(format!("msg_{id}"), echo))),
            Front::Chat => {
                Wire::Chat(Chat { id: format!("chatcmpl-{id}"), created, model: String::new(), include_usage })
            }
        }
    }

    /// The answer's id (`chatcmpl-…`, `resp_…` or `msg_…`).
    pub fn id(&self) -> &str {
        match self {
            Wire::Chat(c) => &c.id,
            Wire::Responses(e) => e.id(),
            Wire::Messages(e) => e.id(),
        }
    }

    /// The model the answer names, once known.
    pub fn set_model(&mut self, model: &str) {
        match self {
            Wire::Chat(c) => c.model = model.to_string(),
            Wire::Responses(e) => e.model = model.to_string(),
            Wire::Messages(e) => e.model = model.to_string(),
        }
    }

    /// The first bytes of a stream: the role chunk, or `response.created` and `response.in_progress`.
    pub fn open(&mut self) -> Vec<u8> {
        match self {
            Wire::Chat(c) => c.head().role_event(),
            Wire::Responses(e) => e.open(),
            Wire::Messages(e) => e.open(),
        }
    }

    /// A piece of the model's thinking.
    pub fn reasoning(&mut self, text: &str) -> Vec<u8> {
        match self {
            Wire::Chat(c) => c.head().reasoning_event(text),
            Wire::Responses(e) => e.reasoning(text),
            Wire::Messages(e) => e.reasoning(text),
        }
    }

    /// A piece of the answer's text.
    pub fn content(&mut self, text: &str) -> Vec<u8> {
        match self {
            Wire::Chat(c) => c.head().content_event(text),
            Wire::Responses(e) => e.text(text),
            Wire::Messages(e) => e.text(text),
        }
    }

    /// The end of a stream that is open: `rest` of the answer's text, the tool calls, the finish.
    pub fn end(&mut self, a: &Answer<'_>, rest: &str) -> Vec<u8> {
        match self {
            Wire::Chat(c) => answer::rest(a, &c.head(), rest),
            Wire::Responses(e) => e.end(a, rest),
            Wire::Messages(e) => e.end(a, rest),
        }
    }

    /// The whole answer as a stream (a host that streams nothing live).
    pub fn stream(&mut self, a: &Answer<'_>) -> Vec<u8> {
        self.set_model(a.model);
        let mut out = self.open();
        if let Some(r) = a.reasoning.filter(|r| !r.is_empty()) {
            out.extend(self.reasoning(r));
        }
        out.extend(self.end(a, a.content));
        out
    }

    /// The answer as one JSON object.
    pub fn object(&mut self, a: &Answer<'_>) -> Vec<u8> {
        match self {
            Wire::Chat(_) => answer::completion(a),
            Wire::Responses(e) => {
                e.model = a.model.to_string();
                e.whole(a)
            }
            Wire::Messages(e) => {
                e.model = a.model.to_string();
                e.whole(a)
            }
        }
    }

    /// A keep-alive while tools run: an SSE comment, or a `ping` event for a Messages client (its
    /// streams have one).
    pub fn keep_alive(&self) -> Vec<u8> {
        match self {
            Wire::Messages(_) => anthropic::Events::ping(),
            _ => answer::KEEP_ALIVE.to_vec(),
        }
    }

    /// An error while nothing was sent (`err`: the OpenAI error object, `status`: the reply's): the
    /// error object of the client's API.
    pub fn error_object(&self, err: &Value, status: u16) -> Vec<u8> {
        match self {
            Wire::Messages(_) => anthropic::answer::error(status, message_of(err)),
            _ => err.to_string().into_bytes(),
        }
    }

    /// An error after the client's 200 (`err`: the error object): in the stream (`opened`: its first
    /// events went out), or as the body of a plain response.
    pub fn late_error(&mut self, err: Value, status: u16, stream: bool, opened: bool) -> Vec<u8> {
        match (self, stream) {
            (Wire::Chat(_), true) => answer::error_sse(&err),
            (Wire::Chat(_), false) => answer::late_error(err),
            (Wire::Responses(e), true) => {
                let mut out = if opened { Vec::new() } else { e.open() };
                out.extend(e.failed(&err));
                out
            }
            (Wire::Responses(e), false) => e.failed_object(&err),
            (Wire::Messages(e), true) => e.failed(status, message_of(&err), opened),
            (Wire::Messages(_), false) => anthropic::answer::error(status, message_of(&err)),
        }
    }
}

/// The message of an OpenAI error object `{"error": {"message"}}`.
fn message_of(err: &Value) -> &str {
    err.pointer("/error/message").and_then(Value::as_str).unwrap_or("the request failed")
}

/// Error messages quote upstream bodies; they stay far below any buffer limit.
const MAX_ERROR_MESSAGE_BYTES: usize = 2048;

/// The client's response: how it asked for it, and whether it has begun.
#[derive(Debug)]
pub struct Response {
    /// The request's id and `created`.
    id: String,
    created: u64,
    /// SSE (its format, a usage chunk in a chat stream: `wire`).
    pub stream: bool,
    /// How the answer is written: chat completions or Responses, as the client asked.
    wire: Wire,
    /// The client has response headers: its response (a stream, if it asked for one) has begun.
    pub responding: bool,
    /// Live streaming, for a streaming client on a host that declared it.
    live: Option<Live>,
    /// `maxResponseBytes`.
    limit: usize,
    /// `reasoning.return`: the final turn's reasoning goes to the client.
    reasoning: bool,
}

impl Response {
    pub fn new(cfg: &Config, meta: &RequestMeta) -> Response {
        let id = meta.id.clone();
        let limit = cfg.max_response_bytes;
        let reasoning = cfg.return_reasoning;
        Response {
            id,
            created: meta.unix_s,
            stream: false,
            wire: Wire::new(&meta.id, meta.unix_s, false, &Front::before_reading(meta.api)),
            responding: false,
            live: None,
            limit,
            reasoning,
        }
    }

    /// What the client's request asks of its response, and what its API's answer echoes.
    pub fn asked(&mut self, req: &ChatRequest, front: &Front) {
        self.stream = req.stream;
        self.wire = Wire::new(&self.id, self.created, req.include_usage, front);
    }

    /// The host streams callouts: a streaming client gets its answer live (`relay`: the text as the
    /// model writes it; not in JSON mode, where the answer is rewritten).
    /// `template_opens`: the server's chat template opens think blocks (`Live::template_opens`).
    pub fn go_live(&mut self, mode: Mode, relay: bool, template_opens: bool) {
        if self.stream {
            let mut live = Live::new(mode, relay, self.wire.clone(), self.limit);
            live.reasoning = relay && self.reasoning;
            live.template_opens = template_opens;
            self.live = Some(live);
        }
    }

    /// The live stream found the server's template opening think blocks.
    pub fn template_opens(&self) -> bool {
        self.live.as_ref().is_some_and(|l| l.template_opens)
    }

    /// Every turn is a streamed callout, its text relayed as it comes.
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// A streamed LLM turn went out under `id`.
    pub fn start_turn(&mut self, id: CallId) {
        if let Some(live) = self.live.as_mut() {
            live.start_turn(id);
        }
    }

    /// The LLM turn `id` is over: whether its text went to the client (it cannot be asked again),
    /// and its reply as one completion when it came as SSE.
    pub fn end_turn(&mut self, id: CallId) -> (bool, Option<Result<Vec<u8>, String>>) {
        let Some(live) = self.live.as_mut() else {
            return (false, None);
        };
        (live.relayed_in(id), live.end_turn(id))
    }

    /// A keep-alive comment, when a live stream has been silent for a while.
    pub fn keep_alive(&mut self, now_ms: u64) -> Option<Command> {
        self.live.as_mut()?.keep_alive(now_ms).map(Command::Send)
    }

    /// When to wake for the next keep-alive.
    pub fn next_keep_alive(&self) -> Option<u64> {
        self.live.as_ref()?.next_keep_alive()
    }

    /// The client's stream starts with `body`: from now on a failure is an error event in it.
    pub fn open(&mut self, body: Vec<u8>) -> Reply {
        self.responding = true;
        Reply { status: 200, content_type: answer::SSE, body }
    }

    /// The head of a streamed LLM turn: a 2xx SSE reply is read as it comes.
    pub fn head_of(&mut self, id: CallId, status: u16, event_stream: bool) {
        if let Some(l) = self.live.as_mut() {
            l.head_of(id, status, event_stream);
        }
    }

    /// The next bytes of a streamed LLM turn: what the client gets of them now, if anything (the
    /// first answer text opens its stream).
    pub fn data(&mut self, id: CallId, data: &[u8], model: &str, now_ms: u64) -> Option<Command> {
        match self.live.as_mut()?.data(id, data, model, now_ms)? {
            (true, body) => Some(Command::Open(self.open(body))),
            (false, bytes) => Some(Command::Send(bytes)),
        }
    }

    /// Live streaming: the loop goes on to tools, so the client's stream starts now (once).
    pub fn open_for_tools(&mut self, model: &str, now_ms: u64) -> Option<Reply> {
        let body = self.live.as_mut()?.open(model, now_ms)?;
        Some(self.open(body))
    }

    /// The answer as the client gets it; `Err` when it is over maxResponseBytes.
    pub fn answer(
        &mut self,
        c: &Convo,
        content: &str,
        finish_reason: FinishReason,
        tool_calls: Option<&Value>,
        steps: Option<Value>,
    ) -> Result<Reply, AgentError> {
        let (model, usage) = (c.model.as_str(), c.usage);
        let reasoning = c.reasoning.as_deref().filter(|_| self.reasoning);
        let id = self.wire.id().to_string();
        let a = Answer {
            id: &id,
            created: self.created,
            model,
            content,
            finish_reason,
            usage,
            tool_calls,
            steps,
            reasoning,
        };
        let (content_type, body, sent) = match self.live.as_mut().filter(|l| l.is_open()) {
            Some(live) => {
                let rest = live.rest_of(content);
                let (relayed, sent) = (live.relayed_reasoning(), live.sent_bytes);
                let wire = live.wire();
                let mut body = Vec::new();
                if let Some(r) = reasoning.filter(|_| !relayed) {
                    body.extend(wire.reasoning(r));
                }
                body.extend(wire.end(&a, &rest));
                (answer::SSE, body, sent)
            }
            None if self.stream => (answer::SSE, self.wire.stream(&a), 0),
            None => (answer::JSON, self.wire.object(&a), 0),
        };
        if sent + body.len() > self.limit {
            return Err(AgentError::new(
                502,
                ErrorCode::ResponseTooLarge,
                format!(
                    "the answer is {} bytes as sent, more than maxResponseBytes ({}); raise maxResponseBytes \
                     together with the listener's per_connection_buffer_limit_bytes",
                    sent + body.len(),
                    self.limit
                ),
            ));
        }
        Ok(Reply { status: 200, content_type, body })
    }

    /// The error as the client gets it. Before the upstream answered, the status is still ours to
    /// set: a plain JSON error, as OpenAI sends for a rejected request, even when a stream was asked for.
    pub fn error(&self, e: &AgentError) -> Reply {
        let message = truncate(&e.message, MAX_ERROR_MESSAGE_BYTES);
        let err = answer::error_at(&message, e.kind(), e.code.as_str(), e.param.as_deref());
        let (content_type, body) = match (self.responding, self.stream) {
            (true, true) => (answer::SSE, self.end_of_stream_error(err, e)),
            (true, false) => (answer::JSON, self.wire.clone().late_error(err, e.status, false, false)),
            (false, _) => (answer::JSON, self.wire.error_object(&err, e.status)),
        };
        Reply { status: e.status, content_type, body }
    }

    /// An error event, kept within maxResponseBytes after what a live stream already sent (a
    /// long message gives way to a short one).
    fn end_of_stream_error(&self, err: Value, e: &AgentError) -> Vec<u8> {
        let live = self.live.as_ref().filter(|l| l.is_open());
        let (mut wire, sent) = match live {
            Some(l) => (l.wire_ref().clone(), l.sent_bytes),
            None => (self.wire.clone(), 0),
        };
        let body = wire.clone().late_error(err, e.status, true, live.is_some());
        if sent + body.len() <= self.limit {
            return body;
        }
        let code = e.code.as_str();
        let short = format!("the request failed ({code}); the details are in the gateway's log");
        wire.late_error(answer::error(&short, e.kind(), code), e.status, true, live.is_some())
    }

    /// The provider's error answer to the first turn (`upstream_error`), in the client's API's shape.
    pub fn upstream_error(&self, status: u16, body: &[u8]) -> Reply {
        let mut reply = upstream_error(status, body);
        if matches!(self.wire, Wire::Messages(_)) {
            let err = serde_json::from_slice::<Value>(&reply.body).unwrap_or_default();
            reply.body = self.wire.error_object(&err, status);
        }
        reply
    }
}

/// The provider's answer to the first turn when it is an error: an OpenAI error object passes as it
/// is; anything else (Envoy's own plain-text 503/504, a proxy's HTML page) is wrapped in one, with
/// the same status.
pub fn upstream_error(status: u16, body: &[u8]) -> Reply {
    let is_openai_error =
        serde_json::from_slice::<Value>(body).is_ok_and(|v| v.get("error").is_some_and(Value::is_object));
    if is_openai_error && body.len() <= MAX_ERROR_MESSAGE_BYTES * 4 {
        return Reply { status, content_type: answer::JSON, body: body.to_vec() };
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = if text.is_empty() {
        format!("the LLM upstream answered HTTP {status} with no body")
    } else {
        format!("the LLM upstream answered HTTP {status}: {}", truncate(text, 500))
    };
    let kind = if (400..500).contains(&status) { "invalid_request_error" } else { "api_error" };
    let body = answer::error(&message, kind, ErrorCode::UpstreamError.as_str()).to_string().into_bytes();
    Reply { status, content_type: answer::JSON, body }
}
