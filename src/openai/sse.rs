//! An LLM reply streamed as `chat.completion.chunk` server-sent events, read as it arrives: the
//! content deltas are handed out as they come (for live streaming to the client), and the chunks are
//! assembled into the `chat.completion` the loop reads once the stream ends.

use super::message::{CallKind, ClientCall, FunctionCall};
use crate::doc::truncate;
use serde::Serialize;
use serde_json::Value;

/// What one piece of the stream carried, for the relay.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// `choices[0].delta.content` of the events completed by this piece, in order.
    pub content: String,
    /// A tool-call delta came: the turn calls tools.
    pub tool_call: bool,
    /// `delta.reasoning_content` (or `delta.reasoning`) of the same events: the model thinking.
    pub reasoning: String,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The stream so far. Bounded by what the host lets through (it caps a reply's bytes).
#[derive(Debug, Default)]
pub struct ChunkStream {
    /// Bytes of an event not yet complete, and how many of them hold no event end.
    pending: Vec<u8>,
    scanned: usize,
    done: bool,
    model: Option<String>,
    content: String,
    /// The thinking so far, and the field the server sends it in.
    reasoning: String,
    reasoning_field: Option<&'static str>,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    error: Option<Value>,
    /// The first thing wrong with the stream (an event that is not JSON).
    bad: Option<String>,
    events: usize,
}

/// OpenAI sends at most 128 tool calls a turn; an index beyond this is not a real call.
const MAX_CALLS: usize = 128;

impl ChunkStream {
    pub fn new() -> ChunkStream {
        ChunkStream::default()
    }

    /// Reads the next bytes of the stream.
    pub fn feed(&mut self, data: &[u8]) -> Fed {
        let mut fed = Fed::default();
        self.pending.extend_from_slice(data);
        // An event end split across two pieces starts at most 3 bytes back.
        let mut from = self.scanned.saturating_sub(3);
        while let Some((end, skip)) = event_end(&self.pending[from..]) {
            let event: Vec<u8> = self.pending.drain(..from + end + skip).take(from + end).collect();
            self.event(&event, &mut fed);
            from = 0;
        }
        self.scanned = self.pending.len();
        fed
    }

    /// One event: its `data:` lines joined, as the SSE specification reads them.
    fn event(&mut self, event: &[u8], fed: &mut Fed) {
        let text = String::from_utf8_lossy(event);
        let data: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if data.is_empty() || self.done {
            return;
        }
        let data = data.join("\n");
        if data.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        match serde_json::from_str::<Value>(&data) {
            Ok(v) => self.chunk(v, fed),
            Err(e) if self.bad.is_none() => {
                self.bad = Some(format!("an event of the LLM's stream is not JSON ({e}): {}", truncate(&data, 200)));
            }
            Err(_) => {}
        }
    }

    fn chunk(&mut self, mut v: Value, fed: &mut Fed) {
        self.events += 1;
        if let Some(m) = v.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()) {
            self.model = Some(m.to_string());
        }
        if let Some(u) = v.get_mut("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.take());
        }
        if let Some(e) = v.get_mut("error").filter(|e| !e.is_null()) {
            self.error = Some(e.take());
        }
        let Some(choice) = v.get_mut("choices").and_then(|c| c.get_mut(0)) else {
            return;
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_string());
        }
        let Some(delta) = choice.get_mut("delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
            fed.content.push_str(text);
        }
        for field in ["reasoning_content", "reasoning"] {
            let text = match delta.get(field) {
                Some(Value::String(t)) => t.as_str(),
                Some(Value::Object(o)) => {
                    o.get("content").or_else(|| o.get("text")).and_then(Value::as_str).unwrap_or("")
                }
                _ => continue,
            };
            self.reasoning_field.get_or_insert(field);
            self.reasoning.push_str(text);
            fed.reasoning.push_str(text);
            break;
        }
        if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
            fed.tool_call |= !calls.is_empty();
            for c in calls.iter() {
                self.call_delta(c);
            }
        }
    }

    /// A tool call's delta: the first for its index names it, the rest add to its arguments.
    fn call_delta(&mut self, c: &Value) {
        let index = c
            .get("index")
            .and_then(Value::as_u64)
            .map_or(self.calls.len().saturating_sub(1), |i| usize::try_from(i).unwrap_or(usize::MAX));
        if index >= MAX_CALLS {
            if self.bad.is_none() {
                self.bad = Some(format!("a tool call of the LLM's stream has index {index}"));
            }
            return;
        }
        while self.calls.len() <= index {
            self.calls.push(PartialCall::default());
        }
        let call = &mut self.calls[index];
        if let Some(id) = c.get("id").and_then(Value::as_str) {
            call.id.push_str(id);
        }
        if let Some(f) = c.get("function") {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                call.arguments.push_str(args);
            }
        }
    }

    /// The model the stream named, if any yet.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The content received so far.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The stream as one `chat.completion` body (what a non-streamed call would have returned);
    /// `Err` says what was wrong with the stream.
    pub fn completion(mut self) -> Result<Vec<u8>, String> {
        if !self.pending.iter().all(u8::is_ascii_whitespace) {
            // The last event lacks its blank line: servers that end the body there mean it complete.
            let rest = std::mem::take(&mut self.pending);
            self.event(&rest, &mut Fed::default());
        }
        if let Some(bad) = self.bad {
            return Err(bad);
        }
        if let Some(error) = self.error {
            return Ok(to_vec(&Failed { error }));
        }
        if self.events == 0 {
            return Err("the LLM's stream has no chat.completion.chunk event".into());
        }
        // The thinking goes back in the field the server used: a later turn must carry it there
        // (DeepSeek's thinking mode with tools refuses a history without it).
        let reasoning = Some(self.reasoning.as_str()).filter(|r| !r.is_empty());
        let in_field = |field: &str| reasoning.filter(|_| self.reasoning_field == Some(field));
        let tool_calls: Vec<ClientCall> = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|c| ClientCall {
                id: c.id,
                kind: CallKind::Function,
                function: FunctionCall { name: c.name, arguments: c.arguments },
            })
            .collect();
        let content = Some(self.content.as_str()).filter(|c| !c.is_empty() || tool_calls.is_empty());
        let message = Assembled {
            role: "assistant",
            content,
            reasoning_content: in_field("reasoning_content"),
            reasoning: in_field("reasoning"),
            tool_calls,
        };
        let out = Completion {
            object: "chat.completion",
            choices: [Choice { index: 0, message, finish_reason: self.finish_reason.as_deref() }],
            model: self.model.as_deref(),
            usage: self.usage.as_ref(),
        };
        Ok(to_vec(&out))
    }
}

