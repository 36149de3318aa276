//! The agent loop as a sans-IO state machine: states named by what they await, and the transitions
//! between them. The other files say what a reply or a call means (`llm`, `tool_phase`, `format`,
//! `approval`, `answer`); this one alone changes the state.

use super::calls::{self, Calls, Retry};
use super::error::{AgentError, ErrorCode};
use super::mcp::Sessions;
use super::protocol::{CallId, Command, Event, Memory, RequestMeta};
use crate::agent::answer::{self, Response};
use crate::agent::record::steps::Steps;
use crate::agent::record::{Record, Seen};
use crate::agent::tools::approval;
use crate::agent::tools::identity::Identity;
use crate::agent::tools::tool_phase::ToolPhase;
use crate::agent::tools::work::{Batch, Work};
use crate::agent::turn::convo::{Convo, Next};
use crate::agent::turn::format::{Format, Target};
use crate::agent::turn::learn::Learning;
use crate::agent::turn::llm;
use crate::agent::turn::rules;
use crate::config::{Config, LoopPhase};
use crate::doc::truncate;
use crate::openai::answer::FinishReason;
use crate::openai::{ChatRequest, Usage};
use serde_json::Value;
use std::rc::Rc;

/// Calls the client approved, run before the first turn, and calls it is asked to approve.
mod approved;
/// A failed LLM call, sent again after its backoff, or the end.
mod failed;
/// JSON mode's formatting call, as transitions of this machine.
mod json_mode;

use approved::ApprovedRequest;
use failed::llm_call_of;

/// What the agent waits for next.
#[derive(Debug)]
pub enum State {
    AwaitRequest,
    /// The route's upstream answers the forwarded first turn.
    AwaitFirstLlm(Convo),
    /// An LLM turn by callout (kept to be sent again).
    AwaitLlm(Retry, Convo),
    AwaitTools(Convo, Box<Batch>),
    /// Calls the client approved, run before the first LLM turn.
    AwaitApproved(Box<ApprovedRequest>, Box<Batch>),
    /// JSON mode: the answer is being turned into JSON; the finish reason is kept for the end.
    AwaitFormat(Retry, Convo, Box<Format>, FinishReason),
    Done,
}

/// The loop: what it keeps across states, and the transitions between them (the only code that
/// changes the state).
pub struct Machine {
    cfg: Rc<Config>,
    pub(super) meta: RequestMeta,
    pub(super) response: Response,
    calls: Calls,
    /// What the request did (report, steps, spans), from what the transitions say (`Seen`).
    pub(super) record: Record,
    /// MCP sessions, from the instance's memory and told back (`learning`).
    mcp_sessions: Sessions,
    /// The client's identity on its tools' calls, and the tokens exchanged for it. `None`: nothing
    /// to carry or mask (no API forwards or exchanges, the client sent no such header, no token
    /// kept), so a request without identity never enters `identity.rs`.
    pub(super) identity: Option<Identity>,
    /// What earlier requests taught this one, and what it teaches later ones. `None` until there is
    /// something to take or give (`learning()`): a request that learns nothing never enters `learn.rs`.
    learning: Option<Learning>,
    /// The server's chat template opens think blocks (`reasoning.templateOpens`, or learnt from an
    /// earlier request to the model): live turns' text is thinking until `</think>`.
    template_opens: bool,
    /// The token budget ended the loop.
    budget_spent: bool,
    /// A reply without readable usage was estimated, and the warning is logged (once a request).
    usage_warned: bool,
    pub(super) state: State,
}

type Step = (State, Vec<Command>);

/// What earlier requests taught this one, made when the request first takes or gives a lesson.
fn learning<'l>(learning: &'l mut Option<Learning>, memory: &Memory) -> &'l mut Learning {
    learning.get_or_insert_with(|| Learning::new(memory))
}

impl Machine {
    pub fn new(cfg: Rc<Config>, meta: RequestMeta) -> Machine {
        let calls = Calls::new(meta.seed, meta.now_ms, cfg.llm.max_request_time_ms);
        let carried = !cfg.identity_headers.is_empty() || !meta.client_headers.0.is_empty();
        let identity = (carried || !meta.memory.tokens.is_empty()).then(|| {
            let mut identity = Identity::new(meta.client_headers.clone());
            for (api, token) in &meta.memory.tokens {
                identity.seed(*api, token.clone());
            }
            identity
        });
        let template_opens = cfg.template_opens;
        // Kept MCP sessions are told back when they change (`handle` makes it for the rest).
        let learning = (!meta.memory.mcp.is_empty()).then(|| Learning::new(&meta.memory));
        let mcp_sessions = meta.memory.mcp.clone();
        let record = Record::new(&cfg, &meta);
        Machine {
            response: Response::new(&cfg, &meta),
            cfg,
            meta,
            calls,
            record,
            mcp_sessions,
            identity,
            learning,
            template_opens,
            budget_spent: false,
            usage_warned: false,
            state: State::AwaitRequest,
        }
    }

