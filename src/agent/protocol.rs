//! The agent's contract with its host, and the only types they exchange.
//!
//! - **In**: `Agent::new(config, RequestMeta)` (what the host knows of the request, what the instance
//!   learnt from earlier requests included: `Memory`; ids, times and seeds that would otherwise come
//!   from a clock or a random source), `Agent::trace()` once before the first event when the host
//!   makes spans, then one `Event` at a time with its time: `Agent::handle(event, now_ms)`. The agent
//!   keeps no clock between events; the stream's end is an event too (`Event::Closed`).
//! - **Out**: the `Command`s `handle` returns, to run in order (what this request learns included:
//!   `Command::Learn`), and one documented poll: `Agent::poll_spans()`, the span notes since the last
//!   event, for a host that makes spans. The rest of `Agent`'s methods only read its state (`report`,
//!   `id`, `is_done`, `awaits_request`, `wants_stream`); nothing else leaves the agent.

use super::mcp::Sessions as McpSessions;
use std::rc::Rc;

/// Per-request inputs that would otherwise come from a clock or a random source.
#[derive(Debug, Clone, Default)]
pub struct RequestMeta {
    /// Unique per request; becomes the completion id.
    pub id: String,
    /// Milliseconds on the host's clock when the request arrived, for its deadline.
    pub now_ms: u64,
    /// Unix seconds, for `created`.
    pub unix_s: u64,
    /// Seeds the jitter of retry backoffs.
    pub seed: u64,
    /// The client asked for the agent's steps (`x-api-agent-steps: true`).
    pub steps: bool,
    /// The request headers that `context.headers` names: (label, value).
    pub context_headers: Vec<(String, String)>,
    /// The request headers that `policy.headers` names, for the call rules: (name, value).
    pub policy_headers: Vec<(String, String)>,
    /// The client's headers that APIs' `forwardHeaders` and `tokenExchange.subjectHeader` name.
    pub client_headers: ClientHeaders,
    /// The host can stream callouts and answer the client while calls are pending (the dynamic
    /// module): a streaming client gets its answer live (`agent::live`).
    pub live: bool,
    /// The client's trace context (W3C `traceparent`/`tracestate`, `x-request-id`, B3), carried on
    /// every callout so that the LLM turns and tool calls join the request's trace.
    pub trace: Vec<(String, String)>,
    /// The API the client spoke, which the answer's format follows.
    pub api: Api,
    /// What the plugin instance learnt from earlier requests of this configuration.
    pub memory: Memory,
}

/// What the plugin instance learnt from earlier requests of the request's configuration and hands to
/// it (`host::memory`); what the request learns goes back as `Command::Learn`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// MCP sessions any request may share (`apis[]` index → session id).
    pub mcp: McpSessions,
    /// What each model's server taught, per model asked for (unexpired, a bounded few).
    pub models: Vec<(String, ModelFacts)>,
    /// Tokens kept for this client's subject tokens: (`apis[]` index, token).
    pub tokens: Vec<(usize, String)>,
}

impl std::fmt::Debug for Memory {
    /// Never a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tokens = self.tokens.len();
        f.debug_struct("Memory").field("mcp", &self.mcp).field("models", &self.models).field("tokens", &tokens).finish()
    }
}

/// What one model's server taught.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelFacts {
    /// Parameters it refused (`llm::STEP_DOWN`): not sent.
    pub refused: Vec<&'static str>,
    /// Its chat template opens think blocks (a lone `</think>` was seen).
    pub template_opens: bool,
}

/// A token this request exchanged, for the host to keep for later requests of the same subject.
#[derive(Clone, PartialEq, Eq)]
pub struct Exchanged {
    pub api: usize,
    /// `TokenExchange::cache_key` of the subject token, audience and scope.
    pub key: [u8; 32],
    pub token: String,
    /// How long it may be used from now (`expires_in` less a margin).
    pub ttl_ms: u64,
}

impl std::fmt::Debug for Exchanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Exchanged {{ api: {}, ttl_ms: {}, token: **** }}", self.api, self.ttl_ms)
    }
}

/// One thing a request learnt, for the plugin instance to keep for later requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lesson {
    /// The MCP sessions as the request leaves them (opened, reopened, or forgotten after a 404).
    McpSessions(McpSessions),
    /// The server of `model` (the model the turn asked for) refused `param`.
    Refused { model: String, param: &'static str },
    /// The chat template of `model` opens think blocks.
    TemplateOpens { model: String },
    /// A token exchanged for the client.
    Token(Exchanged),
    /// An API refused a kept token (by its cache key): no later request gets it.
    TokenRefused([u8; 32]),
}

/// Headers of the client's request (lower-case names) that the configuration copies onto APIs' calls
/// or exchanges for their tokens: credentials, never logged (`Debug` shows the names only).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientHeaders(pub Vec<(String, String)>);

