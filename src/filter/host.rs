//! Host calls that cannot panic: every `Status` becomes a logged error or a `Result`.

use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, MapType, Status};
use std::time::{Duration, UNIX_EPOCH};

pub fn plugin_configuration() -> Vec<u8> {
    hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX).ok().flatten().unwrap_or_default()
}

pub fn buffer(kind: BufferType, size: usize) -> Vec<u8> {
    match hostcalls::get_buffer(kind, 0, size) {
        Ok(b) => b.unwrap_or_default(),
        Err(s) => {
            log::error!("reading {kind:?} failed: {s:?}");
            Vec::new()
        }
    }
}

pub fn set_buffer(kind: BufferType, size: usize, value: &[u8]) -> Result<(), Status> {
    hostcalls::set_buffer(kind, 0, size, value)
}

/// One header, read only in that map's own header callback: the SDK panics on the status the host
/// gives for a map that is not available in the current phase. Bytes, not `String`: the SDK's `String`
/// variants panic on a value that is not UTF-8.
pub fn header(map: MapType, name: &str) -> Option<String> {
    hostcalls::get_map_value_bytes(map, name).ok().flatten().map(|b| String::from_utf8_lossy(&b).into_owned())
}

pub fn set_header(map: MapType, name: &str, value: Option<&str>) {
    if let Err(s) = hostcalls::set_map_value(map, name, value) {
        log::warn!("setting header {name} failed: {s:?}");
    }
}

/// A callout reply's `:status`; `None` when the host gave none (a reset).
pub fn call_status() -> Option<u16> {
    let headers = hostcalls::get_map_bytes(MapType::HttpCallResponseHeaders).unwrap_or_default();
    headers
        .iter()
        .find(|(k, _)| k == ":status")
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
        .and_then(|s| s.parse().ok())
}

/// Milliseconds and seconds since the Unix epoch (the host's clock).
pub fn now() -> (u64, u64) {
    let d =
        hostcalls::get_current_time().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).unwrap_or(Duration::ZERO);
    (d.as_millis() as u64, d.as_secs())
}
