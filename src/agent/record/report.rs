//! What one request did, for the operator: its outcome, LLM turns and retries, each tool call with its
//! status class and duration, malformed outputs, JSON-mode retries, tokens and time. The host turns it
//! into metrics, one log line and the summary for Envoy; it holds no body, prompt or secret.

use crate::agent::error::ErrorCode;
use crate::config::Mode;
use crate::openai::Usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running (the client went away, or the host closed the stream).
    Cancelled,
    Answered,
    ClientError,
    LlmError,
    Timeout,
    IterationLimit,
    /// The request's token budget (`llm.maxTotalTokens`) was spent before a final answer.
    Budget,
    SchemaMismatch,
    TooLarge,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Cancelled => "cancelled",
            Outcome::Answered => "answered",
            Outcome::ClientError => "client_error",
            Outcome::LlmError => "llm_error",
            Outcome::Timeout => "timeout",
            Outcome::IterationLimit => "iteration_limit",
            Outcome::Budget => "budget",
            Outcome::SchemaMismatch => "schema_mismatch",
            Outcome::TooLarge => "too_large",
        }
    }

    pub const ALL: [Outcome; 9] = [
        Outcome::Cancelled,
        Outcome::Answered,
        Outcome::ClientError,
        Outcome::LlmError,
        Outcome::Timeout,
        Outcome::IterationLimit,
        Outcome::Budget,
        Outcome::SchemaMismatch,
        Outcome::TooLarge,
    ];

    /// The outcome an error code means.
    pub fn of_error(status: u16, code: ErrorCode) -> Outcome {
        match code {
            ErrorCode::LlmTimeout | ErrorCode::RequestTimeout => Outcome::Timeout,
            ErrorCode::JsonSchemaMismatch => Outcome::SchemaMismatch,
            ErrorCode::ResponseTooLarge | ErrorCode::RequestTooLarge => Outcome::TooLarge,
            _ if (400..500).contains(&status) && code != ErrorCode::UpstreamError => Outcome::ClientError,
            _ => Outcome::LlmError,
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    Ok2xx,
    Client4xx,
    Server5xx,
    /// Any other status (1xx, 3xx).
    Other,
    Failed,
    TimedOut,
    /// Never sent: arguments the tool's schema refused, or an unknown tool.
    Refused,
    /// Never sent: the client is not authorized for the tool's API (its token exchange was refused,
    /// failed, or had no subject token).
    Unauthorized,
}

impl ToolClass {
    pub fn of_status(status: u16) -> ToolClass {
        match status {
            200..=299 => ToolClass::Ok2xx,
            400..=499 => ToolClass::Client4xx,
            500..=599 => ToolClass::Server5xx,
            _ => ToolClass::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Ok2xx => "2xx",
            ToolClass::Client4xx => "4xx",
            ToolClass::Server5xx => "5xx",
            ToolClass::Other => "other",
            ToolClass::Failed => "failed",
            ToolClass::TimedOut => "timed_out",
            ToolClass::Refused => "refused",
            ToolClass::Unauthorized => "unauthorized",
        }
    }
}

/// The name under which calls of tools that are not configured are counted: the model's names never
/// become metric names.
pub const UNKNOWN_TOOL: &str = "_unknown_";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRecord {
    /// A configured tool's name, or `UNKNOWN_TOOL`.
    pub name: String,
    pub class: ToolClass,
    pub status: Option<u16>,
    pub ms: u64,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub mode: Mode,
    pub outcome: Outcome,
    /// The status the answer means (200, or the error's).
    pub status: u16,
    pub code: Option<&'static str>,
    /// LLM replies read (the first turn, later turns, formatting calls).
    pub llm_turns: u32,
    pub llm_retries: u32,
    /// Milliseconds of each answered LLM callout (the first turn through the route is not timed).
    pub llm_ms: Vec<u64>,
    pub tools: Vec<ToolRecord>,
    /// Token exchanges by `apis[]` index: `exchanged`, `cached` (a kept token used, no exchange),
    /// `refused` (the token service said no), `failed` (it kept failing), `dropped` (the API refused the
    /// token: 401).
    pub exchanges: Vec<(usize, &'static str)>,
    pub malformed: u32,
    pub json_retries: u32,
    /// The call rules' and the data-flow guard's decisions: (rule name or `_guard_`, decision).
    pub policy: Vec<(String, &'static str)>,
    pub tokens: Usage,
    /// A reply did not say its usage and nothing estimated it: `tokens` undercounts, and the tokens
    /// histogram leaves the request out rather than record a count it does not know.
    pub tokens_unread: bool,
    /// The model the LLM last said it was (the client's until a reply names one).
    pub model: String,
    pub started_ms: u64,
    pub ended_ms: u64,
}

impl Report {
    pub fn new(mode: Mode, started_ms: u64) -> Report {
        Report {
            mode,
            outcome: Outcome::Cancelled,
            status: 0,
            code: None,
            llm_turns: 0,
            llm_retries: 0,
            llm_ms: Vec::new(),
            tools: Vec::new(),
            exchanges: Vec::new(),
            malformed: 0,
            json_retries: 0,
            policy: Vec::new(),
            tokens: Usage::default(),
            tokens_unread: false,
            model: String::new(),
            started_ms,
            ended_ms: started_ms,
        }
    }

    /// The request was answered (`limit`: for want of turns); when, `ended` says.
    pub fn answered(&mut self, limit: bool) {
        self.outcome = if limit { Outcome::IterationLimit } else { Outcome::Answered };
        self.status = 200;
    }

    /// The request failed with `status` and `code`; when, `ended` says.
    pub fn failed(&mut self, status: u16, code: ErrorCode) {
        self.outcome = Outcome::of_error(status, code);
        self.status = status;
        self.code = Some(code.as_str());
    }

    /// The agent answered at `now_ms`: the time of the event that ended the request.
    pub fn ended(&mut self, now_ms: u64) {
        self.ended_ms = now_ms;
    }

    /// The client got `status` from the host itself (`done`: after the agent's own answer): the
    /// report says what the client got. False when that changes nothing: no status (the client
    /// left), the status the agent sent, or a 2xx while the agent still ran (its own stream, left).
    pub fn host_answered(&mut self, status: u16, done: bool, now_ms: u64) -> bool {
        let same = done && self.status == status;
        let left = !done && (200..300).contains(&status);
        if !(100..600).contains(&status) || same || left {
            return false;
        }
        if !done {
            self.ended_ms = now_ms;
        }
        self.status = status;
        self.code = Some(ErrorCode::HostReply.as_str());
        self.outcome = if (200..300).contains(&status) {
            Outcome::Answered
        } else {
            Outcome::of_error(status, ErrorCode::HostReply)
        };
        true
    }

    pub fn total_ms(&self) -> u64 {
        self.ended_ms.saturating_sub(self.started_ms)
    }

    /// The operator's one line: no body, prompt or secret.
    pub fn line(&self, id: &str, route: &str, loop_name: &str) -> String {
        let tools: Vec<String> = self
            .tools
            .iter()
            .map(|t| match t.status {
                Some(s) => format!("{}:{}:{}ms", t.name, s, t.ms),
                None => format!("{}:{}:{}ms", t.name, t.class.as_str(), t.ms),
            })
            .collect();
        format!(
            "api-agent request #{id} route={} mode={} loop={loop_name} outcome={} status={} code={} llm_turns={} llm_retries={} tools=[{}] malformed={} json_retries={} ms={} tokens={}/{}/{}",
            if route.is_empty() { "-" } else { route },
            mode_name(self.mode),
            self.outcome.as_str(),
            self.status,
            self.code.unwrap_or("-"),
            self.llm_turns,
            self.llm_retries,
            tools.join(","),
            self.malformed,
            self.json_retries,
            self.total_ms(),
            self.tokens.prompt_tokens,
            self.tokens.completion_tokens,
            self.tokens.total_tokens
        )
    }
}

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::React => "react",
        Mode::Native => "native",
    }
}

/// The per-request summary a host hands to Envoy (filter state, dynamic metadata) for access logs
/// and rate limits: what one agent run cost and how it ended, with no body, prompt or secret. A
/// field's value: numbers stay numbers where the host can keep them so (dynamic metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryValue {
    Number(u64),
    Text(String),
}

