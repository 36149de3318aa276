//! A Messages request, read into typed structs and written as the chat-completions request the loop
//! runs. The field types are checked first (`fields::check`), so that a wrong type is a 400 naming
//! the field; each message and content block is then read on its own, so that a malformed one is
//! named by its place (`messages[2].content[0]`). Fields this file does not know pass to the model
//! unchanged, as the Responses door's do.

use crate::doc::{truncate, type_name};
use crate::openai::fields::{self, check_tool_name, Invalid, Kind};
use crate::openai::ChatRequest;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::answer::Echo;

/// The Messages fields with a simple type (`system`, `messages`, `tools`, `tool_choice`, `thinking`
/// and `metadata` are read with their own checks).
const MESSAGES: [(&str, Kind); 13] = [
    ("model", Kind::Model),
    ("max_tokens", Kind::Count),
    ("messages", Kind::Array),
    ("temperature", Kind::Number),
    ("top_p", Kind::Number),
    ("top_k", Kind::Count),
    ("stop_sequences", Kind::Texts),
    ("stream", Kind::Flag),
    ("tools", Kind::Array),
    ("tool_choice", Kind::Object),
    ("thinking", Kind::Object),
    ("metadata", Kind::Object),
    ("service_tier", Kind::Text),
];

/// Fields that ask for state or servers the provider keeps: refused unless absent or null.
const REFUSED: [(&str, &str); 2] = [
    ("container", "the gateway keeps no containers between requests"),
    ("mcp_servers", "the gateway runs its own tools (configure MCP servers in the gateway's 'apis')"),
];

/// Anthropic-only fields no chat model takes: not sent on (`service_tier`'s values are Anthropic's).
const NOT_SENT: [&str; 2] = ["service_tier", "anthropic_version"];

/// The fields of a Messages request the gateway reads; the rest (`extra`) passes to the model.
#[derive(Deserialize)]
struct Request {
    model: Option<String>,
    max_tokens: Option<u64>,
    #[serde(default)]
    system: Option<Value>,
    #[serde(default)]
    messages: Option<Vec<Value>>,
    temperature: Option<Value>,
    top_p: Option<Value>,
    top_k: Option<u64>,
    #[serde(default)]
    stop_sequences: Option<Vec<String>>,
    stream: Option<bool>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    thinking: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// One message of the conversation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InMessage {
    role: String,
    content: Content,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

/// A content block of a message.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    Image {
        source: ImageSource,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        is_error: Option<bool>,
    },
    Thinking {
        thinking: String,
    },
    RedactedThinking {},
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ImageSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

/// A text block (the `system` blocks, the text of a tool result).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TextBlock {
    Text { text: String },
}

