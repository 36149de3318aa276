//! The host as the host-neutral layer sees it, whatever its ABI: a stream's headers and attributes
//! (`Port`), what the layer's stream protocol (`stream_run.rs`) asks of it (`Host`), and the callouts
//! it makes for the layer: the table from the host's token to the agent's `CallId`, the pseudo-headers
//! of a call, which replies are really failures, and why a host refused one. `src/filter/` implements
//! the traits over Proxy-Wasm, `src/dm/` over the dynamic-module ABI.

use crate::agent::spans::SpanNote;
use crate::agent::SummaryValue;
use crate::agent::{Call, CallId, Failure, Reply};
use crate::config::SummaryForms;
use crate::doc::truncate;
use crate::tools::Request;
use crate::vec_map::VecMap;

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

/// The callouts a stream has in flight: the host's token → the agent's call.
#[derive(Debug, Default)]
pub struct CallTable(VecMap<u64, CallId>);

impl CallTable {
    pub fn insert(&mut self, token: u64, id: CallId) {
        self.0.insert(token, id);
    }

    /// The call a streamed reply's head or data belongs to (it stays until its end).
    pub fn get(&self, token: u64) -> Option<CallId> {
        self.0.get(&token).copied()
    }

    /// The call a reply belongs to (once: a second reply for one token is unknown).
    pub fn take(&mut self, token: u64) -> Option<CallId> {
        self.0.remove(&token)
    }
}

/// A callout as a host starts it: the Envoy cluster, the headers (pseudo-headers first), the body
/// and the timeout. Stream calls and MCP listings both go out as one.
#[derive(Debug)]
pub struct Outgoing<'a> {
    pub cluster: &'a str,
    pub headers: Vec<(&'a str, &'a str)>,
    pub body: Option<&'a [u8]>,
    pub timeout_ms: u64,
}

impl<'a> Outgoing<'a> {
    /// `request` sent to `cluster`.
    pub fn of(cluster: &'a str, request: &'a Request, timeout_ms: u64) -> Self {
        let headers = pseudo(request.method, &request.path, &request.authority, &request.headers);
        Outgoing { cluster, headers, body: request.body.as_deref(), timeout_ms }
    }

    /// An agent's call.
    pub fn of_call(call: &'a Call) -> Self {
        let headers = pseudo(call.method, &call.path, &call.authority, &call.headers);
        Outgoing { cluster: &call.cluster, headers, body: call.body.as_deref(), timeout_ms: call.timeout_ms }
    }
}

impl<'a> Outgoing<'a> {
    /// Sets header `name` (lower case) to `value`, in place of the call's own.
    pub fn set(&mut self, name: &'a str, value: &'a str) {
        match self.headers.iter_mut().find(|(k, _)| *k == name) {
            Some(h) => h.1 = value,
            None => self.headers.push((name, value)),
        }
    }
}

/// Pseudo-headers first, then the request's own.
fn pseudo<'a>(
    method: &'a str,
    path: &'a str,
    authority: &'a str,
    own: &'a [(String, String)],
) -> Vec<(&'a str, &'a str)> {
    let mut headers = Vec::with_capacity(own.len() + 4);
    headers.extend([(":method", method), (":path", path), (":authority", authority)]);
    headers.extend(own.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    headers
}

/// The debug line of a call the host accepted.
pub fn log_sent(rid: &str, call: &Call) {
    log::debug!("#{rid} call {} → {} {} {}", call.id.0, call.cluster, call.method, truncate(&call.path, 120));
}

/// `:status` taken out of a reply's headers.
pub fn split_status(mut headers: Vec<(String, String)>) -> (Option<u16>, Vec<(String, String)>) {
    let status = headers.iter().find(|(k, _)| k == ":status").and_then(|(_, v)| v.parse::<u16>().ok());
    headers.retain(|(k, _)| k != ":status");
    (status, headers)
}

/// Why a callout that was reset (or answered without `:status`) failed, as logs and the model read it.
pub const RESET: &str = "no response (reset)";

/// How a callout ended without a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// Reset, or no `:status`.
    Reset,
    /// The reply went over the host's buffer limit.
    OverLimit,
}

impl Lost {
    pub fn failure(self) -> Failure {
        match self {
            Lost::Reset => Failure::Broken(RESET.into()),
            Lost::OverLimit => Failure::Broken("the reply exceeded the buffer limit".into()),
        }
    }
}

/// A reply without `:status`, or Envoy's own timeout and connect-failure replies, are failures.
pub fn classify(status: Option<u16>, body: &[u8]) -> Option<Failure> {
    match status {
        None => Some(Lost::Reset.failure()),
        Some(504) if body == b"upstream request timeout" => Some(Failure::Timeout),
        Some(503) if body.starts_with(b"upstream connect error or disconnect/reset before headers") => {
            Some(Failure::Broken(String::from_utf8_lossy(body).into_owned()))
        }
        Some(_) => None,
    }
}

/// A host that could not start a call: retryable when it failed at once (no healthy upstream, like a
/// failed connect), final when the call itself is wrong (unknown cluster, missing headers).
pub fn refused(kind: Refusal, cluster: &str) -> Failure {
    match kind {
        Refusal::FailedAtOnce => {
            Failure::Broken(format!("the call to cluster '{cluster}' failed at once (no healthy upstream?)"))
        }
        Refusal::NoCluster => Failure::NotSent(format!("cluster '{cluster}' is not defined")),
        Refusal::MissingHeaders => Failure::NotSent("the call lacks :method, :path or host".into()),
        Refusal::Other(code) => {
            Failure::NotSent(format!("the host refused the call (status {code}); is cluster '{cluster}' defined?"))
        }
    }
}

/// Why a host refused to start a call, as far as its ABI tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    FailedAtOnce,
    NoCluster,
    MissingHeaders,
    Other(u32),
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

    #[test]
    fn envoy_replies_that_are_failures() {
        assert_eq!(classify(Some(504), b"upstream request timeout"), Some(Failure::Timeout));
        assert!(matches!(classify(None, b""), Some(Failure::Broken(_))));
        let connect = b"upstream connect error or disconnect/reset before headers. reset reason: connection failure";
        assert!(matches!(classify(Some(503), connect), Some(Failure::Broken(_))));
        assert_eq!(classify(Some(504), b"{\"error\":\"slow\"}"), None);
        assert_eq!(classify(Some(200), b""), None);
    }

    #[test]
    fn status_is_split_from_headers() {
        let (s, h) = split_status(vec![(":status".into(), "201".into()), ("a".into(), "b".into())]);
        assert_eq!(s, Some(201));
        assert_eq!(h, vec![("a".to_string(), "b".to_string())]);
    }
}
