//! What a Responses client receives: a `response` object, or the same answer as the Responses event
//! stream (`response.created` … `response.completed`, each event with its `sequence_number`). The
//! stream is written by `Events`, which keeps the output items open; the final object's `output` is
//! the items the stream sent, so that a client's snapshot and the final object agree.

use super::answer::{Answer, FinishReason};
use super::Usage;
use serde_json::{json, Map, Value};

/// What the answer repeats from the request (`instructions`, `tools`, `metadata`, `text`, …).
#[derive(Debug, Clone, Default)]
pub struct Echo {
    /// The client's model, until the LLM names its own.
    pub model: String,
    pub fields: Map<String, Value>,
}

/// A response's state, as its `status` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    InProgress,
    Completed,
    /// The iteration limit cut the answer.
    Incomplete,
    Failed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete => "incomplete",
            Status::Failed => "failed",
        }
    }

    /// An answer cut by the loop's limit is `incomplete`; the client's calls end it as `completed`.
    pub fn of(reason: FinishReason) -> Status {
        match reason {
            FinishReason::Length => Status::Incomplete,
            FinishReason::Stop | FinishReason::ToolCalls => Status::Completed,
        }
    }
}

/// The Responses usage object: chat's counts under Responses names.
pub fn usage(u: Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": u.completion_tokens, "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total_tokens,
    })
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
    done: Vec<Value>,
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
    pub fn object(&self, status: Status, output: Vec<Value>, end: Option<(&Usage, Option<&Value>)>) -> Value {
        let mut o = Map::new();
        o.insert("id".into(), json!(self.id));
        o.insert("object".into(), json!("response"));
        o.insert("created_at".into(), json!(self.created_at));
        o.insert("status".into(), json!(status.as_str()));
        o.insert("error".into(), Value::Null);
        let incomplete = (status == Status::Incomplete).then(|| json!({"reason": "max_output_tokens"}));
        o.insert("incomplete_details".into(), incomplete.unwrap_or(Value::Null));
        o.insert("model".into(), json!(self.model));
        let text: String = output
            .iter()
            .filter(|i| i["type"] == "message")
            .filter_map(|i| i.pointer("/content/0/text").and_then(Value::as_str))
            .collect();
        o.insert("output".into(), Value::Array(output));
        o.insert("output_text".into(), json!(text));
        for (key, default) in
            [("tools", json!([])), ("tool_choice", json!("auto")), ("parallel_tool_calls", json!(true))]
        {
            o.insert(key.into(), self.echo.fields.get(key).cloned().unwrap_or(default));
        }
        for (k, v) in &self.echo.fields {
            o.entry(k.clone()).or_insert_with(|| v.clone());
        }
        o.insert("store".into(), json!(false));
        if let Some((u, steps)) = end {
            o.insert("usage".into(), usage(*u));
            if let Some(steps) = steps {
                o.insert("api_agent_steps".into(), steps.clone());
            }
        }
        Value::Object(o)
    }

    /// The answer as one `response` object (no stream).
    pub fn whole(&self, a: &Answer<'_>) -> Vec<u8> {
        let mut output = Vec::new();
        if let Some(r) = a.reasoning.filter(|r| !r.is_empty()) {
            output.push(self.reasoning_item(r, "completed"));
        }
        if !a.content.is_empty() || a.tool_calls.is_none() {
            output.push(self.message_item(a.content, "completed"));
        }
        output.extend(calls(a.tool_calls).map(|(i, c)| self.call_item(i, c, "completed")));
        self.object(Status::of(a.finish_reason), output, Some((&a.usage, a.steps.as_ref()))).to_string().into_bytes()
    }

    /// A failure after the client's 200: a `failed` response object with the error.
    pub fn failed_object(&self, err: &Value) -> Vec<u8> {
        let mut o = self.object(Status::Failed, Vec::new(), None);
        o["error"] = error_of(err);
        o.to_string().into_bytes()
    }

    fn item_id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", self.id.trim_start_matches("resp_"))
    }

    fn reasoning_item(&self, text: &str, status: &str) -> Value {
        let content = if text.is_empty() { json!([]) } else { json!([{"type": "reasoning_text", "text": text}]) };
        json!({"type": "reasoning", "id": self.item_id("rs"), "summary": [], "content": content, "status": status})
    }

    fn message_item(&self, text: &str, status: &str) -> Value {
        let content = if status == "in_progress" { json!([]) } else { json!([text_part(text)]) };
        json!({"type": "message", "id": self.item_id("msg"), "status": status, "role": "assistant", "content": content})
    }

    fn call_item(&self, i: usize, c: &Value, status: &str) -> Value {
        let call_id = c.get("id").and_then(Value::as_str).unwrap_or_default();
        let args = if status == "in_progress" {
            json!("")
        } else {
            c.pointer("/function/arguments").cloned().unwrap_or(json!(""))
        };
        json!({"type": "function_call", "id": format!("{}_{i}", self.item_id("fc")), "call_id": call_id,
            "name": c.pointer("/function/name"), "arguments": args, "status": status})
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Vec<u8> {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(format!("event: {kind}\ndata: ").as_bytes());
        let _ = serde_json::to_writer(&mut out, &data);
        out.extend_from_slice(b"\n\n");
        out
    }

    /// The stream's first events: the response is created and in progress.
    pub fn open(&mut self) -> Vec<u8> {
        let o = self.object(Status::InProgress, Vec::new(), None);
        let mut out = self.event("response.created", json!({"response": o}));
        out.extend(self.event("response.in_progress", json!({"response": o})));
        out
    }

    /// A piece of the model's thinking, in the reasoning item (opened first). Thinking that comes after
    /// answer text has begun stays out of the stream: one reasoning item precedes the message.
    pub fn reasoning(&mut self, text: &str) -> Vec<u8> {
        if self.text.is_some() || self.done.iter().any(|i| i["type"] == "message") {
            return Vec::new();
        }
        let index = self.done.len();
        let mut out = Vec::new();
        if self.reasoning.is_none() {
            let item = self.reasoning_item("", "in_progress");
            out.extend(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            self.reasoning = Some(String::new());
        }
        if let Some(r) = self.reasoning.as_mut() {
            r.push_str(text);
        }
        let item_id = self.item_id("rs");
        out.extend(self.event(
            "response.reasoning_text.delta",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": text}),
        ));
        out
    }

    fn close_reasoning(&mut self) -> Vec<u8> {
        let Some(text) = self.reasoning.take() else {
            return Vec::new();
        };
        let (index, item_id) = (self.done.len(), self.item_id("rs"));
        let mut out = self.event(
            "response.reasoning_text.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": text}),
        );
        let item = self.reasoning_item(&text, "completed");
        out.extend(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
        self.done.push(item);
        out
    }

    /// A piece of the answer's text, in the message item (opened first, after the reasoning item).
    pub fn text(&mut self, delta: &str) -> Vec<u8> {
        let mut out = self.close_reasoning();
        let (index, item_id) = (self.done.len(), self.item_id("msg"));
        if self.text.is_none() {
            let item = self.message_item("", "in_progress");
            out.extend(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            let part = text_part("");
            out.extend(self.event(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
            ));
            self.text = Some(String::new());
        }
        if delta.is_empty() {
            return out;
        }
        if let Some(t) = self.text.as_mut() {
            t.push_str(delta);
        }
        out.extend(self.event(
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": delta, "logprobs": []}),
        ));
        out
    }

    fn close_text(&mut self) -> Vec<u8> {
        let Some(text) = self.text.take() else {
            return Vec::new();
        };
        let (index, item_id) = (self.done.len(), self.item_id("msg"));
        let mut out = self.event(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
        );
        let part = text_part(&text);
        out.extend(self.event(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
        ));
        let item = self.message_item(&text, "completed");
        out.extend(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
        self.done.push(item);
        out
    }

    /// The client's tool call `c` (chat form) as a function_call item, added, argued and done.
    fn call(&mut self, i: usize, c: &Value) -> Vec<u8> {
        let index = self.done.len();
        let added = self.call_item(i, c, "in_progress");
        let item = self.call_item(i, c, "completed");
        let item_id = item["id"].clone();
        let args = item["arguments"].clone();
        let mut out = self.event("response.output_item.added", json!({"output_index": index, "item": added}));
        out.extend(self.event(
            "response.function_call_arguments.delta",
            json!({"item_id": item_id, "output_index": index, "delta": args}),
        ));
        out.extend(self.event(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": index, "name": item["name"], "arguments": args}),
        ));
        out.extend(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
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
        let o = self.object(status, self.done.clone(), Some((&a.usage, a.steps.as_ref())));
        let kind = if status == Status::Incomplete { "response.incomplete" } else { "response.completed" };
        out.extend(self.event(kind, json!({"response": o})));
        out
    }

    /// A failure in a stream that began: `response.failed`, with the error in the response.
    pub fn failed(&mut self, err: &Value) -> Vec<u8> {
        let mut o = self.object(Status::Failed, self.done.clone(), None);
        o["error"] = error_of(err);
        self.event("response.failed", json!({"response": o}))
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// The chat error object `{"error": {message, type, code}}` as a response's `error` (code, message).
fn error_of(err: &Value) -> Value {
    let e = err.get("error").unwrap_or(err);
    json!({"code": e.get("code").cloned().unwrap_or(json!("api_error")), "message": e.get("message").cloned().unwrap_or(json!(""))})
}

/// The client's tool calls (chat form), numbered.
fn calls(tool_calls: Option<&Value>) -> impl Iterator<Item = (usize, &Value)> {
    tool_calls.and_then(Value::as_array).into_iter().flatten().enumerate()
}
