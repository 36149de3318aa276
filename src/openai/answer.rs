//! What the client receives: a `chat.completion`, the same answer as a `chat.completion.chunk` SSE
//! stream, or an OpenAI error object (as JSON, or as an SSE error event for streaming clients).

use super::Usage;
use serde_json::{json, Value};

pub const JSON: &str = "application/json";
pub const SSE: &str = "text/event-stream";

/// Why the answer ends, as the client reads it; `as_str` is the only place its wire text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    /// The loop ran out of turns (or the model kept repeating an invalid action).
    Length,
    /// The client's own tool calls (or calls that need its approval) are returned to it.
    ToolCalls,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
        }
    }
}

/// A final answer, rendered the same way for every path that ends the loop.
#[derive(Debug, Clone)]
pub struct Answer<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub content: &'a str,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    /// The client's own tool calls, returned for it to run (native mode).
    pub tool_calls: Option<&'a Value>,
    /// The agent's steps, when the client asked for them (`api_agent_steps`).
    pub steps: Option<Value>,
    /// The final turn's reasoning, as `reasoning_content` (what DeepSeek's API and reasoning-aware
    /// clients use).
    pub reasoning: Option<&'a str>,
}

fn usage_json(u: Usage) -> Value {
    json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens})
}

/// Written directly rather than built as a `Value` and serialized: the answer is on every request's path.
pub fn completion(a: &Answer<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.content.len() + 320);
    out.extend_from_slice(b"{\"id\":");
    string(&mut out, a.id);
    out.extend_from_slice(format!(",\"object\":\"chat.completion\",\"created\":{},\"model\":", a.created).as_bytes());
    string(&mut out, a.model);
    out.extend_from_slice(b",\"choices\":[{\"index\":0,\"message\":");
    match a.tool_calls {
        Some(_) => value(&mut out, &message(a)),
        None => {
            out.extend_from_slice(b"{\"role\":\"assistant\",\"content\":");
            string(&mut out, a.content);
            if let Some(r) = a.reasoning {
                out.extend_from_slice(b",\"reasoning_content\":");
                string(&mut out, r);
            }
            out.extend_from_slice(b",\"refusal\":null}");
        }
    }
    out.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":");
    string(&mut out, a.finish_reason.as_str());
    out.extend_from_slice(b"}],\"usage\":");
    value(&mut out, &usage_json(a.usage));
    if let Some(steps) = &a.steps {
        out.extend_from_slice(b",\"api_agent_steps\":");
        value(&mut out, steps);
    }
    out.push(b'}');
    out
}

fn string(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn value(out: &mut Vec<u8>, v: &Value) {
    let _ = serde_json::to_writer(&mut *out, v);
}

fn message(a: &Answer<'_>) -> Value {
    match a.tool_calls {
        Some(calls) => {
            let content = if a.content.is_empty() { Value::Null } else { json!(a.content) };
            let mut m = json!({"role": "assistant", "content": content, "refusal": null, "tool_calls": calls});
            if let Some(r) = a.reasoning {
                // A client that sends this turn back (its own tools) must carry the reasoning with it.
                m["reasoning_content"] = json!(r);
            }
            m
        }
        None => json!({"role": "assistant", "content": a.content, "refusal": null}),
    }
}

/// Each tool call as one `delta.tool_calls` entry, by index, as OpenAI streams them.
fn tool_call_deltas(calls: Option<&Value>) -> Vec<Value> {
    let Some(Value::Array(calls)) = calls else {
        return Vec::new();
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"tool_calls": [{"index": i, "id": c.get("id"), "type": "function",
                "function": {"name": c.pointer("/function/name"), "arguments": c.pointer("/function/arguments")}}]})
        })
        .collect()
}

/// What every chunk of one answer's stream repeats.
#[derive(Debug, Clone, Copy)]
pub struct ChunkHead<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    /// The client asked for a usage chunk (`stream_options.include_usage`); every chunk then has
    /// `"usage": null`.
    pub include_usage: bool,
}

