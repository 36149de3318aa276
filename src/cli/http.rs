//! The HTTP client standing in for Envoy's callouts: one blocking request with its own timeout, the
//! reply as Envoy would hand it to the filter (no redirect followed, no decompression, any status).

use crate::agent::Failure;
use std::time::Duration;
use ureq::http;

/// Replies larger than this are refused, as Envoy refuses bodies past its buffer limits.
const MAX_REPLY_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub url: String,
    /// Lower-case names; `host` carries the `:authority`.
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A client that behaves like an Envoy callout: statuses are replies, not errors; a redirect is the
/// reply; no proxy from the environment (the endpoints are given explicitly).
pub fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent(concat!("api-agent/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// Sends `req` and reads the whole reply; transport problems become the agent's `Failure`s.
pub fn send(agent: &ureq::Agent, req: &Request) -> Result<Response, Failure> {
    let mut builder = http::Request::builder().method(req.method.as_str()).uri(req.url.as_str());
    for (name, value) in &req.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let timeout = Some(Duration::from_millis(req.timeout_ms.max(1)));
    let sent = match &req.body {
        Some(body) => {
            let built = builder.body(body.clone()).map_err(|e| Failure::NotSent(e.to_string()))?;
            agent.run(agent.configure_request(built).timeout_global(timeout).build())
        }
        None => {
            let built = builder.body(()).map_err(|e| Failure::NotSent(e.to_string()))?;
            agent.run(agent.configure_request(built).timeout_global(timeout).build())
        }
    };
    let mut response = sent.map_err(failure)?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_ascii_lowercase(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = response.body_mut().with_config().limit(MAX_REPLY_BYTES).read_to_vec().map_err(failure)?;
    Ok(Response { status, headers, body })
}

fn failure(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => Failure::Timeout,
        ureq::Error::BadUri(why) => Failure::NotSent(format!("bad URL: {why}")),
        ureq::Error::Http(e) => Failure::NotSent(e.to_string()),
        other => Failure::Broken(other.to_string()),
    }
}