impl std::fmt::Debug for ClientHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(name, _)| format!("{name}: ****"))).finish()
    }
}

/// The API of the client's request, known from its path (`host::admit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Api {
    /// `…/chat/completions`.
    #[default]
    ChatCompletions,
    /// `…/responses` (or `responses.path`): translated into chat completions for the model.
    Responses,
    /// `…/v1/messages` (or `messages.path`): Anthropic Messages, translated likewise.
    Messages,
}

/// Minted by the agent for every callout; the host maps its own tokens to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(pub u32);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The callout's own timeout fired (Envoy answers with a synthetic 504).
    Timeout,
    /// Reset, no healthy upstream, no `:status`.
    Broken(String),
    /// The host refused to dispatch (unknown cluster, bad headers).
    NotSent(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => write!(f, "timed out"),
            Failure::Broken(why) => write!(f, "failed: {why}"),
            Failure::NotSent(why) => write!(f, "could not be sent: {why}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The client's whole request body.
    ClientRequest {
        body: &'a [u8],
    },
    /// The route upstream's reply to the forwarded first LLM request. `headers_sent`: the client
    /// already has response headers, so a failure can only be told in the body; false when the host
    /// can still answer with a status of its own (a reply without a body).
    UpstreamReply {
        status: u16,
        body: &'a [u8],
        headers_sent: bool,
    },
    /// The status and headers of a streamed callout (`Call::stream`), before its body.
    CallHead {
        id: CallId,
        status: u16,
        headers: &'a [(String, String)],
    },
    /// The next bytes of a streamed callout's body, as they arrive. The call still ends with
    /// `CallReply` or `CallFailed`. `CallReply` carries the whole body, except that a host may leave
    /// out a 2xx `text/event-stream` body it delivered here: the agent reads that one from the data.
    CallData {
        id: CallId,
        data: &'a [u8],
    },
    /// A callout's reply; header names are lower case.
    CallReply {
        id: CallId,
        status: u16,
        headers: &'a [(String, String)],
        body: &'a [u8],
    },
    CallFailed {
        id: CallId,
        failure: &'a Failure,
    },
    /// The time the agent asked for with `Command::WakeAt` has come (a retry's backoff is over).
    Wake,
    /// The host is done with the stream (it closed, answered or not). `host_status`: what the client
    /// got, where the host can tell (Envoy's own reply may have replaced the agent's answer). Spans
    /// still open end; the report says what the client got. No command follows.
    Closed {
        host_status: Option<u16>,
    },
}

impl Event<'_> {
    /// The event in a few words, for a log line.
    pub fn describe(&self) -> String {
        match self {
            Event::ClientRequest { .. } => "client request".into(),
            Event::UpstreamReply { status, .. } => format!("upstream reply {status}"),
            Event::CallHead { id, status, .. } => format!("head {status} of call {}", id.0),
            Event::CallData { id, .. } => format!("data of call {}", id.0),
            Event::CallReply { id, status, .. } => format!("reply {status} to call {}", id.0),
            Event::CallFailed { id, .. } => format!("failure of call {}", id.0),
            Event::Wake => "wake-up".into(),
            Event::Closed { .. } => "the stream's end".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: CallId,
    pub cluster: String,
    pub method: &'static str,
    /// Path and query.
    pub path: String,
    pub authority: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Body>,
    pub timeout_ms: u64,
    /// Stream the reply: the host reports its head and body as they arrive (`CallHead`,
    /// `CallData`). Asked only of hosts that declared live streaming (`RequestMeta::live`).
    pub stream: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status this reply means; once response headers are out, the host can only send the body.
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Send this body upstream in place of the client's request (the first LLM turn).
    Forward {
        body: Vec<u8>,
    },
    Dispatch(Call),
    /// Start the client's response now (live streaming): status, headers and the first bytes; the
    /// request goes on. Only for hosts that declared live streaming.
    Open(Reply),
    /// More bytes of the response `Open` started.
    Send(Vec<u8>),
    /// The answer for the client; the request is over. After `Open`, only its body is sent (the
    /// rest of the stream).
    Reply(Reply),
    /// Send `Event::Wake` once the host's clock reaches this many milliseconds.
    WakeAt(u64),
    /// Keep this for later requests (`Memory`); comes before the event's other commands.
    Learn(Lesson),
}

/// A callout's body, shared rather than copied: an LLM turn's call is kept for a retry while the host
/// sends it (with a large catalog the body is ~80 KB, and copying it was a third of what the catalog
/// cost a request).
#[derive(Clone, PartialEq, Eq)]
pub struct Body(Rc<Vec<u8>>);

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body(Rc::new(bytes))
    }
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
