//! A Messages request, read and written as the chat-completions request the loop runs. The field
//! types are checked first (`fields::check`), so that a wrong type is a 400 naming the field; each
//! message and content block is then read into its typed form (`Block`), so that a malformed one is
//! named by its place (`messages[2].content[0]`). Read by hand over `serde_json::Value` rather than
//! with serde's derives: the tagged and untagged enums' derived readers cost the .wasm ~100 KB.
//! Fields this file does not know pass to the model unchanged, as the Responses door's do.

use crate::doc::{truncate, type_name};
use crate::openai::fields::{self, check_tool_name, Invalid, Kind};
use crate::openai::ChatRequest;
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

/// One field of a JSON object, by its path for errors.
struct Obj<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// `v` as an object (`what` names it in the error).
    fn of(v: &'a Value, what: &str) -> Result<Obj<'a>, Invalid> {
        match v {
            Value::Object(map) => Ok(Obj { map }),
            other => Err(Invalid::new("", format!("{what} must be an object, not {}", type_name(other)))),
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A required string.
    fn text(&self, key: &str) -> Result<&'a str, Invalid> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(Invalid::new(key, format!("'{key}' must be a string, not {}", type_name(other)))),
            None => Err(Invalid::new(key, format!("'{key}' is required"))),
        }
    }

    /// The block's `type`.
    fn kind(&self) -> Result<&'a str, Invalid> {
        self.text("type")
    }

    /// Only these keys (and `cache_control`, a caching hint that no chat model takes).
    fn only(&self, keys: &[&str]) -> Result<(), Invalid> {
        match self.map.keys().find(|k| !keys.contains(&k.as_str()) && *k != "cache_control") {
            Some(k) => Err(Invalid::new(k.as_str(), format!("unknown field '{}'", truncate(k, 64)))),
            None => Ok(()),
        }
    }
}

/// `Err(e)` inside `at`.
fn at<T>(r: Result<T, Invalid>, at: &str) -> Result<T, Invalid> {
    r.map_err(|e| e.within(at))
}

/// A content block of a message, read.
enum Block<'a> {
    Text(&'a str),
    Image(String),
    ToolUse { id: &'a str, name: &'a str, input: &'a Value },
    ToolResult { id: &'a str, content: Option<&'a Value>, is_error: bool },
    Thinking(&'a str),
    RedactedThinking,
}

fn block(v: &Value) -> Result<Block<'_>, Invalid> {
    let b = Obj::of(v, "a content block")?;
    Ok(match b.kind()? {
        "text" => Block::Text(b.text("text")?),
        "image" => Block::Image(at(image(b.get("source")), "source")?),
        "tool_use" => {
            let input = b.get("input").ok_or_else(|| Invalid::new("input", "'input' is required"))?;
            Block::ToolUse { id: b.text("id")?, name: b.text("name")?, input }
        }
        "tool_result" => {
            let is_error = match b.get("is_error") {
                None => false,
                Some(Value::Bool(e)) => *e,
                Some(other) => {
                    return Err(Invalid::new(
                        "is_error",
                        format!("'is_error' must be true or false, not {}", type_name(other)),
                    ))
                }
            };
            Block::ToolResult { id: b.text("tool_use_id")?, content: b.get("content"), is_error }
        }
        "thinking" => Block::Thinking(b.text("thinking")?),
        "redacted_thinking" => Block::RedactedThinking,
        other => {
            let why = format!(
                "blocks of type '{}' are not supported: text, image, tool_use, tool_result, thinking and \
                 redacted_thinking are",
                truncate(other, 64)
            );
            return Err(Invalid::new("type", why));
        }
    })
}

/// An image `source` as the URL a chat `image_url` part takes (base64 data as a data URL).
fn image(source: Option<&Value>) -> Result<String, Invalid> {
    let s = Obj::of(source.unwrap_or(&Value::Null), "'source'")?;
    match s.kind()? {
        "base64" => Ok(format!("data:{};base64,{}", s.text("media_type")?, s.text("data")?)),
        "url" => Ok(s.text("url")?.to_string()),
        other => Err(Invalid::new(
            "type",
            format!("image sources of type '{}' are not supported: 'base64' and 'url' are", truncate(other, 64)),
        )),
    }
}

/// A JSON object of these fields.
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn text_message(role: &str, text: String) -> Value {
    object([("role", role.into()), ("content", text.into())])
}

/// A Messages body as the chat-completions request the loop runs, and what its answer echoes.
pub fn translate(body: &[u8]) -> Result<(ChatRequest, Echo), Invalid> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| Invalid::body(format!("the request body is not valid JSON: {e}")))?;
    let Value::Object(mut map) = value else {
        return Err(Invalid::body(format!("the request body must be a JSON object, not {}", type_name(&value))));
    };
    fields::check(&map, &MESSAGES)?;
    for (field, why) in REFUSED {
        if map.get(field).is_some_and(|v| !v.is_null()) {
            return Err(Invalid::new(field, format!("'{field}' is not supported: {why}")));
        }
    }
    let mut take = |k: &str| map.remove(k).filter(|v| !v.is_null());
    let max_tokens = match take("max_tokens").and_then(|v| v.as_u64()) {
        Some(0) => return Err(Invalid::new("max_tokens", "'max_tokens' must be at least 1")),
        Some(n) => n,
        None => return Err(Invalid::new("max_tokens", "'max_tokens' is required")),
    };
    let mut chat = Map::new();
    let model = take("model");
    let mut messages = system(take("system"))?;
    match take("messages") {
        Some(Value::Array(m)) if m.is_empty() => {
            return Err(Invalid::new("messages", "'messages' must hold at least one message"))
        }
        Some(Value::Array(m)) => messages.extend(conversation(&m)?),
        _ => return Err(Invalid::new("messages", "'messages' is required")),
    }
    chat.insert("messages".into(), Value::Array(messages));
    tools(&mut chat, take("tools"), take("tool_choice"))?;
    chat.insert("max_tokens".into(), Value::from(max_tokens));
    thinking(&mut chat, take("thinking"), max_tokens)?;
    if let Some(stop) = take("stop_sequences").filter(|s| s.as_array().is_some_and(|a| !a.is_empty())) {
        chat.insert("stop".into(), stop);
    }
    if let Some(user) = metadata(take("metadata"))? {
        chat.insert("user".into(), user);
    }
    let stream = take("stream").unwrap_or(Value::Bool(false));
    chat.insert("stream".into(), stream);
    // `model`, `temperature`, `top_p` pass as they are; `top_k` too: not an OpenAI parameter, but
    // vLLM, SGLang and llama.cpp servers take it. Unknown fields pass on, as chat requests' do.
    for (k, v) in map {
        if !NOT_SENT.contains(&k.as_str()) && !chat.contains_key(&k) {
            chat.insert(k, v);
        }
    }
    let echo = Echo { model: model.as_ref().and_then(Value::as_str).unwrap_or_default().to_string() };
    if let Some(model) = model {
        chat.insert("model".into(), model);
    }
    Ok((ChatRequest::from_map(chat)?, echo))
}

