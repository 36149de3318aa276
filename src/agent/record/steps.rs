//! The agent's steps, returned to clients that ask (`x-api-agent-steps: true`, or `returnSteps`), as
//! ChatProxy returns its transcript: each LLM turn (tokens, milliseconds) and each tool call (name,
//! arguments, status, an excerpt of the observation, milliseconds). Configured secrets are masked.

use super::report::ToolClass;
use crate::doc::truncate;
use crate::openai::Usage;
use crate::redact::redact;
use serde::{Serialize, Serializer};
use serde_json::Value;

const EXCERPT_BYTES: usize = 300;

/// One step as the client reads it; the fields serialise in this order, after `type`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Step {
    Llm {
        turn: usize,
        ms: Option<u64>,
        usage: Usage,
        /// The turn's thinking (cut to `maxObservationBytes`), when the model reasoned.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    Tool {
        name: String,
        arguments: String,
        status: ToolStatus,
        observation: String,
        ms: u64,
    },
    /// A call rule (`policy.rules`) or the data-flow guard (`_guard_`) decided a call of `tool`.
    Policy {
        tool: String,
        rule: String,
        decision: &'static str,
    },
}

/// How a tool call ended: its HTTP status (a number), or how it ended without one (a string).
#[derive(Debug, Clone, Copy)]
pub enum ToolStatus {
    Http(u16),
    Ended(ToolClass),
}

impl Serialize for ToolStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolStatus::Http(status) => s.serialize_u16(*status),
            ToolStatus::Ended(class) => s.serialize_str(class.as_str()),
        }
    }
}

#[derive(Debug, Default)]
pub struct Steps {
    list: Vec<Step>,
    secrets: Vec<String>,
}

/// The steps of a request that asked for them (a request that did not has none: `Record::steps`).
impl Steps {
    pub fn new(secrets: Vec<String>) -> Steps {
        Steps { list: Vec::new(), secrets }
    }

    /// `ms`: `None` for the first turn when the route's upstream answered it (not timed).
    /// `reasoning`: the turn's thinking, cut to `limit` bytes.
    pub fn llm(&mut self, ms: Option<u64>, usage: Usage, reasoning: Option<&str>, limit: usize) {
        let turn = self.list.iter().filter(|s| matches!(s, Step::Llm { .. })).count() + 1;
        // Masked before it is cut: a cut secret would no longer match.
        let reasoning = reasoning.map(|r| truncate(&redact(r, &self.secrets), limit).into_owned());
        self.list.push(Step::Llm { turn, ms, usage, reasoning });
    }

    pub fn tool(&mut self, name: &str, arguments: &str, status: ToolStatus, observation: &str, ms: u64) {
        let mask = |s: &str| truncate(&redact(s, &self.secrets), EXCERPT_BYTES).into_owned();
        let (arguments, observation) = (mask(arguments), mask(observation));
        self.list.push(Step::Tool { name: name.to_string(), arguments, status, observation, ms });
    }

    pub fn policy(&mut self, tool: &str, rule: &str, decision: &'static str) {
        self.list.push(Step::Policy { tool: tool.to_string(), rule: rule.to_string(), decision });
    }

    pub fn value(&self) -> Value {
        // Plain data with string keys: serialising it cannot fail.
        serde_json::to_value(&self.list).unwrap_or(Value::Null)
    }
}

/// `after - before`, for one reply's tokens.
pub fn delta(after: Usage, before: Usage) -> Usage {
    Usage {
        prompt_tokens: after.prompt_tokens.saturating_sub(before.prompt_tokens),
        completion_tokens: after.completion_tokens.saturating_sub(before.completion_tokens),
        total_tokens: after.total_tokens.saturating_sub(before.total_tokens),
        reasoning_tokens: after.reasoning_tokens.saturating_sub(before.reasoning_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_keep_their_wire_text() {
        let mut s = Steps::new(vec!["k3y".into()]);
        s.llm(None, Usage { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, reasoning_tokens: 0 }, None, 10);
        s.tool("f", r#"{"key":"k3y"}"#, ToolStatus::Http(200), "ok", 7);
        s.llm(Some(9), Usage::default(), None, 10);
        s.tool("g", "", ToolStatus::Ended(ToolClass::Refused), "no", 0);
        let want = concat!(
            r#"[{"type":"llm","turn":1,"ms":null,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}},"#,
            r#"{"type":"tool","name":"f","arguments":"{\"key\":\"[redacted]\"}","status":200,"observation":"ok","ms":7},"#,
            r#"{"type":"llm","turn":2,"ms":9,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}},"#,
            r#"{"type":"tool","name":"g","arguments":"","status":"refused","observation":"no","ms":0}]"#
        );
        assert_eq!(s.value().to_string(), want);
        assert_eq!(Steps::new(Vec::new()).value().to_string(), "[]");
    }
}
