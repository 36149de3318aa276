//! What one request did, for the operator: its outcome, LLM turns and retries, each tool call with its
//! status class and duration, malformed outputs, JSON-mode retries, tokens and time. The host turns it
//! into metrics and one log line; it holds no body, prompt or secret.

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
}
