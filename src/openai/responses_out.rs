//! What a Responses client receives: a `response` object, or the same answer as the Responses event
//! stream (`response.created` … `response.completed`, each event with its `sequence_number`). The
//! stream is written by `Events`, which keeps the output items open; the final object's `output` is
//! the items the stream sent, so that a client's snapshot and the final object agree.

use super::answer::{Answer, FinishReason};
use super::Usage;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// What the answer repeats from the request (`instructions`, `tools`, `metadata`, `text`, …).
#[derive(Debug, Clone, Default)]
pub struct Echo {
    /// The client's model, until the LLM names its own.
    pub model: String,
    pub fields: Map<String, Value>,
}

/// A response's state, as its `status` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    InProgress,
    Completed,
    /// The iteration limit cut the answer.
    Incomplete,
    Failed,
}

impl Status {
    /// An answer cut by the loop's limit is `incomplete`; the client's calls end it as `completed`.
    pub fn of(reason: FinishReason) -> Status {
        match reason {
            FinishReason::Length => Status::Incomplete,
            FinishReason::Stop | FinishReason::ToolCalls => Status::Completed,
        }
    }
}

/// The Responses usage object: chat's counts under Responses names.
#[derive(serde::Serialize)]
struct ResponsesUsage {
    input_tokens: u64,
    input_tokens_details: Cached,
    output_tokens: u64,
    output_tokens_details: Reasoned,
    total_tokens: u64,
}

#[derive(serde::Serialize)]
struct Cached {
    cached_tokens: u64,
}

#[derive(serde::Serialize)]
struct Reasoned {
    reasoning_tokens: u64,
}

impl From<Usage> for ResponsesUsage {
    fn from(u: Usage) -> ResponsesUsage {
        ResponsesUsage {
            input_tokens: u.prompt_tokens,
            input_tokens_details: Cached { cached_tokens: 0 },
            output_tokens: u.completion_tokens,
            output_tokens_details: Reasoned { reasoning_tokens: u.reasoning_tokens },
            total_tokens: u.total_tokens,
        }
    }
}

/// An empty JSON array (`summary`, `annotations`, `logprobs`: the gateway has none to give).
type None_ = [u8; 0];

/// An output item, as the stream sends it and the final object lists it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item {
    Reasoning { id: String, summary: None_, content: Vec<ReasoningText>, status: Status },
    Message { id: String, status: Status, role: Role, content: Vec<TextPart> },
    FunctionCall { id: String, call_id: String, name: Value, arguments: Value, status: Status },
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    Assistant,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "type", rename = "reasoning_text")]
struct ReasoningText {
    text: String,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "type", rename = "output_text")]
struct TextPart {
    text: String,
    annotations: None_,
    logprobs: None_,
}

fn text_part(text: &str) -> TextPart {
    TextPart { text: text.to_string(), annotations: [], logprobs: [] }
}

/// A response's `error`: the chat error object's code and message.
#[derive(Debug, Clone, serde::Serialize)]
struct ResponseError {
    code: Value,
    message: Value,
}

/// The chat error object `{"error": {message, type, code}}` as a response's `error`.
fn error_of(err: &Value) -> ResponseError {
    let e = err.get("error").unwrap_or(err);
    let field = |key: &str, default: &str| e.get(key).cloned().unwrap_or_else(|| Value::String(default.into()));
    ResponseError { code: field("code", "api_error"), message: field("message", "") }
}

#[derive(serde::Serialize)]
struct Incomplete {
    reason: &'static str,
}

/// The `response` object.
#[derive(serde::Serialize)]
struct Response<'a> {
    id: &'a str,
    object: &'static str,
    created_at: u64,
    status: Status,
    error: Option<ResponseError>,
    incomplete_details: Option<Incomplete>,
    model: &'a str,
    output: &'a [Item],
    output_text: String,
    tools: Or<'a, None_>,
    tool_choice: Or<'a, &'static str>,
    parallel_tool_calls: Or<'a, bool>,
    #[serde(flatten)]
    echo: Echoed<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<ResponsesUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_agent_steps: Option<&'a Value>,
}

/// A field the request echoes, or its default.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Or<'a, T> {
    Sent(&'a Value),
    Default(T),
}

