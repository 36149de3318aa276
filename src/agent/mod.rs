//! The agent loop as a sans-IO state machine: it reads events (the client's request, LLM replies, tool
//! replies, failed calls) and returns commands (forward, dispatch, reply). It never reads a clock or a
//! random source: ids and times come in. Each request has its own `Agent`; nothing is shared.
//!
//! `machine` is the loop and the only place its state changes; the rooms return what an event means,
//! lowest first: `record` (report, steps, spans: what the request did, for those who watch it),
//! `tools` (a turn's calls), `turn` (an LLM turn, in `react` or `native` mode, over a `convo`) and
//! `answer` (the client's response, in the format its API asks for). Beside them, what every room
//! shares: the seam (`protocol`, `error`), the callouts' ids and backoff (`calls`)
//! and the MCP sessions (`mcp`). A room imports only rooms below it (tests/structure.rs).

mod answer;
mod calls;
mod error;
mod machine;
mod mcp;
mod protocol;
mod record;
mod tools;
mod turn;

pub use error::{AgentError, ErrorCode};
pub use protocol::{
    Api, Call, CallId, ClientHeaders, Command, Event, Exchanged, Failure, Lesson, Memory, ModelFacts, Reply,
    RequestMeta,
};
pub use record::report::{
    mode_name, Outcome, Report, SummaryValue, ToolClass, ToolRecord, SUMMARY_FIELDS, UNKNOWN_TOOL,
};

use crate::config::Config;
use machine::{Machine, State};
pub use mcp::{Peer as McpPeer, Sessions as McpSessions};
pub use record::spans;
use std::rc::Rc;

/// One request's agent: what hosts see of the loop (`machine`).
pub struct Agent {
    machine: Machine,
}

impl Agent {
    pub fn new(cfg: Rc<Config>, meta: RequestMeta) -> Self {
        Agent { machine: Machine::new(cfg, meta) }
    }

    /// The host makes real spans for this request (its stream is traced): the agent notes them
    /// (`poll_spans`). Before the request's body is read.
    pub fn trace(&mut self) {
        let cfg = self.machine.cfg();
        let content = cfg.tracing.content.then(|| {
            // The client's credentials too: a tool may echo what it was sent.
            let mut secrets = cfg.secrets().to_vec();
            secrets.extend(self.machine.meta.client_headers.0.iter().map(|(_, v)| v.clone()));
            crate::config::sort_secrets(&mut secrets);
            (cfg.llm.max_observation_bytes, secrets)
        });
        let spans = self.machine.record.spans.insert(spans::Spans::new(true, content));
        for (_, token) in &self.machine.meta.memory.tokens {
            // Tokens kept for the client: masked in content as those it exchanges are.
            spans.mask(token);
        }
    }

    /// The agent's one poll (`protocol`): what the host should do with its spans since the last
    /// call, in order; before it runs the commands of the same event.
    pub fn poll_spans(&mut self) -> Vec<spans::SpanNote> {
        self.machine.record.spans.as_mut().map(spans::Spans::take).unwrap_or_default()
    }

    /// What the request did so far (complete once `is_done`).
    pub fn report(&self) -> &Report {
        &self.machine.record.report
    }

    pub fn id(&self) -> &str {
        &self.machine.meta.id
    }

    /// The API the client spoke.
    pub fn api(&self) -> Api {
        self.machine.meta.api
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

    /// The stream ended (`Event::Closed`). With the client holding `status` from the host (Envoy's own
    /// reply when it gave up on the held upstream reply, or an answer it could not write), the report
    /// says what the client got rather than `cancelled` or the answer the agent meant. Spans still
    /// open end, as cancelled if the agent had not answered.
    fn closed(&mut self, host_status: Option<u16>, now_ms: u64) {
        if let Some(status) = host_status {
            if self.machine.record.report.host_answered(status, self.is_done(), now_ms) {
                log::info!("#{} the client got HTTP {status} from Envoy itself", self.machine.meta.id);
            }
        }
        if let Some(spans) = &mut self.machine.record.spans {
            spans.end_run(&self.machine.record.report);
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.machine.state, State::Done)
    }

    /// Feeds one event; the commands are for the host to run now. While a retry waits, the last
    /// command is `WakeAt` with the time the agent wants `Event::Wake`.
    pub fn handle(&mut self, event: Event<'_>, now_ms: u64) -> Vec<Command> {
        if let Event::Closed { host_status } = event {
            self.closed(host_status, now_ms);
            return Vec::new();
        }
        self.machine.handle(event, now_ms)
    }
}
