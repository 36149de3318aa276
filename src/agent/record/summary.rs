//! The per-request summary a host hands to Envoy (filter state, dynamic metadata) for access logs and
//! rate limits: what one agent run cost and how it ended. Built from the `Report`; no body, prompt or
//! secret.

use super::report::{Outcome, Report, ToolClass};

/// A summary field's value: numbers stay numbers where the host can keep them so (dynamic metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Number(u64),
    Text(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Text(t) => f.write_str(t),
        }
    }
}

/// The fields' names, in the order `fields` gives them.
pub const FIELDS: [&str; 9] = [
    "turns",
    "tool_calls",
    "tool_errors",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "model",
    "outcome",
    "duration_ms",
];

impl Report {
    /// How the run ended, in the summary's words: `answer`, `limit`, `budget`, `deadline`,
    /// `cancelled`, or `error:<code>`.
    pub fn summary_outcome(&self) -> String {
        match (self.outcome, self.code) {
            (Outcome::Answered, _) => "answer".into(),
            (Outcome::IterationLimit, _) => "limit".into(),
            (Outcome::Budget, _) => "budget".into(),
            (Outcome::Timeout, Some("request_timeout")) => "deadline".into(),
            (Outcome::Cancelled, _) => "cancelled".into(),
            (other, code) => format!("error:{}", code.unwrap_or(other.as_str())),
        }
    }

    /// Every summary field with its value, in `FIELDS` order.
    pub fn fields(&self) -> [(&'static str, Value); 9] {
        let errors = self.tools.iter().filter(|t| t.class != ToolClass::Ok2xx).count();
        let n = |v: usize| Value::Number(u64::try_from(v).unwrap_or(u64::MAX));
        [
            (FIELDS[0], Value::Number(self.llm_turns.into())),
            (FIELDS[1], n(self.tools.len())),
            (FIELDS[2], n(errors)),
            (FIELDS[3], Value::Number(self.tokens.prompt_tokens)),
            (FIELDS[4], Value::Number(self.tokens.completion_tokens)),
            (FIELDS[5], Value::Number(self.tokens.total_tokens)),
            (FIELDS[6], Value::Text(if self.model.is_empty() { "-".into() } else { self.model.clone() })),
            (FIELDS[7], Value::Text(self.summary_outcome())),
            (FIELDS[8], Value::Number(self.total_ms())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::record::report::ToolRecord;
    use crate::agent::ErrorCode;
    use crate::config::Mode;
    use crate::openai::Usage;

    fn report() -> Report {
        let mut r = Report::new(Mode::React, 1000);
        r.llm_turns = 3;
        r.tokens = Usage { prompt_tokens: 30, completion_tokens: 12, total_tokens: 42, ..Usage::default() };
        r.model = "m1".into();
        let tool = |class, status| ToolRecord { name: "t".into(), class, status, ms: 1 };
        r.tools = vec![
            tool(ToolClass::Ok2xx, Some(200)),
            tool(ToolClass::Server5xx, Some(503)),
            tool(ToolClass::TimedOut, None),
        ];
        r
    }

    #[test]
    fn every_outcome_in_the_summarys_words() {
        let mut r = report();
        assert_eq!(r.summary_outcome(), "cancelled");
        r.answered(false);
        r.ended(1500);
        assert_eq!(r.summary_outcome(), "answer");
        r.answered(true);
        r.ended(1500);
        assert_eq!(r.summary_outcome(), "limit");
        r.outcome = Outcome::Budget;
        assert_eq!(r.summary_outcome(), "budget");
        r.failed(504, ErrorCode::RequestTimeout);
        r.ended(1600);
        assert_eq!(r.summary_outcome(), "deadline");
        r.failed(504, ErrorCode::LlmTimeout);
        r.ended(1600);
        assert_eq!(r.summary_outcome(), "error:llm_timeout");
        r.failed(502, ErrorCode::LlmError);
        r.ended(1600);
        assert_eq!(r.summary_outcome(), "error:llm_error");
    }

    #[test]
    fn fields_count_turns_tools_errors_tokens_and_time() {
        let mut r = report();
        r.answered(false);
        r.ended(1250);
        let text: Vec<String> = r.fields().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            text.join(" "),
            "turns=3 tool_calls=3 tool_errors=2 input_tokens=30 output_tokens=12 total_tokens=42 model=m1 \
             outcome=answer duration_ms=250"
        );
    }
}
