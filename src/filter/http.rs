//! One HTTP stream. The request phase buffers the client's body and forwards the rewritten first LLM
//! request (or answers 400 locally); the response phase buffers the LLM's reply, runs the agent's
//! callouts, and replaces the response body with the answer. Header callbacks always return Continue
//! (a Pause there stops the body callbacks in Envoy), so the status is sent before the answer is known:
//! later errors go in the body.

use super::host;
use crate::agent::{Agent, CallId, Command, Event, Failure, RequestMeta};
use crate::config::Config;
use crate::doc::truncate;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, MapType};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Request,
    /// Response headers went out; the body is held until the agent answers.
    Response,
}

pub struct Http {
    id: u32,
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
}

impl Http {
    pub fn new(id: u32, config: Option<Rc<Config>>) -> Self {
        Http {
            id,
            config,
            agent: None,
            phase: Phase::Request,
            calls: BTreeMap::new(),
            request_size: 0,
            response_size: 0,
            upstream_status: 0,
            rid: String::new(),
        }
    }

    /// The agent took the request, the upstream answered 2xx, and the answer is not out yet.
    fn awaits_upstream_body(&self) -> bool {
        self.phase == Phase::Response && self.agent.as_ref().is_some_and(|a| !a.is_done())
    }

    /// Whether this request is one the agent takes: a chat-completions POST with a body.
    fn is_chat_request(end_of_stream: bool) -> bool {
        let method = host::header(MapType::HttpRequestHeaders, ":method").unwrap_or_default();
        let path = host::header(MapType::HttpRequestHeaders, ":path").unwrap_or_default();
        let path = path.split('?').next().unwrap_or("");
        let content_type =
            host::header(MapType::HttpRequestHeaders, "content-type").unwrap_or_default().to_ascii_lowercase();
        let json = content_type.is_empty() || content_type.contains("json");
        method == "POST" && path.ends_with("/chat/completions") && json && !end_of_stream
    }

    fn on_request_end(&mut self) -> Action {
        let body = host::buffer(BufferType::HttpRequestBody, self.request_size);
        let (now_ms, _) = host::now();
        let Some(agent) = self.agent.as_mut() else {
            return Action::Continue;
        };
        let commands = agent.handle(Event::ClientRequest { body: &body }, now_ms);
        self.run(commands)
    }

    fn on_response_end(&mut self) -> Action {
        let body = host::buffer(BufferType::HttpResponseBody, self.response_size);
        let (now_ms, _) = host::now();
        let Some(agent) = self.agent.as_mut() else {
            return Action::Continue;
        };
        let commands = agent
            .handle(Event::UpstreamReply { status: self.upstream_status, body: &body, headers_sent: true }, now_ms);
        self.run(commands)
    }

    /// Runs the agent's commands; the result is what the current callback returns. A dispatch the
    /// host refuses is fed straight back to the agent as a failed call.
    fn run(&mut self, mut commands: Vec<Command>) -> Action {
        let mut action = Action::Pause;
        while !commands.is_empty() {
            let mut next = Vec::new();
            for c in commands {
                match c {
                    Command::Forward { body } => action = self.forward(&body),
                    Command::Dispatch(call) => {
                        if let Err(failure) = self.dispatch(&call) {
                            let (now_ms, _) = host::now();
                            if let Some(agent) = self.agent.as_mut() {
                                next.extend(agent.handle(Event::CallFailed { id: call.id, failure: &failure }, now_ms));
                            }
                        }
                    }
                    Command::Reply(reply) => action = self.reply(reply),
                }
            }
            commands = next;
        }
        action
    }

    fn forward(&mut self, body: &[u8]) -> Action {
        if let Err(s) = host::set_buffer(BufferType::HttpRequestBody, self.request_size, body) {
            log::error!("#{} replacing the request body failed: {s:?}", self.rid);
        }
        Action::Continue
    }

    fn dispatch(&mut self, call: &crate::agent::Call) -> Result<(), Failure> {
        let mut headers: Vec<(&str, &str)> =
            vec![(":method", call.method), (":path", &call.path), (":authority", &call.authority)];
        headers.extend(call.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let timeout = Duration::from_millis(call.timeout_ms);
        match hostcalls::dispatch_http_call(&call.cluster, headers, call.body.as_deref(), vec![], timeout) {
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
                Ok(())
            }
            Err(s) => {
                log::warn!("#{} dispatch to cluster '{}' refused: {s:?}", self.rid, call.cluster);
                Err(Failure::NotSent(format!(
                    "the host refused the call ({s:?}); is cluster '{}' defined?",
                    call.cluster
                )))
            }
        }
    }

