//! One HTTP stream. The request phase buffers the client's body; then either the rewritten first LLM
//! request goes upstream (`loop: response`, the loop runs while the response is held) or every turn
//! is a callout and the answer is a local reply (`loop: request`). Header callbacks always return
//! Continue (a Pause there stops the body callbacks in Envoy), so in the response phase the status is
//! sent before the answer is known and later errors go in the body.

use super::{abi, closed_meanwhile, header};
use crate::agent::{Agent, Call, CallId, Command, Event, Failure, Reply, RequestMeta};
use crate::config::{Config, LoopPhase, Plugin, RequestKeys, CONSUMER_HEADER};
use crate::doc::truncate;
use abi::{Buffer, Map, Stream};
use std::collections::BTreeMap;
use std::rc::Rc;

pub const CONTINUE: u32 = 0;
pub const PAUSE: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Request,
    /// Response headers went out; the body is held until the agent answers.
    Response,
}

/// A callout's reply, read during its callback (the host's buffers exist only then).
#[derive(Debug, Clone)]
pub struct CallData {
    token: u32,
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl CallData {
    pub fn read(token: u32, body_size: usize) -> CallData {
        let pairs = abi::get_headers(Map::CallResponseHeaders).unwrap_or_default();
        let mut status = None;
        let mut headers = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            let k = String::from_utf8_lossy(&k).to_ascii_lowercase();
            let v = String::from_utf8_lossy(&v).into_owned();
            if k == ":status" {
                status = v.parse().ok();
            } else {
                headers.push((k, v));
            }
        }
        let body = abi::get_buffer(Buffer::CallResponseBody, body_size).unwrap_or_default();
        CallData { token, status, headers, body }
    }
}

pub struct Http {
    id: u32,
    plugin: Option<Rc<Plugin>>,
    /// The configuration that applies to this request (the global one, or a rule's).
    config: Option<Rc<Config>>,
    agent: Option<Agent>,
    phase: Phase,
    /// Callout tokens → the agent's call ids.
    calls: BTreeMap<u32, CallId>,
    request_size: usize,
    response_size: usize,
    /// The request's id, as the agent and its logs know it.
    rid: String,
    /// The upstream's status, read at response-header time (headers cannot be read in body callbacks).
    upstream_status: u16,
    /// When the agent wants `Event::Wake`.
    wake: Option<u64>,
    /// The request's metrics and log line went out.
    reported: bool,
}

/// Milliseconds since the Unix epoch on the host's clock.
pub fn now_ms() -> u64 {
    abi::now_ns().map_or(0, |ns| ns / 1_000_000)
}

impl Http {
    pub fn new(id: u32, plugin: Option<Rc<Plugin>>) -> Self {
        Http {
            id,
            plugin,
            config: None,
            agent: None,
            phase: Phase::Request,
            calls: BTreeMap::new(),
            request_size: 0,
            response_size: 0,
            upstream_status: 0,
            rid: String::new(),
            wake: None,
            reported: false,
        }
    }

    pub fn wake_at(&self) -> Option<u64> {
        self.wake.filter(|_| self.agent.as_ref().is_some_and(|a| !a.is_done()))
    }

    fn running(&self) -> bool {
        self.agent.as_ref().is_some_and(|a| !a.is_done())
    }

    /// The agent took the request, the upstream answered, and the answer is not out yet.
    fn awaits_upstream_body(&self) -> bool {
        self.phase == Phase::Response && self.running()
    }

    /// Whether this request is one the agent takes: a chat-completions POST with a body.
    fn is_chat_request(end_of_stream: bool) -> bool {
        let method = header(Map::RequestHeaders, ":method").unwrap_or_default();
        let path = header(Map::RequestHeaders, ":path").unwrap_or_default();
        let path = path.split('?').next().unwrap_or("");
        let content_type = header(Map::RequestHeaders, "content-type").unwrap_or_default().to_ascii_lowercase();
        let json = content_type.is_empty() || content_type.contains("json");
        method == "POST" && path.ends_with("/chat/completions") && json && !end_of_stream
    }

    fn feed(&mut self, event: Event<'_>) -> u32 {
        let now = now_ms();
        let Some(agent) = self.agent.as_mut() else {
            return CONTINUE;
        };
        let commands = agent.handle(event, now);
        if let Some(cfg) = &self.config {
            crate::agent::sessions::keep(cfg, agent);
        }
        let action = self.run(commands);
        if self.agent.as_ref().is_some_and(Agent::is_done) {
            self.report();
        }
        action
    }

