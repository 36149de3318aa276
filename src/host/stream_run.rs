//! One agent request as both hosts run it, and the stream protocol, written once for both shims:
//! admission, the response head's triage, the callout table and the report at the end; then the host
//! facts a shim hands over (the request's body, the upstream's body, a callout's reply or failure by
//! the host's token, a wake-up), each turned into the agent's event, with the agent's commands run
//! through `Host` (`port.rs`) and refused dispatches fed back as failed calls. A shim never names an
//! agent event, and `Host` has no way back to the layer. The shims keep only what their ABI makes
//! different (phases, body buffers, pause and resume).

use super::admit::{self, Arrival};
use super::memory::Instance;
use super::metrics::{MetricSink, Metrics};
use super::port::{self, answer_head, set_header, Attr, CallTable, Headers, Host, Lost, Port};
use crate::agent::spans::SpanNote;
use crate::agent::{Agent, Api, Command, Event, Lesson, Reply};
use crate::config::{Config, LoopPhase, SummaryForms};
use std::rc::Rc;

/// What admission decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Not the agent's request: it goes on untouched.
    Pass,
    /// Answered already (a local reply).
    Answered,
    /// The agent runs: the request's body is read next.
    Run,
}

/// What the response head of the forwarded first turn means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head<A> {
    /// Not the agent's to handle (the agent let go of the request): passed to the client as is.
    Pass,
    /// Headers only, no body will come: the agent read the empty reply; what the callback returns.
    Read(A),
    /// The body is the first turn: hold it until the agent answers (`on_upstream_body`).
    Hold,
}

/// The upstream's response head, held by the layer while the agent runs.
#[derive(Debug, Clone, Copy, Default)]
struct Upstream {
    pub status: u16,
    /// The host sent the head on already (Proxy-Wasm): a late error can only go in the body.
    pub headers_sent: bool,
}

pub struct StreamRun {
    instance: Option<Rc<Instance>>,
    /// The configuration that applies to this request (the global one, or a rule's), and its place
    /// in the plugin (what the instance learns is kept by it).
    config: Option<Rc<Config>>,
    config_index: usize,
    agent: Option<Agent>,
    /// The request's id, as the agent and its logs know it.
    rid: String,
    calls: CallTable,
    /// The upstream's response head, once the agent holds the response.
    upstream: Option<Upstream>,
    /// The filter started the client's response (live streaming): the rest goes as data.
    opened: bool,
    /// When the agent wants `Event::Wake`.
    wake: Option<u64>,
    /// The request's metrics and log line went out.
    reported: bool,
    /// The request's summary is in Envoy's filter state (and metadata).
    summarized: bool,
}

impl StreamRun {
    pub fn new(instance: Option<Rc<Instance>>) -> Self {
        StreamRun {
            instance,
            config: None,
            config_index: 0,
            agent: None,
            rid: String::new(),
            calls: CallTable::default(),
            upstream: None,
            opened: false,
            wake: None,
            reported: false,
            summarized: false,
        }
    }

    pub fn rid(&self) -> &str {
        &self.rid
    }

    /// The agent runs and has not answered yet.
    pub fn running(&self) -> bool {
        self.agent.as_ref().is_some_and(|a| !a.is_done())
    }

    pub fn is_done(&self) -> bool {
        self.agent.as_ref().is_some_and(Agent::is_done)
    }

    /// An agent runs for this request (answered or not).
    pub fn taken(&self) -> bool {
        self.agent.is_some()
    }

    /// The agent still waits for the client's request body.
    pub fn reading_request(&self) -> bool {
        self.running() && self.upstream.is_none() && !self.opened
    }

    /// The upstream's response is held for the agent (its body is the agent's to read or replace).
    pub fn response_held(&self) -> bool {
        self.upstream.is_some()
    }

    /// The agent waits for the held upstream response's body.
    pub fn awaits_upstream_body(&self) -> bool {
        self.response_held() && self.running()
    }

    /// The filter started the client's response itself (live streaming).
    pub fn opened(&self) -> bool {
        self.opened
    }

    /// When the agent wants `Event::Wake`, while it runs.
    pub fn wake_at(&self) -> Option<u64> {
        self.wake.filter(|_| self.running())
    }

