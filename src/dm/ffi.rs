//! Envoy dynamic-module ABI (`v0.2.0`, Envoy 1.40) for this filter: the callbacks it calls and the
//! hooks Envoy calls, declared by hand from `source/extensions/dynamic_modules/abi/abi.h`. This is the
//! only `unsafe` of the dynamic-module build. C enums cross as plain integers (a value outside a Rust
//! enum would be undefined behaviour); Envoy's `{ptr, length}` structs are `#[repr(C)]` pairs.
//!
//! Every hook runs its work inside `catch_unwind` (see `super::guard`): no panic crosses into Envoy.
#![allow(unsafe_code)]

use super::{Deferred, DmConfig, Slot};
use std::ffi::{c_char, c_void};
use std::ptr::{null, null_mut};
use std::sync::{Arc, Mutex};

#[repr(C)]
#[derive(Clone, Copy)]
struct ModuleBuffer {
    ptr: *const u8,
    length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    ptr: *const u8,
    length: usize,
}

#[repr(C)]
struct ModuleHeader {
    key_ptr: *const u8,
    key_length: usize,
    value_ptr: *const u8,
    value_length: usize,
}

#[repr(C)]
pub struct EnvoyHeader {
    key_ptr: *const u8,
    key_length: usize,
    value_ptr: *const u8,
    value_length: usize,
}

/// Envoy copies what it is given; the pairs must outlive the call.
fn module_headers(headers: &[(&str, &str)]) -> Vec<ModuleHeader> {
    headers
        .iter()
        .map(|(k, v)| ModuleHeader {
            key_ptr: k.as_ptr(),
            key_length: k.len(),
            value_ptr: v.as_ptr(),
            value_length: v.len(),
        })
        .collect()
}

/// Envoy's headers of a hook, copied (names in lower case).
fn copy_headers(headers: *const EnvoyHeader, size: usize) -> Vec<(String, String)> {
    if headers.is_null() || size == 0 {
        return Vec::new();
    }
    // SAFETY: Envoy's array of `size` headers, valid during the hook.
    let headers = unsafe { std::slice::from_raw_parts(headers, size) };
    headers
        .iter()
        .map(|h| {
            let k = EnvoyBuffer { ptr: h.key_ptr, length: h.key_length }.to_vec();
            let v = EnvoyBuffer { ptr: h.value_ptr, length: h.value_length }.to_vec();
            (String::from_utf8_lossy(&k).to_ascii_lowercase(), String::from_utf8_lossy(&v).into_owned())
        })
        .collect()
}

/// Chunks copied into one buffer (one copy each, not byte by byte).
fn concat(chunks: &[EnvoyBuffer]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunks.iter().map(|c| c.length).sum());
    for c in chunks {
        out.extend_from_slice(c.bytes());
    }
    out
}

/// Envoy's body chunks of a hook, copied into one buffer.
fn copy_chunks(chunks: *const EnvoyBuffer, count: usize) -> Vec<u8> {
    if chunks.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: Envoy's array of `count` buffers, valid during the hook.
    let chunks = unsafe { std::slice::from_raw_parts(chunks, count) };
    concat(chunks)
}

impl ModuleBuffer {
    fn of(b: &[u8]) -> Self {
        ModuleBuffer { ptr: b.as_ptr(), length: b.len() }
    }
    fn null() -> Self {
        ModuleBuffer { ptr: null(), length: 0 }
    }
}

impl EnvoyBuffer {
    const EMPTY: EnvoyBuffer = EnvoyBuffer { ptr: null(), length: 0 };

    /// Envoy's bytes, valid only until the hook returns or a setter is called: copy them at once.
    fn bytes(&self) -> &[u8] {
        if self.ptr.is_null() || self.length == 0 {
            return &[];
        }
        // SAFETY: Envoy hands a valid {ptr, length} for the current hook.
        unsafe { std::slice::from_raw_parts(self.ptr, self.length) }
    }

    /// A copy of Envoy's bytes.
    fn to_vec(self) -> Vec<u8> {
        self.bytes().to_vec()
    }
}

// --- enums of abi.h, as the integers C passes ----------------------------------------------------

pub const LOG_TRACE: u32 = 0;
pub const LOG_DEBUG: u32 = 1;
pub const LOG_INFO: u32 = 2;
pub const LOG_WARN: u32 = 3;
pub const LOG_ERROR: u32 = 4;

