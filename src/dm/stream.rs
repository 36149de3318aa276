//! One HTTP stream, as `src/filter/http.rs` runs it under Proxy-Wasm, with what this host allows
//! beyond it: a header hook can return StopIteration and still receive the body. So the request's
//! headers are held until the body is read (in `loop: request` the route's upstream is never
//! contacted), and in `loop: response` the LLM reply's headers are held while the loop runs: the
//! answer's status and content type are set when it is known, so a late failure is a real 502/504.
//! What both hosts decide is in `crate::host`; this file only maps it to the dynamic-module ABI.

use super::abi::{self, Attribute, Body, CALLOUT_RESET, CALLOUT_SUCCESS};
use super::envoy::{CalloutReply, Envoy, Scheduler, StreamEvent};
use super::port::Metered;
use super::streamed::Streams;
use super::{now_ms, timer, tracing, Deferred, DmConfig};
use crate::agent::spans::SpanNote;
use crate::agent::{Call, CallId, Event, Failure, Reply};
use crate::host::admit::Arrival;
use crate::host::calls::{self, Refusal};
use crate::host::port::set_header;
use crate::host::spans::SpanTable;
use crate::host::{feed, Exchange, Head, Headers, Host, Instance, Start};
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

pub struct Stream {
    envoy: Envoy,
    cfg: Arc<DmConfig>,
    ex: Exchange,
    phase: Phase,
    hook: Hook,
    /// Envoy's ids of streamed callouts → what they brought so far.
    streams: Streams,
    /// The client's response was started by the filter (live streaming): the rest goes as data.
    opened: bool,
    /// Envoy completed the stream: later callout events are dropped.
    closed: bool,
    upstream_status: u16,
    /// The wake-up asked of the timer thread: its number and time.
    timer: Option<(u64, u64)>,
    timers: u64,
    scheduler: Option<Scheduler>,
    /// The agent's spans, made through Envoy's tracer (a traced stream only).
    spans: SpanTable<tracing::Span>,
}

impl Stream {
    pub fn new(envoy: Envoy, cfg: Arc<DmConfig>, instance: Option<Rc<Instance>>) -> Stream {
        Stream {
            envoy,
            cfg,
            ex: Exchange::new(instance),
            phase: Phase::Request,
            hook: Hook::Other,
            streams: Streams::default(),
            opened: false,
            closed: false,
            upstream_status: 0,
            timer: None,
            timers: 0,
            scheduler: None,
            spans: SpanTable::default(),
        }
    }

    // --- hooks ----------------------------------------------------------------------------------

    pub fn on_request_headers(&mut self, end_of_stream: bool) -> u32 {
        let arrival = || {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
            Arrival { now_ns, seq: u64::from(STREAMS.fetch_add(1, Ordering::Relaxed)), live: true }
        };
        match self.ex.start(&self.envoy, end_of_stream, arrival) {
            Start::Pass => abi::CONTINUE,
            // Held until the body is read: the upstream gets the rewritten request whole, or nothing.
            Start::Answered | Start::Run => abi::STOP,
        }
    }

    pub fn on_request_body(&mut self, end_of_stream: bool) -> u32 {
        if !self.ex.running() || self.phase != Phase::Request {
            return abi::CONTINUE;
        }
        if !end_of_stream {
            return abi::STOP_AND_BUFFER;
        }
        self.hook = Hook::RequestBody;
        let act = self.on_request_end();
        self.hook = Hook::Other;
        body_status(act)
    }

    pub fn on_request_trailers(&mut self) -> u32 {
        if !self.ex.running() || self.phase != Phase::Request {
            return abi::CONTINUE;
        }
        self.hook = Hook::RequestTrailers;
        let act = self.on_request_end();
        self.hook = Hook::Other;
        hook_status(act)
    }

    pub fn on_response_headers(&mut self, end_of_stream: bool) -> u32 {
        if !self.ex.running() || self.opened {
            return abi::CONTINUE;
        }
        match self.ex.response_head(&self.envoy, end_of_stream, true) {
            Head::Pass => abi::CONTINUE,
            // No body will come: the agent reads the empty reply now; its error is a local reply.
            Head::Empty(status) => {
                hook_status(self.feed(Event::UpstreamReply { status, body: &[], headers_sent: false }))
            }
            Head::Hold { status, .. } => {
                self.upstream_status = status;
                self.phase = Phase::Held;
                abi::STOP
            }
        }
    }