    /// The request headers came: is it the agent's, and with which configuration. A request the agent
    /// takes has the provider's key put in place of the client's credentials, and no length or
    /// encoding that the rewritten body would contradict.
    pub fn start(&mut self, port: &impl Port, end_of_stream: bool, arrival: impl FnOnce() -> Arrival) -> Start {
        let Some(instance) = self.instance.clone() else {
            return Start::Pass;
        };
        let plugin = instance.plugin();
        let Some((index, cfg)) = admit::select(port, &plugin).map(|(i, c)| (i, Rc::clone(c))) else {
            // No rule for this route and no global configuration: not the filter's request.
            return Start::Pass;
        };
        self.config = Some(Rc::clone(&cfg));
        let api = admit::candidate(port, end_of_stream)
            .and_then(|path| admit::api_of(&path, &cfg).ok_or(admit::NotTaken::Path));
        let api = match api {
            Ok(api) => api,
            Err(why) if admit::pass_on(port, &cfg, why) => return Start::Answered,
            Err(_) => return Start::Pass,
        };
        if cfg.tools.is_empty() {
            admit::not_ready(port);
            return Start::Answered;
        }
        self.config_index = index;
        let mut meta = admit::meta(port, &cfg, arrival(), api);
        meta.memory = instance.memory().borrow_mut().recall(self.config_index, &cfg, &meta.client_headers, meta.now_ms);
        self.rid = meta.id.clone();
        admit::for_the_llm(port, &self.rid, &cfg);
        if api != Api::ChatCompletions {
            // The model speaks chat completions: a first turn forwarded through the route goes to
            // `llm.path`. Set now, at request-header time, while the headers can still change.
            set_header(port, &self.rid, Headers::Request, ":path", Some(&cfg.llm.path));
        }
        let mut agent = Agent::new(Rc::clone(&cfg), meta);
        if port.traced() {
            agent.trace();
        }
        self.agent = Some(agent);
        set_header(port, &self.rid, Headers::Request, "content-length", None);
        set_header(port, &self.rid, Headers::Request, "accept-encoding", None);
        Start::Run
    }

    /// The response head of the route's upstream, while the agent runs. `holds_headers`: the host
    /// can still set the status once the body is read (the dynamic module), so the agent reads a
    /// provider's error too (it may step a refused parameter down and ask again); a host that sends
    /// the head on now gets the answer's head here.
    pub fn response_head<H: Host>(
        &mut self,
        host: &mut H,
        end_of_stream: bool,
        holds_headers: bool,
    ) -> Head<H::Action> {
        let port = host.port();
        let status = port.header(Headers::Response, ":status").unwrap_or_default();
        if self.agent.as_ref().is_some_and(Agent::awaits_request) {
            log::warn!(
                "#{} answered {status} before the request was read (Envoy's own reply?); passed to the client",
                self.rid
            );
            self.agent = None;
            return Head::Pass;
        }
        if self.config.as_ref().is_some_and(|c| c.loop_phase == LoopPhase::Request) {
            // The route's upstream got only the headers; what it says is not a turn of the loop.
            log::warn!("#{} the route's upstream answered {status} while the loop ran; passed to the client", self.rid);
            self.agent = None;
            return Head::Pass;
        }
        let code: u16 = status.parse().unwrap_or(0);
        let ok = (200..300).contains(&code);
        let content_type = port.header(Headers::Response, "content-type").unwrap_or_default();
        let messages = self.agent.as_ref().is_some_and(|a| a.api() == Api::Messages);
        if !ok && admit::mentions_json(&content_type) && !holds_headers && !messages {
            // The provider's own JSON error: the client sees it as it is (a Messages client gets it
            // in Anthropic's shape: the agent reads it).
            log::info!("#{} upstream LLM answered {status}; passed through", self.rid);
            self.agent = None;
            return Head::Pass;
        }
        if end_of_stream {
            // Envoy calls no body callback: the agent reads the empty reply now, while its error can
            // still go out as a local reply with its own status.
            return Head::Read(self.feed(host, Event::UpstreamReply { status: code, body: &[], headers_sent: false }));
        }
        self.upstream = Some(Upstream { status: code, headers_sent: !holds_headers });
        if !holds_headers {
            // The client gets the agent's answer, not the provider's 201/206.
            let stream = ok && self.agent.as_ref().is_some_and(Agent::wants_stream);
            let content_type = if stream { "text/event-stream" } else { "application/json" };
            answer_head(port, &self.rid, (ok && code != 200).then_some(200), content_type);
        }
        Head::Hold
    }

    /// One event for the agent; `None` when no agent runs.
    fn handle(&mut self, event: Event<'_>, now_ms: u64) -> Option<Vec<Command>> {
        Some(self.agent.as_mut()?.handle(event, now_ms))
    }

