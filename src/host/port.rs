//! How the host-neutral layer reads and changes its host: the few things both hosts offer a stream.
//! `src/filter/` implements them over Proxy-Wasm, `src/dm/` over the dynamic-module ABI: `Port` for the
//! stream's headers and attributes, `Host` for what the layer's stream protocol (`stream_run.rs`) asks of it.

use super::callouts::Refusal;
use crate::agent::spans::SpanNote;
use crate::agent::SummaryValue;
use crate::agent::{Call, Reply};
use crate::config::SummaryForms;

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
    /// The request's summary, for Envoy's access log and rate limits, in the `forms` the configuration
    /// asks for where the host has dynamic metadata (the dynamic module: metadata `api_agent`, filter
    /// state `wasm.api_agent.<field>`); filter state alone where the host has nothing else (Proxy-Wasm).
    fn set_summary(&self, fields: &[(&'static str, SummaryValue)], forms: SummaryForms);
    /// The stream is traced and the host can make child spans (`Host::spans`).
    fn traced(&self) -> bool {
        false
    }
}

/// What a host does for the layer; the callback's result type is the host's own.
pub trait Host {
    /// What the current host callback returns (continue, pause, stop).
    type Action: Copy;
    /// The stream's headers, attributes and local replies.
    type Port: Port;
    fn port(&self) -> &Self::Port;
    /// The action when no command decides otherwise: keep the stream held.
    fn holding(&self) -> Self::Action;
    /// The action when no agent runs: let the stream go on.
    fn passing(&self) -> Self::Action;
    /// Send `body` upstream in place of the client's request (`rid`: the request, for logs).
    fn forward(&mut self, rid: &str, body: &[u8]) -> Self::Action;
    /// Start a callout: the host's token, which its reply comes back with (`on_callout_*`), or why
    /// the host refused it.
    fn dispatch(&mut self, call: &Call) -> Result<u64, Refusal>;
    /// The held upstream response's body becomes the answer (its head is the layer's, set already).
    fn answer_body(&mut self, rid: &str, body: &[u8]) -> Self::Action;
    /// Starts the client's response while the request goes on (status, content type, first bytes);
    /// `None`: this host cannot. Only hosts that set `RequestMeta::live` are asked to.
    fn open(&mut self, rid: &str, reply: &Reply) -> Option<Self::Action> {
        let _ = (rid, reply);
        None
    }
    /// More of the response `open` started; `end`: the last of it.
    fn send(&mut self, data: &[u8], end: bool) {
        let _ = end;
        log::error!("this host cannot stream a response; {} bytes not sent", data.len());
    }
    /// Carries out the agent's span notes, before the commands of the same event run; only hosts
    /// whose `Port::traced` says so get any.
    fn spans(&mut self, notes: Vec<SpanNote>) {
        if !notes.is_empty() {
            log::debug!("this host makes no spans; {} notes dropped", notes.len());
        }
    }
    fn now_ms(&self) -> u64;
}

/// The namespace of the summary's dynamic metadata.
pub const SUMMARY_NAMESPACE: &str = "api_agent";

/// The summary's filter-state keys, in `agent::SUMMARY_FIELDS` order: written once, not formatted
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

/// The answer's response head: its status (`None`: the upstream's stands), its content type, and no
/// length or encoding (the body written is never the upstream's, and never compressed: a provider that
/// compressed its reply regardless must not leave its encoding on the answer).
pub fn answer_head(port: &impl Port, rid: &str, status: Option<u16>, content_type: &str) {
    if let Some(status) = status {
        let text = status_text(status);
        set_header(port, rid, Headers::Response, ":status", Some(std::str::from_utf8(&text).unwrap_or("500")));
    }
    set_header(port, rid, Headers::Response, "content-type", Some(content_type));
    set_header(port, rid, Headers::Response, "content-length", None);
    set_header(port, rid, Headers::Response, "content-encoding", None);
}

/// An HTTP status's three digits, without an allocation (statuses out of 100..=999 read as 500).
fn status_text(status: u16) -> [u8; 3] {
    let s = if (100..=999).contains(&status) { status } else { 500 };
    // Each digit is below 10: the casts cannot truncate.
    [b'0' + (s / 100) as u8, b'0' + (s / 10 % 10) as u8, b'0' + (s % 10) as u8]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_follow_the_summary_fields() {
        for (key, field) in SUMMARY_STATE_KEYS.iter().zip(crate::agent::SUMMARY_FIELDS) {
            assert_eq!(*key, format!("wasm.{SUMMARY_NAMESPACE}.{field}"));
        }
    }

    #[test]
    fn statuses_are_three_digits() {
        assert_eq!(&status_text(200), b"200");
        assert_eq!(&status_text(504), b"504");
        assert_eq!(&status_text(42), b"500");
    }
}
