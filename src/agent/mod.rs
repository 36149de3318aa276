//! The agent loop as a sans-IO state machine: it reads events (the client's request, LLM replies, tool
//! replies, failed calls) and returns commands (forward, dispatch, reply). It never reads a clock or a
//! random source: ids and times come in. Each request has its own `Agent`; nothing is shared.
//!
//! `machine` is the loop and the only place its state changes; the other files return what an event
//! means: `llm` (an LLM turn, in `react` or `native` mode, over a `convo`), `tool_phase` (a turn's
//! `batch` of `work`, with `mcp` sessions), `format` (JSON mode), `approval`, `finish` (the client's
//! response, in the format `wire` chose from the request's API), with `calls`, `retry`, `report`,
//! `steps` and `live` beside them.

mod approval;
mod batch;
mod body;
mod calls;
mod convo;
mod error;
mod finish;
mod format;
mod identity;
mod live;
mod llm;
mod machine;
mod mcp;
mod native;
mod offer;
mod offered;
mod protocol;
mod react;
mod report;
mod retry;
pub mod spans;
mod steps;
pub mod summary;
mod tool_phase;
mod wire;
mod work;

pub use error::{AgentError, ErrorCode};
pub use identity::Exchanged;
pub use protocol::{Api, Call, CallId, ClientHeaders, Command, Event, Failure, Reply, RequestMeta};
pub use report::{mode_name, Outcome, Report, ToolClass, ToolRecord, UNKNOWN_TOOL};

use crate::config::Config;
use machine::{Machine, State};
pub use mcp::Sessions as McpSessions;
use std::rc::Rc;

/// One request's agent: what hosts see of the loop (`machine`).
pub struct Agent {
    machine: Machine,
}

impl Agent {
    pub fn new(cfg: Rc<Config>, meta: RequestMeta) -> Self {
        Agent { machine: Machine::new(cfg, meta) }
    }

    /// MCP sessions known before the request (the host keeps them per VM), so that requests share one
    /// session per server instead of opening one each.
    pub fn set_mcp_sessions(&mut self, sessions: McpSessions) {
        self.machine.mcp_sessions = sessions;
    }

    /// The MCP sessions as the request left them (opened, reopened, or forgotten after a 404).
    pub fn mcp_sessions(&self) -> &McpSessions {
        &self.machine.mcp_sessions
    }

    /// Parameters the LLM server refused before (the host keeps them per configuration): not sent.
    pub fn set_refused_params(&mut self, params: Vec<&'static str>) {
        self.machine.refused = params;
    }

    /// The parameters the server has refused, as this request left them.
    pub fn refused_params(&self) -> &[&'static str] {
        &self.machine.refused
    }

    /// The host learnt from an earlier request that the server's chat template opens think blocks.
    pub fn set_template_opens(&mut self) {
        self.machine.template_opens = true;
    }

    /// The server's chat template opens think blocks, as far as this request knows.
    pub fn template_opens(&self) -> bool {
        self.machine.template_opens || self.machine.response.template_opens()
    }

    /// The keys under which the host may hold tokens for this request's exchanges: (`apis[]` index,
    /// `TokenExchange::cache_key` of the client's subject token).
    pub fn token_keys(&self) -> Vec<(usize, [u8; 32])> {
        self.machine.identity.keys(&self.machine.cfg().apis)
    }

    /// A token the host kept for API `api` and this request's subject token: no exchange is made.
    pub fn seed_token(&mut self, api: usize, token: String) {
        self.machine.spans.mask(&token);
        self.machine.identity.seed(api, token);
    }

    /// The cache keys of tokens an API refused since the last call, for the host to drop.
    pub fn take_dropped_tokens(&mut self) -> Vec<[u8; 32]> {
        self.machine.identity.take_dropped()
    }

    /// The tokens this request exchanged since the last call, for the host to keep.
    pub fn take_exchanged(&mut self) -> Vec<Exchanged> {
        self.machine.identity.take_fresh()
    }

    /// The host makes real spans for this request (its stream is traced): the agent notes them
    /// (`take_spans`). Before the request's body is read, and before tokens are seeded.
    pub fn trace(&mut self) {
        let cfg = self.machine.cfg();
        let content = cfg.tracing.content.then(|| {
            // The client's credentials too: a tool may echo what it was sent.
            let mut secrets = cfg.secrets().to_vec();
            secrets.extend(self.machine.meta.client_headers.0.iter().map(|(_, v)| v.clone()));
            crate::config::sort_secrets(&mut secrets);
            (cfg.llm.max_observation_bytes, secrets)
        });
        self.machine.spans = spans::Spans::new(true, content);
    }

    /// What the host should do with its spans since the last call, in order; before it runs the
    /// commands of the same event.
    pub fn take_spans(&mut self) -> Vec<spans::SpanNote> {
        self.machine.spans.take()
    }

    /// The request ends here (the host closes the stream): spans still open end, as cancelled if the
    /// agent had not answered.
    pub fn end_spans(&mut self) {
        self.machine.spans.end_run(&self.machine.report);
    }

    /// What the request did so far (complete once `is_done`).
    pub fn report(&self) -> &Report {
        &self.machine.report
    }

    pub fn id(&self) -> &str {
        &self.machine.meta.id
    }

    /// Whether the client asked for SSE; known once the request was read.
    pub fn wants_stream(&self) -> bool {
        self.machine.response.stream
    }

    /// The client's request body has not been read yet: a response now (Envoy's own, e.g. a 413 for a
    /// body over the listener's buffer limit) is not a turn of the loop and goes to the client as is.
    pub fn awaits_request(&self) -> bool {
        matches!(self.machine.state, State::AwaitRequest)
    }

    /// The stream ended with the client holding `status` from the host (Envoy's own reply when it gave
    /// up on the held upstream reply, or an answer it could not write): the report says what the client
    /// got rather than `cancelled` or the answer the agent meant.
    pub fn host_answered(&mut self, status: u16, now_ms: u64) {
        if self.machine.report.host_answered(status, self.is_done(), now_ms) {
            log::info!("#{} the client got HTTP {status} from Envoy itself", self.machine.meta.id);
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.machine.state, State::Done)
    }

    /// Feeds one event; the commands are for the host to run now. While a retry waits, the last
    /// command is `WakeAt` with the time the agent wants `Event::Wake`.
    pub fn handle(&mut self, event: Event<'_>, now_ms: u64) -> Vec<Command> {
        self.machine.handle(event, now_ms)
    }
}