/// `system` (a string or text blocks) as the first system message.
fn system(system: Option<Value>) -> Result<Vec<Value>, Invalid> {
    let text = match system {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) => s,
        Some(Value::Array(blocks)) => texts(&blocks, "system")?,
        Some(other) => {
            let why = format!("'system' must be a string or text blocks, not {}", type_name(&other));
            return Err(Invalid::new("system", why));
        }
    };
    Ok(vec![text_message("system", text)])
}

/// Text blocks as one text, a line between blocks.
fn texts(blocks: &[Value], outer: &str) -> Result<String, Invalid> {
    let mut out = Vec::with_capacity(blocks.len());
    for (j, b) in blocks.iter().enumerate() {
        let where_ = format!("{outer}[{j}]");
        let b = at(Obj::of(b, "a text block"), &where_)?;
        match at(b.kind(), &where_)? {
            "text" => out.push(at(b.text("text"), &where_)?),
            other => {
                let why = format!("blocks of type '{}' are not supported here: text blocks are", truncate(other, 64));
                return Err(Invalid::new("type", why).within(&where_));
            }
        }
    }
    Ok(out.join("\n"))
}

/// The messages as chat messages: each `tool_result` a `tool` message answering a `tool_use` of the
/// assistant message before it, each `tool_use` a call of its assistant message.
fn conversation(messages: &[Value]) -> Result<Vec<Value>, Invalid> {
    let mut out = Vec::with_capacity(messages.len());
    // The calls not answered yet: (id, message index).
    let mut open: Vec<(String, usize)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let where_ = format!("messages[{i}]");
        let m = at(Obj::of(m, "a message"), &where_)?;
        at(m.only(&["role", "content"]), &where_)?;
        let content =
            m.get("content").ok_or_else(|| Invalid::new("content", "'content' is required").within(&where_))?;
        let blocks = match content {
            Value::String(text) => vec![Block::Text(text)],
            Value::Array(blocks) => blocks
                .iter()
                .enumerate()
                .map(|(j, b)| at(block(b), &format!("{where_}.content[{j}]")))
                .collect::<Result<_, _>>()?,
            other => {
                let why = format!("'content' must be a string or an array of blocks, not {}", type_name(other));
                return Err(Invalid::new("content", why).within(&where_));
            }
        };
        match at(m.text("role"), &where_)? {
            "user" => at(user(blocks, &mut open, &mut out), &where_)?,
            "assistant" => {
                let (message, calls) = at(assistant(blocks), &where_)?;
                open.extend(calls.into_iter().map(|id| (id, i)));
                out.push(message);
            }
            other => {
                let why = format!(
                    "unknown role '{}': 'user' or 'assistant' (the system prompt goes in 'system')",
                    truncate(other, 32)
                );
                return Err(Invalid::new("role", why).within(&where_));
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
fn user(blocks: Vec<Block<'_>>, open: &mut Vec<(String, usize)>, out: &mut Vec<Value>) -> Result<(), Invalid> {
    let mut parts = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        let where_ = format!("content[{j}]");
        match b {
            Block::Text(text) => parts.push(object([("type", "text".into()), ("text", text.into())])),
            Block::Image(url) => {
                let image_url = object([("url", url.into())]);
                parts.push(object([("type", "image_url".into()), ("image_url", image_url)]));
            }
            Block::ToolResult { id, content, is_error } => {
                let Some(k) = open.iter().position(|(open_id, _)| open_id == id) else {
                    let why = format!("'tool_use_id' '{}' matches no earlier unanswered tool_use", truncate(id, 64));
                    return Err(Invalid::new("tool_use_id", why).within(&where_));
                };
                open.remove(k);
                let text = at(tool_result(content), &where_)?;
                // Chat has no error flag: the model reads it in the text.
                let text = if is_error { format!("Error: {text}") } else { text };
                out.push(object([("role", "tool".into()), ("tool_call_id", id.into()), ("content", text.into())]));
            }
            Block::ToolUse { .. } | Block::Thinking(_) | Block::RedactedThinking => {
                let why = "a user message holds text, image and tool_result blocks";
                return Err(Invalid::new("type", why).within(&where_));
            }
        }
    }
    if let Some((id, _)) = open.first() {
        let why = format!("the tool_use '{}' has no tool_result in this message", truncate(id, 64));
        return Err(Invalid::new("content", why));
    }
    let content = match parts.as_mut_slice() {
        [] => return Ok(()),
        [one] => one.get_mut("text").map(Value::take).unwrap_or(Value::Array(parts)),
        _ => Value::Array(parts),
    };
    out.push(object([("role", "user".into()), ("content", content)]));
    Ok(())
}

/// A tool result's content (a string or text blocks) as text.
fn tool_result(content: Option<&Value>) -> Result<String, Invalid> {
    match content {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(blocks)) => texts(blocks, "content")
            .map_err(|e| Invalid { why: format!("{} (a chat tool message holds text only)", e.why), ..e }),
        Some(other) => {
            let why = format!("'content' must be a string or text blocks, not {}", type_name(other));
            Err(Invalid::new("content", why))
        }
    }
}

/// An assistant message and the ids of its calls: its text, its tool calls, and its thinking (sent
/// back as chat clients do, in `reasoning_content`; redacted thinking is the provider's ciphertext,
/// which no chat model reads).
fn assistant(blocks: Vec<Block<'_>>) -> Result<(Value, Vec<String>), Invalid> {
    let (mut text, mut thinking) = (String::new(), String::new());
    let (mut calls, mut ids) = (Vec::new(), Vec::new());
    for (j, b) in blocks.into_iter().enumerate() {
        let where_ = format!("content[{j}]");
        match b {
            Block::Text(t) => text.push_str(t),
            Block::Thinking(t) => thinking.push_str(t),
            Block::RedactedThinking => {}
            Block::ToolUse { id, name, input } => {
                check_tool_name(name).map_err(|why| Invalid::new("name", why).within(&where_))?;
                if !input.is_object() {
                    let why = format!("'input' must be an object, not {}", type_name(input));
                    return Err(Invalid::new("input", why).within(&where_));
                }
                let function = object([("name", name.into()), ("arguments", input.to_string().into())]);
                calls.push(object([("id", id.into()), ("type", "function".into()), ("function", function)]));
                ids.push(id.to_string());
            }
            Block::Image(_) | Block::ToolResult { .. } => {
                let why = "an assistant message holds text, tool_use and thinking blocks";
                return Err(Invalid::new("type", why).within(&where_));
            }
        }
    }
    let content = if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) };
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("content".into(), content);
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    if !thinking.is_empty() {
        m.insert("reasoning_content".into(), thinking.into());
    }
    Ok((Value::Object(m), ids))
}