    /// The answer: a local reply in the request phase; in the response phase, the new body.
    fn reply(&mut self, reply: crate::agent::Reply) -> Action {
        match self.phase {
            Phase::Request => {
                let headers = vec![("content-type", reply.content_type)];
                if let Err(s) = hostcalls::send_http_response(reply.status as u32, headers, Some(&reply.body)) {
                    log::error!("#{} local reply failed: {s:?}", self.rid);
                }
                Action::Pause
            }
            Phase::Response => {
                if reply.status >= 400 {
                    log::info!("#{} late error {} sent in the body (status already sent)", self.rid, reply.status);
                }
                if let Err(s) = host::set_buffer(BufferType::HttpResponseBody, self.response_size, &reply.body) {
                    log::error!("#{} replacing the response body failed: {s:?}", self.rid);
                }
                Action::Continue
            }
        }
    }
}

impl Context for Http {
    fn on_http_call_response(&mut self, token: u32, _headers: usize, body_size: usize, _trailers: usize) {
        let Some(id) = self.calls.remove(&token) else {
            log::warn!("#{} reply for unknown callout token {token}", self.rid);
            return;
        };
        let status = host::call_status();
        let body = host::buffer(BufferType::HttpCallResponseBody, body_size);
        let (now_ms, _) = host::now();
        let failure = classify(status, &body);
        let Some(agent) = self.agent.as_mut() else {
            return;
        };
        let commands = match (&failure, status) {
            (Some(f), _) => agent.handle(Event::CallFailed { id, failure: f }, now_ms),
            (None, Some(status)) => agent.handle(Event::CallReply { id, status, body: &body }, now_ms),
            (None, None) => Vec::new(),
        };
        if self.run(commands) == Action::Continue {
            if let Err(s) = hostcalls::resume_http_response() {
                log::error!("#{} resuming the response failed: {s:?}", self.rid);
            }
        }
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

impl HttpContext for Http {
    fn on_http_request_headers(&mut self, _n: usize, end_of_stream: bool) -> Action {
        let Some(cfg) = &self.config else {
            return Action::Continue;
        };
        if !Self::is_chat_request(end_of_stream) {
            return Action::Continue;
        }
        let (now_ms, unix_s) = host::now();
        let meta = RequestMeta { id: format!("{now_ms:x}{:04x}", self.id), now_ms, unix_s };
        self.rid = meta.id.clone();
        if let Some(key) = &cfg.llm.api_key {
            // The consumer's credentials are for the gateway, never for the provider.
            host::set_header(MapType::HttpRequestHeaders, "authorization", Some(&format!("Bearer {key}")));
        }
        self.agent = Some(Agent::new(Rc::clone(cfg), meta));
        host::set_header(MapType::HttpRequestHeaders, "content-length", None);
        host::set_header(MapType::HttpRequestHeaders, "accept-encoding", None);
        Action::Continue
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if self.agent.is_none() {
            return Action::Continue;
        }
        self.request_size = size;
        if !end_of_stream {
            return Action::Pause;
        }
        self.on_request_end()
    }

    fn on_http_request_trailers(&mut self, _n: usize) -> Action {
        match &self.agent {
            Some(a) if !a.is_done() && self.phase == Phase::Request => self.on_request_end(),
            _ => Action::Continue,
        }
    }

    fn on_http_response_headers(&mut self, _n: usize, end_of_stream: bool) -> Action {
        let Some(agent) = &self.agent else {
            return Action::Continue;
        };
        if agent.is_done() {
            return Action::Continue;
        }
        let status = host::header(MapType::HttpResponseHeaders, ":status").unwrap_or_default();
        self.upstream_status = status.parse().unwrap_or(0);
        if !(200..300).contains(&self.upstream_status) {
            // The provider's own error: the client sees it as it is.
            log::info!("#{} upstream LLM answered {status}; passed through", self.rid);
            self.agent = None;
            return Action::Continue;
        }
        if end_of_stream {
            // Headers only: Envoy calls no body callback. The agent reads the empty reply now, while
            // its error can still go out as a local reply with its own status.
            let (now_ms, _) = host::now();
            let status = self.upstream_status;
            let commands = self
                .agent
                .as_mut()
                .map(|a| a.handle(Event::UpstreamReply { status, body: &[], headers_sent: false }, now_ms));
            return self.run(commands.unwrap_or_default());
        }
        self.phase = Phase::Response;
        let content_type = if agent.wants_stream() { "text/event-stream" } else { "application/json" };
        host::set_header(MapType::HttpResponseHeaders, "content-length", None);
        host::set_header(MapType::HttpResponseHeaders, "content-type", Some(content_type));
        Action::Continue
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !self.awaits_upstream_body() {
            return Action::Continue;
        }
        self.response_size = size;
        if !end_of_stream {
            return Action::Pause;
        }
        self.on_response_end()
    }

    fn on_http_response_trailers(&mut self, _n: usize) -> Action {
        if !self.awaits_upstream_body() {
            return Action::Continue;
        }
        self.on_response_end()
    }
}