    pub fn on_response_body(&mut self, end_of_stream: bool) -> u32 {
        if !(self.phase == Phase::Held && self.ex.running()) || self.opened {
            return abi::CONTINUE;
        }
        if !end_of_stream {
            return abi::STOP_AND_BUFFER;
        }
        self.hook = Hook::ResponseBody;
        let act = self.on_response_end();
        self.hook = Hook::Other;
        body_status(act)
    }

    pub fn on_response_trailers(&mut self) -> u32 {
        if !(self.phase == Phase::Held && self.ex.running()) {
            return abi::CONTINUE;
        }
        hook_status(self.on_response_end())
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
        for sid in self.streams.take_all() {
            self.envoy.reset_stream(sid);
        }
    }

    pub fn on_destroy(&mut self) {
        self.report();
        self.close_scheduler();
    }

    // --- the agent ------------------------------------------------------------------------------

    /// The whole body: the buffered chunks, then (in a body hook) the one handed over. Each buffer
    /// reserves its own size as it is copied (no separate size calls).
    fn whole_body(&self, received: Body, buffered: Body) -> Vec<u8> {
        let in_hook = self.hook.is_body();
        let mut body = Vec::new();
        self.envoy.body_into(buffered, &mut body);
        if in_hook {
            self.envoy.body_into(received, &mut body);
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

    fn on_callout(&mut self, reply: CalloutReply) -> Act {
        let Some(id) = self.ex.calls.take(reply.id) else {
            log::warn!("#{} reply for unknown callout {}", self.ex.rid(), reply.id);
            return Act::Stop;
        };
        let (status, headers) = calls::split_status(reply.headers);
        let failure = match reply.result {
            CALLOUT_SUCCESS => calls::classify(status, &reply.body),
            CALLOUT_RESET => Some(Failure::Broken("no response (reset)".into())),
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
        let Some(id) = self.streams.call(sid) else {
            return Act::Stop;
        };
        match event {
            StreamEvent::Headers(headers, end) => {
                let (status, headers) = self.streams.head(sid, headers);
                let act = match status {
                    Some(status) => self.feed(Event::CallHead { id, status, headers: &headers }),
                    None => Act::Stop,
                };
                if end {
                    return self.end_stream(sid);
                }
                act
            }
            StreamEvent::Data(data, end) => {
                if !self.streams.data(sid, &data) {
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
                self.streams.remove(sid);
                log::debug!("#{} streamed call {} reset (reason {reason})", self.ex.rid(), id.0);
                let f = Failure::Broken("no response (reset)".into());
                self.feed(Event::CallFailed { id, failure: &f })
            }
        }
    }

    /// A streamed callout ended: its whole reply, read as a callout's.
    fn end_stream(&mut self, sid: u64) -> Act {
        let Some(e) = self.streams.end(sid) else {
            return Act::Stop;
        };
        self.end_call(e.id, e.failure, e.status, &e.headers, &e.body)
    }

    /// Reported when the stream completes: Envoy may still fail to deliver the answer. The summary
    /// goes out with the answer (`reply`): at the stream's end Envoy no longer lets a module set it.
    fn feed(&mut self, event: Event<'_>) -> Act {
        feed(self, event)
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
            log::error!("#{} writing the body failed", self.ex.rid());
        }
    }

    /// After every hook: one wake-up for the agent's next `WakeAt`, if it wants one.
    pub fn sync_wake(&mut self) {
        match (self.ex.wake_at(), self.timer) {
            (None, _) => self.timer = None,
            (Some(at), Some((_, set))) if at == set => {}
            (Some(at), _) => self.start_timer(at),
        }
    }

    fn start_timer(&mut self, at: u64) {
        self.timers += 1;
        let n = self.timers;
        let scheduler = self.scheduler.get_or_insert_with(|| self.envoy.scheduler()).clone();
        let wait = Duration::from_millis(at.saturating_sub(now_ms()));
        if timer::wake_after(wait, scheduler, n) {
            self.timer = Some((n, at));
        } else {
            log::error!("#{} no timer for a retry's backoff", self.ex.rid());
        }
    }

    fn close_scheduler(&mut self) {
        if let Some(s) = self.scheduler.take() {
            s.close();
        }
        self.timer = None;
    }

    /// The request's metrics and its one info line, once, with the status the client really got.
    fn report(&mut self) {
        // MCP listings of the main thread are counted here: Envoy's metrics are recorded by streams.
        let sink = Metered { envoy: self.envoy, tally: self.cfg.tally.as_ref() };
        for (api, outcome) in self.cfg.published.take_counts() {
            self.cfg.metrics.mcp_listing(&sink, api, outcome);
        }
        let status = self.envoy.attribute_int(Attribute::ResponseCode).and_then(|c| u16::try_from(c).ok());
        self.ex.report(&self.envoy, &self.cfg.metrics, &sink, Some(status.unwrap_or(0)), now_ms());
        // The spans still open end with the stream (the agent's notes say how; the rest end as they are).
        let notes = self.ex.take_spans();
        self.spans.apply(&self.envoy, notes);
        self.spans.finish_all(&self.envoy);
    }
}

/// A header or trailer hook's return.
fn hook_status(act: Act) -> u32 {
    match act {
        Act::Continue => abi::CONTINUE,
        Act::Stop => abi::STOP,
    }
}

/// A body hook's return: hold the data (buffered) until the agent lets it go.
fn body_status(act: Act) -> u32 {
    match act {
        Act::Continue => abi::CONTINUE,
        Act::Stop => abi::STOP_AND_BUFFER,
    }
}

impl Host for Stream {
    type Action = Act;

    fn holding(&self) -> Act {
        Act::Stop
    }

    fn passing(&self) -> Act {
        Act::Continue
    }

    fn forward(&mut self, body: &[u8]) -> Act {
        if !matches!(self.hook, Hook::RequestBody | Hook::RequestTrailers) {
            log::error!("#{} the first LLM request came after the request was read; not sent", self.ex.rid());
            return Act::Stop;
        }
        self.replace_body(Body::ReceivedRequest, Body::BufferedRequest, body);
        Act::Continue
    }

    fn dispatch(&mut self, call: &Call) -> Result<(), Failure> {
        let context = self.spans.context(&self.envoy, call.id, &call.headers);
        let mut out = calls::Outgoing::of_call(call);
        for (name, value) in &context {
            out.set(name, value);
        }
        let started = if call.stream {
            // Envoy sends a streamed request's body chunked unless told its length, and not every
            // LLM server reads chunked request bodies.
            let length = out.body.unwrap_or_default().len().to_string();
            out.headers.push(("content-length", &length));
            self.envoy.start_stream(&out).map(|sid| self.streams.insert(sid, call.id))
        } else {
            self.envoy.callout(&out).map(|id| self.ex.calls.insert(id, call.id))
        };
        match started {
            Ok(()) => {
                calls::log_sent(self.ex.rid(), call);
                Ok(())
            }
            Err(code) => {
                log::warn!("#{} dispatch to cluster '{}' refused ({code})", self.ex.rid(), call.cluster);
                let kind = match code {
                    abi::INIT_CANNOT_CREATE => Refusal::FailedAtOnce,
                    abi::INIT_CLUSTER_NOT_FOUND => Refusal::NoCluster,
                    abi::INIT_MISSING_HEADERS => Refusal::MissingHeaders,
                    other => Refusal::Other(other),
                };
                Err(calls::refused(kind, &call.cluster))
            }
        }
    }

    /// Live streaming: the response starts now, from the filter (the request is never forwarded).
    fn open(&mut self, reply: Reply) -> Act {
        if self.phase != Phase::Request || self.opened {
            log::error!("#{} the response cannot be started now; {} bytes not sent", self.ex.rid(), reply.body.len());
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
        // Before the answer goes out: ending the response can end the stream inside the call.
        self.ex.summarize(&self.envoy);
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
                let rid = self.ex.rid().to_string();
                if reply.status >= 400 {
                    log::info!("#{rid} late error {} sent with its status", reply.status);
                }
                let status = reply.status.to_string();
                set_header(&self.envoy, &rid, Headers::Response, ":status", Some(&status));
                set_header(&self.envoy, &rid, Headers::Response, "content-type", Some(reply.content_type));
                set_header(&self.envoy, &rid, Headers::Response, "content-length", None);
                // The body written here is never compressed, whatever the provider did.
                set_header(&self.envoy, &rid, Headers::Response, "content-encoding", None);
                self.replace_body(Body::ReceivedResponse, Body::BufferedResponse, &reply.body);
                Act::Continue
            }
        }
    }

    fn spans(&mut self, notes: Vec<SpanNote>) {
        self.spans.apply(&self.envoy, notes);
    }

    fn exchange(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}
