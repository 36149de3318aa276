//! One HTTP stream, as `src/filter/http.rs` runs it under Proxy-Wasm, with what this host allows
//! beyond it: a header hook can return StopIteration and still receive the body. So the request's
//! headers are held until the body is read (in `loop: request` the route's upstream is never
//! contacted), and in `loop: response` the LLM reply's headers are held while the loop runs: the
//! answer's status and content type are set when it is known, so a late failure is a real 502/504.

use super::ffi::{self, Attribute, Body, Envoy, HeaderMap, Scheduler, StreamEvent};
use super::{Deferred, DmConfig};
use crate::agent::{Agent, Call, CallId, Command, Event, Failure, Reply, RequestMeta};
use crate::config::{Config, LoopPhase, Plugin, RequestKeys, CONSUMER_HEADER};
use crate::doc::truncate;
use crate::openai::answer;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Request,
    /// The upstream's response headers are held (not sent) until the agent answers.
    Held,
}

/// Which hook is running: it decides which body buffers hold the data (the chunk a body hook is
/// given is not in the buffered body yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hook {
    RequestBody,
    RequestTrailers,
    ResponseBody,
    /// Response trailers, callout replies, wake-ups: the whole body is the buffered one.
    Other,
}

impl Hook {
    fn is_body(self) -> bool {
        matches!(self, Hook::RequestBody | Hook::ResponseBody)
    }
}

/// What the running hook should do: let the data go on, or hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Continue,
    Stop,
}

static STREAMS: AtomicU32 = AtomicU32::new(0);

/// The most a streamed callout's reply may carry: far above any real LLM turn (an SSE turn is several
/// times its text), and above what this Envoy lets a plain callout buffer in the fault suite (28 MiB).
const STREAMED_REPLY_LIMIT: usize = 64 << 20;

/// A streamed callout in flight: the agent's call, and its head and body so far.
struct Streamed {
    id: CallId,
    status: Option<u16>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Bytes received, kept or not.
    received: usize,
    /// A 2xx SSE reply is read by the agent from its data as it comes: not kept twice.
    sse: bool,
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub struct Stream {
    envoy: Envoy,
    cfg: Arc<DmConfig>,
    plugin: Option<Rc<Plugin>>,
    /// The configuration that applies to this request (the global one, or a rule's).
    config: Option<Rc<Config>>,
    agent: Option<Agent>,
    phase: Phase,
    hook: Hook,
    /// Envoy's callout ids → the agent's call ids.
    calls: BTreeMap<u64, CallId>,
    /// Envoy's ids of streamed callouts → what they brought so far.
    streams: BTreeMap<u64, Streamed>,
    /// The client's response was started by the filter (live streaming): the rest goes as data.
    opened: bool,
    /// Envoy completed the stream: later callout events are dropped.
    closed: bool,
    rid: String,
    upstream_status: u16,
    /// When the agent wants `Event::Wake`, and the timer that will bring it.
    wake: Option<u64>,
    timer: Option<(u64, u64)>,
    timers: u64,
    scheduler: Option<Scheduler>,
    reported: bool,
}

impl Stream {
    pub fn new(envoy: Envoy, cfg: Arc<DmConfig>, plugin: Option<Rc<Plugin>>) -> Stream {
        Stream {
            envoy,
            cfg,
            plugin,
            config: None,
            agent: None,
            phase: Phase::Request,
            hook: Hook::Other,
            calls: BTreeMap::new(),
            streams: BTreeMap::new(),
            opened: false,
            closed: false,
            rid: String::new(),
            upstream_status: 0,
            wake: None,
            timer: None,
            timers: 0,
            scheduler: None,
            reported: false,
        }
    }

    fn running(&self) -> bool {
        self.agent.as_ref().is_some_and(|a| !a.is_done())
    }

    fn header(&self, map: HeaderMap, name: &str) -> Option<String> {
        self.envoy.header(map, name)
    }

    fn set_header(&self, map: HeaderMap, name: &str, value: Option<&str>) {
        if !self.envoy.set_header(map, name, value) {
            log::warn!("#{} setting header {name} failed", self.rid);
        }
    }

