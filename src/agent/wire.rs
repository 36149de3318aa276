//! How the answer is written, chosen once from what the request was (`RequestMeta::api`): chat completions
//! (`chat.completion` and its chunks) or the Responses API (`response` and its events). `finish.rs`
//! and `live.rs` write every answer, stream and late error through this, never by asking the API.

use super::error::AgentError;
use super::protocol::Api;
use crate::openai::answer::{self, Answer, ChunkHead};
use crate::openai::responses::translate;
use crate::openai::responses_out::{Echo, Events};
use crate::openai::ChatRequest;
use serde_json::Value;

/// The client's body as the chat request the loop runs, and for a Responses request what its
/// answer echoes; `Err` is a 400.
pub fn read_request(api: Api, body: &[u8]) -> Result<(ChatRequest, Option<Echo>), AgentError> {
    match api {
        Api::ChatCompletions => ChatRequest::parse(body).map(|r| (r, None)).map_err(AgentError::from),
        Api::Responses => translate(body).map(|(r, echo)| (r, Some(echo))).map_err(AgentError::from),
    }
}

/// The answer's format; `Responses` carries what the answer echoes and the stream's state.
#[derive(Debug, Clone)]
pub enum Wire {
    Chat(Chat),
    Responses(Box<Events>),
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
    pub fn new(id: &str, created: u64, include_usage: bool, echo: Option<&Echo>) -> Wire {
        match echo {
            Some(echo) => Wire::Responses(Box::new(Events::new(format!("resp_{id}"), created, echo.clone()))),
            None => Wire::Chat(Chat { id: format!("chatcmpl-{id}"), created, model: String::new(), include_usage }),
        }
    }

    /// The answer's id (`chatcmpl-…` or `resp_…`).
    pub fn id(&self) -> &str {
        match self {
            Wire::Chat(c) => &c.id,
            Wire::Responses(e) => e.id(),
        }
    }

    /// The model the answer names, once known.
    pub fn set_model(&mut self, model: &str) {
        match self {
            Wire::Chat(c) => c.model = model.to_string(),
            Wire::Responses(e) => e.model = model.to_string(),
        }
    }

    /// The first bytes of a stream: the role chunk, or `response.created` and `response.in_progress`.
    pub fn open(&mut self) -> Vec<u8> {
        match self {
            Wire::Chat(c) => c.head().role_event(),
            Wire::Responses(e) => e.open(),
        }
    }

    /// A piece of the model's thinking.
    pub fn reasoning(&mut self, text: &str) -> Vec<u8> {
        match self {
            Wire::Chat(c) => c.head().reasoning_event(text),
            Wire::Responses(e) => e.reasoning(text),
        }
    }

    /// A piece of the answer's text.
    pub fn content(&mut self, text: &str) -> Vec<u8> {
        match self {
            Wire::Chat(c) => c.head().content_event(text),
            Wire::Responses(e) => e.text(text),
        }
    }

    /// The end of a stream that is open: `rest` of the answer's text, the tool calls, the finish.
    pub fn end(&mut self, a: &Answer<'_>, rest: &str) -> Vec<u8> {
        match self {
            Wire::Chat(c) => answer::rest(a, &c.head(), rest),
            Wire::Responses(e) => e.end(a, rest),
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
        }
    }

    /// An error after the client's 200 (`err`: the error object): in the stream (`opened`: its first
    /// events went out), or as the body of a plain response.
    pub fn late_error(&mut self, err: Value, stream: bool, opened: bool) -> Vec<u8> {
        match (self, stream) {
            (Wire::Chat(_), true) => answer::error_sse(&err),
            (Wire::Chat(_), false) => answer::late_error(err),
            (Wire::Responses(e), true) => {
                let mut out = if opened { Vec::new() } else { e.open() };
                out.extend(e.failed(&err));
                out
            }
            (Wire::Responses(e), false) => e.failed_object(&err),
        }
    }
}
