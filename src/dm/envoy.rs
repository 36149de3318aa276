//! Safe wrappers of the ABI (`abi.rs`): the stream's filter (`Envoy`), its configuration
//! (`EnvoyConfig`), the scheduler that brings wake-ups back to the stream's thread, and the logger's
//! calls. Every pointer is Envoy's and valid for the documented span; every buffer outlives its call.
#![allow(unsafe_code)]

use super::abi::*;
use crate::agent::SummaryValue;
use crate::host::port::Outgoing;
use crate::host::summary::SummaryTarget;
use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::{Arc, Mutex};

pub fn log(level: u32, text: &str) {
    // SAFETY: the buffer is valid for the call; Envoy copies it.
    unsafe { envoy_dynamic_module_callback_log(level, ModuleBuffer::of(text.as_bytes())) }
}

pub fn log_enabled(level: u32) -> bool {
    // SAFETY: no pointers.
    unsafe { envoy_dynamic_module_callback_log_enabled(level) }
}

/// A stream's or a configuration's callout: the same C signature, a different owner.
type CalloutFn =
    unsafe extern "C" fn(*mut c_void, *mut u64, ModuleBuffer, *mut ModuleHeader, usize, ModuleBuffer, u64) -> u32;

/// Starts `call` with Envoy's `start` for `owner`; `Err` carries Envoy's init result.
fn start_callout(start: CalloutFn, owner: *mut c_void, call: &Outgoing<'_>) -> Result<u64, u32> {
    let mut hs = module_headers(&call.headers);
    let body = call.body.map_or_else(ModuleBuffer::null, ModuleBuffer::of);
    let cluster = ModuleBuffer::of(call.cluster.as_bytes());
    let mut id = 0u64;
    // SAFETY: `owner` is the live filter or configuration `start` belongs to; every buffer outlives
    // the call (Envoy copies them).
    let result = unsafe { start(owner, &mut id, cluster, hs.as_mut_ptr(), hs.len(), body, call.timeout_ms) };
    if result == INIT_SUCCESS {
        Ok(id)
    } else {
        Err(result)
    }
}

fn labels(values: &[&str]) -> Vec<ModuleBuffer> {
    values.iter().map(|v| ModuleBuffer::of(v.as_bytes())).collect()
}

/// The filter configuration in Envoy: valid from `on_http_filter_config_new` until its destroy, on the
/// main thread (metrics are defined in `config_new` only; callouts and schedulers later too).
#[derive(Clone, Copy)]
pub struct EnvoyConfig(pub(super) *mut c_void);

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

    /// Starts a callout of the configuration (outside any stream; its reply comes to the main
    /// thread's `on_http_filter_config_http_callout_done`). `Err` carries Envoy's init result.
    pub fn callout(self, call: &Outgoing<'_>) -> Result<u64, u32> {
        // The configuration is Envoy's until config_destroy.
        start_callout(envoy_dynamic_module_callback_http_filter_config_http_callout, self.0, call)
    }

    /// Adds `value` to a counter of the configuration (the main thread), if this Envoy can; false
    /// when it cannot (`optional::Optional::config_increment`).
    pub fn increment(self, id: usize, label_values: &[&str], value: u64) -> bool {
        let Some(increment) = super::optional::optional().config_increment else { return false };
        let mut values = labels(label_values);
        // SAFETY: the configuration is Envoy's until config_destroy (this runs on the main thread
        // before it); the label buffers outlive the call.
        unsafe { increment(self.0, id, values.as_mut_ptr(), values.len(), value) };
        true
    }

    /// A scheduler of the configuration: wake-ups come back on the main thread.
    pub fn scheduler(self) -> Scheduler {
        // SAFETY: the configuration is Envoy's until config_destroy; deleted by `Scheduler::close`.
        let ptr = unsafe { envoy_dynamic_module_callback_http_filter_config_scheduler_new(self.0) };
        Scheduler(Arc::new(Mutex::new(SchedulerPtr { ptr, config: true })))
    }
}

