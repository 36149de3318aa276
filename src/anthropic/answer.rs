//! What a Messages client receives: a `message` object, or the same answer as the Messages event
//! stream (`message_start`, content blocks started, delta'd and stopped, `message_delta`,
//! `message_stop`), or an error in Anthropic's shape. `Events` keeps the open block while a live
//! stream relays the model's text.
//!
//! Thinking blocks carry an empty `signature`: the gateway signs nothing, and a client that sends the
//! block back gets its text passed to the model as `reasoning_content`, the signature unchecked.

use crate::openai::answer::{Answer, FinishReason};
use serde::Serialize;
use serde_json::Value;

/// What the answer repeats from the request.
#[derive(Debug, Clone, Default)]
pub struct Echo {
    /// The client's model, until the LLM names its own.
    pub model: String,
}

/// Why the answer ends, in Messages words. Never `stop_sequence`: a chat completion's `stop` does
/// not say whether a stop sequence ended the turn, so such an answer is `end_turn` (and
/// `stop_sequence` is null).
fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
    }
}

#[derive(Serialize, Clone, Copy, Default)]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
}

impl From<crate::openai::Usage> for Usage {
    fn from(u: crate::openai::Usage) -> Usage {
        Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens }
    }
}

/// A content block of the answer.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking { thinking: &'a str, signature: &'a str },
    Text { text: &'a str },
    ToolUse { id: &'a str, name: &'a str, input: Value },
}

/// The `message` object.
#[derive(Serialize)]
struct Message<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<Block<'a>>,
    stop_reason: Option<&'static str>,
    stop_sequence: Option<&'a str>,
    usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_agent_steps: Option<&'a Value>,
}

/// A delta of a content block (`text_delta`, …).
#[derive(Serialize)]
#[serde(tag = "type")]
enum Delta<'a> {
    #[serde(rename = "text_delta")]
    Text { text: &'a str },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: &'a str },
    #[serde(rename = "signature_delta")]
    Signature { signature: &'a str },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: &'a str },
}

#[derive(Serialize)]
struct MessageDelta<'a> {
    stop_reason: &'static str,
    stop_sequence: Option<&'a str>,
}

/// The events of the stream.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event<'a> {
    MessageStart {
        message: Message<'a>,
    },
    ContentBlockStart {
        index: usize,
        content_block: Block<'a>,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta<'a>,
        usage: Usage,
        #[serde(skip_serializing_if = "Option::is_none")]
        api_agent_steps: Option<&'a Value>,
    },
    MessageStop {},
    Ping {},
    Error {
        error: ErrorBody<'a>,
    },
}

impl Event<'_> {
    fn name(&self) -> &'static str {
        match self {
            Event::MessageStart { .. } => "message_start",
            Event::ContentBlockStart { .. } => "content_block_start",
            Event::ContentBlockDelta { .. } => "content_block_delta",
            Event::ContentBlockStop { .. } => "content_block_stop",
            Event::MessageDelta { .. } => "message_delta",
            Event::MessageStop {} => "message_stop",
            Event::Ping {} => "ping",
            Event::Error { .. } => "error",
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(self.name().as_bytes());
        out.extend_from_slice(b"\ndata: ");
        // Writing typed values into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, self);
        out.extend_from_slice(b"\n\n");
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: ErrorBody<'a>,
}

/// Anthropic's error type for a status: its own for the statuses its API uses, `invalid_request_error`
/// for another 4xx, `overloaded_error` for a 503 (Anthropic's 529), else `api_error`.
pub fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// `{"type": "error", "error": {"type", "message"}}`.
pub fn error(status: u16, message: &str) -> Vec<u8> {
    let e = ErrorObject { kind: "error", error: ErrorBody { kind: error_type(status), message } };
    serde_json::to_vec(&e).unwrap_or_default()
}

/// The block open in a live stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Thinking,
    Text,
}

/// One answer's event stream, and the `message` object.
#[derive(Debug, Clone)]
pub struct Events {
    /// `msg_…`.
    id: String,
    pub model: String,
    /// The blocks started so far (the next block's index).
    blocks: usize,
    open: Option<Open>,
    /// A text block has been started: later thinking stays out of the stream.
    texted: bool,
}

