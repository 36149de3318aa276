//! One HTTP stream. The request phase buffers the client's body; then either the rewritten first LLM
//! request goes upstream (`loop: response`, the loop runs while the response is held) or every turn
//! is a callout and the answer is a local reply (`loop: request`). Header callbacks always return
//! Continue (a Pause there stops the body callbacks in Envoy), so in the response phase the status is
//! sent before the answer is known and later errors go in the body. What both hosts decide is in
//! `crate::host`; this file only maps it to Proxy-Wasm.

use super::port::{now_ms, Current};
use super::{abi, closed_meanwhile};
use crate::agent::Call;
use crate::host::admit::Arrival;
use crate::host::port::{split_status, Outgoing, Refusal};
use crate::host::{Head, Host, Instance, Start, StreamRun};
use abi::{Buffer, Map, Stream};
use std::rc::Rc;

pub const CONTINUE: u32 = 0;
pub const PAUSE: u32 = 1;

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
        let (status, headers) = split_status(headers);
        let body = abi::get_buffer(Buffer::CallResponseBody, body_size).unwrap_or_default();
        CallData { token, status, headers, body }
    }
}

pub struct Http {
    ex: StreamRun,
    io: Io,
}

/// What the layer asks of Proxy-Wasm for one stream (`Host`): the stream's context id and the sizes
/// of its buffered bodies.
struct Io {
    id: u32,
    request_size: usize,
    response_size: usize,
}

impl Http {
    pub fn new(id: u32, instance: Option<Rc<Instance>>) -> Self {
        Http { ex: StreamRun::new(instance), io: Io { id, request_size: 0, response_size: 0 } }
    }

    pub fn wake_at(&self) -> Option<u64> {
        self.ex.wake_at()
    }

    /// Once the agent has answered, the request's metrics and its one info line.
    fn after(&mut self, action: u32) -> u32 {
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
        let action = self.after(action);
        if action == CONTINUE && self.ex.response_held() && !closed_meanwhile(self.io.id) {
            if let Err(s) = abi::resume(Stream::Response) {
                log::error!("#{} resuming the response failed: {s:?}", self.ex.rid());
            }
        }
    }

    pub fn on_call_response(&mut self, data: CallData) {
        let token = u64::from(data.token);
        let action = self.ex.on_callout_reply(&mut self.io, token, data.status, &data.headers, &data.body);
        self.after_async(action);
    }

    pub fn on_wake(&mut self) {
        let action = self.ex.on_wake(&mut self.io);
        self.after_async(action);
    }

    fn on_request_end(&mut self) -> u32 {
        let body = abi::get_buffer(Buffer::RequestBody, self.io.request_size).unwrap_or_default();
        let action = self.ex.on_request_body(&mut self.io, &body);
        self.after(action)
    }

    fn on_response_end(&mut self) -> u32 {
        let body = abi::get_buffer(Buffer::ResponseBody, self.io.response_size).unwrap_or_default();
        let action = self.ex.on_upstream_body(&mut self.io, &body);
        self.after(action)
    }

    pub fn on_request_headers(&mut self, end_of_stream: bool) -> u32 {
        let id = self.io.id;
        let arrival = || Arrival { now_ns: abi::now_ns().unwrap_or(0), seq: u64::from(id), live: false };
        match self.ex.start(&Current, end_of_stream, arrival) {
            // Proxy-Wasm in this Envoy cannot answer while a callout is pending: never live.
            Start::Pass | Start::Run => CONTINUE,
            Start::Answered => PAUSE,
        }
    }

    pub fn on_request_body(&mut self, size: usize, end_of_stream: bool) -> u32 {
        if !self.ex.taken() {
            return CONTINUE;
        }
        self.io.request_size = size;
        if !end_of_stream {
            return PAUSE;
        }
        self.on_request_end()
    }

    pub fn on_request_trailers(&mut self) -> u32 {
        if self.ex.reading_request() {
            return self.on_request_end();
        }
        CONTINUE
    }

    /// Header callbacks always continue here: the answer's head (its status, content type) goes out
    /// now, set by the layer, and a later error goes in the body.
    pub fn on_response_headers(&mut self, end_of_stream: bool) -> u32 {
        if !self.ex.running() {
            return CONTINUE;
        }
        match self.ex.response_head(&mut self.io, end_of_stream, false) {
            Head::Pass | Head::Hold => CONTINUE,
            Head::Read(action) => self.after(action),
        }
    }

    pub fn on_response_body(&mut self, size: usize, end_of_stream: bool) -> u32 {
        if !self.ex.awaits_upstream_body() {
            return CONTINUE;
        }
        self.io.response_size = size;
        if !end_of_stream {
            return PAUSE;
        }
        self.on_response_end()
    }

    pub fn on_response_trailers(&mut self) -> u32 {
        if !self.ex.awaits_upstream_body() {
            return CONTINUE;
        }
        self.on_response_end()
    }
}

impl Host for Io {
    type Action = u32;
    type Port = Current;

    fn port(&self) -> &Current {
        &Current
    }

    fn holding(&self) -> u32 {
        PAUSE
    }

    fn passing(&self) -> u32 {
        CONTINUE
    }

    fn forward(&mut self, rid: &str, body: &[u8]) -> u32 {
        if let Err(s) = abi::set_buffer(Buffer::RequestBody, self.request_size, body) {
            log::error!("#{rid} replacing the request body failed: {s:?}");
        }
        CONTINUE
    }

    fn dispatch(&mut self, call: &Call) -> Result<u64, Refusal> {
        match abi::http_call(&Outgoing::of_call(call)) {
            Ok(token) => {
                super::register_callout(token, self.id);
                Ok(u64::from(token))
            }
            // InternalFailure: the call failed at once (no healthy upstream); BadArgument: an
            // unknown cluster or bad headers, which sending again will not fix.
            Err(s) if s.0 == INTERNAL_FAILURE => Err(Refusal::FailedAtOnce),
            Err(s) => Err(Refusal::Other(s.0)),
        }
    }

    fn answer_body(&mut self, rid: &str, body: &[u8]) -> u32 {
        // The agent bounds what it writes below the listener's buffer limit; writing past it makes
        // Envoy reset the stream inside this call (and call back into the module).
        if let Err(s) = abi::set_buffer(Buffer::ResponseBody, self.response_size, body) {
            log::error!("#{rid} replacing the response body failed: {s:?}");
        }
        if closed_meanwhile(self.id) {
            log::warn!("#{rid} the host closed the stream while the answer was written");
            return PAUSE;
        }
        CONTINUE
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}

/// Proxy-Wasm's `InternalFailure` status.
const INTERNAL_FAILURE: u32 = 10;
