//! What `run` did, step by step: LLM turns and tool calls as text lines (printed as they happen) or as
//! one JSON object. Every text here has had the configuration's secrets replaced already.

use crate::agent::Reply;
use crate::doc::truncate;
use crate::openai::LlmReply;
use serde_json::{json, Value};

/// How much of a model's text or an observation a step shows.
const EXCERPT_BYTES: usize = 600;

#[derive(Debug, Clone)]
pub enum Kind {
    Llm { turn: u32 },
    Tool { name: String },
}

#[derive(Debug, Clone)]
pub struct Step {
    pub kind: Kind,
    pub method: String,
    /// The URL sent to, secrets masked.
    pub url: String,
    pub status: Option<u16>,
    /// Why no reply came (timeout, reset).
    pub failure: Option<String>,
    pub ms: u64,
    /// LLM turns: prompt and completion tokens.
    pub tokens: Option<(u64, u64)>,
    /// LLM turns: what the model wrote (text or tool calls); tools: the reply the model observes.
    pub text: String,
}

impl Step {
    pub fn lines(&self) -> Vec<String> {
        let outcome = match (self.status, &self.failure) {
            (_, Some(f)) => format!("no reply after {} ms ({f})", self.ms),
            (Some(s), None) => format!("{s} in {} ms", self.ms),
            (None, None) => format!("no reply after {} ms", self.ms),
        };
        let head = match &self.kind {
            Kind::Llm { turn } => {
                let tokens = self.tokens.map(|(i, o)| format!(", tokens {i} in / {o} out")).unwrap_or_default();
                format!("LLM turn {turn}: {} {} -> {outcome}{tokens}", self.method, self.url)
            }
            Kind::Tool { name } => format!("tool {name}: {} {} -> {outcome}", self.method, self.url),
        };
        let excerpt = truncate(self.text.trim(), EXCERPT_BYTES);
        std::iter::once(head).chain(excerpt.lines().map(|l| format!("    {l}"))).collect()
    }

    pub fn json(&self) -> Value {
        let (kind, name, turn) = match &self.kind {
            Kind::Llm { turn } => ("llm", None, Some(*turn)),
            Kind::Tool { name } => ("tool", Some(name.clone()), None),
        };
        let mut v = json!({
            "type": kind, "method": self.method, "url": self.url, "status": self.status,
            "failure": self.failure, "ms": self.ms,
        });
        match (name, turn) {
            (Some(name), _) => {
                v["tool"] = Value::String(name);
                v["observation"] = Value::String(self.text.clone());
            }
            (None, turn) => {
                v["turn"] = json!(turn);
                v["tokens"] = json!(self.tokens.map(|(i, o)| json!({"prompt": i, "completion": o})));
                v["model_output"] = Value::String(self.text.clone());
            }
        }
        v
    }
}

/// What an LLM reply says: the model's text and tool calls, or the body when it is not a completion.
pub fn model_output(status: u16, body: &[u8]) -> (String, Option<(u64, u64)>) {
    match LlmReply::parse(body) {
        Ok(r) if (200..300).contains(&status) => {
            let calls: Vec<String> =
                r.tool_calls.iter().map(|c| format!("tool call {}({})", c.name, c.arguments)).collect();
            let text = [r.content].into_iter().chain(calls).filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
            (text, Some((r.usage.prompt_tokens, r.usage.completion_tokens)))
        }
        _ => (String::from_utf8_lossy(body).into_owned(), None),
    }
}

/// A tool's reply as the model observes it (in short): the body, with the status when it failed.
pub fn observation(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = truncate(text.trim(), EXCERPT_BYTES * 4);
    match (status, text.is_empty()) {
        (200..=299, false) => text.into_owned(),
        (_, true) => format!("HTTP {status}, empty body"),
        (_, false) => format!("HTTP {status}: {text}"),
    }
}

/// The answer's text, or its error, from a JSON or SSE reply body.
pub fn answer(content_type: &str, text: &str) -> Result<String, String> {
    if content_type.starts_with("text/event-stream") {
        return sse_answer(text);
    }
    let v: Value = serde_json::from_str(text).map_err(|_| text.to_string())?;
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        return Err(error_text(e));
    }
    v["choices"][0]["message"]["content"].as_str().map(str::to_string).ok_or_else(|| text.to_string())
}

fn sse_answer(text: &str) -> Result<String, String> {
    let mut content = String::new();
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        if let Some(e) = chunk.get("error") {
            return Err(error_text(e));
        }
        content.push_str(chunk["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
    }
    Ok(content)
}

fn error_text(e: &Value) -> String {
    let code = e.get("code").and_then(Value::as_str).unwrap_or("error");
    format!("{code}: {}", e.get("message").and_then(Value::as_str).unwrap_or(""))
}

/// The reply for the transcript: its body as JSON when it is JSON, else as text.
pub fn reply_json(reply: &Reply, body_text: &str) -> Value {
    let body = serde_json::from_str::<Value>(body_text).unwrap_or_else(|_| Value::String(body_text.to_string()));
    json!({"status": reply.status, "content_type": reply.content_type, "body": body})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_json_and_sse() {
        let json = r#"{"choices":[{"message":{"content":"It is 21 °C."}}]}"#;
        assert_eq!(answer("application/json", json), Ok("It is 21 °C.".to_string()));
        let sse = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                   data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(answer("text/event-stream", sse), Ok("Hi".to_string()));
        let late = r#"{"error":{"message":"boom","code":"llm_error"},"choices":[]}"#;
        assert_eq!(answer("application/json", late), Err("llm_error: boom".to_string()));
    }

    #[test]
    fn steps_print_a_head_line_and_an_indented_excerpt() {
        let step = Step {
            kind: Kind::Tool { name: "t".into() },
            method: "GET".into(),
            url: "http://h/x".into(),
            status: Some(200),
            failure: None,
            ms: 3,
            tokens: None,
            text: "{\"a\":1}".into(),
        };
        assert_eq!(step.lines(), ["tool t: GET http://h/x -> 200 in 3 ms", "    {\"a\":1}"]);
        assert_eq!(step.json()["observation"], "{\"a\":1}");
    }
}
