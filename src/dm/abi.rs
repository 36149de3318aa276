//! Envoy dynamic-module ABI (`v0.2.0`, Envoy 1.40), raw: the C types, the enums as the integers C
//! passes, and the callbacks this filter calls, declared by hand from
//! `source/extensions/dynamic_modules/abi/abi.h` and checked against it by `tests/dm_abi.rs` (every
//! declaration here and in `hooks.rs`: names, parameter and return types, enum values). `envoy.rs`
//! wraps them safely, `hooks.rs` exports the hooks Envoy calls; these three files are the only
//! `unsafe` of the dynamic-module build. C enums Envoy passes in cross as plain integers (a value
//! outside a Rust enum would be undefined behaviour); what a hook returns is a Rust enum per hook
//! kind; Envoy's `{ptr, length}` structs are `#[repr(C)]` pairs.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr::null;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleBuffer {
    ptr: *const u8,
    length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    pub ptr: *const u8,
    pub length: usize,
}

#[repr(C)]
pub struct ModuleHeader {
    key_ptr: *const u8,
    key_length: usize,
    value_ptr: *const u8,
    value_length: usize,
}

#[repr(C)]
pub struct EnvoyHeader {
    pub key_ptr: *const u8,
    pub key_length: usize,
    pub value_ptr: *const u8,
    pub value_length: usize,
}

/// Envoy copies what it is given; the pairs must outlive the call.
pub fn module_headers(headers: &[(&str, &str)]) -> Vec<ModuleHeader> {
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
pub fn copy_headers(headers: *const EnvoyHeader, size: usize) -> Vec<(String, String)> {
    if headers.is_null() || size == 0 {
        return Vec::new();
    }
    // SAFETY: Envoy's array of `size` headers, valid during the hook.
    let headers = unsafe { std::slice::from_raw_parts(headers, size) };
    // One allocation per name and per value: read in place, not copied first (a callout reply's
    // headers were 13,000 instructions per request with the intermediate copies).
    headers
        .iter()
        .map(|h| {
            let k = EnvoyBuffer { ptr: h.key_ptr, length: h.key_length };
            let v = EnvoyBuffer { ptr: h.value_ptr, length: h.value_length };
            let mut name = owned_text(k.bytes());
            name.make_ascii_lowercase();
            (name, owned_text(v.bytes()))
        })
        .collect()
}

/// Envoy's bytes as text, invalid UTF-8 replaced. Headers are nearly always valid, and checking them
/// whole (`str::from_utf8`, word by word over ASCII) costs a third of walking them chunk by chunk as
/// `String::from_utf8_lossy` does.
pub fn owned_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Chunks copied into one buffer (one copy each, not byte by byte).
pub fn concat(chunks: &[EnvoyBuffer]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunks.iter().map(|c| c.length).sum());
    for c in chunks {
        out.extend_from_slice(c.bytes());
    }
    out
}

/// Envoy's body chunks of a hook, copied into one buffer.
pub fn copy_chunks(chunks: *const EnvoyBuffer, count: usize) -> Vec<u8> {
    if chunks.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: Envoy's array of `count` buffers, valid during the hook.
    let chunks = unsafe { std::slice::from_raw_parts(chunks, count) };
    concat(chunks)
}

impl ModuleBuffer {
    pub fn of(b: &[u8]) -> Self {
        ModuleBuffer { ptr: b.as_ptr(), length: b.len() }
    }
    pub fn null() -> Self {
        ModuleBuffer { ptr: null(), length: 0 }
    }
}

impl EnvoyBuffer {
    pub const EMPTY: EnvoyBuffer = EnvoyBuffer { ptr: null(), length: 0 };

    /// Envoy's bytes, valid only until the hook returns or a setter is called: copy them at once.
    pub fn bytes(&self) -> &[u8] {
        if self.ptr.is_null() || self.length == 0 {
            return &[];
        }
        // SAFETY: Envoy hands a valid {ptr, length} for the current hook.
        unsafe { std::slice::from_raw_parts(self.ptr, self.length) }
    }

    /// A copy of Envoy's bytes.
    pub fn to_vec(self) -> Vec<u8> {
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

/// `envoy_dynamic_module_type_on_http_filter_{request,response}_headers_status`: what a header
/// hook returns. Each hook kind has its own type, so a body status cannot leave a header hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum HeadersStatus {
    Continue = 0,
    /// The body hooks are still called.
    StopIteration = 1,
}

/// `envoy_dynamic_module_type_on_http_filter_{request,response}_body_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BodyStatus {
    Continue = 0,
    StopIterationAndBuffer = 1,
}

