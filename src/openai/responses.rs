//! The OpenAI Responses API in front of the agent: a `POST …/responses` body, typed where it is read,
//! translated into the chat-completions request the loop runs (the model is always asked with chat
//! completions). What the answer echoes back (`instructions`, `tools`, `metadata`, …) is kept as
//! `Echo`; `responses_out.rs` writes the answer. Fields this file does not know pass through to the
//! model unchanged, as chat requests' do.

use super::fields::{self, check_tool_name, Invalid};
use super::message::{
    to_value, CallKind, ChatMessage, ChatTool, ClientCall, Content, FileData, FunctionCall, FunctionDef, ImageUrl,
    JsonSchemaFormat, Part, ResponseFormat, ToolChoice,
};
use super::responses_out::Echo;
use super::ChatRequest;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Why a Responses request is refused (a 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Not a Responses body the gateway can read: why, and the field at fault.
    Invalid(Invalid),
    /// The request refers to state the gateway would have to keep (`previous_response_id`, …).
    Stateful(&'static str),
    /// A tool the provider hosts (`web_search`, `file_search`, …): the gateway has none of them.
    HostedTool(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Invalid(e) => e.fmt(f),
            RequestError::Stateful(field) => write!(
                f,
                "'{field}' is not supported: the gateway keeps no state between requests; send the whole \
                 conversation in 'input' (with store: false)"
            ),
            RequestError::HostedTool(kind) => write!(
                f,
                "tools of type '{kind}' are not supported: the gateway runs only its own tools and the \
                 client's 'function' tools"
            ),
        }
    }
}

/// A malformed field: `param` names it.
fn invalid(param: &str, why: impl Into<String>) -> RequestError {
    RequestError::Invalid(Invalid::new(param, why))
}

impl From<Invalid> for RequestError {
    fn from(e: Invalid) -> Self {
        RequestError::Invalid(e)
    }
}

impl RequestError {
    /// The same error inside `outer` (`input[2]`, `tools[0]`).
    fn within(self, outer: &str) -> RequestError {
        match self {
            RequestError::Invalid(e) => RequestError::Invalid(e.within(outer)),
            other => other,
        }
    }
}

/// The fields of a Responses request the gateway reads; the rest (`extra`) passes to the model.
#[derive(Debug, Deserialize)]
struct Request {
    #[serde(default)]
    model: Option<Value>,
    input: Option<Input>,
    #[serde(default)]
    instructions: Option<Value>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    max_output_tokens: Option<Value>,
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    text: Option<Value>,
    #[serde(default)]
    stream: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<Value>),
}

/// Fields that ask the gateway to keep or fetch state: refused unless absent, null or false.
const STATEFUL: [&str; 4] = ["previous_response_id", "conversation", "store", "prompt"];
/// Responses-only fields no chat model takes: kept for the answer's echo, never sent on.
const NOT_SENT: [&str; 8] =
    ["metadata", "user", "include", "truncation", "background", "stream_options", "top_logprobs", "max_tool_calls"];
/// What the answer repeats from the request, as OpenAI's Responses objects do.
const ECHOED: [&str; 7] = ["metadata", "user", "parallel_tool_calls", "temperature", "top_p", "truncation", "store"];

/// A Responses body as the chat-completions request the loop runs, and what its answer echoes.
pub fn translate(body: &[u8]) -> Result<(ChatRequest, Echo), RequestError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| Invalid::body(format!("the request body is not valid JSON: {e}")))?;
    let Value::Object(map) = &value else {
        return Err(Invalid::body("the request body must be a JSON object").into());
    };
    fields::check(map, &fields::RESPONSES)?;
    if map.get("input").is_some_and(|i| !i.is_string() && !i.is_array()) {
        return Err(invalid("input", "the request body: 'input' must be a string or an array of items"));
    }
    let req: Request = serde_json::from_value(value).map_err(|e| Invalid::body(format!("the request body: {e}")))?;
    refuse_state(&req.extra)?;
    let mut t = Translation::default();
    if let Some(model) = req.model {
        t.chat.insert("model".into(), model);
    }
    let messages = t.messages(req.instructions, req.input)?;
    t.chat.insert("messages".into(), to_value(&messages));
    t.tools(req.tools, req.tool_choice)?;
    t.controls(req.max_output_tokens, req.reasoning, req.text)?;
    match req.stream {
        None | Some(Value::Null) => {}
        Some(Value::Bool(on)) => {
            t.chat.insert("stream".into(), Value::Bool(on));
        }
        Some(_) => return Err(invalid("stream", "'stream' must be true or false")),
    }
    t.pass_on(req.extra);
    let chat = ChatRequest::from_map(t.chat)?;
    t.echo.model = chat.model.clone().unwrap_or_default();
    Ok((chat, t.echo))
}

