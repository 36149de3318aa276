//! How a request ends badly: the status it means and an OpenAI error code.

/// The `code` of an OpenAI error object; `as_str` is the only place its wire text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    InvalidResponseFormat,
    InvalidTools,
    ToolNameClash,
    UnsupportedTools,
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
}

impl AgentError {
    pub fn new(status: u16, code: ErrorCode, message: impl Into<String>) -> Self {
        AgentError { status, code, message: message.into() }
    }

    /// The error object's `type`.
    pub fn kind(&self) -> &'static str {
        if self.status == 400 {
            "invalid_request_error"
        } else {
            "api_error"
        }
    }
}