    pub fn cfg(&self) -> &Config {
        &self.cfg
    }

    /// Feeds one event; the commands are for the host to run now (`Agent::handle`).
    /// `now_ms` is the one time of the event: no clock is kept between events.
    pub fn handle(&mut self, event: Event<'_>, now_ms: u64) -> Vec<Command> {
        let keep_alive = if let Event::Wake = event { self.response.keep_alive(now_ms) } else { None };
        let state = std::mem::replace(&mut self.state, State::Done);
        let was_done = matches!(state, State::Done);
        let (state, mut commands) = self.step(state, event, now_ms);
        if let Some(send) = keep_alive.filter(|_| !matches!(state, State::Done)) {
            commands.insert(0, send);
        }
        if matches!(state, State::Done) {
            // Ended with this event: its time is the report's end.
            self.record.note(Seen::Done { ended_at: (!was_done).then_some(now_ms) });
        }
        self.state = state;
        if let Some(at) = self.wake_at() {
            commands.push(Command::WakeAt(at));
        }
        // Without `learning` nothing was taught yet: a token only where there is an identity,
        // sessions only once an MCP call opened one.
        if self.learning.is_some() || self.identity.is_some() || !self.mcp_sessions.is_empty() {
            let lessons =
                learning(&mut self.learning, &self.meta.memory).tell(&self.mcp_sessions, self.identity.as_mut());
            commands.splice(0..0, lessons);
        }
        commands
    }

    /// The earliest time a waiting retry is due, if the request is still running.
    fn wake_at(&self) -> Option<u64> {
        let due = match &self.state {
            State::AwaitLlm(r, _) | State::AwaitFormat(r, ..) => r.due,
            State::AwaitTools(_, b) | State::AwaitApproved(_, b) => b.next_due(),
            State::Done => return None,
            _ => None,
        };
        let keep_alive = self.response.next_keep_alive();
        due.into_iter().chain(keep_alive).min()
    }

    fn step(&mut self, state: State, event: Event<'_>, now_ms: u64) -> Step {
        match (state, event) {
            (State::AwaitRequest, Event::ClientRequest { body }) => self.start(body, now_ms),
            (State::AwaitFirstLlm(c), Event::UpstreamReply { status, body, headers_sent }) => {
                self.response.responding = headers_sent;
                self.on_llm(c, status, body, None, now_ms)
            }
            (State::AwaitLlm(r, c), Event::CallHead { id, status, headers }) if r.call.id == id => {
                self.response.head_of(id, status, llm::is_event_stream(headers));
                (State::AwaitLlm(r, c), Vec::new())
            }
            (State::AwaitLlm(r, c), Event::CallData { id, data }) if r.call.id == id => {
                let command = self.response.data(id, data, &c.model, now_ms);
                (State::AwaitLlm(r, c), command.into_iter().collect())
            }
            (state, Event::CallHead { .. } | Event::CallData { .. }) => (state, Vec::new()),
            (State::AwaitLlm(r, c), Event::CallReply { id, status, headers, body }) if r.call.id == id => {
                self.on_llm_reply(r, c, (status, headers, body), now_ms)
            }
            (State::AwaitFormat(r, c, f, reason), Event::CallReply { id, status, headers, body })
                if r.call.id == id =>
            {
                self.on_format(r, (c, f, reason), (status, headers, body), now_ms)
            }
            (state @ (State::AwaitLlm(..) | State::AwaitFormat(..)), Event::CallFailed { id, failure })
                if llm_call_of(&state) == Some(id) =>
            {
                self.on_llm_failed(state, id, failure, now_ms)
            }
            (state @ (State::AwaitLlm(..) | State::AwaitFormat(..)), Event::Wake) => self.resend_llm(state, now_ms),
            (State::AwaitTools(c, mut b), event) if b.takes(&event) => {
                self.tools().on_event(&mut b, event, now_ms);
                self.on_tool_done(c, b, now_ms)
            }
            (State::AwaitApproved(a, mut b), event) if b.takes(&event) => {
                self.tools().on_event(&mut b, event, now_ms);
                self.on_approved_done(a, b, now_ms)
            }
            (state, event) => {
                log::warn!("#{} ignored an event the agent does not wait for: {}", self.meta.id, event.describe());
                (state, Vec::new())
            }
        }
    }

