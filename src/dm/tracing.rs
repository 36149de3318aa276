//! Envoy's tracing ABI (Envoy 1.40): the stream's active span, child spans, tags, and their ids, as
//! the host-neutral `Tracer`. Resolved by name once (`optional::lookup`): an Envoy without these
//! callbacks loads the module and makes no spans (one log line), and a stream Envoy does not trace
//! (no tracer configured: Envoy's null span) makes none either.
#![allow(unsafe_code)]

use super::abi::{owned_text, EnvoyBuffer, ModuleBuffer};
use super::envoy::Envoy;
use super::optional::lookup;
use crate::host::tracer::Tracer;
use std::ffi::c_void;
use std::sync::OnceLock;

type ActiveSpan = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type SetTag = unsafe extern "C" fn(*mut c_void, ModuleBuffer, ModuleBuffer);
type GetId = unsafe extern "C" fn(*mut c_void, *mut EnvoyBuffer) -> bool;
type SpawnChild = unsafe extern "C" fn(*mut c_void, *mut c_void, ModuleBuffer) -> *mut c_void;
type FinishChild = unsafe extern "C" fn(*mut c_void);

/// The tracing callbacks, all or none.
struct Calls {
    active: ActiveSpan,
    set_tag: SetTag,
    trace_id: GetId,
    span_id: GetId,
    spawn: SpawnChild,
    finish: FinishChild,
}

fn calls() -> Option<&'static Calls> {
    static CALLS: OnceLock<Option<Calls>> = OnceLock::new();
    CALLS
        .get_or_init(|| {
            let names = [
                c"envoy_dynamic_module_callback_http_get_active_span",
                c"envoy_dynamic_module_callback_http_span_set_tag",
                c"envoy_dynamic_module_callback_http_span_get_trace_id",
                c"envoy_dynamic_module_callback_http_span_get_span_id",
                c"envoy_dynamic_module_callback_http_span_spawn_child",
                c"envoy_dynamic_module_callback_http_child_span_finish",
            ];
            let [a, t, ti, si, sp, f] = names.map(lookup);
            if [a, t, ti, si, sp, f].iter().any(|p| p.is_null()) {
                log::info!("this Envoy has no tracing callbacks for dynamic modules: the agent makes no spans");
                return None;
            }
            // SAFETY: each pointer is the Envoy function of that name, whose C signature is the one
            // declared by the type it is transmuted to (abi.h of Envoy 1.40).
            unsafe {
                Some(Calls {
                    active: std::mem::transmute::<*mut c_void, ActiveSpan>(a),
                    set_tag: std::mem::transmute::<*mut c_void, SetTag>(t),
                    trace_id: std::mem::transmute::<*mut c_void, GetId>(ti),
                    span_id: std::mem::transmute::<*mut c_void, GetId>(si),
                    spawn: std::mem::transmute::<*mut c_void, SpawnChild>(sp),
                    finish: std::mem::transmute::<*mut c_void, FinishChild>(f),
                })
            }
        })
        .as_ref()
}

/// A span of Envoy's: the stream's own, or a child this module made and must finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(*mut c_void);

impl Envoy {
    /// The stream is traced and this Envoy lets the module make child spans.
    pub fn is_traced(self) -> bool {
        self.active().is_some()
    }

    fn active(self) -> Option<Span> {
        let c = calls().filter(|_| self.live())?;
        // SAFETY: valid filter pointer; Envoy returns null for its null span (no tracer).
        let span = unsafe { (c.active)(self.0) };
        (!span.is_null()).then_some(Span(span))
    }
}

/// An id (trace or span) Envoy writes into thread-local storage, copied at once.
fn id(get: GetId, span: Span) -> Option<String> {
    let mut out = EnvoyBuffer::EMPTY;
    // SAFETY: a live span; `out` points into Envoy's thread-local string, read before the next call.
    let ok = unsafe { get(span.0, &mut out) };
    ok.then(|| owned_text(out.bytes()))
}

impl Tracer for Envoy {
    type Span = Span;

    fn active(&self) -> Option<Span> {
        Envoy::active(*self)
    }

    fn spawn(&self, parent: Span, operation: &str) -> Option<Span> {
        let c = calls().filter(|_| self.live())?;
        // SAFETY: valid filter pointer and a live parent span; Envoy copies the name.
        let child = unsafe { (c.spawn)(self.0, parent.0, ModuleBuffer::of(operation.as_bytes())) };
        (!child.is_null()).then_some(Span(child))
    }

    fn tag(&self, span: Span, key: &str, value: &str) {
        if let Some(c) = calls() {
            // SAFETY: a live span; Envoy copies both buffers.
            unsafe { (c.set_tag)(span.0, ModuleBuffer::of(key.as_bytes()), ModuleBuffer::of(value.as_bytes())) }
        }
    }

    fn finish(&self, span: Span) {
        if let Some(c) = calls() {
            // SAFETY: a child span this module made and has not finished; Envoy deletes it.
            unsafe { (c.finish)(span.0) }
        }
    }

    fn ids(&self, span: Span) -> Option<(String, String)> {
        let c = calls()?;
        Some((id(c.trace_id, span)?, id(c.span_id, span)?))
    }
}
