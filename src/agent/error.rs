//! How a request ends badly: the status it means and an OpenAI error code.

/// The `code` of an OpenAI error object; `as_str` is the only place its wire text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    InvalidResponseFormat,
    InvalidTools,
    ToolNameClash,
    UnsupportedTools,
    /// A Responses request that needs state the gateway does not keep (`previous_response_id`, …).
    StatefulRequest,
    LlmBadReply,
    LlmError,
    LlmTimeout,
    LlmUnavailable,
    RequestTimeout,
    RequestTooLarge,
    ResponseTooLarge,
    JsonSchemaMismatch,
    /// The provider's own error to the first turn, passed to the client.
    UpstreamError,
    /// The client got Envoy's own reply, not the agent's.
    HostReply,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidResponseFormat => "invalid_response_format",
            ErrorCode::InvalidTools => "invalid_tools",
            ErrorCode::ToolNameClash => "tool_name_clash",
            ErrorCode::UnsupportedTools => "unsupported_tools",
            ErrorCode::StatefulRequest => "stateful_request",
            ErrorCode::LlmBadReply => "llm_bad_reply",
            ErrorCode::LlmError => "llm_error",
            ErrorCode::LlmTimeout => "llm_timeout",
            ErrorCode::LlmUnavailable => "llm_unavailable",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::RequestTooLarge => "request_too_large",
            ErrorCode::ResponseTooLarge => "response_too_large",
            ErrorCode::JsonSchemaMismatch => "json_schema_mismatch",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::HostReply => "host_reply",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    pub status: u16,
    pub code: ErrorCode,
    pub message: String,
    /// The request field at fault (the error object's `param`).
    pub param: Option<String>,
}

impl From<crate::openai::Invalid> for AgentError {
    /// A refused client request: a 400 naming the field.
    fn from(e: crate::openai::Invalid) -> Self {
        AgentError { param: e.param, ..AgentError::new(400, ErrorCode::InvalidRequest, e.why) }
    }
}

impl From<crate::openai::responses::RequestError> for AgentError {
    /// A refused Responses request: a 400 with the code that says why.
    fn from(e: crate::openai::responses::RequestError) -> Self {
        use crate::openai::responses::RequestError;
        let (code, param) = match &e {
            RequestError::Invalid(i) => (ErrorCode::InvalidRequest, i.param.clone()),
            RequestError::Stateful(field) => (ErrorCode::StatefulRequest, Some(field.to_string())),
            RequestError::HostedTool(_) => (ErrorCode::UnsupportedTools, Some("tools".into())),
        };
        AgentError { param, ..AgentError::new(400, code, e.to_string()) }
    }
}

impl AgentError {
    pub fn new(status: u16, code: ErrorCode, message: impl Into<String>) -> Self {
        AgentError { status, code, message: message.into(), param: None }
    }

    /// The error is about the request field `param`.
    pub fn at(self, param: impl Into<String>) -> Self {
        AgentError { param: Some(param.into()), ..self }
    }

    /// The error object's `type`: OpenAI's for a 4xx (the request is at fault), else `api_error`.
    pub fn kind(&self) -> &'static str {
        if (400..500).contains(&self.status) {
            "invalid_request_error"
        } else {
            "api_error"
        }
    }
}
