//! How the answer is written, chosen once from what the request was (`RequestMeta::api`): chat completions
//! (`chat.completion` and its chunks), the Responses API (`response` and its events) or Anthropic
//! Messages (`message` and its events). `finish.rs`
//! and `live.rs` write every answer, stream and late error through this, never by asking the API.

use crate::agent::error::AgentError;
use crate::agent::protocol::Api;
use crate::anthropic;
use crate::openai::answer::{self, Answer, ChunkHead};
use crate::openai::responses::translate;
use crate::openai::responses_out::{Echo, Events};
use crate::openai::ChatRequest;
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