/// The client's tools as chat function tools, and `tool_choice` (sent only with tools).
fn tools(chat: &mut Map<String, Value>, tools: Option<Value>, choice: Option<Value>) -> Result<(), Invalid> {
    let mut out = Vec::new();
    for (i, t) in tools.as_ref().and_then(Value::as_array).into_iter().flatten().enumerate() {
        out.push(at(tool(t), &format!("tools[{i}]"))?);
    }
    let choice = choice.map(|c| at(tool_choice(&c), "tool_choice")).transpose()?;
    if out.is_empty() {
        return Ok(());
    }
    chat.insert("tools".into(), Value::Array(out));
    if let Some((choice, no_parallel)) = choice {
        chat.insert("tool_choice".into(), choice);
        if no_parallel {
            chat.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }
    Ok(())
}

/// A client tool (no `type`, or `custom`); any other type is a tool the provider runs.
fn tool(t: &Value) -> Result<Value, Invalid> {
    let t = Obj::of(t, "a tool")?;
    if let Some(kind) = t.get("type") {
        if kind.as_str() != Some("custom") {
            let kind = kind.as_str().map_or_else(|| type_name(kind).to_string(), |k| truncate(k, 64).into_owned());
            let why = format!(
                "tools of type '{kind}' are not supported: the gateway runs only its own tools and the client's \
                 custom tools"
            );
            return Err(Invalid::new("type", why));
        }
    }
    let name = t.text("name")?;
    check_tool_name(name).map_err(|why| Invalid::new("name", why))?;
    let parameters = match t.get("input_schema") {
        Some(s @ Value::Object(_)) => s.clone(),
        Some(other) => {
            let why = format!("'input_schema' must be an object, not {}", type_name(other));
            return Err(Invalid::new("input_schema", why));
        }
        None => return Err(Invalid::new("input_schema", "'input_schema' is required")),
    };
    let mut f = Map::new();
    f.insert("name".into(), name.into());
    if t.get("description").is_some() {
        f.insert("description".into(), t.text("description")?.into());
    }
    f.insert("parameters".into(), parameters);
    Ok(object([("type", "function".into()), ("function", Value::Object(f))]))
}

/// `tool_choice` as chat's, and whether parallel calls are off (`disable_parallel_tool_use`).
fn tool_choice(c: &Value) -> Result<(Value, bool), Invalid> {
    let c = Obj::of(c, "'tool_choice'")?;
    let no_parallel = match c.get("disable_parallel_tool_use") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            let why = format!("'disable_parallel_tool_use' must be true or false, not {}", type_name(other));
            return Err(Invalid::new("disable_parallel_tool_use", why));
        }
    };
    let choice = match c.kind()? {
        "auto" => "auto".into(),
        "any" => "required".into(),
        "none" => "none".into(),
        "tool" => object([("type", "function".into()), ("function", object([("name", c.text("name")?.into())]))]),
        other => {
            let why = format!("'type' must be 'auto', 'any', 'tool' or 'none', not '{}'", truncate(other, 32));
            return Err(Invalid::new("type", why));
        }
    };
    Ok((choice, no_parallel))
}