impl ChunkHead<'_> {
    fn chunk(&self, delta: Value, finish: Value) -> Value {
        let mut c = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        c
    }

    /// The first event of a stream: the assistant's role.
    pub fn role_event(&self) -> Vec<u8> {
        event(&self.chunk(json!({"role": "assistant", "content": ""}), Value::Null))
    }

    /// One content delta.
    pub fn content_event(&self, text: &str) -> Vec<u8> {
        event(&self.chunk(json!({"content": text}), Value::Null))
    }

    /// One reasoning delta: the model's thinking, before its content.
    pub fn reasoning_event(&self, text: &str) -> Vec<u8> {
        event(&self.chunk(json!({"reasoning_content": text}), Value::Null))
    }
}

/// Role chunk, content chunk, tool-call chunks, finish chunk, then a usage chunk when asked for, then
/// `[DONE]`.
pub fn chunks(a: &Answer<'_>, include_usage: bool) -> Vec<u8> {
    let head = ChunkHead { id: a.id, created: a.created, model: a.model, include_usage };
    let mut out = head.role_event();
    if let Some(r) = a.reasoning.filter(|r| !r.is_empty()) {
        out.extend(head.reasoning_event(r));
    }
    out.extend(rest(a, &head, a.content));
    out
}

/// The end of a stream whose role chunk (and part of the content) already went out: `content` is
/// what is left of the answer's text.
pub fn rest(a: &Answer<'_>, head: &ChunkHead<'_>, content: &str) -> Vec<u8> {
    let mut events = Vec::new();
    if !content.is_empty() || (a.tool_calls.is_none() && a.content.is_empty()) {
        events.push(head.chunk(json!({"content": content}), Value::Null));
    }
    events.extend(tool_call_deltas(a.tool_calls).into_iter().map(|d| head.chunk(d, Value::Null)));
    events.push(head.chunk(json!({}), json!(a.finish_reason.as_str())));
    if head.include_usage {
        events.push(json!({
            "id": head.id, "object": "chat.completion.chunk", "created": head.created, "model": head.model,
            "choices": [], "usage": usage_json(a.usage),
        }));
    }
    if let (Some(steps), Some(Value::Object(last))) = (&a.steps, events.last_mut()) {
        // On the last chunk before [DONE]: clients ignore unknown fields.
        last.insert("api_agent_steps".into(), steps.clone());
    }
    let mut out = Vec::with_capacity(content.len() * 2 + 512);
    for e in events {
        push_event(&mut out, &e.to_string());
    }
    push_event(&mut out, "[DONE]");
    out
}

fn event(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    push_event(&mut out, &v.to_string());
    out
}

/// An SSE comment: keeps the connection busy while tools run; clients skip it.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// `{"error": {"message", "type", "param", "code"}}`.
pub fn error(message: &str, kind: &str, code: &str) -> Value {
    error_at(message, kind, code, None)
}

/// An error about the request field `param`.
pub fn error_at(message: &str, kind: &str, code: &str, param: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// An error in the body of a response whose status 200 is already out: the error object with
/// `"choices": []`. Measured with the official clients: LangChain (`invoke` and structured output) and
/// litellm's async client then raise with the message, and the OpenAI SDKs fail on `choices[0]`
/// rather than on `None`; no 200 body makes the OpenAI SDKs themselves raise.
pub fn late_error(mut err: Value) -> Vec<u8> {
    if let Value::Object(m) = &mut err {
        m.insert("choices".into(), Value::Array(Vec::new()));
    }
    err.to_string().into_bytes()
}

pub fn error_sse(err: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    push_event(&mut out, &err.to_string());
    push_event(&mut out, "[DONE]");
    out
}

fn push_event(out: &mut Vec<u8>, data: &str) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\n\n");
}
