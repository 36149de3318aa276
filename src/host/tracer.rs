//! The agent's span notes (`agent::spans`) carried out over a host's tracer: which host span each of
//! the agent's spans is, which span's context a call carries, and the W3C `traceparent` made from
//! it. Written once for any host with a tracer (today the dynamic module, over Envoy's tracing ABI).

use crate::agent::spans::{SpanKey, SpanNote};
use crate::agent::CallId;
use crate::vec_map::VecMap;

/// What a host's tracer offers a stream.
pub trait Tracer {
    /// A host span; valid until `finish` (the stream's own span: until the stream ends).
    type Span: Copy;
    /// The stream's own span; `None` when the stream is not traced.
    fn active(&self) -> Option<Self::Span>;
    fn spawn(&self, parent: Self::Span, operation: &str) -> Option<Self::Span>;
    fn tag(&self, span: Self::Span, key: &str, value: &str);
    /// Ends a span made by `spawn`; it must not be used again.
    fn finish(&self, span: Self::Span);
    /// The span's trace id and span id, as the tracer writes them (hex).
    fn ids(&self, span: Self::Span) -> Option<(String, String)>;
}

/// One stream's spans: the agent's keys → the host's spans, and the calls waiting to carry one.
#[derive(Debug)]
pub struct SpanTable<S> {
    open: VecMap<SpanKey, S>,
    carry: VecMap<CallId, SpanKey>,
}

impl<S> Default for SpanTable<S> {
    fn default() -> Self {
        SpanTable { open: VecMap::new(), carry: VecMap::new() }
    }
}

impl<S: Copy> SpanTable<S> {
    /// Carries out `notes`, in order. A span the tracer would not make leaves its tags and children
    /// out (its children go under the stream's span), never the request.
    pub fn apply<T: Tracer<Span = S>>(&mut self, tracer: &T, notes: Vec<SpanNote>) {
        for note in notes {
            match note {
                SpanNote::Open { span, parent, operation } => {
                    let parent = parent.and_then(|p| self.open.get(&p).copied()).or_else(|| tracer.active());
                    if let Some(made) = parent.and_then(|p| tracer.spawn(p, &operation)) {
                        self.open.insert(span, made);
                    }
                }
                SpanNote::Tag { span, key, value } => {
                    if let Some(s) = self.open.get(&span) {
                        tracer.tag(*s, key, &value);
                    }
                }
                SpanNote::Carry { span, call } => {
                    self.carry.insert(call, span);
                }
                SpanNote::Close { span } => {
                    if let Some(s) = self.open.remove(&span) {
                        tracer.finish(s);
                    }
                    self.carry.retain(|_, k| *k != span);
                }
            }
        }
    }

    /// The trace headers call `call` goes out with, in place of the client's: `traceparent` of its
    /// span (the client's sampling flag kept, else sampled), and `x-b3-spanid` where the call carries
    /// B3 headers. Empty when the call carries no span.
    pub fn context<T: Tracer<Span = S>>(
        &mut self,
        tracer: &T,
        call: CallId,
        headers: &[(String, String)],
    ) -> Vec<(&'static str, String)> {
        let Some(span) = self.carry.remove(&call).and_then(|k| self.open.get(&k).copied()) else {
            return Vec::new();
        };
        let Some((trace_id, span_id)) = tracer.ids(span).and_then(|(t, s)| w3c_ids(&t, &s)) else {
            return Vec::new();
        };
        let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let flags = header("traceparent").and_then(|tp| tp.get(53..55)).filter(|f| is_hex(f)).unwrap_or("01");
        let mut out = vec![("traceparent", format!("00-{trace_id}-{span_id}-{flags}"))];
        if header("x-b3-traceid").is_some() {
            out.push(("x-b3-spanid", span_id));
        }
        out
    }

