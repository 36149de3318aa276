//! One agent request as both hosts run it: admission, the response head's triage, feeding events to
//! the agent, the callout table, and the report at the end. The host shims keep only what their ABI
//! makes different (phases, body buffers, pause and resume).

use super::admit::{self, Arrival};
use super::callouts::CallTable;
use super::memory::Instance;
use super::metrics::{MetricSink, Metrics};
use super::port::{answer_head, set_header, Attr, Headers, Host, Port};
use crate::agent::spans::SpanNote;
use crate::agent::{Agent, Api, Command, Event, Lesson};
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
pub(super) struct Upstream {
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
    pub(super) calls: CallTable,
    /// The upstream's response head, once the agent holds the response.
    pub(super) upstream: Option<Upstream>,
    /// The filter started the client's response (live streaming): the rest goes as data.
    pub(super) opened: bool,
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
    pub(super) fn handle(&mut self, event: Event<'_>, now_ms: u64) -> Option<Vec<Command>> {
        Some(self.agent.as_mut()?.handle(event, now_ms))
    }

    /// What the agent learnt (`Command::Learn`), kept by the instance at once, so that concurrent
    /// requests share it.
    pub(super) fn learn(&mut self, lesson: Lesson, now_ms: u64) {
        if let (Some(cfg), Some(instance)) = (&self.config, &self.instance) {
            instance.memory().borrow_mut().learn(self.config_index, cfg, lesson, now_ms);
        }
    }

    /// What the host should do with its spans since the last event (`agent::spans`).
    pub fn take_spans(&mut self) -> Vec<SpanNote> {
        self.agent.as_mut().map(Agent::poll_spans).unwrap_or_default()
    }

    pub(super) fn set_wake(&mut self, wake: Option<u64>) {
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