/// A client tool: a function the model may call, returned to the client as `tool_use`.
#[derive(Deserialize)]
struct Tool {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ToolChoice {
    Auto {
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    },
    Any {
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    },
    Tool {
        name: String,
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    },
    None {},
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Thinking {
    Enabled { budget_tokens: u64 },
    Disabled {},
    Adaptive {},
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    #[serde(default)]
    user_id: Option<String>,
}

/// A chat message as the loop reads it.
#[derive(Serialize)]
struct ChatMessage {
    role: &'static str,
    content: Option<ChatContent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ChatCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    /// The assistant's earlier thinking, where a chat client sends it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
}

impl ChatMessage {
    fn new(role: &'static str, content: Option<ChatContent>) -> ChatMessage {
        ChatMessage { role, content, tool_calls: Vec::new(), tool_call_id: None, reasoning_content: None }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum ChatContent {
    Text(String),
    Parts(Vec<ChatPart>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ChatPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct ChatCall {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    function: ChatFunction,
}

#[derive(Serialize)]
struct ChatFunction {
    name: String,
    arguments: String,
}

#[derive(Serialize)]
struct ChatTool {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ChatToolFunction,
}

#[derive(Serialize)]
struct ChatToolFunction {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    parameters: Map<String, Value>,
}

/// The value, as JSON (typed values always serialize).
fn to_value(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `v` read as `T`; serde's message (it names the missing or mistyped field) inside `at`.
fn read<T: DeserializeOwned>(v: Value, at: &str) -> Result<T, Invalid> {
    serde_json::from_value(v).map_err(|e| Invalid::new("", e.to_string()).within(at))
}

/// A Messages body as the chat-completions request the loop runs, and what its answer echoes.
pub fn translate(body: &[u8]) -> Result<(ChatRequest, Echo), Invalid> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| Invalid::body(format!("the request body is not valid JSON: {e}")))?;
    let Value::Object(map) = &value else {
        return Err(Invalid::body(format!("the request body must be a JSON object, not {}", type_name(&value))));
    };
    fields::check(map, &MESSAGES)?;
    for (field, why) in REFUSED {
        if map.get(field).is_some_and(|v| !v.is_null()) {
            return Err(Invalid::new(field, format!("'{field}' is not supported: {why}")));
        }
    }
    let req: Request = serde_json::from_value(value).map_err(|e| Invalid::body(format!("the request body: {e}")))?;
    let max_tokens = match req.max_tokens {
        Some(0) => return Err(Invalid::new("max_tokens", "'max_tokens' must be at least 1")),
        Some(n) => n,
        None => return Err(Invalid::new("max_tokens", "'max_tokens' is required")),
    };
    let mut chat = Map::new();
    if let Some(model) = &req.model {
        chat.insert("model".into(), Value::String(model.clone()));
    }
    let mut messages = system(req.system)?;
    match req.messages {
        None => return Err(Invalid::new("messages", "'messages' is required")),
        Some(m) if m.is_empty() => return Err(Invalid::new("messages", "'messages' must hold at least one message")),
        Some(m) => messages.extend(conversation(m)?),
    }
    chat.insert("messages".into(), Value::Array(messages.into_iter().map(to_value).collect()));
    tools(&mut chat, req.tools, req.tool_choice)?;
    chat.insert("max_tokens".into(), Value::from(max_tokens));
    thinking(&mut chat, req.thinking, max_tokens)?;
    for (key, v) in [("temperature", req.temperature), ("top_p", req.top_p)] {
        if let Some(v) = v {
            chat.insert(key.into(), v);
        }
    }
    if let Some(k) = req.top_k {
        // Not an OpenAI parameter: vLLM, SGLang and llama.cpp servers take it as it is.
        chat.insert("top_k".into(), Value::from(k));
    }
    let stop = req.stop_sequences.unwrap_or_default();
    if !stop.is_empty() {
        chat.insert("stop".into(), to_value(&stop));
    }
    if let Some(user) = metadata(req.metadata)? {
        chat.insert("user".into(), Value::String(user));
    }
    chat.insert("stream".into(), Value::Bool(req.stream.unwrap_or(false)));
    for (k, v) in req.extra {
        if !NOT_SENT.contains(&k.as_str()) && !chat.contains_key(&k) {
            chat.insert(k, v);
        }
    }
    let chat = ChatRequest::from_map(chat)?;
    Ok((chat, Echo { model: req.model.unwrap_or_default() }))
}

/// `system` (a string or text blocks) as the first system message.
fn system(system: Option<Value>) -> Result<Vec<ChatMessage>, Invalid> {
    let text = match system {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => s,
        Some(Value::Array(blocks)) => texts(blocks, "system")?,
        Some(other) => {
            return Err(Invalid::new("system", format!("'system' must be a string or text blocks, not {}", type_name(&other))))
        }
    };
    Ok(vec![ChatMessage::new("system", Some(ChatContent::Text(text)))])
}

/// Text blocks as one text, a line between blocks.
fn texts(blocks: Vec<Value>, at: &str) -> Result<String, Invalid> {
    let mut out = Vec::with_capacity(blocks.len());
    for (j, b) in blocks.into_iter().enumerate() {
        let TextBlock::Text { text } = read(b, &format!("{at}[{j}]"))?;
        out.push(text);
    }
    Ok(out.join("\n"))
}

/// The messages as chat messages: each `tool_result` a `tool` message answering an earlier
/// `tool_use` that has no answer yet, each `tool_use` a call of its assistant message.
fn conversation(messages: Vec<Value>) -> Result<Vec<ChatMessage>, Invalid> {
    let mut out = Vec::with_capacity(messages.len());
    // The calls not answered yet: (id, message index).
    let mut open: Vec<(String, usize)> = Vec::new();
    for (i, m) in messages.into_iter().enumerate() {
        let at = format!("messages[{i}]");
        let m: InMessage = read(m, &at)?;
        let blocks = match m.content {
            Content::Text(text) => vec![Block::Text { text }],
            Content::Blocks(blocks) => blocks
                .into_iter()
                .enumerate()
                .map(|(j, b)| read(b, &format!("{at}.content[{j}]")))
                .collect::<Result<_, _>>()?,
        };
        match m.role.as_str() {
            "user" => user(blocks, &mut open, &mut out).map_err(|e| e.within(&at))?,
            "assistant" => {
                let message = assistant(blocks).map_err(|e| e.within(&at))?;
                open.extend(message.tool_calls.iter().map(|c| (c.id.clone(), i)));
                out.push(message);
            }
            other => {
                let why = format!("unknown role '{}': 'user' or 'assistant' (the system prompt goes in 'system')", truncate(other, 32));
                return Err(Invalid::new("role", why).within(&at));
            }
        }
    }
    match open.first() {
        Some((id, i)) => {
            let why = format!("the tool_use '{}' has no tool_result in the next user message", truncate(id, 64));
            Err(Invalid::new("content", why).within(&format!("messages[{i}]")))
        }
        None => Ok(out),
    }
}

/// A user message: its tool results first (as `tool` messages), then its text and images.
fn user(blocks: Vec<Block>, open: &mut Vec<(String, usize)>, out: &mut Vec<ChatMessage>) -> Result<(), Invalid> {
    let mut parts = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("content[{j}]");
        match b {
            Block::Text { text } => parts.push(ChatPart::Text { text }),
            Block::Image { source } => parts.push(ChatPart::ImageUrl { image_url: image(source) }),
            Block::ToolResult { tool_use_id, content, is_error } => {
                let Some(k) = open.iter().position(|(id, _)| *id == tool_use_id) else {
                    let why = format!("'tool_use_id' '{}' matches no earlier unanswered tool_use", truncate(&tool_use_id, 64));
                    return Err(Invalid::new("tool_use_id", why).within(&at));
                };
                open.remove(k);
                let text = tool_result(content).map_err(|e| e.within(&at))?;
                // Chat has no error flag: the model reads it in the text.
                let text = if is_error == Some(true) { format!("Error: {text}") } else { text };
                let mut m = ChatMessage::new("tool", Some(ChatContent::Text(text)));
                m.tool_call_id = Some(tool_use_id);
                out.push(m);
            }
            Block::ToolUse { .. } | Block::Thinking { .. } | Block::RedactedThinking {} => {
                return Err(Invalid::new("type", "a user message holds text, image and tool_result blocks").within(&at))
            }
        }
    }
    if let Some((id, _)) = open.first() {
        let why = format!("the tool_use '{}' has no tool_result in this message", truncate(id, 64));
        return Err(Invalid::new("content", why));
    }
    let content = match parts.as_slice() {
        [] => return Ok(()),
        [ChatPart::Text { text }] => ChatContent::Text(text.clone()),
        _ => ChatContent::Parts(parts),
    };
    out.push(ChatMessage::new("user", Some(content)));
    Ok(())
}

fn image(source: ImageSource) -> ImageUrl {
    match source {
        ImageSource::Base64 { media_type, data } => ImageUrl { url: format!("data:{media_type};base64,{data}") },
        ImageSource::Url { url } => ImageUrl { url },
    }
}

/// A tool result's content (a string or text blocks) as text.
fn tool_result(content: Option<Content>) -> Result<String, Invalid> {
    match content {
        None => Ok(String::new()),
        Some(Content::Text(text)) => Ok(text),
        Some(Content::Blocks(blocks)) => texts(blocks, "content").map_err(|e| Invalid {
            why: format!("{} (a chat tool message holds text only)", e.why),
            ..e
        }),
    }
}

/// An assistant message: its text, its tool calls, and its thinking (sent back as chat clients do,
/// in `reasoning_content`; redacted thinking is the provider's ciphertext, which no chat model reads).
fn assistant(blocks: Vec<Block>) -> Result<ChatMessage, Invalid> {
    let (mut text, mut thinking) = (String::new(), String::new());
    let mut calls = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        match b {
            Block::Text { text: t } => text.push_str(&t),
            Block::Thinking { thinking: t } => thinking.push_str(&t),
            Block::RedactedThinking {} => {}
            Block::ToolUse { id, name, input } => {
                let at = format!("content[{j}]");
                check_tool_name(&name).map_err(|why| Invalid::new("name", why).within(&at))?;
                if !input.is_object() {
                    let why = format!("'input' must be an object, not {}", type_name(&input));
                    return Err(Invalid::new("input", why).within(&at));
                }
                let function = ChatFunction { name, arguments: input.to_string() };
                calls.push(ChatCall { id, kind: "function", function });
            }
            Block::Image { .. } | Block::ToolResult { .. } => {
                let why = "an assistant message holds text, tool_use and thinking blocks";
                return Err(Invalid::new("type", why).within(&format!("content[{j}]")));
            }
        }
    }
    let content = (!text.is_empty() || calls.is_empty()).then_some(ChatContent::Text(text));
    let mut m = ChatMessage::new("assistant", content);
    m.tool_calls = calls;
    m.reasoning_content = (!thinking.is_empty()).then_some(thinking);
    Ok(m)
}

/// The client's tools as chat function tools, and `tool_choice` (sent only with tools).
fn tools(chat: &mut Map<String, Value>, tools: Option<Vec<Value>>, choice: Option<Value>) -> Result<(), Invalid> {
    let mut out = Vec::new();
    for (i, t) in tools.unwrap_or_default().into_iter().enumerate() {
        let at = format!("tools[{i}]");
        let tool: Tool = read(t, &at)?;
        if let Some(kind) = tool.kind.as_deref().filter(|k| *k != "custom") {
            let why = format!(
                "tools of type '{}' are not supported: the gateway runs only its own tools and the client's \
                 custom tools",
                truncate(kind, 64)
            );
            return Err(Invalid::new("type", why).within(&at));
        }
        check_tool_name(&tool.name).map_err(|why| Invalid::new("name", why).within(&at))?;
        let Some(parameters) = tool.input_schema else {
            return Err(Invalid::new("input_schema", "'input_schema' is required").within(&at));
        };
        let function = ChatToolFunction { name: tool.name, description: tool.description, parameters };
        out.push(ChatTool { kind: "function", function });
    }
    let choice = match choice {
        None | Some(Value::Null) => None,
        Some(c) => Some(read::<ToolChoice>(c, "tool_choice")?),
    };
    if out.is_empty() {
        return Ok(());
    }
    chat.insert("tools".into(), to_value(&out));
    let (value, no_parallel) = match choice {
        None => return Ok(()),
        Some(ToolChoice::Auto { disable_parallel_tool_use: d }) => (Value::from("auto"), d),
        Some(ToolChoice::Any { disable_parallel_tool_use: d }) => (Value::from("required"), d),
        Some(ToolChoice::None {}) => (Value::from("none"), None),
        Some(ToolChoice::Tool { name, disable_parallel_tool_use: d }) => {
            let mut f = Map::new();
            f.insert("name".into(), Value::String(name));
            let mut c = Map::new();
            c.insert("type".into(), Value::from("function"));
            c.insert("function".into(), Value::Object(f));
            (Value::Object(c), d)
        }
    };
    chat.insert("tool_choice".into(), value);
    if no_parallel == Some(true) {
        chat.insert("parallel_tool_calls".into(), Value::Bool(false));
    }
    Ok(())
}

/// `thinking` as chat's `reasoning_effort`, the one reasoning control chat models take: a budget
/// under 4,096 tokens is `low`, under 16,384 `medium`, else `high`; `disabled` and `adaptive` send
/// none (the model's own default).
fn thinking(chat: &mut Map<String, Value>, thinking: Option<Value>, max_tokens: u64) -> Result<(), Invalid> {
    let Some(t) = thinking.filter(|t| !t.is_null()) else {
        return Ok(());
    };
    let Thinking::Enabled { budget_tokens } = read(t, "thinking")? else {
        return Ok(());
    };
    if budget_tokens < 1024 || budget_tokens >= max_tokens {
        let why = "'thinking.budget_tokens' must be at least 1024 and less than 'max_tokens'";
        return Err(Invalid::new("thinking.budget_tokens", why));
    }
    let effort = match budget_tokens {
        ..4096 => "low",
        ..16384 => "medium",
        _ => "high",
    };
    chat.insert("reasoning_effort".into(), Value::from(effort));
    Ok(())
}

/// `metadata.user_id`, chat's `user`.
fn metadata(metadata: Option<Value>) -> Result<Option<String>, Invalid> {
    match metadata.filter(|m| !m.is_null()) {
        None => Ok(None),
        Some(m) => Ok(read::<Metadata>(m, "metadata")?.user_id),
    }
}