/// `envoy_dynamic_module_type_on_http_filter_{request,response}_trailers_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum TrailersStatus {
    Continue = 0,
    StopIteration = 1,
}

/// A hook's status: let the data go on, or hold it.
pub trait Status: Copy {
    const CONTINUE: Self;
    const STOP: Self;
}

impl Status for HeadersStatus {
    const CONTINUE: Self = HeadersStatus::Continue;
    const STOP: Self = HeadersStatus::StopIteration;
}

impl Status for BodyStatus {
    const CONTINUE: Self = BodyStatus::Continue;
    const STOP: Self = BodyStatus::StopIterationAndBuffer;
}

impl Status for TrailersStatus {
    const CONTINUE: Self = TrailersStatus::Continue;
    const STOP: Self = TrailersStatus::StopIteration;
}

/// `envoy_dynamic_module_type_http_filter_stream_reset_reason`: a local reset.
pub const RESET_LOCAL: u32 = 0;

// Resolved against the Envoy binary at load time: a cdylib is linked with BIND_NOW, so a callback this
// Envoy does not export fails the load (`undefined symbol`), which is the version check there is.
extern "C" {
    pub fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    pub fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_header(
        filter: *mut c_void,
        map: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_set_header(
        filter: *mut c_void,
        map: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_send_response(
        filter: *mut c_void,
        status: u32,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );
    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(filter: *mut c_void, body: u32) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: *mut c_void,
        body: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_body_size(filter: *mut c_void, body: u32) -> usize;
    pub fn envoy_dynamic_module_callback_http_append_body(filter: *mut c_void, body: u32, data: ModuleBuffer) -> bool;
    pub fn envoy_dynamic_module_callback_http_drain_body(filter: *mut c_void, body: u32, bytes: usize) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_http_callout(
        filter: *mut c_void,
        callout_id_out: *mut u64,
        cluster: ModuleBuffer,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_ms: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_start_http_stream(
        filter: *mut c_void,
        stream_id_out: *mut u64,
        cluster: ModuleBuffer,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_ms: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_reset_http_stream(filter: *mut c_void, stream_id: u64);
    pub fn envoy_dynamic_module_callback_http_send_response_headers(
        filter: *mut c_void,
        headers: *mut ModuleHeader,
        headers_size: usize,
        end_stream: bool,
    );
    pub fn envoy_dynamic_module_callback_http_send_response_data(
        filter: *mut c_void,
        data: ModuleBuffer,
        end_stream: bool,
    );
    pub fn envoy_dynamic_module_callback_http_filter_continue_encoding(filter: *mut c_void);
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: *mut c_void,
        id: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
        filter: *mut c_void,
        id: u32,
        result: *mut u64,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_config_http_callout(
        config: *mut c_void,
        callout_id_out: *mut u64,
        cluster: ModuleBuffer,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_ms: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(config: *mut c_void) -> *mut c_void;
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(scheduler: *mut c_void, event_id: u64);
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(scheduler: *mut c_void);
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_new(filter: *mut c_void) -> *mut c_void;
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_commit(scheduler: *mut c_void, event_id: u64);
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void);
    pub fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: *mut c_void,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        id_out: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
        config: *mut c_void,
        name: ModuleBuffer,
        label_names: *mut ModuleBuffer,
        label_names_length: usize,
        id_out: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: *mut c_void,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_record_histogram_value(
        filter: *mut c_void,
        id: usize,
        label_values: *mut ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envoy_text_is_copied_whole_and_invalid_utf8_replaced() {
        assert_eq!(owned_text(b"application/json"), "application/json");
        assert_eq!(owned_text("zürich".as_bytes()), "zürich");
        assert_eq!(owned_text(b"a\xffb"), "a\u{fffd}b");
        let h = [EnvoyHeader {
            key_ptr: b"Content-Type".as_ptr(),
            key_length: 12,
            value_ptr: b"x\xfe".as_ptr(),
            value_length: 2,
        }];
        assert_eq!(copy_headers(h.as_ptr(), 1), vec![("content-type".to_string(), "x\u{fffd}".to_string())]);
    }
}