/// The chat request being written, and what the answer will echo.
#[derive(Default)]
struct Translation {
    chat: Map<String, Value>,
    echo: Echo,
}

impl Translation {
    /// `instructions` as the first system message, then the input.
    fn messages(
        &mut self,
        instructions: Option<Value>,
        input: Option<Input>,
    ) -> Result<Vec<ChatMessage>, RequestError> {
        let mut messages = Vec::new();
        if let Some(instructions) = instructions.filter(|v| !v.is_null()) {
            let Value::String(text) = &instructions else {
                return Err(invalid("instructions", "'instructions' must be a string"));
            };
            messages.push(ChatMessage::System { content: Content::Text(text.clone()) });
            self.echo.fields.insert("instructions".into(), instructions);
        }
        match input {
            Some(Input::Text(text)) => messages.push(ChatMessage::User { content: Content::Text(text) }),
            Some(Input::Items(items)) => messages.extend(items_to_messages(&items)?),
            None => return Err(invalid("input", "'input' is required")),
        }
        Ok(messages)
    }

    /// The client's function tools and its `tool_choice` (sent only with tools).
    fn tools(&mut self, tools: Option<Vec<Value>>, choice: Option<Value>) -> Result<(), RequestError> {
        let tools = tools.unwrap_or_default();
        let choice = choice.filter(|v| !v.is_null());
        let chat_tools = function_tools(&tools)?;
        let chat_choice = choice.as_ref().map(tool_choice).transpose()?;
        if !chat_tools.is_empty() {
            self.chat.insert("tools".into(), to_value(&chat_tools));
            if let Some(choice) = chat_choice {
                self.chat.insert("tool_choice".into(), choice.into());
            }
        }
        self.echo.fields.insert("tools".into(), Value::Array(tools));
        self.echo.fields.insert("tool_choice".into(), choice.unwrap_or_else(|| "auto".into()));
        Ok(())
    }

    /// `max_output_tokens`, `reasoning` and `text` as chat's controls.
    fn controls(
        &mut self,
        max: Option<Value>,
        reasoning_: Option<Value>,
        text: Option<Value>,
    ) -> Result<(), RequestError> {
        if let Some(max) = max.filter(|v| !v.is_null()) {
            if max.as_u64().is_none_or(|n| n == 0) {
                return Err(invalid("max_output_tokens", "'max_output_tokens' must be a positive integer"));
            }
            self.chat.insert("max_tokens".into(), max.clone());
            self.echo.fields.insert("max_output_tokens".into(), max);
        }
        if let Some(r) = reasoning_.filter(|v| !v.is_null()) {
            reasoning(&r, &mut self.chat)?;
            self.echo.fields.insert("reasoning".into(), r);
        }
        if let Some(t) = text.filter(|v| !v.is_null()) {
            text_config(&t, &mut self.chat)?;
            self.echo.fields.insert("text".into(), t);
        }
        Ok(())
    }

    /// The fields this file does not read: echoed when the answer repeats them, passed to the model
    /// unless they are Responses-only.
    fn pass_on(&mut self, extra: Map<String, Value>) {
        for (k, v) in extra {
            if ECHOED.contains(&k.as_str()) {
                self.echo.fields.insert(k.clone(), v.clone());
            }
            if !NOT_SENT.contains(&k.as_str()) && !STATEFUL.contains(&k.as_str()) && !self.chat.contains_key(&k) {
                self.chat.insert(k, v);
            }
        }
    }
}

/// `previous_response_id`, `conversation`, `prompt`, `store: true`, `background: true`.
fn refuse_state(extra: &Map<String, Value>) -> Result<(), RequestError> {
    for field in STATEFUL {
        match extra.get(field) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(_) => return Err(RequestError::Stateful(field)),
        }
    }
    if extra.get("background").is_some_and(|v| v.as_bool() == Some(true)) {
        return Err(RequestError::Stateful("background"));
    }
    Ok(())
}