    fn start(&mut self, body: &[u8], now_ms: u64) -> Step {
        self.record.note(Seen::Started { agent: &self.cfg.tracing.agent_name });
        let (mut req, front) = match answer::read_request(self.meta.api, body) {
            Ok(parsed) => parsed,
            Err(e) => return self.fail(e),
        };
        self.response.asked(&req, &front);
        let model = self.cfg.llm.model.as_deref().or(req.model.as_deref()).unwrap_or_default();
        if !self.meta.memory.models.is_empty() {
            self.template_opens |=
                learning(&mut self.learning, &self.meta.memory).asks(model, &self.meta.memory).template_opens;
        }
        // JSON mode's code only where the request or the configuration asks for it.
        let json_asked = self.cfg.json_resp.is_some() || req.raw.get("response_format").is_some();
        let json = if json_asked { Target::for_request(&self.cfg, &req) } else { Ok(None) };
        let json = match json {
            Ok(t) => t,
            Err(e) => return self.fail(e),
        };
        if self.meta.live {
            self.response.go_live(self.cfg.mode, json.is_none(), self.template_opens);
        }
        // Approvals are looked for only where a tool or a policy can ask for one.
        let approvals = !self.cfg.confirm.is_empty() || self.cfg.call_policy.is_some();
        let approved = if approvals { approval::scan(&self.cfg, &mut req, &self.meta) } else { Vec::new() };
        if approved.is_empty() {
            // Live streaming needs every turn to be a streamed callout.
            let first_by_callout = self.cfg.loop_phase == LoopPhase::Request || self.response.is_live();
            return self.begin(req, json, first_by_callout, now_ms);
        }
        self.run_approved(req, json, &approved, now_ms)
    }

    /// The conversation and its first LLM turn: forwarded through the route, or by callout.
    fn begin(&mut self, req: ChatRequest, json: Option<Target>, first_by_callout: bool, now_ms: u64) -> Step {
        let (mut c, mut body) = match llm::start(&self.cfg, req, &self.meta) {
            Ok(started) => started,
            Err(e) => return self.fail(e),
        };
        // What the server refused before is not sent again.
        let mut stepped = false;
        for p in self.learning.as_ref().map_or(&[][..], Learning::refused) {
            stepped |= c.step_down(p);
        }
        if stepped {
            body = c.body(&self.cfg, None);
        }
        c.json = json;
        // Every turn is a callout, the first one too: it can be retried, and its failure still has its
        // own status.
        let body = match (first_by_callout, self.response.is_live()) {
            (false, _) => body,
            (true, true) => {
                c.stream_turns();
                c.body(&self.cfg, self.cfg.llm.model.as_deref())
            }
            (true, false) => c.first_callout_body(&self.cfg, body),
        };
        let body = match llm::forwardable(&self.cfg, body) {
            Ok(body) => body,
            Err(e) => return self.fail(e),
        };
        if first_by_callout {
            return self.ask(c, body, now_ms);
        }
        c.sent = body.len();
        self.record.note(Seen::TurnSent { model: c.client_model(), call: None });
        (State::AwaitFirstLlm(c), vec![Command::Forward { body }])
    }

    /// An agent turn's LLM callout: streamed when the answer goes to the client live.
    fn ask(&mut self, mut c: Convo, body: Vec<u8>, now_ms: u64) -> Step {
        c.sent = body.len();
        let mut r = llm::call(&self.cfg, &mut self.calls, body, now_ms);
        r.call.headers.extend_from_slice(&self.meta.trace);
        self.record.note(Seen::TurnSent { model: c.requested_model(&self.cfg), call: Some(r.call.id) });
        if self.response.is_live() {
            r.call.stream = true;
            self.response.start_turn(r.call.id);
        }
        let call = r.call.clone();
        (State::AwaitLlm(r, c), vec![Command::Dispatch(call)])
    }

