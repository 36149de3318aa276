//! One HTTP stream. The request phase buffers the client's body; then either the rewritten first LLM
//! request goes upstream (`loop: response`, the loop runs while the response is held) or every turn
//! is a callout and the answer is a local reply (`loop: request`). Header callbacks always return
//! Continue (a Pause there stops the body callbacks in Envoy), so in the response phase the status is
//! sent before the answer is known and later errors go in the body. What both hosts decide is in
//! `crate::host`; this file only maps it to Proxy-Wasm.

use super::port::{now_ms, Current};
use super::{abi, closed_meanwhile};
use crate::agent::{Call, Event, Failure, Reply};
use crate::host::admit::Arrival;
use crate::host::calls::{self, Refusal};
use crate::host::port::set_header;
use crate::host::{feed, Exchange, Head, Headers, Host, Instance, Start};
use abi::{Buffer, Map, Stream};
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
    pub token: u32,
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl CallData {
    pub fn read(token: u32, body_size: usize) -> CallData {
        let headers = abi::get_headers(Map::CallResponseHeaders).unwrap_or_default();
        let (status, headers) = calls::split_status(headers);
        let body = abi::get_buffer(Buffer::CallResponseBody, body_size).unwrap_or_default();
        CallData { token, status, headers, body }
    }
}

pub struct Http {
    id: u32,
    ex: Exchange,
    phase: Phase,
    request_size: usize,
    response_size: usize,
    /// The upstream's status, read at response-header time (headers cannot be read in body callbacks).
    upstream_status: u16,
}

impl Http {
    pub fn new(id: u32, instance: Option<Rc<Instance>>) -> Self {
        Http {
            id,
            ex: Exchange::new(instance),
            phase: Phase::Request,
            request_size: 0,
            response_size: 0,
            upstream_status: 0,
        }
    }

    pub fn wake_at(&self) -> Option<u64> {
        self.ex.wake_at()
    }

    /// The agent took the request, the upstream answered, and the answer is not out yet.
    fn awaits_upstream_body(&self) -> bool {
        self.phase == Phase::Response && self.ex.running()
    }

    fn feed(&mut self, event: Event<'_>) -> u32 {
        let action = feed(self, event);
        if self.ex.is_done() {
            self.report();
        }
        action
    }

    /// The request's metrics and its one info line, once.
    fn report(&mut self) {
        super::with_metrics(|metrics, stats| self.ex.report(&Current, metrics, stats, None, now_ms()));
    }

    /// The host closed the stream: a request still running is reported as cancelled.
    pub fn on_closed(&mut self) {
        self.report();
    }

    /// After a callout or a timer: continue the held response once the answer is in it. The request
    /// is never resumed in the response phase, and in `loop: request` the local reply ends it.
    fn after_async(&mut self, action: u32) {
        if action == CONTINUE && self.phase == Phase::Response && !closed_meanwhile(self.id) {
            if let Err(s) = abi::resume(Stream::Response) {
                log::error!("#{} resuming the response failed: {s:?}", self.ex.rid());
            }
        }
    }

    pub fn on_call_response(&mut self, data: CallData) {
        let Some(id) = self.ex.calls.take(u64::from(data.token)) else {
            log::warn!("#{} reply for unknown callout token {}", self.ex.rid(), data.token);
            return;
        };
        let action = match (calls::classify(data.status, &data.body), data.status) {
            (Some(f), _) => self.feed(Event::CallFailed { id, failure: &f }),
            (None, Some(status)) => {
                self.feed(Event::CallReply { id, status, headers: &data.headers, body: &data.body })
            }
            (None, None) => PAUSE,
        };
        self.after_async(action);
    }

    pub fn on_wake(&mut self) {
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
        let id = self.id;
        let arrival = || Arrival { now_ns: abi::now_ns().unwrap_or(0), seq: u64::from(id), live: false };
        match self.ex.start(&Current, end_of_stream, arrival) {
            // Proxy-Wasm in this Envoy cannot answer while a callout is pending: never live.
            Start::Pass | Start::Run => CONTINUE,
            Start::Answered => PAUSE,
        }
    }