/// The stream as the `chat.completion` a non-streamed call returns (what `LlmReply` reads).
#[derive(Serialize)]
struct Completion<'a> {
    object: &'static str,
    choices: [Choice<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Value>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u8,
    message: Assembled<'a>,
    finish_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct Assembled<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ClientCall>,
}

/// An error event of the stream, as a non-streamed error reply.
#[derive(Serialize)]
struct Failed {
    error: Value,
}

fn to_vec<T: Serialize>(v: &T) -> Vec<u8> {
    // Typed values into a Vec cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

/// Where the first complete event ends, and the length of the blank line after it (LF or CRLF).
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::LlmReply;
    use serde_json::json;

    fn chunk(delta: Value, finish: Value) -> String {
        format!(
            "data: {}\n\n",
            json!({"model": "m1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    }

    #[test]
    fn content_deltas_come_out_as_they_complete_across_split_bytes() {
        let body = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "It is "}), Value::Null),
            chunk(json!({"content": "cold."}), Value::Null),
            chunk(json!({}), json!("stop")),
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n"
                .into(),
            "data: [DONE]\n\n".into(),
        ]
        .concat();
        let mut s = ChunkStream::new();
        let mut seen = String::new();
        for piece in body.as_bytes().chunks(7) {
            let fed = s.feed(piece);
            assert!(!fed.tool_call);
            seen.push_str(&fed.content);
        }
        assert_eq!(seen, "It is cold.");
        let reply = LlmReply::parse(&s.completion().unwrap()).unwrap();
        assert_eq!(reply.content, "It is cold.");
        assert_eq!(reply.model.as_deref(), Some("m1"));
        assert_eq!(reply.usage.total_tokens, 5);
        assert!(reply.tool_calls.is_empty());
    }

    #[test]
    fn reasoning_deltas_are_kept_in_the_field_the_server_used() {
        for field in ["reasoning_content", "reasoning"] {
            let body = [
                chunk(json!({"role": "assistant", field: "Need the "}), Value::Null),
                chunk(json!({field: "weather."}), Value::Null),
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "w", "arguments": "{}"}}]}),
                    Value::Null,
                ),
                chunk(json!({}), json!("tool_calls")),
            ]
            .concat();
            let mut s = ChunkStream::new();
            let fed = s.feed(body.as_bytes());
            assert_eq!(fed.reasoning, "Need the weather.");
            let reply = LlmReply::parse(&s.completion().unwrap()).unwrap();
            assert_eq!(reply.message_value()[field], "Need the weather.");
            assert_eq!(reply.reasoning.map(|r| r.text), Some("Need the weather.".to_string()));
        }
    }

    #[test]
    fn a_streamed_body_where_json_was_asked_for_is_read_as_the_same_reply() {
        let body = [chunk(json!({"role": "assistant", "content": "Hi"}), Value::Null), chunk(json!({}), json!("stop"))]
            .concat();
        let reply = LlmReply::parse(format!("\n{body}data: [DONE]\n\n").as_bytes()).unwrap();
        assert_eq!(reply.content, "Hi");
    }

    #[test]
    fn tool_calls_are_assembled_by_index() {
        let body = [
            chunk(json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "get_time", "arguments": "{}"}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"location\":"}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Oslo\"}"}}]}), Value::Null),
            chunk(json!({}), json!("tool_calls")),
        ]
        .concat();
        let mut s = ChunkStream::new();
        assert!(s.feed(body.as_bytes()).tool_call);
        let reply = LlmReply::parse(&s.completion().unwrap()).unwrap();
        let calls: Vec<(&str, &str, &str)> =
            reply.tool_calls.iter().map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str())).collect();
        assert_eq!(calls, [("c1", "get_weather", "{\"location\":\"Oslo\"}"), ("c2", "get_time", "{}")]);
        assert!(reply.message_value()["content"].is_null());
    }

    #[test]
    fn crlf_framing_multiline_data_and_a_missing_last_blank_line_are_read() {
        let mut s = ChunkStream::new();
        let fed = s.feed(b": comment\r\n\r\ndata: {\"choices\":[{\"delta\":\r\ndata: {\"content\":\"a\"}}]}\r\n\r\n");
        assert_eq!(fed.content, "a");
        s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}");
        let reply = LlmReply::parse(&s.completion().unwrap()).unwrap();
        assert_eq!(reply.content, "ab");
    }

    #[test]
    fn a_broken_stream_is_an_error_that_says_why() {
        let mut s = ChunkStream::new();
        s.feed(b"data: {not json\n\n");
        assert!(s.completion().unwrap_err().contains("not JSON"));
        let s = ChunkStream::new();
        assert!(s.completion().unwrap_err().contains("no chat.completion.chunk"));
        let mut s = ChunkStream::new();
        s.feed(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n");
        assert!(LlmReply::parse(&s.completion().unwrap()).unwrap_err().contains("overloaded"));
        let mut s = ChunkStream::new();
        s.feed(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":100000}]}}]}\n\n");
        assert!(s.completion().unwrap_err().contains("index 100000"));
    }
}