/// `envoy_dynamic_module_type_http_header_type`.
#[derive(Debug, Clone, Copy)]
#[repr(u32)]
pub enum HeaderMap {
    Request = 0,
    Response = 2,
}

/// `envoy_dynamic_module_type_http_body_type`.
#[derive(Debug, Clone, Copy)]
#[repr(u32)]
pub enum Body {
    ReceivedRequest = 0,
    BufferedRequest = 1,
    ReceivedResponse = 2,
    BufferedResponse = 3,
}

/// `envoy_dynamic_module_type_attribute_id` (response.code, xds.cluster_name, xds.route_name).
#[derive(Debug, Clone, Copy)]
#[repr(u32)]
pub enum Attribute {
    /// response.code (an int attribute).
    ResponseCode = 15,
    XdsClusterName = 57,
    XdsRouteName = 61,
}

/// `envoy_dynamic_module_type_http_callout_result`.
pub const CALLOUT_SUCCESS: u32 = 0;
pub const CALLOUT_RESET: u32 = 1;

/// `envoy_dynamic_module_type_http_callout_init_result`.
pub const INIT_SUCCESS: u32 = 0;
pub const INIT_MISSING_HEADERS: u32 = 1;
pub const INIT_CLUSTER_NOT_FOUND: u32 = 2;
pub const INIT_CANNOT_CREATE: u32 = 4;

/// What the header, body and trailer hooks return (FilterHeadersStatus / FilterDataStatus /
/// FilterTrailersStatus share 0 for Continue).
pub const CONTINUE: u32 = 0;
/// Headers: StopIteration (the body hooks are still called). Trailers: StopIteration.
pub const STOP: u32 = 1;
/// Body: StopIterationAndBuffer.
pub const STOP_AND_BUFFER: u32 = 1;

