//! Callouts as both hosts see them: the table from the host's token to the agent's `CallId`, the
//! pseudo-headers of a call, and which replies are really failures.

use crate::agent::{Call, CallId, Failure};
use crate::doc::truncate;
use crate::tools::Request;
use crate::vec_map::VecMap;

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