impl Events {
    pub fn new(id: String, echo: &Echo) -> Events {
        Events { id, model: echo.model.clone(), blocks: 0, open: None, texted: false }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    fn message<'a>(&'a self, content: Vec<Block<'a>>, end: Option<&'a Answer<'a>>) -> Message<'a> {
        Message {
            id: &self.id,
            kind: "message",
            role: "assistant",
            model: &self.model,
            content,
            stop_reason: end.map(|a| stop_reason(a.finish_reason)),
            stop_sequence: None,
            usage: end.map(|a| a.usage.into()).unwrap_or_default(),
            api_agent_steps: end.and_then(|a| a.steps.as_ref()),
        }
    }

    /// The answer as one `message` object (no stream).
    pub fn whole(&self, a: &Answer<'_>) -> Vec<u8> {
        let mut content = Vec::new();
        if let Some(r) = a.reasoning.filter(|r| !r.is_empty()) {
            content.push(Block::Thinking { thinking: r, signature: "" });
        }
        if !a.content.is_empty() || a.tool_calls.is_none() {
            content.push(Block::Text { text: a.content });
        }
        content.extend(calls(a.tool_calls).map(|c| Block::ToolUse { id: c.id, name: c.name, input: c.input }));
        serde_json::to_vec(&self.message(content, Some(a))).unwrap_or_default()
    }

    /// The stream's first events: `message_start` and a `ping`, as Anthropic's streams begin.
    pub fn open(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(320);
        Event::MessageStart { message: self.message(Vec::new(), None) }.write(&mut out);
        Event::Ping {}.write(&mut out);
        out
    }

    /// A keep-alive while tools run: a `ping` event.
    pub fn ping() -> Vec<u8> {
        let mut out = Vec::new();
        Event::Ping {}.write(&mut out);
        out
    }

    fn start(&mut self, block: Block<'_>, out: &mut Vec<u8>) -> usize {
        let index = self.blocks;
        self.blocks += 1;
        Event::ContentBlockStart { index, content_block: block }.write(out);
        index
    }

    /// Closes the open block (a thinking block with its signature first).
    fn close(&mut self, out: &mut Vec<u8>) {
        let Some(open) = self.open.take() else { return };
        let index = self.blocks - 1;
        if open == Open::Thinking {
            Event::ContentBlockDelta { index, delta: Delta::Signature { signature: "" } }.write(out);
        }
        Event::ContentBlockStop { index }.write(out);
    }

    /// A piece of the model's thinking, in a thinking block (opened first). Thinking that comes after
    /// the answer's text has begun stays out of the stream.
    pub fn reasoning(&mut self, text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if self.texted {
            return out;
        }
        if self.open != Some(Open::Thinking) {
            self.close(&mut out);
            self.start(Block::Thinking { thinking: "", signature: "" }, &mut out);
            self.open = Some(Open::Thinking);
        }
        Event::ContentBlockDelta { index: self.blocks - 1, delta: Delta::Thinking { thinking: text } }.write(&mut out);
        out
    }

    /// A piece of the answer's text, in a text block (opened first, after the thinking block).
    pub fn text(&mut self, delta: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if self.open != Some(Open::Text) {
            self.close(&mut out);
            self.start(Block::Text { text: "" }, &mut out);
            self.open = Some(Open::Text);
            self.texted = true;
        }
        if !delta.is_empty() {
            Event::ContentBlockDelta { index: self.blocks - 1, delta: Delta::Text { text: delta } }.write(&mut out);
        }
        out
    }

    /// The end of the stream: `rest` of the answer's text, the open block closed, the client's tool
    /// calls as `tool_use` blocks, `message_delta` with the stop reason and usage, `message_stop`.
    pub fn end(&mut self, a: &Answer<'_>, rest: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if !rest.is_empty() || (a.tool_calls.is_none() && !self.texted) {
            out.extend(self.text(rest));
        }
        self.close(&mut out);
        for c in calls(a.tool_calls) {
            let json = c.input.to_string();
            let block = Block::ToolUse { id: c.id, name: c.name, input: Value::Object(Default::default()) };
            let index = self.start(block, &mut out);
            Event::ContentBlockDelta { index, delta: Delta::InputJson { partial_json: &json } }.write(&mut out);
            Event::ContentBlockStop { index }.write(&mut out);
        }
        let delta = MessageDelta { stop_reason: stop_reason(a.finish_reason), stop_sequence: None };
        Event::MessageDelta { delta, usage: a.usage.into(), api_agent_steps: a.steps.as_ref() }.write(&mut out);
        Event::MessageStop {}.write(&mut out);
        out
    }

    /// A failure in a stream: an `error` event (after `message_start` when the stream had not begun).
    pub fn failed(&mut self, status: u16, message: &str, opened: bool) -> Vec<u8> {
        let mut out = if opened { Vec::new() } else { self.open() };
        Event::Error { error: ErrorBody { kind: error_type(status), message } }.write(&mut out);
        out
    }
}

/// A client tool call, read from its chat form.
struct Call<'a> {
    id: &'a str,
    name: &'a str,
    /// The arguments as an object (chat carries them as JSON text; text that is not an object is
    /// kept under `arguments`, so that the client sees what the model wrote).
    input: Value,
}

fn calls(tool_calls: Option<&Value>) -> impl Iterator<Item = Call<'_>> {
    tool_calls.and_then(Value::as_array).into_iter().flatten().map(|c| {
        let text = c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("");
        let input = match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => v,
            _ if text.trim().is_empty() => Value::Object(Default::default()),
            _ => {
                let mut m = serde_json::Map::new();
                m.insert("arguments".into(), Value::String(text.to_string()));
                Value::Object(m)
            }
        };
        Call {
            id: c.get("id").and_then(Value::as_str).unwrap_or_default(),
            name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default(),
            input,
        }
    })
}
