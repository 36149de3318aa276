//! One HTTP stream, as `src/filter/http.rs` runs it under Proxy-Wasm, with what this host allows
//! beyond it: a header hook can return StopIteration and still receive the body. So the request's
//! headers are held until the body is read (in `loop: request` the route's upstream is never
//! contacted), and in `loop: response` the LLM reply's headers are held while the loop runs: the
//! answer's status and content type are set when it is known, so a late failure is a real 502/504.
//! What both hosts decide is in `crate::host`; this file only maps it to the dynamic-module ABI.

use super::abi::{
    self, Attribute, Body, BodyStatus, HeadersStatus, Status, TrailersStatus, CALLOUT_RESET, CALLOUT_SUCCESS,
};
use super::envoy::{CalloutReply, Envoy, Scheduler, StreamEvent};
use super::port::Metered;
use super::streamed::Streams;
use super::{now_ms, timer, tracing, Deferred, DmConfig};
use crate::agent::spans::SpanNote;
use crate::agent::{Call, Reply};
use crate::host::admit::Arrival;
use crate::host::port::{split_status, Outgoing, Refusal};
use crate::host::tracer::SpanTable;
use crate::host::{Head, Host, Instance, Lost, Start, StreamRun};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Streamed callouts' tokens carry this bit: Envoy numbers streams and callouts apart.
const STREAM_TOKEN: u64 = 1 << 63;

static STREAMS: AtomicU32 = AtomicU32::new(0);

pub struct Stream {
    cfg: Arc<DmConfig>,
    ex: StreamRun,
    io: Io,
    /// Envoy completed the stream: later callout events are dropped.
    closed: bool,
    /// The wake-up asked of the timer thread: its number and time.
    timer: Option<(u64, u64)>,
    timers: u64,
    scheduler: Option<Scheduler>,
}

/// What the layer asks of Envoy for one stream (`Host`).
struct Io {
    envoy: Envoy,
    hook: Hook,
    /// Envoy's ids of streamed callouts → what they brought so far.
    streams: Streams,
    /// The agent's spans, made through Envoy's tracer (a traced stream only).
    spans: SpanTable<tracing::Span>,
}

impl Stream {
    pub fn new(envoy: Envoy, cfg: Arc<DmConfig>, instance: Option<Rc<Instance>>) -> Stream {
        Stream {
            cfg,
            ex: StreamRun::new(instance),
            io: Io { envoy, hook: Hook::Other, streams: Streams::default(), spans: SpanTable::default() },
            closed: false,
            timer: None,
            timers: 0,
            scheduler: None,
        }
    }

    fn envoy(&self) -> Envoy {
        self.io.envoy
    }

    // --- hooks ----------------------------------------------------------------------------------

    pub fn on_request_headers(&mut self, end_of_stream: bool) -> HeadersStatus {
        let arrival = || {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
            Arrival { now_ns, seq: u64::from(STREAMS.fetch_add(1, Ordering::Relaxed)), live: true }
        };
        match self.ex.start(&self.io.envoy, end_of_stream, arrival) {
            Start::Pass => HeadersStatus::Continue,
            // Held until the body is read: the upstream gets the rewritten request whole, or nothing.
            Start::Answered | Start::Run => HeadersStatus::StopIteration,
        }
    }

    pub fn on_request_body(&mut self, end_of_stream: bool) -> BodyStatus {
        if !self.ex.reading_request() {
            return BodyStatus::Continue;
        }
        if !end_of_stream {
            return BodyStatus::StopIterationAndBuffer;
        }
        status(self.on_request_end(Hook::RequestBody))
    }

    pub fn on_request_trailers(&mut self) -> TrailersStatus {
        if !self.ex.reading_request() {
            return TrailersStatus::Continue;
        }
        status(self.on_request_end(Hook::RequestTrailers))
    }

    pub fn on_response_headers(&mut self, end_of_stream: bool) -> HeadersStatus {
        if !self.ex.running() || self.ex.opened() {
            return HeadersStatus::Continue;
        }
        match self.ex.response_head(&mut self.io, end_of_stream, true) {
            Head::Pass => HeadersStatus::Continue,
            // No body came: the agent read the empty reply; its error is a local reply.
            Head::Read(act) => status(act),
            Head::Hold => HeadersStatus::StopIteration,
        }
    }

    pub fn on_response_body(&mut self, end_of_stream: bool) -> BodyStatus {
        if !self.ex.awaits_upstream_body() || self.ex.opened() {
            return BodyStatus::Continue;
        }
        if !end_of_stream {
            return BodyStatus::StopIterationAndBuffer;
        }
        status(self.on_response_end(Hook::ResponseBody))
    }

