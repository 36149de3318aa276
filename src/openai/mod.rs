//! OpenAI chat-completions shapes: the client's request (typed where we read it, the rest kept as
//! sent), the LLM's reply, and the answers we write (JSON, SSE chunks, errors). The Responses API's
//! request becomes such a chat request (`responses`); its answer is written by `responses_out`.

pub mod answer;
pub mod fields;
pub mod message;
pub mod reasoning;
mod reply;
pub mod responses;
pub mod responses_out;
pub mod sse;
pub mod text_calls;

use crate::doc::{truncate, type_name};
use serde_json::{Map, Value};

pub use fields::Invalid;
pub use reply::LlmReply;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The JSON text the model wrote.
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    /// The text content; array content is flattened (non-text parts described).
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The request as the client sent it; fields we do not touch are forwarded unchanged.
    pub raw: Map<String, Value>,
    pub messages: Vec<Message>,
    pub stream: bool,
    pub include_usage: bool,
    pub model: Option<String>,
}

impl ChatRequest {
    /// A client body; `Err` is a 400 answer's message and field.
    pub fn parse(body: &[u8]) -> Result<ChatRequest, Invalid> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| Invalid::body(format!("the request body is not valid JSON: {e}")))?;
        let Value::Object(raw) = value else {
            return Err(Invalid::body(format!("the request body must be a JSON object, not {}", type_name(&value))));
        };
        Self::from_map(raw)
    }

    /// A request already read as a JSON object (a translated Responses request).
    pub fn from_map(raw: Map<String, Value>) -> Result<ChatRequest, Invalid> {
        let messages = match raw.get("messages") {
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    parse_message(m).map_err(|(param, e)| Invalid::new(param, e).within(&format!("messages[{i}]")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(Value::Array(_)) => return Err(Invalid::new("messages", "'messages' must not be empty")),
            Some(other) => {
                return Err(Invalid::new("messages", format!("'messages' must be an array, not {}", type_name(other))))
            }
            None => return Err(Invalid::new("messages", "'messages' is required")),
        };
        let question = messages.iter().rev().find(|m| m.role == Role::User);
        if question.is_none_or(|m| m.text.trim().is_empty()) {
            return Err(Invalid::new("messages", "the conversation needs a user message with text (the question)"));
        }
        let stream = flag(&raw, "stream").map_err(|e| Invalid::new("stream", e))?;
        fields::check(&raw, &fields::CHAT)?;
        let include_usage = match raw.get("stream_options") {
            Some(Value::Object(o)) => o.get("include_usage").and_then(Value::as_bool).unwrap_or(false),
            _ => false,
        };
        if let Some(n) = raw.get("n") {
            if n.as_u64() != Some(1) && !n.is_null() {
                return Err(Invalid::new("n", "'n' must be 1: the agent produces one answer"));
            }
        }
        let model = raw.get("model").and_then(Value::as_str).map(str::to_string);
        Ok(ChatRequest { raw, messages, stream, include_usage, model })
    }

    /// The question: the last user message's text.
    pub fn question(&self) -> &str {
        self.messages.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.text.as_str())
    }
}

fn flag(raw: &Map<String, Value>, key: &str) -> Result<bool, String> {
    match raw.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!("'{key}' must be true or false, not {}", type_name(other))),
    }
}

/// A message; `Err` names the field at fault and says why.
fn parse_message(m: &Value) -> Result<Message, (&'static str, String)> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some("system") | Some("developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") | Some("function") => Role::Tool,
        Some(other) => return Err(("role", format!("unknown role '{other}'"))),
        None => return Err(("role", "'role' is required".into())),
    };
    let text = content_text(m.get("content")).map_err(|e| ("content", e))?;
    let tool_calls = match m.get("tool_calls") {
        Some(Value::Array(calls)) => {
            calls.iter().map(parse_tool_call).collect::<Result<_, _>>().map_err(|e| ("tool_calls", e))?
        }
        _ => Vec::new(),
    };
    let tool_call_id = m.get("tool_call_id").and_then(Value::as_str).map(str::to_string);
    Ok(Message { role, text, tool_calls, tool_call_id })
}

/// String content, or an array of parts: text kept, other parts described in words.
fn content_text(content: Option<&Value>) -> Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out: Vec<String> = Vec::with_capacity(parts.len());
            for p in parts {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                out.push(match kind {
                    "text" | "input_text" => p.get("text").and_then(Value::as_str).unwrap_or("").to_string(),
                    "image_url" => match p.pointer("/image_url/url").and_then(Value::as_str) {
                        Some(u) if !u.starts_with("data:") => {
                            format!("[image: {}]", truncate(u, 200))
                        }
                        _ => "[image]".into(),
                    },
                    "" => return Err("a content part has no 'type'".into()),
                    other => format!("[{other} content]"),
                });
            }
            Ok(out.join("\n"))
        }
        Some(other) => Err(format!("'content' must be a string or an array of parts, not {}", type_name(other))),
    }
}

fn parse_tool_call(c: &Value) -> Result<ToolCall, String> {
    let f = c.get("function").ok_or("a tool call has no 'function'")?;
    let name = f.get("name").and_then(Value::as_str).ok_or("a tool call has no function name")?;
    let arguments = match f.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let id = c.get("id").and_then(Value::as_str).unwrap_or("").to_string();
    Ok(ToolCall { id, name: name.to_string(), arguments })
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// `completion_tokens_details.reasoning_tokens`, when the provider counts them (0: unknown).
    #[serde(skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        // Counts come from the provider: saturate rather than overflow.
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }

    /// Fills the counts a reply did not say with an estimate: ceil(bytes / 4) of the request sent for
    /// the prompt, of the reply read for the completion; the total is then at least their sum.
    pub fn estimate(&mut self, unread: Unread, sent: usize, received: usize) {
        let tokens = |bytes: usize| u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX);
        if unread.prompt {
            self.prompt_tokens = tokens(sent);
        }
        if unread.completion {
            self.completion_tokens = tokens(received);
        }
        self.total_tokens = self.total_tokens.max(self.prompt_tokens.saturating_add(self.completion_tokens));
    }
}

/// The counts of a reply's usage that could not be read (absent, null, negative, not a number), when
/// it has no readable `total_tokens` either: the turn's cost is then unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unread {
    pub prompt: bool,
    pub completion: bool,
}

impl Unread {
    pub fn any(self) -> bool {
        self.prompt || self.completion
    }
}

#[cfg(test)]
mod tests;