    /// The request's metrics and its one info line, once.
    fn report(&mut self) {
        let Some(agent) = self.agent.as_ref().filter(|_| !self.reported) else {
            return;
        };
        self.reported = true;
        let r = agent.report();
        super::metrics::emit(r);
        if log::log_enabled!(log::Level::Info) {
            let route = property(&["route_name"], &["xds", "route_name"]);
            let loop_name = match self.config.as_ref().map(|c| c.loop_phase) {
                Some(LoopPhase::Request) => "request",
                _ => "response",
            };
            log::info!("{}", r.line(agent.id(), &route, loop_name));
        }
    }

    /// The host closed the stream: a request still running is reported as cancelled.
    pub fn on_closed(&mut self) {
        self.report();
    }

    /// Runs the agent's commands (`agent::host::run`); the result is what the current callback returns.
    fn run(&mut self, commands: Vec<Command>) -> u32 {
        let (action, wake) = crate::agent::host::run(self, commands);
        self.wake = wake;
        action
    }

    fn forward(&mut self, body: &[u8]) -> u32 {
        if let Err(s) = abi::set_buffer(Buffer::RequestBody, self.request_size, body) {
            log::error!("#{} replacing the request body failed: {s:?}", self.rid);
        }
        CONTINUE
    }

    fn dispatch(&mut self, call: &Call) -> Result<(), Failure> {
        let mut headers: Vec<(&str, &str)> =
            vec![(":method", call.method), (":path", &call.path), (":authority", &call.authority)];
        headers.extend(call.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let timeout = u32::try_from(call.timeout_ms).unwrap_or(u32::MAX);
        match abi::http_call(&call.cluster, &headers, call.body.as_deref(), timeout) {
            Ok(token) => {
                log::debug!(
                    "#{} call {} → {} {} {}",
                    self.rid,
                    call.id.0,
                    call.cluster,
                    call.method,
                    truncate(&call.path, 120)
                );
                self.calls.insert(token, call.id);
                super::register_callout(token, self.id);
                Ok(())
            }
            Err(s) => {
                log::warn!("#{} dispatch to cluster '{}' refused: {s:?}", self.rid, call.cluster);
                Err(dispatch_failure(s, &call.cluster))
            }
        }
    }

    /// The answer: a local reply in the request phase; in the response phase, the new body.
    fn reply(&mut self, reply: Reply) -> u32 {
        match self.phase {
            Phase::Request => {
                let headers = [("content-type", reply.content_type)];
                // Envoy defers the local reply until this callback returns: it does not re-enter.
                if let Err(s) = abi::send_local_response(reply.status, &headers, &reply.body) {
                    log::error!("#{} local reply failed: {s:?}", self.rid);
                }
                PAUSE
            }
            Phase::Response => {
                if reply.status >= 400 {
                    log::info!("#{} late error {} sent in the body (status already sent)", self.rid, reply.status);
                }
                // The agent bounds what it writes below the listener's buffer limit; writing past it
                // makes Envoy reset the stream inside this call (and call back into the module).
                if let Err(s) = abi::set_buffer(Buffer::ResponseBody, self.response_size, &reply.body) {
                    log::error!("#{} replacing the response body failed: {s:?}", self.rid);
                }
                if closed_meanwhile(self.id) {
                    log::warn!("#{} the host closed the stream while the answer was written", self.rid);
                    return PAUSE;
                }
                CONTINUE
            }
        }
    }

    /// After a callout or a timer: continue the held response once the answer is in it. The request
    /// is never resumed in the response phase, and in `loop: request` the local reply ends it.
    fn after_async(&mut self, action: u32) {
        if action == CONTINUE && self.phase == Phase::Response && !closed_meanwhile(self.id) {
            if let Err(s) = abi::resume(Stream::Response) {
                log::error!("#{} resuming the response failed: {s:?}", self.rid);
            }
        }
    }

    pub fn on_call_response(&mut self, data: CallData) {
        let Some(id) = self.calls.remove(&data.token) else {
            log::warn!("#{} reply for unknown callout token {}", self.rid, data.token);
            return;
        };
        let action = match (classify(data.status, &data.body), data.status) {
            (Some(f), _) => self.feed(Event::CallFailed { id, failure: &f }),
            (None, Some(status)) => {
                self.feed(Event::CallReply { id, status, headers: &data.headers, body: &data.body })
            }
            (None, None) => PAUSE,
        };
        self.after_async(action);
    }

    pub fn on_wake(&mut self, _now: u64) {
        let action = self.feed(Event::Wake);
        self.after_async(action);
    }

    fn on_request_end(&mut self) -> u32 {
        let body = abi::get_buffer(Buffer::RequestBody, self.request_size).unwrap_or_default();
        self.feed(Event::ClientRequest { body: &body })
    }

    fn on_response_end(&mut self) -> u32 {
        let body = abi::get_buffer(Buffer::ResponseBody, self.response_size).unwrap_or_default();
        let status = self.upstream_status;
        self.feed(Event::UpstreamReply { status, body: &body, headers_sent: true })
    }

    pub fn on_request_headers(&mut self, end_of_stream: bool) -> u32 {
        if !Self::is_chat_request(end_of_stream) {
            return CONTINUE;
        }
        self.config = self.plugin.as_ref().and_then(|p| select(p)).cloned();
        let Some(cfg) = &self.config else {
            // No rule for this route and no global configuration: not the agent's request.
            return CONTINUE;
        };
        if cfg.tools.is_empty() {
            return not_ready();
        }
        let now_ns = abi::now_ns().unwrap_or(0);
        let now_ms = now_ns / 1_000_000;
        let meta = RequestMeta {
            id: format!("{now_ms:x}{:04x}", self.id),
            now_ms,
            unix_s: now_ms / 1000,
            seed: now_ns ^ (u64::from(self.id) << 32),
            steps: header(Map::RequestHeaders, "x-api-agent-steps")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            context_headers: context_headers(cfg),
            // Proxy-Wasm in this Envoy cannot answer while a callout is pending.
            live: false,
        };
        self.rid = meta.id.clone();
        if let Some(key) = &cfg.llm.api_key {
            // The consumer's credentials are for the gateway, never for the provider.
            set_header(Map::RequestHeaders, "authorization", Some(&format!("Bearer {key}")));
        }
        let mut agent = Agent::new(Rc::clone(cfg), meta);
        crate::agent::sessions::seed(cfg, &mut agent);
        self.agent = Some(agent);
        set_header(Map::RequestHeaders, "content-length", None);
        set_header(Map::RequestHeaders, "accept-encoding", None);
        CONTINUE
    }

    pub fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> u32 {
        if self.agent.is_none() {
            return CONTINUE;
        }
        self.request_size = size;
        if !end_of_stream {
            return PAUSE;
        }
        self.on_request_end()
    }

    pub fn on_request_trailers(&mut self) -> u32 {
        if self.running() && self.phase == Phase::Request {
            return self.on_request_end();
        }
        CONTINUE
    }

    pub fn on_response_headers(&mut self, end_of_stream: bool) -> u32 {
        if !self.running() {
            return CONTINUE;
        }
        let status = header(Map::ResponseHeaders, ":status").unwrap_or_default();
        if self.agent.as_ref().is_some_and(Agent::awaits_request) {
            log::warn!(
                "#{} answered {status} before the request was read (Envoy's own reply?); passed to the client",
                self.rid
            );
            self.agent = None;
            return CONTINUE;
        }
        if self.config.as_ref().is_some_and(|c| c.loop_phase == LoopPhase::Request) {
            // The route's upstream got only the headers; what it says is not a turn of the loop.
            log::warn!("#{} the route's upstream answered {status} while the loop ran; passed to the client", self.rid);
            self.agent = None;
            return CONTINUE;
        }
        self.upstream_status = status.parse().unwrap_or(0);
        let ok = (200..300).contains(&self.upstream_status);
        let content_type = header(Map::ResponseHeaders, "content-type").unwrap_or_default().to_ascii_lowercase();
        if !ok && content_type.contains("json") {
            // The provider's own JSON error: the client sees it as it is.
            log::info!("#{} upstream LLM answered {status}; passed through", self.rid);
            self.agent = None;
            return CONTINUE;
        }
        if end_of_stream {
            // Headers only: Envoy calls no body callback. The agent reads the empty reply now, while
            // its error can still go out as a local reply with its own status.
            let status = self.upstream_status;
            return self.feed(Event::UpstreamReply { status, body: &[], headers_sent: false });
        }
        self.phase = Phase::Response;
        if ok && self.upstream_status != 200 {
            // The client gets the agent's answer, not the provider's 201/206.
            set_header(Map::ResponseHeaders, ":status", Some("200"));
        }
        let stream = ok && self.agent.as_ref().is_some_and(Agent::wants_stream);
        let content_type = if stream { "text/event-stream" } else { "application/json" };
        set_header(Map::ResponseHeaders, "content-length", None);
        // The body the filter writes is never compressed: a provider that compressed its reply
        // regardless must not leave its encoding on the answer (clients would fail to decode it).
        set_header(Map::ResponseHeaders, "content-encoding", None);
        set_header(Map::ResponseHeaders, "content-type", Some(content_type));
        CONTINUE
    }

    pub fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> u32 {
        if !self.awaits_upstream_body() {
            return CONTINUE;
        }
        self.response_size = size;
        if !end_of_stream {
            return PAUSE;
        }
        self.on_response_end()
    }

    pub fn on_response_trailers(&mut self) -> u32 {
        if !self.awaits_upstream_body() {
            return CONTINUE;
        }
        self.on_response_end()
    }
}

impl crate::agent::host::Host for Http {
    type Action = u32;