// Resolved against the Envoy binary at load time: a cdylib is linked with BIND_NOW, so a callback this
// Envoy does not export fails the load (`undefined symbol`), which is the version check there is.
extern "C" {
    fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;
    fn envoy_dynamic_module_callback_http_get_header(
        filter: *mut c_void,
        map: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_set_header(
        filter: *mut c_void,
        map: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_send_response(
        filter: *mut c_void,
        status: u32,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );
    fn envoy_dynamic_module_callback_http_get_body_chunks_size(filter: *mut c_void, body: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: *mut c_void,
        body: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_get_body_size(filter: *mut c_void, body: u32) -> usize;
    fn envoy_dynamic_module_callback_http_append_body(filter: *mut c_void, body: u32, data: ModuleBuffer) -> bool;
    fn envoy_dynamic_module_callback_http_drain_body(filter: *mut c_void, body: u32, bytes: usize) -> bool;
    fn envoy_dynamic_module_callback_http_filter_http_callout(
        filter: *mut c_void,
        callout_id_out: *mut u64,
        cluster: ModuleBuffer,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_ms: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_start_http_stream(
        filter: *mut c_void,
        stream_id_out: *mut u64,
        cluster: ModuleBuffer,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_ms: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_reset_http_stream(filter: *mut c_void, stream_id: u64);
    fn envoy_dynamic_module_callback_http_send_response_headers(
        filter: *mut c_void,
        headers: *mut ModuleHeader,
        headers_size: usize,
        end_stream: bool,
    );
    fn envoy_dynamic_module_callback_http_send_response_data(filter: *mut c_void, data: ModuleBuffer, end_stream: bool);
    fn envoy_dynamic_module_callback_http_filter_continue_encoding(filter: *mut c_void);
    fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: *mut c_void,
        id: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
        filter: *mut c_void,
        id: u32,
        result: *mut u64,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_filter_scheduler_new(filter: *mut c_void) -> *mut c_void;
    fn envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler: *mut c_void, event_id: u64);
    fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void);
    fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: *mut c_void,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        id_out: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: *mut c_void,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        id_out: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: *mut c_void,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: *mut c_void,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
}

// --- safe wrappers --------------------------------------------------------------------------------

pub fn log(level: u32, text: &str) {
    // SAFETY: the buffer is valid for the call; Envoy copies it.
    unsafe { envoy_dynamic_module_callback_log(level, ModuleBuffer::of(text.as_bytes())) }
}

pub fn log_enabled(level: u32) -> bool {
    // SAFETY: no pointers.
    unsafe { envoy_dynamic_module_callback_log_enabled(level) }
}

fn labels(values: &[&str]) -> Vec<ModuleBuffer> {
    values.iter().map(|v| ModuleBuffer::of(v.as_bytes())).collect()
}

/// The filter configuration in Envoy, valid during `on_http_filter_config_new` only.
#[derive(Clone, Copy)]
pub struct EnvoyConfig(*mut c_void);

impl EnvoyConfig {
    /// Defines a counter (or a histogram) with these label names; `None` if Envoy refused.
    pub fn define(self, histogram: bool, name: &str, label_names: &[&str]) -> Option<usize> {
        let mut names = labels(label_names);
        let mut id = 0usize;
        let (ptr, n) = (names.as_mut_ptr(), names.len());
        // SAFETY: the config pointer is Envoy's for this hook; buffers outlive the call.
        let result = unsafe {
            if histogram {
                envoy_dynamic_module_callback_http_filter_config_define_histogram(
                    self.0,
                    ModuleBuffer::of(name.as_bytes()),
                    ptr,
                    n,
                    &mut id,
                )
            } else {
                envoy_dynamic_module_callback_http_filter_config_define_counter(
                    self.0,
                    ModuleBuffer::of(name.as_bytes()),
                    ptr,
                    n,
                    &mut id,
                )
            }
        };
        (result == 0).then_some(id)
    }
}

/// What a streamed callout's hooks report.
#[derive(Debug, Clone)]
pub enum StreamEvent {
    /// Headers, and whether they end the stream.
    Headers(Vec<(String, String)>, bool),
    /// Body bytes, and whether they end the stream (trailers end it with no bytes).
    Data(Vec<u8>, bool),
    Complete,
    /// Envoy's reset reason.
    Reset(u32),
}

/// A callout's reply as the completion hook hands it (copied: Envoy's buffers end with the hook).
#[derive(Debug, Clone)]
pub struct CalloutReply {
    pub id: u64,
    pub result: u32,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The stream's filter in Envoy: every call acts on it. Valid from `on_http_filter_new` until
/// `on_http_filter_destroy`, on the stream's worker thread.
#[derive(Clone, Copy)]
pub struct Envoy(*mut c_void);

impl Envoy {
    pub fn header(self, map: HeaderMap, name: &str) -> Option<String> {
        let mut out = EnvoyBuffer::EMPTY;
        // SAFETY: valid filter pointer; `out` is written by Envoy.
        let ok = unsafe {
            envoy_dynamic_module_callback_http_get_header(
                self.0,
                map as u32,
                ModuleBuffer::of(name.as_bytes()),
                &mut out,
                0,
                null_mut(),
            )
        };
        (ok && !out.ptr.is_null()).then(|| String::from_utf8_lossy(&out.to_vec()).into_owned())
    }

    /// Sets a header, or removes it (`None`). False if Envoy has no such map now.
    pub fn set_header(self, map: HeaderMap, name: &str, value: Option<&str>) -> bool {
        let value = value.map_or_else(ModuleBuffer::null, |v| ModuleBuffer::of(v.as_bytes()));
        // SAFETY: valid filter pointer; buffers outlive the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_header(self.0, map as u32, ModuleBuffer::of(name.as_bytes()), value)
        }
    }

    pub fn send_response(self, status: u16, headers: &[(&str, &str)], body: &[u8], details: &str) {
        let mut hs = module_headers(headers);
        // SAFETY: valid filter pointer; every buffer outlives the call (Envoy copies them).
        unsafe {
            envoy_dynamic_module_callback_http_send_response(
                self.0,
                u32::from(status),
                hs.as_mut_ptr(),
                hs.len(),
                ModuleBuffer::of(body),
                ModuleBuffer::of(details.as_bytes()),
            );
        }
    }

    /// The bytes of one body buffer (empty when Envoy has none now).
    pub fn body(self, which: Body) -> Vec<u8> {
        // SAFETY: valid filter pointer; the vector has room for every chunk Envoy reports.
        unsafe {
            let n = envoy_dynamic_module_callback_http_get_body_chunks_size(self.0, which as u32);
            if n == 0 {
                return Vec::new();
            }
            let mut chunks = vec![EnvoyBuffer::EMPTY; n];
            if !envoy_dynamic_module_callback_http_get_body_chunks(self.0, which as u32, chunks.as_mut_ptr()) {
                return Vec::new();
            }
            concat(&chunks)
        }
    }

    /// Empties one body buffer; false when Envoy has none now.
    pub fn drain(self, which: Body) -> bool {
        // SAFETY: valid filter pointer.
        unsafe {
            let size = envoy_dynamic_module_callback_http_get_body_size(self.0, which as u32);
            envoy_dynamic_module_callback_http_drain_body(self.0, which as u32, size)
        }
    }

    pub fn append(self, which: Body, data: &[u8]) -> bool {
        // SAFETY: valid filter pointer; Envoy copies the data.
        unsafe { envoy_dynamic_module_callback_http_append_body(self.0, which as u32, ModuleBuffer::of(data)) }
    }

    /// Starts a callout; `Err` carries Envoy's init result.
    pub fn callout(
        self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        timeout_ms: u64,
    ) -> Result<u64, u32> {
        let mut hs = module_headers(headers);
        let body = body.map_or_else(ModuleBuffer::null, ModuleBuffer::of);
        let mut id = 0u64;
        // SAFETY: valid filter pointer; every buffer outlives the call (Envoy copies them).
        let result = unsafe {
            envoy_dynamic_module_callback_http_filter_http_callout(
                self.0,
                &mut id,
                ModuleBuffer::of(cluster.as_bytes()),
                hs.as_mut_ptr(),
                hs.len(),
                body,
                timeout_ms,
            )
        };
        if result == INIT_SUCCESS {
            Ok(id)
        } else {
            Err(result)
        }
    }

    /// Starts a streamed callout with its whole request; its reply comes to the `http_stream_*`
    /// hooks. `Err` carries Envoy's init result.
    pub fn start_stream(
        self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<u64, u32> {
        let mut hs = module_headers(headers);
        let mut id = 0u64;
        // SAFETY: valid filter pointer; every buffer outlives the call (Envoy copies them).
        let result = unsafe {
            envoy_dynamic_module_callback_http_filter_start_http_stream(
                self.0,
                &mut id,
                ModuleBuffer::of(cluster.as_bytes()),
                hs.as_mut_ptr(),
                hs.len(),
                ModuleBuffer::of(body),
                true,
                timeout_ms,
            )
        };
        if result == INIT_SUCCESS {
            Ok(id)
        } else {
            Err(result)
        }
    }

    pub fn reset_stream(self, id: u64) {
        // SAFETY: valid filter pointer; an unknown id is ignored by Envoy.
        unsafe { envoy_dynamic_module_callback_http_filter_reset_http_stream(self.0, id) }
    }

    /// Response headers sent by the filter itself (the request is not forwarded).
    pub fn send_headers(self, headers: &[(&str, &str)], end_stream: bool) {
        let mut hs = module_headers(headers);
        // SAFETY: valid filter pointer; Envoy copies the headers.
        unsafe {
            envoy_dynamic_module_callback_http_send_response_headers(self.0, hs.as_mut_ptr(), hs.len(), end_stream)
        }
    }

    /// Response body bytes after `send_headers`.
    pub fn send_data(self, data: &[u8], end_stream: bool) {
        // SAFETY: valid filter pointer; Envoy copies the data.
        unsafe { envoy_dynamic_module_callback_http_send_response_data(self.0, ModuleBuffer::of(data), end_stream) }
    }

    pub fn continue_encoding(self) {
        // SAFETY: valid filter pointer.
        unsafe { envoy_dynamic_module_callback_http_filter_continue_encoding(self.0) }
    }

    pub fn attribute(self, id: Attribute) -> Option<String> {
        let mut out = EnvoyBuffer::EMPTY;
        // SAFETY: valid filter pointer; `out` is written by Envoy.
        let ok = unsafe { envoy_dynamic_module_callback_http_filter_get_attribute_string(self.0, id as u32, &mut out) };
        ok.then(|| String::from_utf8_lossy(&out.to_vec()).into_owned())
    }

    pub fn attribute_int(self, id: Attribute) -> Option<u64> {
        let mut out = 0u64;
        // SAFETY: valid filter pointer; `out` is written by Envoy.
        let ok = unsafe { envoy_dynamic_module_callback_http_filter_get_attribute_int(self.0, id as u32, &mut out) };
        ok.then_some(out)
    }

    /// Adds `value` to a counter, or records it in a histogram, defined by the stream's configuration.
    pub fn metric(self, histogram: bool, id: usize, label_values: &[&str], value: u64) {
        let mut values = labels(label_values);
        let (ptr, n) = (values.as_mut_ptr(), values.len());
        // SAFETY: valid filter pointer; the label buffers outlive the call.
        unsafe {
            if histogram {
                envoy_dynamic_module_callback_http_filter_record_histogram_value(self.0, id, ptr, n, value);
            } else {
                envoy_dynamic_module_callback_http_filter_increment_counter(self.0, id, ptr, n, value);
            }
        }
    }

    /// A scheduler for this stream: wake-ups from the timer thread come back on the worker thread.
    pub fn scheduler(self) -> Scheduler {
        // SAFETY: valid filter pointer; the scheduler is deleted by `Scheduler::close`.
        let ptr = unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.0) };
        Scheduler(Arc::new(Mutex::new(SchedulerPtr(ptr))))
    }
}

struct SchedulerPtr(*mut c_void);

// SAFETY: Envoy's scheduler may be committed from any thread (abi.h); the mutex makes the commit and
// the delete exclusive, and a deleted scheduler is null.
unsafe impl Send for SchedulerPtr {}

/// Envoy's per-stream scheduler, shared with timer threads.
#[derive(Clone)]
pub struct Scheduler(Arc<Mutex<SchedulerPtr>>);

impl Scheduler {
    /// Asks Envoy to call `on_http_filter_scheduled(event)` on the stream's thread; a no-op once closed.
    pub fn commit(&self, event: u64) {
        if let Ok(s) = self.0.lock() {
            if !s.0.is_null() {
                // SAFETY: not deleted (checked under the lock that `close` takes).
                unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(s.0, event) }
            }
        }
    }

    /// Deletes Envoy's scheduler (the stream is going away); later commits do nothing.
    pub fn close(&self) {
        if let Ok(mut s) = self.0.lock() {
            if !s.0.is_null() {
                // SAFETY: created by scheduler_new, deleted once.
                unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(s.0) }
                s.0 = null_mut();
            }
        }
    }
}