/// A configuration kept for a hook that is not handed it (its destroy): shared with the workers, used
/// only on the main thread.
#[derive(Clone, Copy)]
pub struct KeptConfig(EnvoyConfig);

// SAFETY: workers only carry the value; Envoy is called with it on the main thread alone
// (`on_main_thread`'s contract).
unsafe impl Send for KeptConfig {}
unsafe impl Sync for KeptConfig {}

impl KeptConfig {
    pub fn new(config: EnvoyConfig) -> Self {
        KeptConfig(config)
    }

    /// The configuration, for a call made on the main thread before its destroy returns.
    pub fn on_main_thread(self) -> EnvoyConfig {
        self.0
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
pub struct Envoy(pub(super) *mut c_void);

thread_local! {
    /// Filters this worker's Envoy tore down inside a call of the module's own. Envoy before 1.39
    /// destroys a filter synchronously when a call ends its stream (a local reply, the answer's last
    /// bytes), and then clears the stream's callbacks: a later call with the filter would dereference
    /// them. Metrics stay allowed: they go through the filter's configuration, which lives on.
    static TORN_DOWN: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

impl Envoy {
    /// Envoy still holds the stream: calls that act on it may be made.
    pub fn live(self) -> bool {
        TORN_DOWN.with_borrow(|t| t.is_empty() || !t.contains(&(self.0 as usize)))
    }

    /// Envoy destroyed the filter inside one of the module's calls: nothing reaches the stream now.
    pub(super) fn tear_down(self) {
        TORN_DOWN.with_borrow_mut(|t| t.push(self.0 as usize));
    }

    /// The module let go of the filter: its address may come back as another stream's.
    pub(super) fn forget(self) {
        TORN_DOWN.with_borrow_mut(|t| t.retain(|p| *p != self.0 as usize));
    }

    pub fn header(self, map: HeaderMap, name: &str) -> Option<String> {
        if !self.live() {
            return None;
        }
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
        (ok && !out.ptr.is_null()).then(|| owned_text(out.bytes()))
    }

    /// Sets a header, or removes it (`None`). False if Envoy has no such map now.
    pub fn set_header(self, map: HeaderMap, name: &str, value: Option<&str>) -> bool {
        if !self.live() {
            return false;
        }
        let value = value.map_or_else(ModuleBuffer::null, |v| ModuleBuffer::of(v.as_bytes()));
        // SAFETY: valid filter pointer; buffers outlive the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_header(self.0, map as u32, ModuleBuffer::of(name.as_bytes()), value)
        }
    }

    pub fn send_response(self, status: u16, headers: &[(&str, &str)], body: &[u8], details: &str) {
        if !self.live() {
            return;
        }
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

    /// Appends the bytes of one body buffer to `out` (nothing when Envoy has none now): the chunks
    /// are copied once, straight into the buffer the agent reads.
    pub fn body_into(self, which: Body, out: &mut Vec<u8>) {
        if !self.live() {
            return;
        }
        // SAFETY: valid filter pointer; the vector has room for every chunk Envoy reports.
        unsafe {
            let n = envoy_dynamic_module_callback_http_get_body_chunks_size(self.0, which as u32);
            if n == 0 {
                return;
            }
            let mut chunks = vec![EnvoyBuffer::EMPTY; n];
            if !envoy_dynamic_module_callback_http_get_body_chunks(self.0, which as u32, chunks.as_mut_ptr()) {
                return;
            }
            out.reserve(chunks.iter().map(|c| c.length).sum());
            for c in &chunks {
                out.extend_from_slice(c.bytes());
            }
        }
    }

    /// Empties one body buffer; false when Envoy has none now.
    pub fn drain(self, which: Body) -> bool {
        if !self.live() {
            return false;
        }
        // SAFETY: valid filter pointer.
        unsafe {
            let size = envoy_dynamic_module_callback_http_get_body_size(self.0, which as u32);
            envoy_dynamic_module_callback_http_drain_body(self.0, which as u32, size)
        }
    }

    pub fn append(self, which: Body, data: &[u8]) -> bool {
        if !self.live() {
            return false;
        }
        // SAFETY: valid filter pointer; Envoy copies the data.
        unsafe { envoy_dynamic_module_callback_http_append_body(self.0, which as u32, ModuleBuffer::of(data)) }
    }

    /// Starts a callout; `Err` carries Envoy's init result.
    pub fn callout(self, call: &Outgoing<'_>) -> Result<u64, u32> {
        if !self.live() {
            return Err(INIT_CANNOT_CREATE);
        }
        start_callout(envoy_dynamic_module_callback_http_filter_http_callout, self.0, call)
    }

    /// Starts a streamed callout with its whole request; its reply comes to the `http_stream_*`
    /// hooks. `Err` carries Envoy's init result.
    pub fn start_stream(self, call: &Outgoing<'_>) -> Result<u64, u32> {
        if !self.live() {
            return Err(INIT_CANNOT_CREATE);
        }
        let (cluster, body, timeout_ms) = (call.cluster, call.body.unwrap_or_default(), call.timeout_ms);
        let mut hs = module_headers(&call.headers);
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
        if !self.live() {
            return;
        }
        // SAFETY: valid filter pointer; an unknown id is ignored by Envoy.
        unsafe { envoy_dynamic_module_callback_http_filter_reset_http_stream(self.0, id) }
    }

    /// Response headers sent by the filter itself (the request is not forwarded).
    pub fn send_headers(self, headers: &[(&str, &str)], end_stream: bool) {
        if !self.live() {
            return;
        }
        let mut hs = module_headers(headers);
        // SAFETY: valid filter pointer; Envoy copies the headers.
        unsafe {
            envoy_dynamic_module_callback_http_send_response_headers(self.0, hs.as_mut_ptr(), hs.len(), end_stream)
        }
    }

    /// Response body bytes after `send_headers`.
    pub fn send_data(self, data: &[u8], end_stream: bool) {
        if !self.live() {
            return;
        }
        // SAFETY: valid filter pointer; Envoy copies the data.
        unsafe { envoy_dynamic_module_callback_http_send_response_data(self.0, ModuleBuffer::of(data), end_stream) }
    }

    pub fn continue_encoding(self) {
        if !self.live() {
            return;
        }
        // SAFETY: valid filter pointer.
        unsafe { envoy_dynamic_module_callback_http_filter_continue_encoding(self.0) }
    }

    pub fn attribute(self, id: Attribute) -> Option<String> {
        if !self.live() {
            return None;
        }
        let mut out = EnvoyBuffer::EMPTY;
        // SAFETY: valid filter pointer; `out` is written by Envoy.
        let ok = unsafe { envoy_dynamic_module_callback_http_filter_get_attribute_string(self.0, id as u32, &mut out) };
        ok.then(|| owned_text(out.bytes()))
    }

    pub fn attribute_int(self, id: Attribute) -> Option<u64> {
        if !self.live() {
            return None;
        }
        let mut out = 0u64;
        // SAFETY: valid filter pointer; `out` is written by Envoy.
        let ok = unsafe { envoy_dynamic_module_callback_http_filter_get_attribute_int(self.0, id as u32, &mut out) };
        ok.then_some(out)
    }

    /// Adds `value` to a counter, or records it in a histogram, defined by the stream's configuration.
    pub fn metric(self, histogram: bool, id: usize, label_values: &[&str], value: u64) {
        // The catalogue's metrics have at most two labels: no allocation per update.
        let mut values = [ModuleBuffer::null(); 4];
        let n = label_values.len().min(values.len());
        for (slot, v) in values.iter_mut().zip(label_values) {
            *slot = ModuleBuffer::of(v.as_bytes());
        }
        let ptr = values.as_mut_ptr();
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
        // SAFETY: valid filter pointer; the scheduler is deleted by `Scheduler::close`. A torn-down
        // stream gets none: its commits do nothing.
        let ptr = if self.live() {
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.0) }
        } else {
            null_mut()
        };
        Scheduler(Arc::new(Mutex::new(SchedulerPtr { ptr, config: false })))
    }
}

/// Envoy's scheduler of a stream, or of a configuration (`config`).
struct SchedulerPtr {
    ptr: *mut c_void,
    config: bool,
}

// SAFETY: Envoy's scheduler may be committed from any thread (abi.h); the mutex makes the commit and
// the delete exclusive, and a deleted scheduler is null.
unsafe impl Send for SchedulerPtr {}

/// Envoy's scheduler of a stream (or of a configuration), shared with the timer thread.
#[derive(Clone)]
pub struct Scheduler(Arc<Mutex<SchedulerPtr>>);

impl Scheduler {
    /// Asks Envoy to call `on_http_filter_scheduled(event)` on the stream's thread (a configuration's:
    /// `on_http_filter_config_scheduled` on the main thread); a no-op once closed.
    pub fn commit(&self, event: u64) {
        if let Ok(s) = self.0.lock() {
            if s.ptr.is_null() {
                return;
            }
            // SAFETY: not deleted (checked under the lock that `close` takes).
            unsafe {
                if s.config {
                    envoy_dynamic_module_callback_http_filter_config_scheduler_commit(s.ptr, event);
                } else {
                    envoy_dynamic_module_callback_http_filter_scheduler_commit(s.ptr, event);
                }
            }
        }
    }

