//! How the host-neutral layer reads and changes its host: the few things both hosts offer a stream.
//! `src/filter/` implements it over Proxy-Wasm, `src/dm/` over the dynamic-module ABI.

/// A stream's header map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headers {
    Request,
    Response,
}

/// Stream attributes read by meaning; each host knows where its Envoy keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attr {
    RouteName,
    ClusterName,
}

pub trait Port {
    /// A header as text (non-UTF-8 bytes replaced), `None` when absent.
    fn header(&self, map: Headers, name: &str) -> Option<String>;
    /// Sets (`Some`) or removes (`None`) a header; false when the host refused.
    fn set_header(&self, map: Headers, name: &str, value: Option<&str>) -> bool;
    /// An attribute of the stream; `None` (or empty) when the host has none.
    fn attribute(&self, attr: Attr) -> Option<String>;
    /// Answers the client now, while no response has started.
    fn local_reply(&self, status: u16, headers: &[(&str, &str)], body: &[u8]);
}

/// Sets or removes a header, logging a refusal.
pub fn set_header(port: &impl Port, rid: &str, map: Headers, name: &str, value: Option<&str>) {
    if !port.set_header(map, name, value) {
        log::warn!("#{rid} setting header {name} failed");
    }
}