/// `thinking` as chat's `reasoning_effort`, the one reasoning control chat models take: a budget
/// under 4,096 tokens is `low`, under 16,384 `medium`, else `high`; `disabled` and `adaptive` send
/// none (the model's own default).
fn thinking(chat: &mut Map<String, Value>, thinking: Option<Value>, max_tokens: u64) -> Result<(), Invalid> {
    let Some(t) = thinking else {
        return Ok(());
    };
    let t = at(Obj::of(&t, "'thinking'"), "thinking")?;
    match at(t.kind(), "thinking")? {
        "enabled" => {}
        "disabled" | "adaptive" => return Ok(()),
        other => {
            let why = format!("'type' must be 'enabled', 'disabled' or 'adaptive', not '{}'", truncate(other, 32));
            return Err(Invalid::new("type", why).within("thinking"));
        }
    }
    let budget = t.get("budget_tokens").and_then(Value::as_u64);
    let Some(budget) = budget.filter(|b| *b >= 1024 && *b < max_tokens) else {
        let why = "'thinking.budget_tokens' must be an integer of at least 1024 and less than 'max_tokens'";
        return Err(Invalid::new("thinking.budget_tokens", why));
    };
    let effort = match budget {
        0..4096 => "low",
        4096..16384 => "medium",
        _ => "high",
    };
    chat.insert("reasoning_effort".into(), effort.into());
    Ok(())
}

/// `metadata.user_id`, chat's `user` (the only field Anthropic's `metadata` has).
fn metadata(metadata: Option<Value>) -> Result<Option<Value>, Invalid> {
    let Some(m) = metadata else {
        return Ok(None);
    };
    let m = at(Obj::of(&m, "'metadata'"), "metadata")?;
    at(m.only(&["user_id"]), "metadata")?;
    match m.get("user_id") {
        None => Ok(None),
        Some(_) => Ok(Some(at(m.text("user_id"), "metadata")?.into())),
    }
}