/// The input items as chat messages: consecutive `function_call` items (and the assistant text
/// before them) make one assistant message with `tool_calls`. Each call is answered by one
/// `function_call_output` after it, as a chat model needs.
fn items_to_messages(items: &[Value]) -> Result<Vec<ChatMessage>, RequestError> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(items.len());
    // The items of the calls not answered yet.
    let mut open: Vec<usize> = Vec::new();
    let id_of = |k: usize| items[k].get("call_id").and_then(Value::as_str).unwrap_or("");
    for (i, item) in items.iter().enumerate() {
        let at = |e: RequestError| e.within(&format!("input[{i}]"));
        if !item.is_object() {
            return Err(at(invalid("", "an item must be an object")));
        }
        let kind = item.get("type").and_then(Value::as_str);
        match kind {
            Some("message") => out.push(message(item).map_err(at)?),
            None if item.get("role").is_some() => out.push(message(item).map_err(at)?),
            Some("function_call") => {
                push_call(&mut out, item).map_err(at)?;
                open.push(i);
            }
            Some("function_call_output") => {
                let (id, output) = call_output(item).map_err(at)?;
                let Some(k) = open.iter().position(|&k| id_of(k) == id) else {
                    let why = format!("'call_id' '{}' matches no earlier unanswered function_call", short(id));
                    return Err(at(invalid("call_id", why)));
                };
                let output = ChatMessage::Tool { tool_call_id: id.to_string(), content: output };
                open.remove(k);
                out.push(output);
            }
            // The model's earlier thinking: chat models take none back in the client's history.
            Some("reasoning") => {}
            Some("item_reference") => return Err(RequestError::Stateful("item_reference")),
            Some(other) => return Err(at(invalid("type", format!("items of type '{other}' are not supported")))),
            None => return Err(at(invalid("type", "an item needs a 'type' (or a 'role' for a message)"))),
        }
    }
    match open.first() {
        Some(&i) => {
            let why = format!("the function_call '{}' has no function_call_output after it", short(id_of(i)));
            Err(invalid("call_id", why).within(&format!("input[{i}]")))
        }
        None => Ok(out),
    }
}

/// A client's id in a message, bounded.
fn short(id: &str) -> std::borrow::Cow<'_, str> {
    crate::doc::truncate(id, 64)
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str, RequestError> {
    v.get(key).and_then(Value::as_str).ok_or_else(|| invalid(key, format!("'{key}' must be a string")))
}

/// A `message` item: its role, and its content as a string or chat content parts.
fn message(item: &Value) -> Result<ChatMessage, RequestError> {
    let role = match str_field(item, "role")? {
        r @ ("user" | "system" | "developer" | "assistant") => r,
        other => return Err(invalid("role", format!("unknown role '{other}'"))),
    };
    let in_content = |e: RequestError| e.within("content");
    let content = match item.get("content") {
        Some(Value::String(s)) => Content::Text(s.clone()),
        Some(Value::Array(parts)) if role == "assistant" => Content::Text(assistant_text(parts).map_err(in_content)?),
        Some(Value::Array(parts)) => {
            Content::Parts(parts.iter().map(part).collect::<Result<_, _>>().map_err(in_content)?)
        }
        _ => return Err(invalid("content", "'content' must be a string or an array of parts")),
    };
    Ok(match (role, content) {
        ("assistant", Content::Text(text)) => {
            ChatMessage::Assistant { content: Some(text), tool_calls: Vec::new(), reasoning_content: None }
        }
        ("system", content) => ChatMessage::System { content },
        ("developer", content) => ChatMessage::Developer { content },
        (_, content) => ChatMessage::User { content },
    })
}

/// An earlier answer's parts (`output_text`, `refusal`) as one text.
fn assistant_text(parts: &[Value]) -> Result<String, RequestError> {
    let mut text = String::new();
    for p in parts {
        match p.get("type").and_then(Value::as_str) {
            Some("output_text" | "input_text") => text.push_str(str_field(p, "text")?),
            Some("refusal") => text.push_str(str_field(p, "refusal")?),
            other => {
                return Err(invalid("", format!("an assistant message cannot hold a '{}' part", other.unwrap_or("?"))))
            }
        }
    }
    Ok(text)
}

/// A user or system content part as the chat part it means.
fn part(p: &Value) -> Result<Part, RequestError> {
    match p.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => Ok(Part::Text { text: str_field(p, "text")?.to_string() }),
        Some("input_image") => match p.get("image_url").and_then(Value::as_str) {
            Some(url) => {
                let detail = p.get("detail").cloned().unwrap_or_else(|| "auto".into());
                Ok(Part::ImageUrl { image_url: ImageUrl { url: url.to_string(), detail: Some(detail) } })
            }
            None => {
                Err(invalid("image_url", "an 'input_image' part needs an 'image_url' (file ids need stored files)"))
            }
        },
        Some("input_file") => match (p.get("file_data"), p.get("filename")) {
            (Some(Value::String(data)), name) => Ok(Part::File {
                file: FileData { file_data: data.clone(), filename: name.cloned().unwrap_or(Value::Null) },
            }),
            _ => Err(invalid(
                "file_data",
                "an 'input_file' part needs 'file_data' (file ids and URLs need stored files)",
            )),
        },
        Some(other) => Err(invalid("type", format!("content parts of type '{other}' are not supported"))),
        None => Err(invalid("type", "a content part has no 'type'")),
    }
}