    fn holding(&self) -> u32 {
        PAUSE
    }

    fn forward(&mut self, body: &[u8]) -> u32 {
        Http::forward(self, body)
    }

    fn dispatch(&mut self, call: &Call) -> Result<(), Failure> {
        Http::dispatch(self, call)
    }

    fn reply(&mut self, reply: Reply) -> u32 {
        Http::reply(self, reply)
    }

    fn agent(&mut self) -> Option<&mut Agent> {
        self.agent.as_mut()
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}

/// The request headers `context.headers` names, with their labels.
fn context_headers(cfg: &Config) -> Vec<(String, String)> {
    let Some(ctx) = &cfg.context else {
        return Vec::new();
    };
    ctx.headers
        .iter()
        .filter_map(|(label, name)| header(Map::RequestHeaders, name).map(|v| (label.clone(), v)))
        .collect()
}

/// The configuration for this request: Higress's rule matching by route name, host and cluster.
fn select(plugin: &Plugin) -> Option<&Rc<Config>> {
    if plugin.rules.is_empty() {
        return plugin.global.as_ref();
    }
    let route = if plugin.needs_route() { property(&["route_name"], &["xds", "route_name"]) } else { String::new() };
    let cluster =
        if plugin.needs_cluster() { property(&["cluster_name"], &["xds", "cluster_name"]) } else { String::new() };
    let host = header(Map::RequestHeaders, ":authority").unwrap_or_default();
    let consumer = if plugin.needs_consumer() {
        header(Map::RequestHeaders, CONSUMER_HEADER).unwrap_or_default()
    } else {
        String::new()
    };
    plugin.select(RequestKeys { route: &route, host: &host, cluster: &cluster, consumer: &consumer })
}

/// A property by its Higress name, or by the name Envoy 1.40 fills (`route_name` comes back empty
/// there; `xds.route_name` works).
fn property(higress: &[&str], envoy: &[&str]) -> String {
    [higress, envoy]
        .iter()
        .filter_map(|p| abi::get_property(p).ok().flatten())
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .find(|v| !v.is_empty())
        .unwrap_or_default()
}

fn set_header(map: Map, name: &str, value: Option<&str>) {
    let r = match value {
        Some(v) => abi::set_header(map, name, v),
        None => abi::remove_header(map, name),
    };
    if let Err(s) = r {
        log::warn!("setting header {name} failed: {s:?}");
    }
}

/// Envoy answers a call it cannot start with a status, never with a callback from inside the call:
/// BadArgument for an unknown cluster or bad headers (sending again will not help), InternalFailure
/// when the call failed at once, e.g. no healthy upstream (like a failed connect: retryable).
/// Every tool source of the configuration is an MCP server not listed yet: a 503 the client can retry.
fn not_ready() -> u32 {
    log::warn!("a request came before any MCP server's tools were listed: 503");
    let message = "the gateway's tools are not ready yet (their MCP servers are being listed); try again shortly";
    let body = crate::openai::answer::error(message, "api_error", "tools_not_ready").to_string();
    let headers = [("content-type", "application/json"), ("retry-after", "1")];
    if let Err(s) = abi::send_local_response(503, &headers, body.as_bytes()) {
        log::error!("local reply failed: {s:?}");
    }
    PAUSE
}

fn dispatch_failure(s: abi::Status, cluster: &str) -> Failure {
    const INTERNAL_FAILURE: u32 = 10;
    if s.0 == INTERNAL_FAILURE {
        Failure::Broken(format!("the call to cluster '{cluster}' failed at once (no healthy upstream?)"))
    } else {
        Failure::NotSent(format!("the host refused the call (status {}); is cluster '{cluster}' defined?", s.0))
    }
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
