//! A turn's tool phase: its batch's calls go out as the concurrency limit allows (an MCP call through
//! its session's handshake first), each reply or failure becomes what the model is told or a retry
//! later, and each call's end is recorded (`Seen`) for the report, the steps and the spans.

use super::identity::{self, Gate, Identity};
use super::work::{self, Batch, ToolCall, Work};
use crate::agent::calls::{self, Wait};
use crate::agent::calls::{excerpt, Calls};
use crate::agent::mcp::{self, Sessions};
use crate::agent::protocol::{CallId, Command, Event, Failure};
use crate::agent::record::report::{ToolClass, UNKNOWN_TOOL};
use crate::agent::record::steps::ToolStatus;
use crate::agent::record::{Record, Seen};
use crate::config::Config;
use crate::doc::truncate;
use std::borrow::Cow;

/// A reply: status, headers, body.
type Answer<'b> = (u16, &'b [(String, String)], &'b [u8]);

/// What the tool phase reads and records, borrowed from the agent for one event.
pub struct ToolPhase<'a> {
    pub cfg: &'a Config,
    /// The request's id, for logs and JSON-RPC ids.
    pub request: &'a str,
    /// The request's trace context, for every call.
    pub trace: &'a [(String, String)],
    pub calls: &'a mut Calls,
    pub sessions: &'a mut Sessions,
    /// `None`: no identity to carry or mask (`Machine::identity`).
    pub identity: &'a mut Option<Identity>,
    /// Where what the phase did is recorded (`Seen`).
    pub record: &'a mut Record,
}