    /// What the agent learnt (`Command::Learn`), kept by the instance at once, so that concurrent
    /// requests share it.
    fn learn(&mut self, lesson: Lesson, now_ms: u64) {
        if let (Some(cfg), Some(instance)) = (&self.config, &self.instance) {
            instance.memory().borrow_mut().learn(self.config_index, cfg, lesson, now_ms);
        }
    }

    /// What the host should do with its spans since the last event (`agent::spans`).
    pub fn take_spans(&mut self) -> Vec<SpanNote> {
        self.agent.as_mut().map(Agent::poll_spans).unwrap_or_default()
    }

    fn set_wake(&mut self, wake: Option<u64>) {
        self.wake = wake;
    }

    /// The request's summary for Envoy's access log, once the agent has answered (a host that can
    /// no longer touch the stream's info at its end sets it here, before the access log is written).
    pub fn summarize(&mut self, port: &impl Port) {
        if self.summarized || !self.is_done() {
            return;
        }
        if let Some(agent) = self.agent.as_ref() {
            self.summarized = true;
            port.set_summary(&agent.report().fields(), self.summary_forms());
        }
    }

    /// The forms of the summary the configuration asks for (`summary`).
    fn summary_forms(&self) -> SummaryForms {
        self.config.as_ref().map(|c| c.summary).unwrap_or_default()
    }

    /// The request's metrics and its one info line, once. `host_status`: what the client got, where
    /// the host can tell (Envoy's own reply may replace the agent's answer).
    pub fn report<S: MetricSink>(
        &mut self,
        port: &impl Port,
        metrics: &Metrics<S::Id>,
        sink: &S,
        host_status: Option<u16>,
        now_ms: u64,
    ) {
        if self.reported {
            return;
        }
        let forms = self.summary_forms();
        let Some(agent) = self.agent.as_mut() else {
            return;
        };
        self.reported = true;
        agent.handle(Event::Closed { host_status }, now_ms);
        let r = agent.report();
        if !self.summarized {
            self.summarized = true;
            port.set_summary(&r.fields(), forms);
        }
        metrics.emit(sink, r);
        if log::log_enabled!(log::Level::Info) {
            let route = port.attribute(Attr::RouteName).unwrap_or_default();
            let loop_name = match self.config.as_ref().map(|c| c.loop_phase) {
                Some(LoopPhase::Request) => "request",
                _ => "response",
            };
            log::info!("{}", r.line(agent.id(), &route, loop_name));
        }
    }
}

/// The host facts of a stream, as the layer reads them.
impl StreamRun {
    /// The client's request body, whole.
    pub fn on_request_body<H: Host>(&mut self, host: &mut H, body: &[u8]) -> H::Action {
        self.feed(host, Event::ClientRequest { body })
    }

    /// The held upstream response's body, whole (after `response_head` said `Hold`).
    pub fn on_upstream_body<H: Host>(&mut self, host: &mut H, body: &[u8]) -> H::Action {
        let Upstream { status, headers_sent } = self.upstream.unwrap_or_default();
        self.feed(host, Event::UpstreamReply { status, body, headers_sent })
    }

    /// A callout's whole reply (`status`: `None` when it came without one).
    pub fn on_callout_reply<H: Host>(
        &mut self,
        host: &mut H,
        token: u64,
        status: Option<u16>,
        headers: &[(String, String)],
        body: &[u8],
    ) -> H::Action {
        let Some(id) = self.take_call(token) else {
            return host.holding();
        };
        match (port::classify(status, body), status) {
            (None, Some(status)) => self.feed(host, Event::CallReply { id, status, headers, body }),
            (failure, _) => {
                let failure = failure.unwrap_or_else(|| Lost::Reset.failure());
                self.feed(host, Event::CallFailed { id, failure: &failure })
            }
        }
    }

    /// A callout that ended without a reply.
    pub fn on_callout_failed<H: Host>(&mut self, host: &mut H, token: u64, why: Lost) -> H::Action {
        let Some(id) = self.take_call(token) else {
            return host.holding();
        };
        self.feed(host, Event::CallFailed { id, failure: &why.failure() })
    }

    /// A streamed callout's head, while its body is still to come (its end is `on_callout_reply`).
    pub fn on_callout_head<H: Host>(
        &mut self,
        host: &mut H,
        token: u64,
        status: u16,
        headers: &[(String, String)],
    ) -> H::Action {
        match self.calls.get(token) {
            Some(id) => self.feed(host, Event::CallHead { id, status, headers }),
            None => host.holding(),
        }
    }