// --- hooks -----------------------------------------------------------------------------------------

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
    // SAFETY: made by Box::into_raw in filter_new; Envoy destroys it once, after every other hook.
    let slot = unsafe { Box::from_raw(module.cast_mut().cast::<Slot>()) };
    slot.destroy();
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> u32 {
    slot(m).map_or(CONTINUE, |s| s.request_headers(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> u32 {
    slot(m).map_or(CONTINUE, |s| s.request_body(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(_f: *mut c_void, m: *const c_void) -> u32 {
    slot(m).map_or(CONTINUE, Slot::request_trailers)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> u32 {
    slot(m).map_or(CONTINUE, |s| s.response_headers(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _f: *mut c_void,
    m: *const c_void,
    eos: bool,
) -> u32 {
    slot(m).map_or(CONTINUE, |s| s.response_body(eos))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(_f: *mut c_void, m: *const c_void) -> u32 {
    slot(m).map_or(CONTINUE, Slot::response_trailers)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(_f: *mut c_void, m: *const c_void) {
    if let Some(s) = slot(m) {
        s.stream_complete();
    }
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
    let Some(s) = slot(m) else { return };
    let headers = copy_headers(headers, headers_size);
    let body = copy_chunks(chunks, chunks_size);
    s.deliver(Deferred::Callout(CalloutReply { id, result, headers, body }));
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(_f: *mut c_void, m: *const c_void, event: u64) {
    if let Some(s) = slot(m) {
        s.deliver(Deferred::Wake(event));
    }
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
    if let Some(s) = slot(m) {
        let headers = copy_headers(headers, size);
        s.deliver(Deferred::Stream(stream, StreamEvent::Headers(headers, end)));
    }
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
    if let Some(s) = slot(m) {
        let data = copy_chunks(data, count);
        s.deliver(Deferred::Stream(stream, StreamEvent::Data(data, end)));
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
    _trailers: *const EnvoyHeader,
    _size: usize,
) {
    if let Some(s) = slot(m) {
        s.deliver(Deferred::Stream(stream, StreamEvent::Data(Vec::new(), true)));
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
) {
    if let Some(s) = slot(m) {
        s.deliver(Deferred::Stream(stream, StreamEvent::Complete));
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _f: *mut c_void,
    m: *const c_void,
    stream: u64,
    reason: u32,
) {
    if let Some(s) = slot(m) {
        s.deliver(Deferred::Stream(stream, StreamEvent::Reset(reason)));
    }
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