fn echoed<'a, T>(fields: &'a Map<String, Value>, key: &str, default: T) -> Or<'a, T> {
    fields.get(key).map_or(Or::Default(default), Or::Sent)
}

/// The rest of what the request echoes, after the fields `Response` names: in the request's order,
/// with `store` always false (appended when the client did not send it).
struct Echoed<'a>(&'a Map<String, Value>);

/// The echoed fields `Response` writes in their own place.
const PLACED: [&str; 3] = ["tools", "tool_choice", "parallel_tool_calls"];

impl Serialize for Echoed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0.iter().filter(|(k, _)| !PLACED.contains(&k.as_str())) {
            match k.as_str() {
                "store" => m.serialize_entry(k, &false)?,
                _ => m.serialize_entry(k, v)?,
            }
        }
        if !self.0.contains_key("store") {
            m.serialize_entry("store", &false)?;
        }
        m.end()
    }
}

/// An event's payload; `Events::frame` adds its `type` and `sequence_number` after these fields.
#[allow(clippy::large_enum_variant)] // written at once, never kept: no boxing
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Payload<'a> {
    Response { response: Response<'a> },
    Item { output_index: usize, item: &'a Item },
    Part { item_id: &'a str, output_index: usize, content_index: u8, part: TextPart },
    Delta { item_id: &'a str, output_index: usize, content_index: u8, delta: &'a str },
    Text { item_id: &'a str, output_index: usize, content_index: u8, text: &'a str },
    TextDelta { item_id: &'a str, output_index: usize, content_index: u8, delta: &'a str, logprobs: None_ },
    TextDone { item_id: &'a str, output_index: usize, content_index: u8, text: &'a str, logprobs: None_ },
    ArgsDelta { item_id: &'a str, output_index: usize, delta: &'a Value },
    ArgsDone { item_id: &'a str, output_index: usize, name: &'a Value, arguments: &'a Value },
}

/// How the stream ends.
struct End<'a> {
    usage: &'a Usage,
    steps: Option<&'a Value>,
}

/// One answer's event stream, and the `response` object it ends with.
#[derive(Debug, Clone)]
pub struct Events {
    /// `resp_…`; the items' ids derive from it.
    id: String,
    created_at: u64,
    pub model: String,
    echo: Echo,
    seq: u64,
    /// The items sent whole (`output_item.done`), in order.
    done: Vec<Item>,
    /// The reasoning item being streamed: its text so far.
    reasoning: Option<String>,
    /// The message item being streamed: its text so far.
    text: Option<String>,
}

impl Events {
    pub fn new(id: String, created_at: u64, echo: Echo) -> Events {
        let model = echo.model.clone();
        Events { id, created_at, model, echo, seq: 0, done: Vec::new(), reasoning: None, text: None }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The `response` object with this status and output.
    fn object<'a>(&'a self, status: Status, output: &'a [Item], end: Option<End<'a>>) -> Response<'a> {
        let output_text: String = output
            .iter()
            .filter_map(|i| match i {
                Item::Message { content, .. } => content.first().map(|p| p.text.as_str()),
                _ => None,
            })
            .collect();
        let fields = &self.echo.fields;
        Response {
            id: &self.id,
            object: "response",
            created_at: self.created_at,
            status,
            error: None,
            incomplete_details: (status == Status::Incomplete).then_some(Incomplete { reason: "max_output_tokens" }),
            model: &self.model,
            output,
            output_text,
            tools: echoed(fields, "tools", []),
            tool_choice: echoed(fields, "tool_choice", "auto"),
            parallel_tool_calls: echoed(fields, "parallel_tool_calls", true),
            echo: Echoed(fields),
            usage: end.as_ref().map(|e| ResponsesUsage::from(*e.usage)),
            api_agent_steps: end.and_then(|e| e.steps),
        }
    }

    /// The answer as one `response` object (no stream).
    pub fn whole(&self, a: &Answer<'_>) -> Vec<u8> {
        let mut output = Vec::new();
        if let Some(r) = a.reasoning.filter(|r| !r.is_empty()) {
            output.push(self.reasoning_item(r, Status::Completed));
        }
        if !a.content.is_empty() || a.tool_calls.is_none() {
            output.push(self.message_item(a.content, Status::Completed));
        }
        output.extend(calls(a.tool_calls).map(|(i, c)| self.call_item(i, c, Status::Completed)));
        let end = End { usage: &a.usage, steps: a.steps.as_ref() };
        to_vec(&self.object(Status::of(a.finish_reason), &output, Some(end)))
    }

    /// A failure after the client's 200: a `failed` response object with the error.
    pub fn failed_object(&self, err: &Value) -> Vec<u8> {
        let mut o = self.object(Status::Failed, &[], None);
        o.error = Some(error_of(err));
        to_vec(&o)
    }

    fn item_id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", self.id.trim_start_matches("resp_"))
    }

    fn reasoning_item(&self, text: &str, status: Status) -> Item {
        let content = if text.is_empty() { Vec::new() } else { vec![ReasoningText { text: text.to_string() }] };
        Item::Reasoning { id: self.item_id("rs"), summary: [], content, status }
    }

    fn message_item(&self, text: &str, status: Status) -> Item {
        let content = if status == Status::InProgress { Vec::new() } else { vec![text_part(text)] };
        Item::Message { id: self.item_id("msg"), status, role: Role::Assistant, content }
    }

    fn call_item(&self, i: usize, c: &Value, status: Status) -> Item {
        let call_id = c.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let args = match status {
            Status::InProgress => None,
            _ => c.pointer("/function/arguments").cloned(),
        };
        Item::FunctionCall {
            id: format!("{}_{i}", self.item_id("fc")),
            call_id,
            name: c.pointer("/function/name").cloned().unwrap_or(Value::Null),
            arguments: args.unwrap_or_else(|| Value::String(String::new())),
            status,
        }
    }

    /// One event: its payload's fields (`data`, a JSON object), then its `type` and `sequence_number`.
    fn frame(&mut self, kind: &str, mut data: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + kind.len() * 2 + 48);
        out.extend_from_slice(format!("event: {kind}\ndata: ").as_bytes());
        data.pop();
        out.extend_from_slice(&data);
        out.extend_from_slice(format!(",\"type\":\"{kind}\",\"sequence_number\":{}}}\n\n", self.seq).as_bytes());
        self.seq += 1;
        out
    }

    fn item_event(&mut self, kind: &str, output_index: usize, item: &Item) -> Vec<u8> {
        self.frame(kind, to_vec(&Payload::Item { output_index, item }))
    }

    /// The stream's first events: the response is created and in progress.
    pub fn open(&mut self) -> Vec<u8> {
        let o = to_vec(&Payload::Response { response: self.object(Status::InProgress, &[], None) });
        let mut out = self.frame("response.created", o.clone());
        out.extend(self.frame("response.in_progress", o));
        out
    }

    /// A piece of the model's thinking, in the reasoning item (opened first). Thinking that comes after
    /// answer text has begun stays out of the stream: one reasoning item precedes the message.
    pub fn reasoning(&mut self, text: &str) -> Vec<u8> {
        if self.text.is_some() || self.done.iter().any(|i| matches!(i, Item::Message { .. })) {
            return Vec::new();
        }
        let index = self.done.len();
        let mut out = Vec::new();
        if self.reasoning.is_none() {
            let item = self.reasoning_item("", Status::InProgress);
            out.extend(self.item_event("response.output_item.added", index, &item));
            self.reasoning = Some(String::new());
        }
        if let Some(r) = self.reasoning.as_mut() {
            r.push_str(text);
        }
        let item_id = self.item_id("rs");
        let delta = Payload::Delta { item_id: &item_id, output_index: index, content_index: 0, delta: text };
        out.extend(self.frame("response.reasoning_text.delta", to_vec(&delta)));
        out
    }

    fn close_reasoning(&mut self) -> Vec<u8> {
        let Some(text) = self.reasoning.take() else {
            return Vec::new();
        };
        let (index, item_id) = (self.done.len(), self.item_id("rs"));
        let done = Payload::Text { item_id: &item_id, output_index: index, content_index: 0, text: &text };
        let mut out = self.frame("response.reasoning_text.done", to_vec(&done));
        let item = self.reasoning_item(&text, Status::Completed);
        out.extend(self.item_event("response.output_item.done", index, &item));
        self.done.push(item);
        out
    }

    /// A piece of the answer's text, in the message item (opened first, after the reasoning item).
    pub fn text(&mut self, delta: &str) -> Vec<u8> {
        let mut out = self.close_reasoning();
        let (index, item_id) = (self.done.len(), self.item_id("msg"));
        if self.text.is_none() {
            let item = self.message_item("", Status::InProgress);
            out.extend(self.item_event("response.output_item.added", index, &item));
            let part = Payload::Part { item_id: &item_id, output_index: index, content_index: 0, part: text_part("") };
            out.extend(self.frame("response.content_part.added", to_vec(&part)));
            self.text = Some(String::new());
        }
        if delta.is_empty() {
            return out;
        }
        if let Some(t) = self.text.as_mut() {
            t.push_str(delta);
        }
        let piece =
            Payload::TextDelta { item_id: &item_id, output_index: index, content_index: 0, delta, logprobs: [] };
        out.extend(self.frame("response.output_text.delta", to_vec(&piece)));
        out
    }

    fn close_text(&mut self) -> Vec<u8> {
        let Some(text) = self.text.take() else {
            return Vec::new();
        };
        let (index, item_id) = (self.done.len(), self.item_id("msg"));
        let done =
            Payload::TextDone { item_id: &item_id, output_index: index, content_index: 0, text: &text, logprobs: [] };
        let mut out = self.frame("response.output_text.done", to_vec(&done));
        let part = Payload::Part { item_id: &item_id, output_index: index, content_index: 0, part: text_part(&text) };
        out.extend(self.frame("response.content_part.done", to_vec(&part)));
        let item = self.message_item(&text, Status::Completed);
        out.extend(self.item_event("response.output_item.done", index, &item));
        self.done.push(item);
        out
    }

    /// The client's tool call `c` (chat form) as a function_call item, added, argued and done.
    fn call(&mut self, i: usize, c: &Value) -> Vec<u8> {
        let index = self.done.len();
        let added = self.call_item(i, c, Status::InProgress);
        let item = self.call_item(i, c, Status::Completed);
        let mut out = self.item_event("response.output_item.added", index, &added);
        if let Item::FunctionCall { id, name, arguments, .. } = &item {
            let delta = Payload::ArgsDelta { item_id: id, output_index: index, delta: arguments };
            out.extend(self.frame("response.function_call_arguments.delta", to_vec(&delta)));
            let done = Payload::ArgsDone { item_id: id, output_index: index, name, arguments };
            out.extend(self.frame("response.function_call_arguments.done", to_vec(&done)));
        }
        out.extend(self.item_event("response.output_item.done", index, &item));
        self.done.push(item);
        out
    }

    /// The end of the stream: `rest` of the answer's text, the open items closed, the client's tool
    /// calls, and `response.completed` (or `response.incomplete`) with the whole response.
    pub fn end(&mut self, a: &Answer<'_>, rest: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if !rest.is_empty() || self.text.is_some() || a.tool_calls.is_none() {
            out.extend(self.text(rest));
        }
        out.extend(self.close_reasoning());
        out.extend(self.close_text());
        for (i, c) in calls(a.tool_calls) {
            out.extend(self.call(i, c));
        }
        let status = Status::of(a.finish_reason);
        let end = End { usage: &a.usage, steps: a.steps.as_ref() };
        let o = to_vec(&Payload::Response { response: self.object(status, &self.done, Some(end)) });
        let kind = if status == Status::Incomplete { "response.incomplete" } else { "response.completed" };
        out.extend(self.frame(kind, o));
        out
    }

    /// A failure in a stream that began: `response.failed`, with the error in the response.
    pub fn failed(&mut self, err: &Value) -> Vec<u8> {
        let mut response = self.object(Status::Failed, &self.done, None);
        response.error = Some(error_of(err));
        let o = to_vec(&Payload::Response { response });
        self.frame("response.failed", o)
    }
}

/// Typed values into a Vec: cannot fail.
fn to_vec<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// The client's tool calls (chat form), numbered.
fn calls(tool_calls: Option<&Value>) -> impl Iterator<Item = (usize, &Value)> {
    tool_calls.and_then(Value::as_array).into_iter().flatten().enumerate()
}
