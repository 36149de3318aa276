//! How the request ends for the client: its answer as a completion, as SSE chunks, or as the rest of
//! a live stream; or its error, as a status of its own while nothing was sent, else in the body.

use super::error::{AgentError, ErrorCode};
use super::live::Live;
use super::protocol::{CallId, Command, Reply};
use crate::doc::truncate;
use crate::openai::answer::{self, Answer};
use serde_json::Value;

/// Error messages quote upstream bodies; they stay far below any buffer limit.
const MAX_ERROR_MESSAGE_BYTES: usize = 2048;

/// The client's response: how it asked for it, and whether it has begun.
#[derive(Debug)]
pub struct Response {
    /// SSE, and a usage chunk in it (`stream_options.include_usage`).
    pub stream: bool,
    pub include_usage: bool,
    /// The client has response headers: its response (a stream, if it asked for one) has begun.
    pub responding: bool,
    /// Live streaming, for a streaming client on a host that declared it.
    pub live: Option<Live>,
    /// `maxResponseBytes`.
    limit: usize,
}

impl Response {
    pub fn new(limit: usize) -> Response {
        Response { stream: false, include_usage: false, responding: false, live: None, limit }
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
    pub fn answer(&self, a: &Answer<'_>) -> Result<Reply, AgentError> {
        let (content_type, body, sent) = match self.live.as_ref().filter(|l| l.is_open()) {
            Some(live) => {
                let rest = live.rest_of(a.content);
                (answer::SSE, answer::rest(a, &live.head(), &rest), live.sent_bytes)
            }
            None if self.stream => (answer::SSE, answer::chunks(a, self.include_usage), 0),
            None => (answer::JSON, answer::completion(a), 0),
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
        let err = answer::error(&truncate(&e.message, MAX_ERROR_MESSAGE_BYTES), e.kind(), e.code.as_str());
        let (content_type, body) = match (self.responding, self.stream) {
            (true, true) => (answer::SSE, self.end_of_stream_error(err, e.code)),
            (true, false) => (answer::JSON, answer::late_error(err)),
            (false, _) => (answer::JSON, err.to_string().into_bytes()),
        };
        Reply { status: e.status, content_type, body }
    }

    /// An error event, kept within maxResponseBytes after what a live stream already sent (a
    /// long message gives way to a short one).
    fn end_of_stream_error(&self, err: Value, code: ErrorCode) -> Vec<u8> {
        let body = answer::error_sse(&err);
        let sent = self.live.as_ref().map_or(0, |l| l.sent_bytes);
        if sent + body.len() <= self.limit {
            return body;
        }
        let short = format!("the request failed ({}); the details are in the gateway's log", code.as_str());
        answer::error_sse(&answer::error(&short, "api_error", code.as_str()))
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