    /// A streamed turn's reply is read from what came as data; a retryable failure goes again.
    fn on_llm_reply(&mut self, mut r: Retry, c: Convo, reply: (u16, &[(String, String)], &[u8]), now_ms: u64) -> Step {
        let ((status, headers, body), id) = (reply, r.call.id);
        let ms = self.llm_answered(id, status, body, now_ms);
        let (relayed, streamed) = self.response.end_turn(id);
        if self.response.template_opens() && !self.cfg.template_opens {
            learning(&mut self.learning, &self.meta.memory).template_opens(c.requested_model(&self.cfg));
        }
        let mut c = c;
        if self.stepped_down(&mut c, status, body, relayed) {
            return self.ask_again(c, now_ms);
        }
        let wait = calls::status_wait(status, headers).filter(|_| !relayed);
        if self.retry_llm(&mut r, wait, now_ms) {
            return (State::AwaitLlm(r, c), Vec::new());
        }
        match streamed {
            Some(Ok(completion)) if (200..300).contains(&status) => self.on_llm(c, status, &completion, ms, now_ms),
            Some(Err(why)) if (200..300).contains(&status) => {
                self.fail(AgentError::new(502, ErrorCode::LlmBadReply, why))
            }
            _ => self.on_llm(c, status, body, ms, now_ms),
        }
    }

    /// A 400 that refuses a parameter the turn carried (`stop`, `max_tokens`, …): left out of this
    /// conversation (the turn then goes again) and of later requests. False: not such a refusal.
    fn stepped_down(&mut self, c: &mut Convo, status: u16, body: &[u8], relayed: bool) -> bool {
        let Some(param) = llm::refused_param(status, body).filter(|_| !relayed) else {
            return false;
        };
        if !c.step_down(param) {
            return false;
        }
        log::info!("#{} the LLM refused '{param}': the turn goes again without it", self.meta.id);
        self.record.note(Seen::SteppedDown(param));
        learning(&mut self.learning, &self.meta.memory).refusal(c.requested_model(&self.cfg), param);
        true
    }

    /// The turn again by callout, after a parameter was stepped down.
    fn ask_again(&mut self, c: Convo, now_ms: u64) -> Step {
        let body = c.body(&self.cfg, self.cfg.llm.model.as_deref());
        self.ask(c, body, now_ms)
    }

    /// `ms`: how long the turn's callout took (none for the route's first turn).
    fn on_llm(&mut self, mut c: Convo, status: u16, body: &[u8], ms: Option<u64>, now_ms: u64) -> Step {
        if ms.is_none() && self.stepped_down(&mut c, status, body, false) {
            return self.ask_again(c, now_ms);
        }
        c.replies += 1;
        self.record.note(Seen::Replied(status));
        if c.replies == 1 && !(200..300).contains(&status) {
            // The provider's own answer to the client's request: its status and error, as sent.
            self.record.note(Seen::Failed(status, ErrorCode::UpstreamError));
            log::warn!("#{} the LLM answered the first turn HTTP {status}: {}", self.meta.id, calls::excerpt(body));
            return (State::Done, vec![Command::Reply(self.response.upstream_error(status, body))]);
        }
        if let Some(e) = llm::status_error(status, body) {
            return self.fail(e);
        }
        let before = c.usage;
        let next = llm::read(&mut c, &self.cfg, body);
        self.llm_read(&c, before, ms);
        if c.rules.is_some() {
            self.record.note(Seen::Decided(rules::decided(&mut c)));
        }
        let next = match (next, self.cfg.llm.max_total_tokens) {
            (Ok(Next::Tools(_) | Next::ClientTools(_)), Some(budget)) if c.usage.total_tokens >= budget => {
                log::info!("#{} the token budget ({budget}) is spent: the loop ends", self.meta.id);
                self.budget_spent = true;
                Ok(c.budget_answer(&self.cfg, budget))
            }
            (next, _) => next,
        };
        if let Ok(next) = &next {
            self.record.note(Seen::TurnEnded(Some(next.finish_reason())));
        }
        match next {
            Ok(Next::Answer { content, finish_reason }) => match c.json.take() {
                Some(target) => {
                    let mut f = Box::new(Format::start(target, &c.question, &content));
                    f.carry(&c.base);
                    let body = f.body(&self.cfg, c.requested_model(&self.cfg));
                    self.format_call(c, f, finish_reason, body, now_ms)
                }
                None => self.finish(&c, &content, finish_reason, None),
            },
            Ok(Next::ClientTools(message)) => {
                let content = message.get("content").and_then(Value::as_str).unwrap_or("").to_string();
                self.finish(&c, &content, FinishReason::ToolCalls, message.get("tool_calls"))
            }
            Ok(Next::Tools(work)) if work.iter().any(|w| matches!(w, Work::Confirm { .. })) => {
                self.ask_approval(&c, &work)
            }
            Ok(Next::Tools(work)) => {
                self.tools().count(&work);
                if let Some(e) = self.calls.deadline_error(now_ms) {
                    return self.fail(e);
                }
                let batch = Box::new(Batch::new(work, self.cfg.llm.max_parallel_tool_calls));
                self.record.note(Seen::Calls(&c.call_ids));
                let open = self.response.open_for_tools(&c.model, now_ms).map(Command::Open);
                let (state, commands) = self.on_tool_done(c, batch, now_ms);
                (state, open.into_iter().chain(commands).collect())
            }
            Err(e) => self.fail(e),
        }
    }

