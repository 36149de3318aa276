//! How the host-neutral layer reads and changes its host: the few things both hosts offer a stream.
//! `src/filter/` implements it over Proxy-Wasm, `src/dm/` over the dynamic-module ABI.

use crate::agent::summary::Value;

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
    /// The request's summary, for Envoy's access log and rate limits: dynamic metadata `api_agent`
    /// where the host has it (the dynamic module), with filter state `wasm.api_agent.<field>` too when
    /// `filter_state` (`summary.filterState`); filter state alone where the host has nothing else
    /// (Proxy-Wasm).
    fn set_summary(&self, fields: &[(&'static str, Value)], filter_state: bool);
    /// The stream is traced and the host can make child spans (`Host::spans`).
    fn traced(&self) -> bool {
        false
    }
}

/// The namespace of the summary's dynamic metadata.
pub const SUMMARY_NAMESPACE: &str = "api_agent";

/// The summary's filter-state keys, in `agent::summary::FIELDS` order: written once, not formatted
/// per request (Proxy-Wasm sets them without the `wasm.` prefix, which Envoy adds).
pub const SUMMARY_STATE_KEYS: [&str; 9] = [
    "wasm.api_agent.turns",
    "wasm.api_agent.tool_calls",
    "wasm.api_agent.tool_errors",
    "wasm.api_agent.input_tokens",
    "wasm.api_agent.output_tokens",
    "wasm.api_agent.total_tokens",
    "wasm.api_agent.model",
    "wasm.api_agent.outcome",
    "wasm.api_agent.duration_ms",
];

/// Sets or removes a header, logging a refusal.
pub fn set_header(port: &impl Port, rid: &str, map: Headers, name: &str, value: Option<&str>) {
    if !port.set_header(map, name, value) {
        log::warn!("#{rid} setting header {name} failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_follow_the_summary_fields() {
        for (key, field) in SUMMARY_STATE_KEYS.iter().zip(crate::agent::summary::FIELDS) {
            assert_eq!(*key, format!("wasm.{SUMMARY_NAMESPACE}.{field}"));
        }
    }
}