impl std::fmt::Display for SummaryValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SummaryValue::Number(n) => write!(f, "{n}"),
            SummaryValue::Text(t) => f.write_str(t),
        }
    }
}

/// The fields' names, in the order `fields` gives them.
pub const SUMMARY_FIELDS: [&str; 9] = [
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

    /// Every summary field with its value, in `SUMMARY_FIELDS` order.
    pub fn fields(&self) -> [(&'static str, SummaryValue); 9] {
        let errors = self.tools.iter().filter(|t| t.class != ToolClass::Ok2xx).count();
        let n = |v: usize| SummaryValue::Number(u64::try_from(v).unwrap_or(u64::MAX));
        [
            (SUMMARY_FIELDS[0], SummaryValue::Number(self.llm_turns.into())),
            (SUMMARY_FIELDS[1], n(self.tools.len())),
            (SUMMARY_FIELDS[2], n(errors)),
            (SUMMARY_FIELDS[3], SummaryValue::Number(self.tokens.prompt_tokens)),
            (SUMMARY_FIELDS[4], SummaryValue::Number(self.tokens.completion_tokens)),
            (SUMMARY_FIELDS[5], SummaryValue::Number(self.tokens.total_tokens)),
            (
                SUMMARY_FIELDS[6],
                SummaryValue::Text(if self.model.is_empty() { "-".into() } else { self.model.clone() }),
            ),
            (SUMMARY_FIELDS[7], SummaryValue::Text(self.summary_outcome())),
            (SUMMARY_FIELDS[8], SummaryValue::Number(self.total_ms())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_outcomes() {
        assert_eq!(Outcome::of_error(400, ErrorCode::InvalidRequest), Outcome::ClientError);
        assert_eq!(Outcome::of_error(401, ErrorCode::UpstreamError), Outcome::LlmError);
        assert_eq!(Outcome::of_error(502, ErrorCode::LlmError), Outcome::LlmError);
        assert_eq!(Outcome::of_error(504, ErrorCode::LlmTimeout), Outcome::Timeout);
        assert_eq!(Outcome::of_error(504, ErrorCode::RequestTimeout), Outcome::Timeout);
        assert_eq!(Outcome::of_error(502, ErrorCode::JsonSchemaMismatch), Outcome::SchemaMismatch);
        assert_eq!(Outcome::of_error(413, ErrorCode::RequestTooLarge), Outcome::TooLarge);
        assert_eq!(ToolClass::of_status(204), ToolClass::Ok2xx);
        assert_eq!(ToolClass::of_status(302), ToolClass::Other);
    }

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