    /// A chat-completions POST with a body.
    fn is_chat_request(&self, end_of_stream: bool) -> bool {
        let method = self.header(HeaderMap::Request, ":method").unwrap_or_default();
        let path = self.header(HeaderMap::Request, ":path").unwrap_or_default();
        let path = path.split('?').next().unwrap_or("");
        let content_type = self.header(HeaderMap::Request, "content-type").unwrap_or_default().to_ascii_lowercase();
        let json = content_type.is_empty() || content_type.contains("json");
        method == "POST" && path.ends_with("/chat/completions") && json && !end_of_stream
    }

    // --- hooks ----------------------------------------------------------------------------------

    pub fn on_request_headers(&mut self, end_of_stream: bool) -> u32 {
        if !self.is_chat_request(end_of_stream) {
            return ffi::CONTINUE;
        }
        self.config = self.plugin.as_ref().and_then(|p| self.select(p)).cloned();
        let Some(cfg) = self.config.clone() else {
            // No rule for this route and no global configuration: not the agent's request.
            return ffi::CONTINUE;
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        let n = STREAMS.fetch_add(1, Ordering::Relaxed);
        let meta = RequestMeta {
            id: format!("{now_ms:x}{:04x}", n & 0xffff),
            now_ms,
            unix_s: now_ms / 1000,
            seed: u64::from(now.subsec_nanos()) ^ now_ms ^ (u64::from(n) << 32),
            steps: self
                .header(HeaderMap::Request, "x-api-agent-steps")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            context_headers: self.context_headers(&cfg),
            live: true,
        };
        self.rid = meta.id.clone();
        if let Some(key) = &cfg.llm.api_key {
            // The consumer's credentials are for the gateway, never for the provider.
            self.set_header(HeaderMap::Request, "authorization", Some(&format!("Bearer {key}")));
        }
        let mut agent = Agent::new(Rc::clone(&cfg), meta);
        crate::agent::sessions::seed(&cfg, &mut agent);
        self.agent = Some(agent);
        self.set_header(HeaderMap::Request, "content-length", None);
        self.set_header(HeaderMap::Request, "accept-encoding", None);
        // Held until the body is read: the upstream gets the rewritten request whole, or nothing.
        ffi::STOP
    }

    pub fn on_request_body(&mut self, end_of_stream: bool) -> u32 {
        if !self.running() || self.phase != Phase::Request {
            return ffi::CONTINUE;
        }
        if !end_of_stream {
            return ffi::STOP_AND_BUFFER;
        }
        self.hook = Hook::RequestBody;
        let act = self.on_request_end();
        self.hook = Hook::Other;
        body_status(act)
    }

    pub fn on_request_trailers(&mut self) -> u32 {
        if !self.running() || self.phase != Phase::Request {
            return ffi::CONTINUE;
        }
        self.hook = Hook::RequestTrailers;
        let act = self.on_request_end();
        self.hook = Hook::Other;
        match act {
            Act::Continue => ffi::CONTINUE,
            Act::Stop => ffi::STOP,
        }
    }

    pub fn on_response_headers(&mut self, end_of_stream: bool) -> u32 {
        if !self.running() || self.opened {
            return ffi::CONTINUE;
        }
        let status = self.header(HeaderMap::Response, ":status").unwrap_or_default();
        if self.agent.as_ref().is_some_and(Agent::awaits_request) {
            log::warn!(
                "#{} answered {status} before the request was read (Envoy's own reply?); passed to the client",
                self.rid
            );
            self.agent = None;
            return ffi::CONTINUE;
        }
        if self.config.as_ref().is_some_and(|c| c.loop_phase == LoopPhase::Request) {
            log::warn!("#{} the route's upstream answered {status} while the loop ran; passed to the client", self.rid);
            self.agent = None;
            return ffi::CONTINUE;
        }
        self.upstream_status = status.parse().unwrap_or(0);
        let ok = (200..300).contains(&self.upstream_status);
        let content_type = self.header(HeaderMap::Response, "content-type").unwrap_or_default().to_ascii_lowercase();
        if !ok && content_type.contains("json") {
            // The provider's own JSON error: the client sees it as it is.
            log::info!("#{} upstream LLM answered {status}; passed through", self.rid);
            self.agent = None;
            return ffi::CONTINUE;
        }
        if end_of_stream {
            // No body will come: the agent reads the empty reply now; its error is a local reply.
            let status = self.upstream_status;
            return match self.feed(Event::UpstreamReply { status, body: &[], headers_sent: false }) {
                Act::Continue => ffi::CONTINUE,
                Act::Stop => ffi::STOP,
            };
        }
        self.phase = Phase::Held;
        ffi::STOP
    }

    pub fn on_response_body(&mut self, end_of_stream: bool) -> u32 {
        if !(self.phase == Phase::Held && self.running()) || self.opened {
            return ffi::CONTINUE;
        }
        if !end_of_stream {
            return ffi::STOP_AND_BUFFER;
        }
        self.hook = Hook::ResponseBody;
        let act = self.on_response_end();
        self.hook = Hook::Other;
        body_status(act)
    }

    pub fn on_response_trailers(&mut self) -> u32 {
        if !(self.phase == Phase::Held && self.running()) {
            return ffi::CONTINUE;
        }
        match self.on_response_end() {
            Act::Continue => ffi::CONTINUE,
            Act::Stop => ffi::STOP,
        }
    }

    /// A callout reply or a wake-up (outside of any header or body hook).
    pub fn on_deferred(&mut self, d: Deferred) {
        if self.closed {
            // Envoy is done with the stream: nothing may be sent on it any more.
            return;
        }
        let act = match d {
            Deferred::Callout(reply) => self.on_callout(reply),
            Deferred::Stream(sid, event) => self.on_stream(sid, event),
            Deferred::Wake(n) => {
                if self.timer.map(|(id, _)| id) != Some(n) {
                    return;
                }
                self.timer = None;
                self.feed(Event::Wake)
            }
        };
        if act == Act::Continue && self.phase == Phase::Held {
            self.envoy.continue_encoding();
        }
    }

    /// Envoy is done with the stream: a request still running is reported as cancelled.
    pub fn on_closed(&mut self) {
        self.report();
        self.close_scheduler();
        self.closed = true;
        // A streamed callout still running (the client left mid-answer) is of no use now.
        for sid in std::mem::take(&mut self.streams).into_keys() {
            self.envoy.reset_stream(sid);
        }
    }

    pub fn on_destroy(&mut self) {
        self.report();
        self.close_scheduler();
    }

    // --- the agent ------------------------------------------------------------------------------

    fn whole_body(&self, received: Body, buffered: Body) -> Vec<u8> {
        let mut body = self.envoy.body(buffered);
        if self.hook.is_body() {
            body.extend(self.envoy.body(received));
        }
        body
    }

    fn on_request_end(&mut self) -> Act {
        let body = self.whole_body(Body::ReceivedRequest, Body::BufferedRequest);
        self.feed(Event::ClientRequest { body: &body })
    }

    fn on_response_end(&mut self) -> Act {
        let body = self.whole_body(Body::ReceivedResponse, Body::BufferedResponse);
        let status = self.upstream_status;
        // The headers are still ours: the agent answers with the status its answer means.
        self.feed(Event::UpstreamReply { status, body: &body, headers_sent: false })
    }

    fn on_callout(&mut self, reply: ffi::CalloutReply) -> Act {
        let Some(id) = self.calls.remove(&reply.id) else {
            log::warn!("#{} reply for unknown callout {}", self.rid, reply.id);
            return Act::Stop;
        };
        let (status, headers) = split_status(reply.headers);
        let failure = match reply.result {
            ffi::CALLOUT_SUCCESS => classify(status, &reply.body),
            ffi::CALLOUT_RESET => Some(Failure::Broken("no response (reset)".into())),
            _ => Some(Failure::Broken("the reply exceeded the buffer limit".into())),
        };
        self.end_call(id, failure, status, &headers, &reply.body)
    }

    /// A call is over: its failure, or its whole reply.
    fn end_call(
        &mut self,
        id: CallId,
        failure: Option<Failure>,
        status: Option<u16>,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Act {
        match (failure, status) {
            (Some(f), _) => self.feed(Event::CallFailed { id, failure: &f }),
            (None, Some(status)) => self.feed(Event::CallReply { id, status, headers, body }),
            (None, None) => Act::Stop,
        }
    }

    /// An event of a streamed callout: its head and bytes go to the agent as they come; its end as
    /// the whole reply (or a failure), as for a callout.
    fn on_stream(&mut self, sid: u64, event: StreamEvent) -> Act {
        let Some(id) = self.streams.get(&sid).map(|s| s.id) else {
            return Act::Stop;
        };
        match event {
            StreamEvent::Headers(headers, end) => {
                let (status, headers) = split_status(headers);
                let act = match status {
                    Some(status) => self.feed(Event::CallHead { id, status, headers: &headers }),
                    None => Act::Stop,
                };
                if let Some(s) = self.streams.get_mut(&sid) {
                    let ok = status.is_some_and(|s| (200..300).contains(&s));
                    s.sse = ok
                        && headers
                            .iter()
                            .any(|(k, v)| k == "content-type" && v.to_ascii_lowercase().starts_with(answer::SSE));
                    s.status = status;
                    s.headers = headers;
                }
                if end {
                    return self.end_stream(sid);
                }
                act
            }
            StreamEvent::Data(data, end) => {
                let over = self.streams.get_mut(&sid).is_some_and(|s| {
                    s.received += data.len();
                    if !s.sse {
                        s.body.extend_from_slice(&data);
                    }
                    s.received > STREAMED_REPLY_LIMIT
                });
                if over {
                    self.streams.remove(&sid);
                    self.envoy.reset_stream(sid);
                    let f = Failure::Broken("the reply exceeded the buffer limit".into());
                    return self.feed(Event::CallFailed { id, failure: &f });
                }
                let act = if data.is_empty() { Act::Stop } else { self.feed(Event::CallData { id, data: &data }) };
                if end {
                    return self.end_stream(sid);
                }
                act
            }
            StreamEvent::Complete => self.end_stream(sid),
            StreamEvent::Reset(reason) => {
                self.streams.remove(&sid);
                log::debug!("#{} streamed call {} reset (reason {reason})", self.rid, id.0);
                let f = Failure::Broken("no response (reset)".into());
                self.feed(Event::CallFailed { id, failure: &f })
            }
        }
    }

    /// A streamed callout ended: its whole reply, read as a callout's.
    fn end_stream(&mut self, sid: u64) -> Act {
        let Some(s) = self.streams.remove(&sid) else {
            return Act::Stop;
        };
        self.end_call(s.id, classify(s.status, &s.body), s.status, &s.headers, &s.body)
    }

    fn feed(&mut self, event: Event<'_>) -> Act {
        let Some(agent) = self.agent.as_mut() else {
            return Act::Continue;
        };
        let commands = agent.handle(event, now_ms());
        // Reported when the stream completes: Envoy may still fail to deliver the answer.
        self.run(commands)
    }

    /// Runs the agent's commands (`agent::host::run`, as the Proxy-Wasm shim does).
    fn run(&mut self, commands: Vec<Command>) -> Act {
        let (act, wake) = crate::agent::host::run(self, commands);
        self.wake = wake;
        act
    }

    /// Replaces a whole body: in a body hook, the chunk being handed over counts too.
    fn replace_body(&self, received: Body, buffered: Body, body: &[u8]) {
        self.envoy.drain(buffered);
        let target = if self.hook.is_body() {
            self.envoy.drain(received);
            received
        } else {
            buffered
        };
        if !self.envoy.append(target, body) {
            log::error!("#{} writing the body failed", self.rid);
        }
    }

    fn forward(&mut self, body: &[u8]) -> Act {
        if !matches!(self.hook, Hook::RequestBody | Hook::RequestTrailers) {
            log::error!("#{} the first LLM request came after the request was read; not sent", self.rid);
            return Act::Stop;
        }
        self.replace_body(Body::ReceivedRequest, Body::BufferedRequest, body);
        Act::Continue
    }

    fn dispatch(&mut self, call: &Call) -> Result<(), Failure> {
        let mut headers: Vec<(&str, &str)> =
            vec![(":method", call.method), (":path", &call.path), (":authority", &call.authority)];
        headers.extend(call.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let length;
        let started = if call.stream {
            let body = call.body.as_deref().unwrap_or_default();
            // Envoy sends a streamed request's body chunked unless told its length, and not every
            // LLM server reads chunked request bodies.
            length = body.len().to_string();
            headers.push(("content-length", &length));
            self.envoy.start_stream(&call.cluster, &headers, body, call.timeout_ms).map(|sid| {
                let s = Streamed {
                    id: call.id,
                    status: None,
                    headers: Vec::new(),
                    body: Vec::new(),
                    received: 0,
                    sse: false,
                };
                self.streams.insert(sid, s);
            })
        } else {
            self.envoy.callout(&call.cluster, &headers, call.body.as_deref(), call.timeout_ms).map(|id| {
                self.calls.insert(id, call.id);
            })
        };
        match started {
            Ok(()) => {
                log::debug!(
                    "#{} call {} → {} {} {}",
                    self.rid,
                    call.id.0,
                    call.cluster,
                    call.method,
                    truncate(&call.path, 120)
                );
                Ok(())
            }
            Err(code) => {
                log::warn!("#{} dispatch to cluster '{}' refused ({code})", self.rid, call.cluster);
                Err(dispatch_failure(code, &call.cluster))
            }
        }
    }

    /// Live streaming: the response starts now, from the filter (the request is never forwarded).
    fn open(&mut self, reply: Reply) -> Act {
        if self.phase != Phase::Request || self.opened {
            log::error!("#{} the response cannot be started now; {} bytes not sent", self.rid, reply.body.len());
            return Act::Stop;
        }
        let status = reply.status.to_string();
        let headers =
            [(":status", status.as_str()), ("content-type", reply.content_type), ("cache-control", "no-cache")];
        self.opened = true;
        self.envoy.send_headers(&headers, false);
        self.envoy.send_data(&reply.body, false);
        Act::Stop
    }

    fn send(&mut self, data: &[u8]) {
        if self.opened {
            self.envoy.send_data(data, false);
        }
    }

    /// The answer: a local reply while nothing was sent; else into the held response, or the end of
    /// the response the filter started.
    fn reply(&mut self, reply: Reply) -> Act {
        if self.opened {
            self.envoy.send_data(&reply.body, true);
            return Act::Stop;
        }
        match self.phase {
            Phase::Request => {
                let headers = [("content-type", reply.content_type)];
                self.envoy.send_response(reply.status, &headers, &reply.body, "api_agent");
                Act::Stop
            }
            Phase::Held => {
                if reply.status >= 400 {
                    log::info!("#{} late error {} sent with its status", self.rid, reply.status);
                }
                let status = reply.status.to_string();
                self.set_header(HeaderMap::Response, ":status", Some(&status));
                self.set_header(HeaderMap::Response, "content-type", Some(reply.content_type));
                self.set_header(HeaderMap::Response, "content-length", None);
                // The body written here is never compressed, whatever the provider did.
                self.set_header(HeaderMap::Response, "content-encoding", None);
                self.replace_body(Body::ReceivedResponse, Body::BufferedResponse, &reply.body);
                Act::Continue
            }
        }
    }

    /// After every hook: one timer for the agent's next wake-up, if it wants one.
    pub fn sync_wake(&mut self) {
        let want = self.wake.filter(|_| self.running());
        match (want, self.timer) {
            (None, _) => self.timer = None,
            (Some(at), Some((_, set))) if at == set => {}
            (Some(at), _) => self.start_timer(at),
        }
    }

    /// This host has no timers for HTTP filters: a thread sleeps, then Envoy's scheduler brings the
    /// wake-up back to the stream's worker thread. Retries are rare; a thread each is enough.
    fn start_timer(&mut self, at: u64) {
        self.timers += 1;
        let n = self.timers;
        let scheduler = self.scheduler.get_or_insert_with(|| self.envoy.scheduler()).clone();
        let wait = Duration::from_millis(at.saturating_sub(now_ms()));
        let spawned = std::thread::Builder::new().name("api-agent-timer".into()).spawn(move || {
            std::thread::sleep(wait);
            scheduler.commit(n);
        });
        match spawned {
            Ok(_) => self.timer = Some((n, at)),
            Err(e) => log::error!("#{} starting a retry timer failed: {e}", self.rid),
        }
    }

    fn close_scheduler(&mut self) {
        if let Some(s) = self.scheduler.take() {
            s.close();
        }
        self.timer = None;
    }

    /// The request's metrics and its one info line, once.
    fn report(&mut self) {
        if self.reported || self.agent.is_none() {
            return;
        }
        self.reported = true;
        let status = self.envoy.attribute_int(Attribute::ResponseCode).and_then(|c| u16::try_from(c).ok());
        let Some(agent) = self.agent.as_mut() else {
            return;
        };
        agent.host_answered(status.unwrap_or(0), now_ms());
        if let Some(cfg) = &self.config {
            // This worker's requests share one session per MCP server.
            crate::agent::sessions::keep(cfg, agent);
        }
        let r = agent.report();
        self.cfg.metrics.emit(self.envoy, r);
        if log::log_enabled!(log::Level::Info) {
            let route = self.envoy.attribute(Attribute::XdsRouteName).unwrap_or_default();
            let loop_name = match self.config.as_ref().map(|c| c.loop_phase) {
                Some(LoopPhase::Request) => "request",
                _ => "response",
            };
            log::info!("{}", r.line(agent.id(), &route, loop_name));
        }
    }

    /// The request headers `context.headers` names, with their labels.
    fn context_headers(&self, cfg: &Config) -> Vec<(String, String)> {
        let Some(ctx) = &cfg.context else {
            return Vec::new();
        };
        ctx.headers
            .iter()
            .filter_map(|(label, name)| self.header(HeaderMap::Request, name).map(|v| (label.clone(), v)))
            .collect()
    }

    /// The configuration for this request: Higress's rule matching by route name, host and cluster.
    fn select<'p>(&self, plugin: &'p Plugin) -> Option<&'p Rc<Config>> {
        if plugin.rules.is_empty() {
            return plugin.global.as_ref();
        }
        let attr = |needed: bool, id| if needed { self.envoy.attribute(id).unwrap_or_default() } else { String::new() };
        let route = attr(plugin.needs_route(), Attribute::XdsRouteName);
        let cluster = attr(plugin.needs_cluster(), Attribute::XdsClusterName);
        let host = self.header(HeaderMap::Request, ":authority").unwrap_or_default();
        let consumer = if plugin.needs_consumer() {
            self.header(HeaderMap::Request, CONSUMER_HEADER).unwrap_or_default()
        } else {
            String::new()
        };
        plugin.select(RequestKeys { route: &route, host: &host, cluster: &cluster, consumer: &consumer })
    }
}

/// A body hook's return: hold the data (buffered) until the agent lets it go.
fn body_status(act: Act) -> u32 {
    match act {
        Act::Continue => ffi::CONTINUE,
        Act::Stop => ffi::STOP_AND_BUFFER,
    }
}

/// Envoy's refusal to start a callout: an unknown cluster or bad headers will not change by sending
/// again; no healthy upstream (CannotCreateRequest) is like a failed connect: retryable.
fn dispatch_failure(code: u32, cluster: &str) -> Failure {
    match code {
        ffi::INIT_CANNOT_CREATE => {
            Failure::Broken(format!("the call to cluster '{cluster}' failed at once (no healthy upstream?)"))
        }
        ffi::INIT_CLUSTER_NOT_FOUND => Failure::NotSent(format!("cluster '{cluster}' is not defined")),
        ffi::INIT_MISSING_HEADERS => Failure::NotSent("the call lacks :method, :path or host".into()),
        other => Failure::NotSent(format!("the host refused the call ({other}); is cluster '{cluster}' defined?")),
    }
}

/// `:status` taken out of a reply's headers.
fn split_status(mut headers: Vec<(String, String)>) -> (Option<u16>, Vec<(String, String)>) {
    let status = headers.iter().find(|(k, _)| k == ":status").and_then(|(_, v)| v.parse::<u16>().ok());
    headers.retain(|(k, _)| k != ":status");
    (status, headers)
}

/// A reply without `:status`, or Envoy's own timeout and connect-failure replies, are failures.
fn classify(status: Option<u16>, body: &[u8]) -> Option<Failure> {
    match status {
        None => Some(Failure::Broken("no response (reset)".into())),
        Some(504) if body == b"upstream request timeout" => Some(Failure::Timeout),
        Some(503) if body.starts_with(b"upstream connect error or disconnect/reset before headers") => {
            Some(Failure::Broken(String::from_utf8_lossy(body).into_owned()))
        }
        Some(_) => None,
    }
}

impl crate::agent::host::Host for Stream {
    type Action = Act;

    fn holding(&self) -> Act {
        Act::Stop
    }

    fn forward(&mut self, body: &[u8]) -> Act {
        Stream::forward(self, body)
    }

    fn dispatch(&mut self, call: &Call) -> Result<(), Failure> {
        Stream::dispatch(self, call)
    }

    fn reply(&mut self, reply: Reply) -> Act {
        Stream::reply(self, reply)
    }

    fn open(&mut self, reply: Reply) -> Act {
        Stream::open(self, reply)
    }

    fn send(&mut self, data: &[u8]) {
        Stream::send(self, data);
    }

    fn agent(&mut self) -> Option<&mut Agent> {
        self.agent.as_mut()
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}
