//! Proxy-Wasm ABI 0.2.1 host calls, written for this filter (the only `unsafe` in the crate). Every
//! call returns the host's status as a `Result`: nothing here panics on a status it did not expect,
//! as the SDK's wrappers did, and statuses are read as plain integers (a status outside an enum
//! would be undefined behaviour).
#![allow(unsafe_code)]

use std::ptr::{null, null_mut};

/// A host status other than Ok (1 NotFound, 2 BadArgument, 7 Empty, 10 InternalFailure, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u32);

const OK: u32 = 0;
const NOT_FOUND: u32 = 1;

pub type HostResult<T> = Result<T, Status>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Buffer {
    RequestBody = 0,
    ResponseBody = 1,
    CallResponseBody = 4,
    PluginConfiguration = 7,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
#[allow(clippy::enum_variant_names)] // The ABI's names.
pub enum Map {
    RequestHeaders = 0,
    ResponseHeaders = 2,
    CallResponseHeaders = 6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stream {
    /// The request is never resumed from here: in the response phase that breaks Envoy, and in the
    /// request phase the local reply ends the stream.
    Response = 1,
}

pub const LOG_TRACE: u32 = 0;
pub const LOG_DEBUG: u32 = 1;
pub const LOG_INFO: u32 = 2;
pub const LOG_WARN: u32 = 3;
pub const LOG_ERROR: u32 = 4;

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_log(level: u32, data: *const u8, size: usize) -> u32;
    fn proxy_get_log_level(level: *mut u32) -> u32;
    fn proxy_get_current_time_nanoseconds(time: *mut u64) -> u32;
    fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
    fn proxy_set_effective_context(context_id: u32) -> u32;
    fn proxy_get_buffer_bytes(kind: u32, start: usize, max: usize, data: *mut *mut u8, size: *mut usize) -> u32;
    fn proxy_set_buffer_bytes(kind: u32, start: usize, size: usize, data: *const u8, data_size: usize) -> u32;
    fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
    fn proxy_get_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        value: *mut *mut u8,
        value_size: *mut usize,
    ) -> u32;
    fn proxy_replace_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_remove_header_map_value(map: u32, key: *const u8, key_size: usize) -> u32;
    fn proxy_send_local_response(
        status: u32,
        details: *const u8,
        details_size: usize,
        body: *const u8,
        body_size: usize,
        headers: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_http_call(
        upstream: *const u8,
        upstream_size: usize,
        headers: *const u8,
        headers_size: usize,
        body: *const u8,
        body_size: usize,
        trailers: *const u8,
        trailers_size: usize,
        timeout_ms: u32,
        token: *mut u32,
    ) -> u32;
    fn proxy_continue_stream(stream: u32) -> u32;
    fn proxy_get_property(path: *const u8, path_size: usize, value: *mut *mut u8, value_size: *mut usize) -> u32;
    fn proxy_define_metric(kind: u32, name: *const u8, name_size: usize, id: *mut u32) -> u32;
    fn proxy_increment_metric(id: u32, offset: i64) -> u32;
    fn proxy_record_metric(id: u32, value: u64) -> u32;
    fn proxy_set_property(path: *const u8, path_size: usize, value: *const u8, value_size: usize) -> u32;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Metric {
    Counter = 0,
    Histogram = 2,
}

pub fn define_metric(kind: Metric, name: &str) -> HostResult<u32> {
    let mut id = 0;
    // SAFETY: pointer and length of a live string; the host writes one u32.
    check(unsafe { proxy_define_metric(kind as u32, name.as_ptr(), name.len(), &mut id) })?;
    Ok(id)
}

pub fn increment_metric(id: u32, by: i64) -> HostResult<()> {
    // SAFETY: plain values.
    check(unsafe { proxy_increment_metric(id, by) })
}

pub fn record_metric(id: u32, value: u64) -> HostResult<()> {
    // SAFETY: plain values.
    check(unsafe { proxy_record_metric(id, value) })
}

fn check(status: u32) -> HostResult<()> {
    if status == OK {
        Ok(())
    } else {
        Err(Status(status))
    }
}

/// Takes ownership of a buffer the host allocated with `proxy_on_memory_allocate`.
///
/// # Safety
/// `data` must be null or come from `proxy_on_memory_allocate(size)`.
unsafe fn owned(data: *mut u8, size: usize) -> Vec<u8> {
    if data.is_null() {
        return Vec::new();
    }
    // SAFETY: allocated by `proxy_on_memory_allocate` with capacity exactly `size`, and every byte
    // written by the host before it handed the pointer back.
    unsafe { Vec::from_raw_parts(data, size, size) }
}

/// Memory the host asks for, to copy buffers and maps into; handed back to us by the calls above.
/// Not zeroed: the host writes every byte before the call that asked for it returns, and each
/// buffer the host hands over (bodies, header maps) would otherwise be written twice.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let mut v: Vec<u8> = Vec::with_capacity(size);
    if v.capacity() != size {
        // `owned` rebuilds the vector with capacity `size`: never hand out any other allocation.
        v = vec![0; size];
        v.shrink_to_fit();
    }
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

pub fn log(level: u32, message: &str) {
    // SAFETY: pointer and length of a live string.
    unsafe {
        proxy_log(level, message.as_ptr(), message.len());
    }
}

pub fn log_level() -> HostResult<u32> {
    let mut level = 0;
    // SAFETY: the host writes one u32.
    check(unsafe { proxy_get_log_level(&mut level) })?;
    Ok(level)
}

/// Nanoseconds since the Unix epoch on the host's clock.
pub fn now_ns() -> HostResult<u64> {
    let mut t = 0;
    // SAFETY: the host writes one u64.
    check(unsafe { proxy_get_current_time_nanoseconds(&mut t) })?;
    Ok(t)
}

pub fn set_tick_period_ms(ms: u32) -> HostResult<()> {
    // SAFETY: plain value.
    check(unsafe { proxy_set_tick_period_milliseconds(ms) })
}

pub fn set_effective_context(id: u32) -> HostResult<()> {
    // SAFETY: plain value.
    check(unsafe { proxy_set_effective_context(id) })
}

pub fn get_buffer(kind: Buffer, max: usize) -> HostResult<Vec<u8>> {
    let (mut data, mut size) = (null_mut(), 0);
    // SAFETY: the host writes a pointer it allocated through `proxy_on_memory_allocate` and its size.
    match unsafe { proxy_get_buffer_bytes(kind as u32, 0, max, &mut data, &mut size) } {
        OK => Ok(unsafe { owned(data, size) }),
        NOT_FOUND => Ok(Vec::new()),
        s => Err(Status(s)),
    }
}

/// Replaces `size` bytes from the start of the buffer (the whole buffer, given its full size).
pub fn set_buffer(kind: Buffer, size: usize, value: &[u8]) -> HostResult<()> {
    // SAFETY: pointer and length of a live slice.
    check(unsafe { proxy_set_buffer_bytes(kind as u32, 0, size, value.as_ptr(), value.len()) })
}

/// Every header of a map as text (non-UTF-8 bytes replaced), names in lower case: each name and
/// value copied once, straight out of the host's buffer.
pub fn get_headers(map: Map) -> HostResult<Vec<(String, String)>> {
    let (mut data, mut size) = (null_mut(), 0);
    // SAFETY: as in `get_buffer`.
    let bytes = match unsafe { proxy_get_header_map_pairs(map as u32, &mut data, &mut size) } {
        OK => unsafe { owned(data, size) },
        NOT_FOUND => return Ok(Vec::new()),
        s => return Err(Status(s)),
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(decode_pairs_with(&bytes, |k, v| {
        let mut name = text(k);
        name.make_ascii_lowercase();
        (name, text(v))
    })
    .unwrap_or_default())
}

pub fn get_header(map: Map, name: &str) -> HostResult<Option<Vec<u8>>> {
    let (mut data, mut size) = (null_mut(), 0);
    // SAFETY: as in `get_buffer`.
    match unsafe { proxy_get_header_map_value(map as u32, name.as_ptr(), name.len(), &mut data, &mut size) } {
        OK => Ok(Some(unsafe { owned(data, size) })),
        NOT_FOUND => Ok(None),
        s => Err(Status(s)),
    }
}

pub fn set_header(map: Map, name: &str, value: &str) -> HostResult<()> {
    // SAFETY: pointers and lengths of live strings.
    check(unsafe { proxy_replace_header_map_value(map as u32, name.as_ptr(), name.len(), value.as_ptr(), value.len()) })
}

pub fn remove_header(map: Map, name: &str) -> HostResult<()> {
    // SAFETY: pointer and length of a live string.
    check(unsafe { proxy_remove_header_map_value(map as u32, name.as_ptr(), name.len()) })
}

/// A local reply. Envoy defers it until the current callback returns (it does not re-enter).
pub fn send_local_response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> HostResult<()> {
    let h = encode_pairs(headers);
    // SAFETY: pointers and lengths of live buffers; -1: not gRPC.
    check(unsafe {
        proxy_send_local_response(status.into(), null(), 0, body.as_ptr(), body.len(), h.as_ptr(), h.len(), -1)
    })
}

/// Dispatches an HTTP callout; the token identifies its `proxy_on_http_call_response`.
pub fn http_call(call: &crate::host::port::Outgoing<'_>) -> HostResult<u32> {
    let (cluster, timeout_ms) = (call.cluster, u32::try_from(call.timeout_ms).unwrap_or(u32::MAX));
    let h = encode_pairs(&call.headers);
    let t = encode_pairs(&[]);
    let (b, bl) = call.body.map_or((null(), 0), |b| (b.as_ptr(), b.len()));
    let mut token = 0;
    // SAFETY: pointers and lengths of live buffers; the host writes one u32.
    check(unsafe {
        proxy_http_call(
            cluster.as_ptr(),
            cluster.len(),
            h.as_ptr(),
            h.len(),
            b,
            bl,
            t.as_ptr(),
            t.len(),
            timeout_ms,
            &mut token,
        )
    })?;
    Ok(token)
}

/// A property of the stream by its encoded path (segments joined by NUL, e.g. `"xds\0route_name"`,
/// written once as a constant); `None` when the host has none.
pub fn get_property(path: &str) -> HostResult<Option<Vec<u8>>> {
    let (mut data, mut size) = (null_mut(), 0);
    // SAFETY: as in `get_buffer`.
    match unsafe { proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut size) } {
        OK => Ok(Some(unsafe { owned(data, size) })),
        NOT_FOUND => Ok(None),
        s => Err(Status(s)),
    }
}

/// Sets a property of the stream: Envoy keeps it as filter state `wasm.<path>`.
pub fn set_property(path: &str, value: &[u8]) -> HostResult<()> {
    // SAFETY: both buffers are valid for the call; Envoy copies them.
    check(unsafe { proxy_set_property(path.as_ptr(), path.len(), value.as_ptr(), value.len()) })
}

pub fn resume(stream: Stream) -> HostResult<()> {
    // SAFETY: plain value.
    check(unsafe { proxy_continue_stream(stream as u32) })
}

/// The ABI's map encoding: count, then (name length, value length) pairs, then NUL-terminated names
/// and values.
pub fn encode_pairs(pairs: &[(&str, &str)]) -> Vec<u8> {
    let size = 4 + pairs.iter().map(|(k, v)| k.len() + v.len() + 10).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// The inverse of `encode_pairs`, each pair made by `pair` from the bytes in place; `None` for a
/// malformed buffer (never a panic).
fn decode_pairs_with<T>(b: &[u8], mut pair: impl FnMut(&[u8], &[u8]) -> T) -> Option<Vec<T>> {
    let word = |at: usize| -> Option<usize> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(w) as usize)
    };
    if b.is_empty() {
        return Some(Vec::new());
    }
    let n = word(0)?;
    let mut out = Vec::with_capacity(n.min(1024));
    let mut p = 4usize.checked_add(n.checked_mul(8)?)?;
    for i in 0..n {
        let (kl, vl) = (word(4 + i * 8)?, word(8 + i * 8)?);
        let k = b.get(p..p.checked_add(kl)?)?;
        p = p.checked_add(kl + 1)?;
        let v = b.get(p..p.checked_add(vl)?)?;
        p = p.checked_add(vl + 1)?;
        out.push(pair(k, v));
    }
    Some(out)
}