impl ToolPhase<'_> {
    /// Counts a turn's malformed output and the calls refused before sending.
    pub fn count(&mut self, work: &[Work]) {
        for w in work {
            match w {
                Work::Known(_) => self.record.note(Seen::Malformed),
                Work::Refused { name, observation, .. } => {
                    let known = self.cfg.tools.get(name).is_some();
                    self.record.note(Seen::ToolRefused { name, known, observation });
                }
                Work::Found { query, observation } => self.record.note(Seen::ToolsFound { query, observation }),
                Work::Call { .. } | Work::Confirm { .. } => {}
            }
        }
    }

    /// The calls of the batch that may start now (those of an API whose token is being exchanged
    /// wait for it), and the token exchanges due.
    pub fn dispatch(&mut self, b: &mut Batch, now_ms: u64) -> Vec<Command> {
        let mut commands = Vec::new();
        for (api, sent) in b.identity.due(now_ms) {
            commands.extend(self.exchange(b, api, sent, now_ms));
        }
        while let Some((id, call)) = b.take(|| self.calls.mint()) {
            let api = call.api;
            let gate = match self.identity.as_mut() {
                Some(identity) => identity.gate(&self.cfg.apis, api, b.identity.exchanging(api)),
                // No API forwards or exchanges, and no token is kept: the call goes as it is.
                None => Gate::Go(Vec::new()),
            };
            match gate {
                Gate::Go(headers) => {
                    if self.identity.as_mut().is_some_and(|i| i.first_use_of_kept(api)) {
                        self.record.note(Seen::Exchange(api, "cached"));
                    }
                    commands.push(self.send(b, id, call, headers, now_ms));
                }
                Gate::Wait => b.identity.parked.push((api, id, call)),
                Gate::Exchange => {
                    b.identity.parked.push((api, id, call));
                    commands.extend(self.exchange(b, api, 0, now_ms));
                }
                Gate::Denied => self.denied(b, id),
            }
        }
        commands
    }

    /// Call `id` goes out, with the client's identity (`identity`) on it.
    fn send(
        &mut self,
        b: &mut Batch,
        id: CallId,
        call: ToolCall,
        identity: Vec<(String, String)>,
        now_ms: u64,
    ) -> Command {
        let (mut call, started) = self.mcp_step(b, id, call);
        if let Some(api) = self.cfg.apis.get(call.api) {
            // The client's identity is the client's: a header of the same name that the model filled
            // in (an operation's header parameter) never goes out beside or in place of it.
            let exchanged = api.identity.token_exchange.is_some();
            let own =
                |k: &str| api.identity.forward_headers.iter().any(|n| n == k) || (exchanged && k == "authorization");
            call.request.headers.retain(|(k, _)| !own(k));
        }
        let timeout = self.calls.bounded(call.timeout_ms, now_ms);
        let mut call = call.into_call(id, timeout, identity);
        call.headers.extend_from_slice(self.trace);
        self.calls.went_out(id, now_ms, timeout, started.unwrap_or(now_ms));
        let name = b.name_of(id).unwrap_or_default();
        self.record.note(Seen::ToolSent { id, name, index: b.index_of(id) });
        log::debug!("#{} tool {name}: {} {} {}", self.request, call.cluster, call.method, truncate(&call.path, 200));
        Command::Dispatch(call)
    }

    /// The token exchange for API `api` (`sent`: its retries so far); without one, its calls are
    /// denied.
    fn exchange(&mut self, b: &mut Batch, api: usize, sent: u32, now_ms: u64) -> Option<Command> {
        let (id, cfg) = (self.calls.mint(), self.cfg);
        let x = self.cfg.apis.get(api).and_then(|a| a.identity.token_exchange.as_ref());
        let timeout = self.calls.bounded(x.map_or(1, |x| x.upstream.timeout_ms), now_ms);
        let Some(call) = self.identity().exchange_call(&cfg.apis, api, id, timeout) else {
            self.identity().answered(&cfg.apis, api, None);
            for (id, _) in b.identity.unpark(api) {
                self.denied(b, id);
            }
            return None;
        };
        self.calls.went_out(id, now_ms, timeout, now_ms);
        b.identity.calls.insert(id, (api, sent));
        log::debug!("#{} token exchange for apis[{api}]: {} POST {}", self.request, call.cluster, call.path);
        let mut call = call;
        call.headers.extend_from_slice(self.trace);
        self.record.note(Seen::ExchangeSent(id));
        Some(Command::Dispatch(call))
    }

    /// The token service answered (or failed) exchange `id`: its API's calls go on with the token,
    /// or the exchange is retried later, or they are denied.
    fn on_exchange(&mut self, b: &mut Batch, id: CallId, outcome: Result<Answer<'_>, &Failure>, now_ms: u64) {
        let Some((api, sent)) = b.identity.calls.remove(&id) else {
            return;
        };
        let cfg = self.cfg;
        let (wait, result) = match outcome {
            Ok((status, headers, body)) => {
                self.calls.forget(id);
                (calls::status_wait(status, headers), identity::read_reply(status, body))
            }
            Err(failure) => {
                let (failure, _) = self.calls.failed(id, failure, now_ms);
                (calls::failure_wait(&failure), Err(format!("the call {failure}")))
            }
        };
        let why = match result {
            Ok(granted) => {
                self.record.note(Seen::Exchanged { api, token: &granted.token });
                self.identity().answered(&cfg.apis, api, Some(granted));
                for (id, call) in b.identity.unpark(api) {
                    b.resume(id, call);
                }
                return;
            }
            Err(why) => why,
        };
        let max = self.cfg.apis.get(api).map_or(0, |a| a.max_retries);
        let due = wait.filter(|_| sent < max).and_then(|wait| self.calls.retry_due(now_ms, sent, wait));
        if let Some(due) = due {
            log::info!("#{} token exchange for apis[{api}]: {why}; retried in {} ms", self.request, due - now_ms);
            b.identity.delayed.push((due, api, sent + 1));
            return;
        }
        log::warn!("#{} token exchange for apis[{api}]: {why}; its tools are not called", self.request);
        self.record.note(Seen::Exchange(api, if wait.is_some() { "failed" } else { "refused" }));
        self.identity().answered(&cfg.apis, api, None);
        for (id, _) in b.identity.unpark(api) {
            self.denied(b, id);
        }
    }

    /// Call `id` is not made: its caller is not authorized for its API.
    fn denied(&mut self, b: &mut Batch, id: CallId) {
        let name = b.name_of(id).unwrap_or(UNKNOWN_TOOL).to_string();
        let observation = identity::not_authorized(&name);
        let class = ToolClass::Unauthorized;
        self.record.note(Seen::ToolAnswered { id, name, class, status: None, ms: 0 });
        self.step(b, id, ToolStatus::Ended(ToolClass::Unauthorized), &observation);
        self.end(b, id, Some("not_authorized"), observation);
    }

    /// An event of the batch (`Batch::takes`): a call's reply or failure, or a wake-up for its
    /// retries that are due.
    pub fn on_event(&mut self, b: &mut Batch, event: Event<'_>, now_ms: u64) {
        match event {
            Event::CallReply { id, status, headers, body } if b.identity.calls.contains_key(&id) => {
                self.on_exchange(b, id, Ok((status, headers, body)), now_ms)
            }
            Event::CallFailed { id, failure } if b.identity.calls.contains_key(&id) => {
                self.on_exchange(b, id, Err(failure), now_ms)
            }
            Event::CallReply { id, status, headers, body } => self.on_reply(b, id, (status, headers, body), now_ms),
            Event::CallFailed { id, failure } => self.on_failure(b, id, failure, now_ms),
            Event::Wake => b.wake(now_ms),
            _ => {}
        }
    }

    /// A tool's reply: its observation, the next step of its MCP handshake, or a retry later.
    fn on_reply(&mut self, b: &mut Batch, id: CallId, reply: (u16, &[(String, String)], &[u8]), now_ms: u64) {
        let (status, headers, body) = reply;
        // Masked whole, before anything reads or cuts it: the log, the observation, the steps, a span.
        let masked = self.masked(body);
        let body: &[u8] = &masked;
        let sent = self.calls.forget(id);
        let ms = sent.map_or(0, |sent| now_ms.saturating_sub(sent));
        let observation = match self.mcp_reply(b, id, (status, headers, body), sent) {
            mcp::Reply::Next => return,
            mcp::Reply::Failed(observation) => Some(observation),
            mcp::Reply::Observe => None,
        };
        self.answered(b, id, ToolClass::of_status(status), Some(status), body, ms);
        if status == 401 {
            if let Some(api) = b.name_of(id).and_then(|n| self.cfg.tools.get(n)).map(|t| t.api) {
                if self.identity.as_mut().is_some_and(|i| i.refused(&self.cfg.apis, api)) {
                    self.record.note(Seen::Exchange(api, "dropped"));
                }
            }
        }
        if let Some(observation) = observation {
            self.step(b, id, ToolStatus::Http(status), &observation);
            return self.end(b, id, Some("tool_error"), observation);
        }
        let name = b.name_of(id).unwrap_or(UNKNOWN_TOOL).to_string();
        let observation = work::tool_observation(self.cfg, &name, status, headers, body);
        self.step(b, id, ToolStatus::Http(status), &observation);
        if !self.retry(b, id, calls::status_wait(status, headers), now_ms) {
            let error = (!(200..300).contains(&status)).then(|| status.to_string());
            self.end(b, id, error.as_deref(), observation);
        }
    }

    /// A tool call that failed: what the model is told, or a retry later.
    fn on_failure(&mut self, b: &mut Batch, id: CallId, failure: &Failure, now_ms: u64) {
        b.release(id);
        let (failure, ms) = self.calls.failed(id, failure, now_ms);
        let class = if failure == Failure::Timeout { ToolClass::TimedOut } else { ToolClass::Failed };
        self.answered(b, id, class, None, failure.to_string().as_bytes(), ms.unwrap_or(0));
        let name = b.name_of(id).unwrap_or(UNKNOWN_TOOL).to_string();
        let observation = format!("The call to '{name}' {failure}.");
        self.step(b, id, ToolStatus::Ended(class), &observation);
        if !self.retry(b, id, calls::failure_wait(&failure), now_ms) {
            let error = if class == ToolClass::TimedOut { "timeout" } else { class.as_str() };
            self.end(b, id, Some(error), observation);
        }
    }

    /// The request to send now for `call` under `id` (the next step of an MCP call, or the call as it
    /// is), and when the call was first sent.
    fn mcp_step(&mut self, b: &mut Batch, id: CallId, mut call: ToolCall) -> (ToolCall, Option<u64>) {
        let Some(h) = call.mcp.as_mut() else {
            return (call, None);
        };
        let rpc_id = format!("{}-{}", self.request, id.0);
        let Some(request) = h.request(&self.cfg.apis, self.sessions, &call.request, &rpc_id) else {
            return (call, None);
        };
        let started = h.started();
        let send =
            ToolCall { api: call.api, cluster: call.cluster.clone(), request, timeout_ms: call.timeout_ms, mcp: None };
        b.hold(id, call);
        (send, started)
    }

    /// Reads the reply to an MCP step (`sent`: when the step went out): the next step is queued in
    /// `b`, or the handshake failed, or the reply is the tool's own.
    fn mcp_reply(
        &mut self,
        b: &mut Batch,
        id: CallId,
        (status, headers, body): (u16, &[(String, String)], &[u8]),
        sent: Option<u64>,
    ) -> mcp::Reply {
        let Some(mut call) = b.release(id) else {
            return mcp::Reply::Observe;
        };
        let Some(h) = call.mcp.as_mut() else {
            return mcp::Reply::Observe;
        };
        let name = b.name_of(id).unwrap_or_default();
        let reply = h.on_reply(self.sessions, self.request, name, status, headers, body);
        if let mcp::Reply::Next = reply {
            h.went_on(sent);
            b.resume(id, call);
        }
        reply
    }

    /// Records a tool call's end; a failing one gets a warning with an excerpt of its body.
    fn answered(&mut self, b: &Batch, id: CallId, class: ToolClass, status: Option<u16>, body: &[u8], ms: u64) {
        let name = b.name_of(id).unwrap_or(UNKNOWN_TOOL).to_string();
        if class != ToolClass::Ok2xx {
            let what = status.map_or_else(|| class.as_str().to_string(), |s| format!("HTTP {s}"));
            log::warn!("#{} tool {name} (call {}) {what} after {ms} ms: {}", self.request, id.0, excerpt(body));
        }
        self.record.note(Seen::ToolAnswered { id, name, class, status, ms });
    }

    /// The request's identity, for a token exchange: only an API with `tokenExchange` has one, and
    /// then `Machine::new` made it (as it is made here: the client sent none of its headers).
    fn identity(&mut self) -> &mut Identity {
        self.identity.get_or_insert_with(Identity::default)
    }

    /// A tool's reply body with every credential masked (configured secrets, the client's, the tokens
    /// exchanged for it), before the log, the model, the steps or a span sees any of it, and before it
    /// is cut to `maxObservationBytes` (a cut secret would no longer match). Borrowed when there is none.
    fn masked<'b>(&self, body: &'b [u8]) -> Cow<'b, [u8]> {
        let secrets = self.cfg.secrets();
        // No credential of the client's and no token in this request (`Machine::identity`): the
        // configured secrets are all there is to mask.
        if self.identity.is_none() && secrets.is_empty() {
            return Cow::Borrowed(body);
        }
        let text = String::from_utf8_lossy(body);
        let masked = match self.identity.as_ref() {
            Some(identity) => identity.mask(&text, secrets),
            None => crate::redact::redact(&text, secrets),
        };
        match masked {
            Cow::Borrowed(_) => Cow::Borrowed(body),
            Cow::Owned(m) => Cow::Owned(m.into_bytes()),
        }
    }

    /// Call `id` is over: what the model is told (`error`: how the call failed, for its span).
    fn end(&mut self, b: &mut Batch, id: CallId, error: Option<&str>, observation: String) {
        let name = b.name_of(id).unwrap_or(UNKNOWN_TOOL);
        let io = (b.args_of(id).unwrap_or(""), observation.as_str());
        self.record.note(Seen::ToolEnded { id, name, index: b.index_of(id), error, io });
        b.reply(id, |_| observation);
    }

    /// The step of a tool call just answered (after `answered`, which timed it).
    fn step(&mut self, b: &Batch, id: CallId, status: ToolStatus, observation: &str) {
        let name = b.name_of(id).unwrap_or(UNKNOWN_TOOL);
        let arguments = b.args_of(id).unwrap_or("");
        self.record.note(Seen::ToolStep { name, arguments, status, observation });
    }

    /// A tool call sent again later, if its API allows retries for its method.
    fn retry(&mut self, b: &mut Batch, id: CallId, wait: Option<Wait>, now_ms: u64) -> bool {
        let Some(wait) = wait else {
            return false;
        };
        let Some(attempt) = b.attempts_left(id).map(|(done, _)| done) else {
            return false;
        };
        let Some(due) = self.calls.retry_due(now_ms, attempt, wait) else {
            return false;
        };
        let retried = b.retry_later(id, due);
        if retried {
            log::info!("#{} tool call {} {}; retried in {} ms", self.request, id.0, wait.why(), due - now_ms);
        }
        retried
    }
}
