//! The hooks Envoy calls (`envoy_dynamic_module_on_*`): each finds its stream's `Slot` and hands the
//! event on, copying what Envoy's buffers hold (they end with the hook). Every hook runs its work inside
//! the slot's `catch_unwind`: no panic crosses into Envoy.
#![allow(unsafe_code)]

use super::abi::{
    copy_chunks, copy_headers, BodyStatus, EnvoyBuffer, EnvoyHeader, HeadersStatus, TrailersStatus, CALLOUT_SUCCESS,
};
use super::envoy::{CalloutReply, Envoy, EnvoyConfig, StreamEvent};
use super::{discover, Deferred, DmConfig, Slot};
use crate::host::port::split_status;
use std::ffi::{c_char, c_void};
use std::ptr::null;
use std::sync::Arc;

const ABI_VERSION: &[u8] = b"v0.2.0\0";

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    super::program_init();
    ABI_VERSION.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: *mut c_void,
    name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> *const c_void {
    let (name, text) = (name.to_vec(), config.to_vec());
    match super::config_new(EnvoyConfig(config_envoy), &name, text) {
        Some(cfg) => Arc::into_raw(cfg).cast(),
        None => null(),
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    if config.is_null() {
        return;
    }
    // SAFETY: made by Arc::into_raw in config_new; Envoy destroys it once.
    let cfg = unsafe { Arc::from_raw(config.cast::<DmConfig>()) };
    super::config_destroy(&cfg);
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(config: *const c_void, filter: *mut c_void) -> *const c_void {
    if config.is_null() {
        return null();
    }
    // SAFETY: a live config (Envoy destroys it after its filters); the count is raised for the clone.
    let cfg = unsafe {
        Arc::increment_strong_count(config.cast::<DmConfig>());
        Arc::from_raw(config.cast::<DmConfig>())
    };
    Box::into_raw(Box::new(Slot::new(cfg, Envoy(filter)))).cast_const().cast()
}

/// The stream's slot: Envoy calls the hooks of one filter on its worker thread, one at a time or
/// re-entrantly from inside a callback (which `Slot` detects).
fn slot<'a>(module: *const c_void) -> Option<&'a Slot> {
    // SAFETY: made by Box::into_raw in filter_new, freed only in filter_destroy.
    unsafe { module.cast::<Slot>().as_ref() }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: *const c_void) {
    if module.is_null() {
        return;
    }
    if slot(module).is_some_and(Slot::destroyed) {
        free(module);
    }
}

/// Frees a slot and ends its stream.
fn free(module: *const c_void) {
    // SAFETY: made by Box::into_raw in filter_new; freed once: by Envoy's destroy when no hook runs,
    // else by the outermost hook of the slot when it returns (`on_slot`).
    let slot = unsafe { Box::from_raw(module.cast_mut().cast::<Slot>()) };
    slot.destroy();
}

/// Runs a hook on the stream's slot (`idle` without one). A destroy that came during it is finished
/// when the outermost hook of the slot returns.
fn on_slot<R>(module: *const c_void, idle: R, hook: impl FnOnce(&Slot) -> R) -> R {
    let Some(s) = slot(module) else { return idle };
    s.enter();
    let result = hook(s);
    if s.leave() {
        free(module);
    }
    result
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> HeadersStatus {
    on_slot(m, HeadersStatus::Continue, |s| s.request_headers(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> BodyStatus {
    on_slot(m, BodyStatus::Continue, |s| s.request_body(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _f: *mut c_void,
    m: *const c_void,
) -> TrailersStatus {
    on_slot(m, TrailersStatus::Continue, Slot::request_trailers)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> HeadersStatus {
    on_slot(m, HeadersStatus::Continue, |s| s.response_headers(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> BodyStatus {
    on_slot(m, BodyStatus::Continue, |s| s.response_body(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _f: *mut c_void,
    m: *const c_void,
) -> TrailersStatus {
    on_slot(m, TrailersStatus::Continue, Slot::response_trailers)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(_f: *mut c_void, m: *const c_void) {
    on_slot(m, (), |s| {
        s.stream_complete();
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _f: *mut c_void,
    m: *const c_void,
    id: u64,
    result: u32,
    headers: *const EnvoyHeader,
    headers_size: usize,
    chunks: *const EnvoyBuffer,
    chunks_size: usize,
) {
    on_slot(m, (), |s| {
        let headers = copy_headers(headers, headers_size);
        let body = copy_chunks(chunks, chunks_size);
        s.deliver(Deferred::Callout(CalloutReply { id, result, headers, body }));
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(_f: *mut c_void, m: *const c_void, event: u64) {
    on_slot(m, (), |s| {
        s.deliver(Deferred::Wake(event));
    });
}

// Streamed callouts (live streaming): each event is queued to the stream like a callout reply.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
    headers: *const EnvoyHeader,
    size: usize,
    end: bool,
) {
    on_slot(m, (), |s| {
        let headers = copy_headers(headers, size);
        s.deliver(Deferred::Stream(stream, StreamEvent::Headers(headers, end)));
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
    data: *const EnvoyBuffer,
    count: usize,
    end: bool,
) {
    on_slot(m, (), |s| {
        let data = copy_chunks(data, count);
        s.deliver(Deferred::Stream(stream, StreamEvent::Data(data, end)));
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
    _trailers: *const EnvoyHeader,
    _size: usize,
) {
    on_slot(m, (), |s| {
        s.deliver(Deferred::Stream(stream, StreamEvent::Data(Vec::new(), true)));
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
) {
    on_slot(m, (), |s| {
        s.deliver(Deferred::Stream(stream, StreamEvent::Complete));
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
    reason: u32,
) {
    on_slot(m, (), |s| {
        s.deliver(Deferred::Stream(stream, StreamEvent::Reset(reason)));
    });
}

// The configuration's own callouts and wake-ups (MCP listings), on the main thread.

/// The configuration a hook is for: its id (the configuration stays Envoy's).
fn config_id(config: *const c_void) -> Option<u64> {
    // SAFETY: made by Arc::into_raw in config_new; valid until config_destroy, which comes after.
    unsafe { config.cast::<DmConfig>().as_ref() }.map(DmConfig::id)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    config_envoy: *mut c_void,
    config: *const c_void,
    event: u64,
) {
    if event == super::tally::FLUSH_EVENT {
        // SAFETY: as in `config_id`.
        if let Some(tally) = unsafe { config.cast::<DmConfig>().as_ref() }.and_then(|c| c.tally.as_ref()) {
            guard(|| tally.flush(super::envoy::EnvoyConfig(config_envoy)));
        }
        return;
    }
    if let Some(id) = config_id(config) {
        guard(|| discover::on_scheduled(id));
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    _config_envoy: *mut c_void,
    config: *const c_void,
    callout: u64,
    result: u32,
    headers: *const EnvoyHeader,
    headers_size: usize,
    chunks: *const EnvoyBuffer,
    chunks_size: usize,
) {
    let Some(id) = config_id(config) else { return };
    let (status, headers) = split_status(copy_headers(headers, headers_size));
    let body = copy_chunks(chunks, chunks_size);
    let reply = match (result, status) {
        (CALLOUT_SUCCESS, Some(status)) => Some((status, headers.as_slice(), body.as_slice())),
        _ => None,
    };
    guard(|| discover::on_reply(id, callout, reply));
}

/// A panic on the main thread is logged (once, where it happened) and goes no further.
fn guard(f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        log::error!("{}", crate::host::fault::line(&super::panic_location(), None));
    }
}

// Streamed callouts of the configuration: never started; defined with the callout hook they belong to.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
    _e: *mut c_void,
    _c: *const c_void,
    _stream: u64,
    _headers: *const EnvoyHeader,
    _size: usize,
    _end: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
    _e: *mut c_void,
    _c: *const c_void,
    _stream: u64,
    _data: *const EnvoyBuffer,
    _count: usize,
    _end: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
    _e: *mut c_void,
    _c: *const c_void,
    _stream: u64,
    _trailers: *const EnvoyHeader,
    _size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
    _e: *mut c_void,
    _c: *const c_void,
    _stream: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    _e: *mut c_void,
    _c: *const c_void,
    _stream: u64,
    _reason: u32,
) {
}

// Required by Envoy 1.40, unused: the response is bounded by maxResponseBytes, not by watermarks.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _f: *mut c_void,
    _m: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _f: *mut c_void,
    _m: *const c_void,
) {
}