    /// Dispatches what the batch may start now; once every call of the turn is answered, feeds the
    /// observations back and asks the LLM again, by callout.
    fn on_tool_done(&mut self, mut c: Convo, mut b: Box<Batch>, now_ms: u64) -> Step {
        let commands = self.tools().dispatch(&mut b, now_ms);
        if !b.is_complete() {
            return (State::AwaitTools(c, b), commands);
        }
        if let Some(last) = b.last_real() {
            c.last_observation = last.to_string();
        }
        if let Some(e) = self.calls.deadline_error(now_ms) {
            return self.fail(e);
        }
        let body = llm::observe(&mut c, &self.cfg, b.into_observations());
        self.ask(c, body, now_ms)
    }

    /// Schedules the LLM call `r` to be sent again, if `wait` says it may be retried and a retry is
    /// left that ends before the deadline.
    fn retry_llm(&mut self, r: &mut Retry, wait: Option<calls::Wait>, now_ms: u64) -> bool {
        let retried = llm::retry(&self.cfg, &mut self.calls, r, wait, now_ms, &self.meta.id);
        if retried {
            self.record.note(Seen::Retried);
        }
        retried
    }

    /// Times an answered LLM callout; a failing one gets a warning with an excerpt of its body.
    fn llm_answered(&mut self, id: CallId, status: u16, body: &[u8], now_ms: u64) -> Option<u64> {
        let ms = self.calls.answered(id, now_ms);
        if let Some(ms) = ms {
            self.record.note(Seen::Timed(ms));
        }
        if !(200..300).contains(&status) {
            log::warn!("#{} LLM call {} answered HTTP {status}: {}", self.meta.id, id.0, calls::excerpt(body));
        }
        ms
    }

    /// Records an LLM reply just read: the tokens so far, and its step.
    fn llm_read(&mut self, c: &Convo, before: Usage, ms: Option<u64>) {
        if c.usage_estimated && !std::mem::replace(&mut self.usage_warned, true) {
            let id = &self.meta.id;
            log::warn!("#{id} an LLM reply has no readable usage: its tokens are estimated from the bytes (ceil(bytes / 4) each way)");
        }
        let reasoning = c.reasoning.as_deref();
        let unread = c.usage_unread;
        self.record.note(Seen::Read { total: c.usage, before, unread, model: &c.model, reasoning, ms });
    }

    /// The tool phase's view of the agent, for one event.
    fn tools(&mut self) -> ToolPhase<'_> {
        ToolPhase {
            cfg: &self.cfg,
            request: &self.meta.id,
            trace: &self.meta.trace,
            calls: &mut self.calls,
            sessions: &mut self.mcp_sessions,
            identity: &mut self.identity,
            record: &mut self.record,
        }
    }

    fn finish(&mut self, c: &Convo, content: &str, reason: FinishReason, tool_calls: Option<&Value>) -> Step {
        match self.response.answer(c, content, reason, tool_calls, self.record.steps.as_ref().map(Steps::value)) {
            Ok(reply) => {
                self.record.note(Seen::Answered { length: reason == FinishReason::Length, budget: self.budget_spent });
                (State::Done, vec![Command::Reply(reply)])
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: AgentError) -> Step {
        // The message can quote upstream bodies: debug only (the request's info line has the code).
        log::debug!("#{} request failed ({}): {}", self.meta.id, e.status, truncate(&e.message, 300));
        self.record.note(Seen::Failed(e.status, e.code));
        (State::Done, vec![Command::Reply(self.response.error(&e))])
    }
}