    pub fn on_response_trailers(&mut self) -> TrailersStatus {
        if !self.ex.awaits_upstream_body() {
            return TrailersStatus::Continue;
        }
        status(self.on_response_end(Hook::Other))
    }

    /// The filter started the client's response itself (live streaming).
    pub fn opened(&self) -> bool {
        self.ex.opened()
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
                self.ex.on_wake(&mut self.io)
            }
        };
        if act == Act::Continue && self.ex.response_held() {
            self.envoy().continue_encoding();
        }
    }

    /// Envoy is done with the stream: a request still running is reported as cancelled.
    pub fn on_closed(&mut self) {
        self.report();
        self.close_scheduler();
        self.closed = true;
        // A streamed callout still running (the client left mid-answer) is of no use now.
        for sid in self.io.streams.take_all() {
            self.io.envoy.reset_stream(sid);
        }
    }

    pub fn on_destroy(&mut self) {
        self.report();
        self.close_scheduler();
    }

    // --- the layer ------------------------------------------------------------------------------

    fn on_request_end(&mut self, hook: Hook) -> Act {
        self.io.hook = hook;
        let body = self.io.whole_body(Body::ReceivedRequest, Body::BufferedRequest);
        let act = self.ex.on_request_body(&mut self.io, &body);
        self.io.hook = Hook::Other;
        act
    }

    /// The headers are still ours: the agent answers with the status its answer means.
    fn on_response_end(&mut self, hook: Hook) -> Act {
        self.io.hook = hook;
        let body = self.io.whole_body(Body::ReceivedResponse, Body::BufferedResponse);
        let act = self.ex.on_upstream_body(&mut self.io, &body);
        self.io.hook = Hook::Other;
        act
    }

    fn on_callout(&mut self, reply: CalloutReply) -> Act {
        let (status, headers) = split_status(reply.headers);
        match reply.result {
            CALLOUT_SUCCESS => self.ex.on_callout_reply(&mut self.io, reply.id, status, &headers, &reply.body),
            CALLOUT_RESET => self.ex.on_callout_failed(&mut self.io, reply.id, Lost::Reset),
            _ => self.ex.on_callout_failed(&mut self.io, reply.id, Lost::OverLimit),
        }
    }

    /// An event of a streamed callout: its head and bytes go to the agent as they come; its end as
    /// the whole reply (or a failure), as for a callout.
    fn on_stream(&mut self, sid: u64, event: StreamEvent) -> Act {
        if !self.io.streams.has(sid) {
            return Act::Stop;
        }
        let token = sid | STREAM_TOKEN;
        match event {
            StreamEvent::Headers(headers, end) => {
                let (status, headers) = self.io.streams.head(sid, headers);
                let act = match status {
                    Some(status) => self.ex.on_callout_head(&mut self.io, token, status, &headers),
                    None => Act::Stop,
                };
                if end {
                    return self.end_stream(sid);
                }
                act
            }
            StreamEvent::Data(data, end) => {
                if !self.io.streams.data(sid, &data) {
                    self.io.envoy.reset_stream(sid);
                    return self.ex.on_callout_failed(&mut self.io, token, Lost::OverLimit);
                }
                let act = self.ex.on_callout_data(&mut self.io, token, &data);
                if end {
                    return self.end_stream(sid);
                }
                act
            }
            StreamEvent::Complete => self.end_stream(sid),
            StreamEvent::Reset(reason) => {
                self.io.streams.remove(sid);
                log::debug!("#{} streamed call {sid} reset (reason {reason})", self.ex.rid());
                self.ex.on_callout_failed(&mut self.io, token, Lost::Reset)
            }
        }
    }

    /// A streamed callout ended: its whole reply, read as a callout's.
    fn end_stream(&mut self, sid: u64) -> Act {
        let Some(e) = self.io.streams.end(sid) else {
            return Act::Stop;
        };
        self.ex.on_callout_reply(&mut self.io, sid | STREAM_TOKEN, e.status, &e.headers, &e.body)
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
        let envoy = self.envoy();
        let scheduler = self.scheduler.get_or_insert_with(|| envoy.scheduler()).clone();
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
    /// Reported when the stream completes: Envoy may still fail to deliver the answer (the summary
    /// went out with the answer: at the stream's end Envoy no longer lets a module set it).
    fn report(&mut self) {
        let envoy = self.envoy();
        // MCP listings of the main thread are counted here: Envoy's metrics are recorded by streams.
        let sink = Metered { envoy, tally: self.cfg.tally.as_ref() };
        for (api, outcome) in self.cfg.published.take_counts() {
            self.cfg.metrics.mcp_listing(&sink, api, outcome);
        }
        // A stream Envoy tore down inside a hook (`Slot::destroyed`) ended with the answer the agent
        // sent: Envoy can no longer be asked, and nothing replaced it.
        let status = envoy
            .live()
            .then(|| envoy.attribute_int(Attribute::ResponseCode).and_then(|c| u16::try_from(c).ok()).unwrap_or(0));
        self.ex.report(&envoy, &self.cfg.metrics, &sink, status, now_ms());
        // The spans still open end with the stream (the agent's notes say how; the rest end as they are).
        let notes = self.ex.take_spans();
        self.io.spans.apply(&envoy, notes);
        self.io.spans.finish_all(&envoy);
    }
}