    pub fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> u32 {
        if self.ex.agent().is_none() {
            return CONTINUE;
        }
        self.request_size = size;
        if !end_of_stream {
            return PAUSE;
        }
        self.on_request_end()
    }

    pub fn on_request_trailers(&mut self) -> u32 {
        if self.ex.running() && self.phase == Phase::Request {
            return self.on_request_end();
        }
        CONTINUE
    }

    pub fn on_response_headers(&mut self, end_of_stream: bool) -> u32 {
        if !self.ex.running() {
            return CONTINUE;
        }
        let (status, ok, stream) = match self.ex.response_head(&Current, end_of_stream, false) {
            Head::Pass => return CONTINUE,
            // Headers only: Envoy calls no body callback. The agent reads the empty reply now, while
            // its error can still go out as a local reply with its own status.
            Head::Empty(status) => return self.feed(Event::UpstreamReply { status, body: &[], headers_sent: false }),
            Head::Hold { status, ok, stream } => (status, ok, stream),
        };
        self.upstream_status = status;
        self.phase = Phase::Response;
        let rid = self.ex.rid().to_string();
        if ok && status != 200 {
            // The client gets the agent's answer, not the provider's 201/206.
            set_header(&Current, &rid, Headers::Response, ":status", Some("200"));
        }
        let content_type = if stream { "text/event-stream" } else { "application/json" };
        set_header(&Current, &rid, Headers::Response, "content-length", None);
        // The body the filter writes is never compressed: a provider that compressed its reply
        // regardless must not leave its encoding on the answer (clients would fail to decode it).
        set_header(&Current, &rid, Headers::Response, "content-encoding", None);
        set_header(&Current, &rid, Headers::Response, "content-type", Some(content_type));
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

impl Host for Http {
    type Action = u32;

    fn holding(&self) -> u32 {
        PAUSE
    }

    fn passing(&self) -> u32 {
        CONTINUE
    }

    fn forward(&mut self, body: &[u8]) -> u32 {
        if let Err(s) = abi::set_buffer(Buffer::RequestBody, self.request_size, body) {
            log::error!("#{} replacing the request body failed: {s:?}", self.ex.rid());
        }
        CONTINUE
    }

    fn dispatch(&mut self, call: &Call) -> Result<(), Failure> {
        match abi::http_call(&calls::Outgoing::of_call(call)) {
            Ok(token) => {
                calls::log_sent(self.ex.rid(), call);
                self.ex.calls.insert(u64::from(token), call.id);
                super::register_callout(token, self.id);
                Ok(())
            }
            Err(s) => {
                log::warn!("#{} dispatch to cluster '{}' refused: {s:?}", self.ex.rid(), call.cluster);
                // InternalFailure: the call failed at once (no healthy upstream); BadArgument: an
                // unknown cluster or bad headers, which sending again will not fix.
                const INTERNAL_FAILURE: u32 = 10;
                let kind = if s.0 == INTERNAL_FAILURE { Refusal::FailedAtOnce } else { Refusal::Other(s.0) };
                Err(calls::refused(kind, &call.cluster))
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
                    log::error!("#{} local reply failed: {s:?}", self.ex.rid());
                }
                PAUSE
            }
            Phase::Response => {
                if reply.status >= 400 {
                    log::info!("#{} late error {} sent in the body (status already sent)", self.ex.rid(), reply.status);
                }
                // The agent bounds what it writes below the listener's buffer limit; writing past it
                // makes Envoy reset the stream inside this call (and call back into the module).
                if let Err(s) = abi::set_buffer(Buffer::ResponseBody, self.response_size, &reply.body) {
                    log::error!("#{} replacing the response body failed: {s:?}", self.ex.rid());
                }
                if closed_meanwhile(self.id) {
                    log::warn!("#{} the host closed the stream while the answer was written", self.ex.rid());
                    return PAUSE;
                }
                CONTINUE
            }
        }
    }

    fn exchange(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}