    /// Ends every span still open (the stream is going away).
    pub fn finish_all<T: Tracer<Span = S>>(&mut self, tracer: &T) {
        for (_, span) in std::mem::take(&mut self.open) {
            tracer.finish(span);
        }
        self.carry.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A tracer's ids as W3C wants them: 32 and 16 lower-case hex digits (a 64-bit trace id, as Zipkin
/// may use, padded), not all zero.
fn w3c_ids(trace_id: &str, span_id: &str) -> Option<(String, String)> {
    let ok = |s: &str, len: usize| is_hex(s) && s.len() == len && s.bytes().any(|b| b != b'0');
    let trace = if trace_id.len() == 16 { format!("{:0>32}", trace_id) } else { trace_id.to_string() };
    (ok(&trace, 32) && ok(span_id, 16)).then(|| (trace.to_ascii_lowercase(), span_id.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Spans are numbers; 1 is the stream's.
    #[derive(Default)]
    struct Fake {
        log: RefCell<Vec<String>>,
        next: RefCell<u32>,
        traced: bool,
    }

    impl Tracer for Fake {
        type Span = u32;
        fn active(&self) -> Option<u32> {
            self.traced.then_some(1)
        }
        fn spawn(&self, parent: u32, operation: &str) -> Option<u32> {
            let mut next = self.next.borrow_mut();
            *next += 1;
            let span = *next + 1;
            self.log.borrow_mut().push(format!("spawn {span} under {parent}: {operation}"));
            Some(span)
        }
        fn tag(&self, span: u32, key: &str, value: &str) {
            self.log.borrow_mut().push(format!("tag {span} {key}={value}"));
        }
        fn finish(&self, span: u32) {
            self.log.borrow_mut().push(format!("finish {span}"));
        }
        fn ids(&self, span: u32) -> Option<(String, String)> {
            Some(("4bf92f3577b34da6a3ce929d0e0e4736".into(), format!("{span:016x}")))
        }
    }

    fn open(span: u32, parent: Option<u32>, operation: &str) -> SpanNote {
        SpanNote::Open { span: SpanKey(span), parent: parent.map(SpanKey), operation: operation.into() }
    }

    #[test]
    fn notes_become_nested_spans_and_calls_carry_theirs() {
        let tracer = Fake { traced: true, ..Fake::default() };
        let mut table = SpanTable::default();
        table.apply(
            &tracer,
            vec![
                open(1, None, "invoke_agent a"),
                open(2, Some(1), "chat m"),
                SpanNote::Tag { span: SpanKey(2), key: "k", value: "v".into() },
                SpanNote::Carry { span: SpanKey(2), call: CallId(7) },
            ],
        );
        let client =
            vec![("traceparent".to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_string())];
        let headers = table.context(&tracer, CallId(7), &client);
        assert_eq!(
            headers,
            vec![("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000003-00".to_string())]
        );
        assert!(table.context(&tracer, CallId(7), &client).is_empty(), "once per call");
        table.apply(&tracer, vec![SpanNote::Close { span: SpanKey(2) }]);
        table.finish_all(&tracer);
        assert!(table.is_empty());
        let log = tracer.log.borrow().clone();
        assert_eq!(
            log,
            ["spawn 2 under 1: invoke_agent a", "spawn 3 under 2: chat m", "tag 3 k=v", "finish 3", "finish 2"]
        );
    }

    #[test]
    fn an_untraced_stream_makes_nothing_and_bad_ids_change_nothing() {
        let tracer = Fake::default();
        let mut table = SpanTable::default();
        table.apply(&tracer, vec![open(1, None, "x"), SpanNote::Carry { span: SpanKey(1), call: CallId(1) }]);
        assert!(table.context(&tracer, CallId(1), &[]).is_empty());
        assert!(tracer.log.borrow().is_empty());
        assert_eq!(w3c_ids("00000000000000000000000000000000", "00f067aa0ba902b7"), None);
        assert_eq!(w3c_ids("abc", "00f067aa0ba902b7"), None);
        assert_eq!(
            w3c_ids("A3CE929D0E0E4736", "00F067AA0BA902B7"),
            Some(("0000000000000000a3ce929d0e0e4736".into(), "00f067aa0ba902b7".into()))
        );
    }
}