/// A hook's return: a body hook holds the data (buffered) until the agent lets it go.
fn status<S: Status>(act: Act) -> S {
    match act {
        Act::Continue => S::CONTINUE,
        Act::Stop => S::STOP,
    }
}

impl Io {
    /// The whole body: the buffered chunks, then (in a body hook) the one handed over. Each buffer
    /// reserves its own size as it is copied (no separate size calls).
    fn whole_body(&self, received: Body, buffered: Body) -> Vec<u8> {
        let mut body = Vec::new();
        self.envoy.body_into(buffered, &mut body);
        if self.hook.is_body() {
            self.envoy.body_into(received, &mut body);
        }
        body
    }

    /// Replaces a whole body: in a body hook, the chunk being handed over counts too.
    fn replace_body(&self, rid: &str, received: Body, buffered: Body, body: &[u8]) {
        self.envoy.drain(buffered);
        let target = if self.hook.is_body() {
            self.envoy.drain(received);
            received
        } else {
            buffered
        };
        if !self.envoy.append(target, body) {
            log::error!("#{rid} writing the body failed");
        }
    }
}

impl Host for Io {
    type Action = Act;
    type Port = Envoy;

    fn port(&self) -> &Envoy {
        &self.envoy
    }

    fn holding(&self) -> Act {
        Act::Stop
    }

    fn passing(&self) -> Act {
        Act::Continue
    }

    fn forward(&mut self, rid: &str, body: &[u8]) -> Act {
        if !matches!(self.hook, Hook::RequestBody | Hook::RequestTrailers) {
            log::error!("#{rid} the first LLM request came after the request was read; not sent");
            return Act::Stop;
        }
        self.replace_body(rid, Body::ReceivedRequest, Body::BufferedRequest, body);
        Act::Continue
    }

    fn dispatch(&mut self, call: &Call) -> Result<u64, Refusal> {
        let context = self.spans.context(&self.envoy, call.id, &call.headers);
        let mut out = Outgoing::of_call(call);
        for (name, value) in &context {
            out.set(name, value);
        }
        let started = if call.stream {
            // Envoy sends a streamed request's body chunked unless told its length, and not every
            // LLM server reads chunked request bodies.
            let length = out.body.unwrap_or_default().len().to_string();
            out.headers.push(("content-length", &length));
            self.envoy.start_stream(&out).map(|sid| {
                self.streams.insert(sid);
                sid | STREAM_TOKEN
            })
        } else {
            self.envoy.callout(&out)
        };
        started.map_err(|code| match code {
            abi::INIT_CANNOT_CREATE => Refusal::FailedAtOnce,
            abi::INIT_CLUSTER_NOT_FOUND => Refusal::NoCluster,
            abi::INIT_MISSING_HEADERS => Refusal::MissingHeaders,
            other => Refusal::Other(other),
        })
    }

    /// Live streaming: the response starts now, from the filter (the request is never forwarded).
    fn open(&mut self, _rid: &str, reply: &Reply) -> Option<Act> {
        let status = reply.status.to_string();
        let headers =
            [(":status", status.as_str()), ("content-type", reply.content_type), ("cache-control", "no-cache")];
        self.envoy.send_headers(&headers, false);
        self.envoy.send_data(&reply.body, false);
        Some(Act::Stop)
    }

    fn send(&mut self, data: &[u8], end: bool) {
        self.envoy.send_data(data, end);
    }

    /// The held response's body becomes the answer.
    fn answer_body(&mut self, rid: &str, body: &[u8]) -> Act {
        self.replace_body(rid, Body::ReceivedResponse, Body::BufferedResponse, body);
        Act::Continue
    }

    fn spans(&mut self, notes: Vec<SpanNote>) {
        self.spans.apply(&self.envoy, notes);
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }
}
