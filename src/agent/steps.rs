//! The agent's steps, returned to clients that ask (`x-api-agent-steps: true`, or `returnSteps`), as
//! ChatProxy returns its transcript: each LLM turn (tokens, milliseconds) and each tool call (name,
//! arguments, status, an excerpt of the observation, milliseconds). Configured secrets are masked.

use crate::doc::truncate;
use crate::openai::Usage;
use crate::redact::redact;
use serde_json::{json, Value};

const EXCERPT_BYTES: usize = 300;

#[derive(Debug, Default)]
pub struct Steps {
    /// `None`: not asked for, nothing is recorded.
    list: Option<Vec<Value>>,
    secrets: Vec<String>,
}

impl Steps {
    pub fn new(on: bool, secrets: Vec<String>) -> Steps {
        Steps { list: on.then(Vec::new), secrets }
    }

    pub fn is_on(&self) -> bool {
        self.list.is_some()
    }

    /// `ms`: `None` for the first turn when the route's upstream answered it (not timed).
    pub fn llm(&mut self, ms: Option<u64>, tokens: Usage) {
        if let Some(list) = &mut self.list {
            let n = list.iter().filter(|s| s["type"] == "llm").count() + 1;
            list.push(json!({"type": "llm", "turn": n, "ms": ms, "usage": {
                "prompt_tokens": tokens.prompt_tokens, "completion_tokens": tokens.completion_tokens,
                "total_tokens": tokens.total_tokens}}));
        }
    }

    /// `status`: the HTTP status, or how the call ended (`timed_out`, `failed`, `refused`).
    pub fn tool(&mut self, name: &str, arguments: &str, status: Value, observation: &str, ms: u64) {
        let Some(list) = &mut self.list else {
            return;
        };
        let mask = |s: &str| redact(&truncate(s, EXCERPT_BYTES), &self.secrets).into_owned();
        list.push(json!({"type": "tool", "name": name, "arguments": mask(arguments), "status": status,
            "observation": mask(observation), "ms": ms}));
    }

    pub fn value(&self) -> Option<Value> {
        self.list.as_ref().map(|l| Value::Array(l.clone()))
    }
}

/// `after - before`, for one reply's tokens.
pub fn delta(after: Usage, before: Usage) -> Usage {
    Usage {
        prompt_tokens: after.prompt_tokens.saturating_sub(before.prompt_tokens),
        completion_tokens: after.completion_tokens.saturating_sub(before.completion_tokens),
        total_tokens: after.total_tokens.saturating_sub(before.total_tokens),
    }
}