/// A `function_call` item: a tool call of the assistant message before it, or of a new one.
fn push_call(out: &mut Vec<ChatMessage>, item: &Value) -> Result<(), RequestError> {
    let (id, name) = (str_field(item, "call_id")?, str_field(item, "name")?);
    check_tool_name(name).map_err(|why| invalid("name", why))?;
    let function = FunctionCall { name: name.to_string(), arguments: str_field(item, "arguments")?.to_string() };
    let call = ClientCall { id: id.to_string(), kind: CallKind::Function, function };
    match out.last_mut() {
        Some(ChatMessage::Assistant { tool_calls, .. }) => tool_calls.push(call),
        _ => out.push(ChatMessage::Assistant { content: None, tool_calls: vec![call], reasoning_content: None }),
    }
    Ok(())
}

/// A `function_call_output` item: its call's id and its output (the `tool` message of its call).
fn call_output(item: &Value) -> Result<(&str, String), RequestError> {
    let output = match item.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => return Err(invalid("output", "'output' must be a string or an array of parts")),
    };
    Ok((str_field(item, "call_id")?, output))
}

/// The client's `function` tools as chat tools; any other type is a tool the provider hosts.
fn function_tools(tools: &[Value]) -> Result<Vec<ChatTool<'_>>, RequestError> {
    tools.iter().enumerate().map(|(i, t)| function_tool(t).map_err(|e| e.within(&format!("tools[{i}]")))).collect()
}

/// The fields of a function tool, typed as OpenAI's.
const TOOL: [(&str, fields::Kind); 3] =
    [("description", fields::Kind::Text), ("parameters", fields::Kind::Object), ("strict", fields::Kind::Flag)];

fn function_tool(t: &Value) -> Result<ChatTool<'_>, RequestError> {
    let Value::Object(tool) = t else {
        return Err(invalid("", "a tool must be an object"));
    };
    match tool.get("type").and_then(Value::as_str) {
        Some("function") => {}
        Some(other) => return Err(RequestError::HostedTool(other.to_string())),
        None => return Err(invalid("type", "a tool has no 'type'")),
    }
    let name = str_field(t, "name")?;
    check_tool_name(name).map_err(|why| invalid("name", why))?;
    fields::check(tool, &TOOL)?;
    let given = |key: &str| t.get(key).filter(|v| !v.is_null());
    let function = FunctionDef {
        name,
        description: given("description"),
        parameters: given("parameters"),
        strict: given("strict"),
    };
    Ok(ChatTool { kind: CallKind::Function, function })
}

/// `auto`, `none`, `required`, or one function by name.
fn tool_choice(choice: &Value) -> Result<ToolChoice, RequestError> {
    match choice {
        Value::String(s) if s == "auto" => Ok(ToolChoice::Auto),
        Value::String(s) if s == "none" => Ok(ToolChoice::None),
        Value::String(s) if s == "required" => Ok(ToolChoice::Required),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = str_field(choice, "name").map_err(|e| e.within("tool_choice"))?;
            Ok(ToolChoice::function(name))
        }
        _ => Err(invalid("tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {type: function, name}")),
    }
}

/// `reasoning.effort` as chat's `reasoning_effort` (the summary is the provider's to write).
fn reasoning(r: &Value, chat: &mut Map<String, Value>) -> Result<(), RequestError> {
    if !r.is_object() {
        return Err(invalid("reasoning", "'reasoning' must be an object"));
    }
    match r.get("effort") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(effort)) => {
            chat.insert("reasoning_effort".into(), Value::String(effort.clone()));
            Ok(())
        }
        Some(_) => Err(invalid("reasoning.effort", "'reasoning.effort' must be a string")),
    }
}

/// `text.format` as chat's `response_format` (JSON mode), `text.verbosity` as chat's `verbosity`.
fn text_config(t: &Value, chat: &mut Map<String, Value>) -> Result<(), RequestError> {
    if let Some(v) = t.get("verbosity").filter(|v| !v.is_null()) {
        if !v.is_string() {
            return Err(invalid("text.verbosity", "'text.verbosity' must be a string"));
        }
        chat.insert("verbosity".into(), v.clone());
    }
    let Some(format) = t.get("format").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let rf = match format.get("type").and_then(Value::as_str) {
        Some("text") => return Ok(()),
        Some("json_object") => ResponseFormat::JsonObject,
        Some("json_schema") => {
            let schema = format.get("schema").filter(|s| s.is_object());
            let schema =
                schema.ok_or_else(|| invalid("text.format.schema", "'text.format.schema' must be an object"))?;
            let name = format.get("name").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| "answer".into());
            if !name.is_string() {
                return Err(invalid("text.format.name", "'text.format.name' must be a string"));
            }
            let strict = format.get("strict").filter(|v| !v.is_null()).cloned();
            ResponseFormat::JsonSchema { json_schema: JsonSchemaFormat { name, schema: schema.clone(), strict } }
        }
        _ => {
            return Err(invalid(
                "text.format.type",
                "'text.format.type' must be 'text', 'json_object' or 'json_schema'",
            ))
        }
    };
    chat.insert("response_format".into(), to_value(&rf));
    Ok(())
}