    /// Deletes Envoy's scheduler (the stream is going away); later commits do nothing.
    pub fn close(&self) {
        if let Ok(mut s) = self.0.lock() {
            if s.ptr.is_null() {
                return;
            }
            // SAFETY: created by scheduler_new, deleted once.
            unsafe {
                if s.config {
                    envoy_dynamic_module_callback_http_filter_config_scheduler_delete(s.ptr);
                } else {
                    envoy_dynamic_module_callback_http_filter_scheduler_delete(s.ptr);
                }
            }
            s.ptr = null_mut();
        }
    }
}

/// The summary with the callbacks this Envoy has (`optional`): a missing one costs that form only.
impl SummaryTarget for Envoy {
    fn metadata_struct(&self, namespace: &str, serialized: &[u8]) -> bool {
        if !self.live() {
            return false;
        }
        let Some(set) = super::optional::optional().metadata_struct else {
            return false;
        };
        // SAFETY: valid filter pointer; both buffers outlive the call (Envoy parses and copies them).
        unsafe { set(self.0, ModuleBuffer::of(namespace.as_bytes()), ModuleBuffer::of(serialized)) };
        true
    }

    fn metadata_field(&self, namespace: &str, key: &str, value: &SummaryValue) {
        if !self.live() {
            return;
        }
        let o = super::optional::optional();
        let (ns, key) = (ModuleBuffer::of(namespace.as_bytes()), ModuleBuffer::of(key.as_bytes()));
        // SAFETY: valid filter pointer; every buffer outlives the call (Envoy copies them).
        unsafe {
            match (value, o.metadata_number, o.metadata_string) {
                (SummaryValue::Number(n), Some(set), _) => set(self.0, ns, key, *n as f64),
                (SummaryValue::Text(t), _, Some(set)) => set(self.0, ns, key, ModuleBuffer::of(t.as_bytes())),
                (SummaryValue::Number(n), None, Some(set)) => {
                    set(self.0, ns, key, ModuleBuffer::of(n.to_string().as_bytes()))
                }
                _ => {}
            }
        }
    }

    fn filter_state(&self, key: &str, value: &str) {
        if !self.live() {
            return;
        }
        if let Some(set) = super::optional::optional().filter_state {
            // SAFETY: valid filter pointer; both buffers outlive the call (Envoy copies them).
            unsafe { set(self.0, ModuleBuffer::of(key.as_bytes()), ModuleBuffer::of(value.as_bytes())) };
        }
    }
}