    /// More of a streamed callout's body.
    pub fn on_callout_data<H: Host>(&mut self, host: &mut H, token: u64, data: &[u8]) -> H::Action {
        match self.calls.get(token) {
            Some(id) if !data.is_empty() => self.feed(host, Event::CallData { id, data }),
            _ => host.holding(),
        }
    }

    /// The wake-up the agent asked for (`wake_at`) is due.
    pub fn on_wake<H: Host>(&mut self, host: &mut H) -> H::Action {
        self.feed(host, Event::Wake)
    }

    /// Feeds one event to the agent and runs what it asks; the result is what the callback returns.
    fn feed<H: Host>(&mut self, host: &mut H, event: Event<'_>) -> H::Action {
        let Some(commands) = self.handle(event, host.now_ms()) else {
            return host.passing();
        };
        host.spans(self.take_spans());
        let (action, wake) = self.run(host, commands);
        self.set_wake(wake);
        action
    }

    /// Runs `commands`, and what refused dispatches lead to. Returns the callback's action and the
    /// time of the wake-up the agent asked for last (none: it waits for nothing).
    fn run<H: Host>(&mut self, host: &mut H, mut commands: Vec<Command>) -> (H::Action, Option<u64>) {
        let mut action = host.holding();
        let mut wake = None;
        while !commands.is_empty() {
            let mut next = Vec::new();
            for c in commands {
                match c {
                    Command::Forward { body } => action = host.forward(self.rid(), &body),
                    Command::Dispatch(call) => match host.dispatch(&call) {
                        Ok(token) => {
                            port::log_sent(self.rid(), &call);
                            self.calls.insert(token, call.id);
                        }
                        Err(kind) => {
                            log::warn!("#{} dispatch to cluster '{}' refused ({kind:?})", self.rid(), call.cluster);
                            let failure = port::refused(kind, &call.cluster);
                            let failed = Event::CallFailed { id: call.id, failure: &failure };
                            next.extend(self.handle(failed, host.now_ms()).unwrap_or_default());
                            host.spans(self.take_spans());
                        }
                    },
                    Command::Reply(reply) => action = self.answer(host, reply),
                    Command::Open(reply) => action = self.open(host, &reply),
                    Command::Send(data) if self.opened => host.send(&data, false),
                    Command::Send(data) => {
                        log::error!("#{} no response was started; {} bytes not sent", self.rid(), data.len());
                    }
                    Command::WakeAt(at) => wake = Some(at),
                    Command::Learn(lesson) => self.learn(lesson, host.now_ms()),
                }
            }
            commands = next;
        }
        (action, wake)
    }

    /// The agent's answer: the end of the response it started (live), a local reply while no response
    /// has begun, else the held upstream response made the answer.
    fn answer<H: Host>(&mut self, host: &mut H, reply: Reply) -> H::Action {
        // Before the answer goes out: ending the response can end the stream inside the call.
        self.summarize(host.port());
        if self.opened {
            host.send(&reply.body, true);
            return host.holding();
        }
        let Some(Upstream { headers_sent, .. }) = self.upstream else {
            host.port().local_reply(reply.status, &[("content-type", reply.content_type)], &reply.body);
            return host.holding();
        };
        if reply.status >= 400 {
            let how = if headers_sent { "in the body (status already sent)" } else { "with its status" };
            log::info!("#{} late error {} sent {how}", self.rid(), reply.status);
        }
        if !headers_sent {
            answer_head(host.port(), self.rid(), Some(reply.status), reply.content_type);
        }
        host.answer_body(self.rid(), &reply.body)
    }

    /// Live streaming: the response starts now, from the filter.
    fn open<H: Host>(&mut self, host: &mut H, reply: &Reply) -> H::Action {
        if self.upstream.is_some() || self.opened {
            log::error!("#{} the response cannot be started now; {} bytes not sent", self.rid(), reply.body.len());
            return host.holding();
        }
        match host.open(self.rid(), reply) {
            Some(action) => {
                self.opened = true;
                action
            }
            None => {
                log::error!(
                    "#{} this host cannot start a response early; {} bytes not sent",
                    self.rid(),
                    reply.body.len()
                );
                host.holding()
            }
        }
    }

    /// The call a reply belongs to, once; an unknown token is logged.
    fn take_call(&mut self, token: u64) -> Option<crate::agent::CallId> {
        let id = self.calls.take(token);
        if id.is_none() {
            log::warn!("#{} reply for unknown callout token {token}", self.rid());
        }
        id
    }
}
