//! MCP replies (JSON, or SSE-framed JSON-RPC messages) as observations the model can act on.

use super::{Revision, LEGACY, MODERN};
use crate::doc::truncate;
use crate::tools::{compressed, http_observation};
use serde_json::Value;

/// 2026-07-28's `UnsupportedProtocolVersionError`, which lists the versions the server speaks.
const UNSUPPORTED_VERSION: i64 = -32022;
/// The codes the MCP specification reserves for itself (2026-07-28 on): only a modern server answers
/// with one.
const MODERN_CODES: std::ops::RangeInclusive<i64> = -32099..=-32020;

/// How a server refused a request sent in 2026-07-28 (the specification's backward compatibility:
/// a 4xx without a recognized modern JSON-RPC error is a handshake-era server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A 2025 server: open a session with `initialize`.
    Legacy,
    /// A modern server that does not speak 2026-07-28 but one of these versions.
    Versions(Vec<String>),
}

/// How the reply to a 2026-07-28 request refused it, if it did in a way the gateway can answer: the
/// server is of the handshake era, or speaks other versions. `None`: the reply is the request's own
/// (a result, or a modern server's error).
pub fn refusal(status: u16, body: &[u8]) -> Option<Refusal> {
    let error = response(body).and_then(|m| m.get("error").cloned());
    let code = error.as_ref().and_then(|e| e.get("code")).and_then(Value::as_i64);
    if code == Some(UNSUPPORTED_VERSION) {
        let supported = error.as_ref().and_then(|e| e.pointer("/data/supported")).and_then(Value::as_array);
        let versions = supported.into_iter().flatten().filter_map(Value::as_str).map(str::to_string);
        return Some(Refusal::Versions(versions.collect()));
    }
    // A modern server's own error; 404 with "method not found" is how it says it lacks the method.
    let modern = code.is_some_and(|c| MODERN_CODES.contains(&c)) || (status == 404 && code == Some(-32601));
    (matches!(status, 400 | 404 | 405) && !modern).then_some(Refusal::Legacy)
}

impl Refusal {
    /// The revision to try next after this refusal of `tried`, or why there is none.
    pub fn next(&self, tried: Revision) -> Result<Revision, String> {
        match self {
            Refusal::Legacy if tried == Revision::Modern => Ok(Revision::Legacy(super::PROTOCOL_VERSION)),
            Refusal::Versions(v) if v.iter().any(|v| v == MODERN) && tried != Revision::Modern => Ok(Revision::Modern),
            Refusal::Versions(v) => match v.iter().find_map(|v| Revision::legacy(v)) {
                Some(legacy) if tried == Revision::Modern => Ok(legacy),
                _ => Err(format!(
                    "the server speaks MCP {}; the gateway speaks {MODERN}, {}",
                    v.join(", "),
                    LEGACY.join(", ")
                )),
            },
            Refusal::Legacy => Err("the server refused the request".into()),
        }
    }
}

/// The revision an `initialize` result agreed on (`protocolVersion`), or why the gateway cannot speak it.
pub fn agreed(body: &[u8]) -> Result<Revision, String> {
    let result = response(body).and_then(|m| m.get("result").cloned()).unwrap_or(Value::Null);
    match result.get("protocolVersion").and_then(Value::as_str) {
        Some(v) => Revision::legacy(v).ok_or_else(|| {
            format!("the server answered MCP {}; the gateway speaks {}", truncate(v, 40), LEGACY.join(", "))
        }),
        None => Err("the initialize result names no protocolVersion".into()),
    }
}

/// What the model is told of a `tools/call` reply: the result's content as text (structured content
/// as JSON when there is no text; images and other binary content described, not dumped); a tool's
/// own error (`isError`) and JSON-RPC errors as errors it can act on.
pub fn observation(tool: &str, max: usize, status: u16, headers: &[(String, String)], body: &[u8]) -> String {
    if let Some(described) = compressed(tool, status, headers, body) {
        return described;
    }
    if !(200..300).contains(&status) {
        return http_observation(tool, max, status, headers, body);
    }
    let text = match response(body) {
        Some(m) => match (m.get("result"), m.get("error")) {
            (_, Some(e)) => format!("'{tool}' failed: MCP error {}", rpc_error(e)),
            (Some(r), None) if r.get("resultType").and_then(Value::as_str) == Some("input_required") => {
                format!("'{tool}' asked for input the gateway cannot give (sampling, elicitation or roots).")
            }
            (Some(r), None) if r.get("isError").and_then(Value::as_bool) == Some(true) => {
                format!("'{tool}' reported an error: {}", content(r))
            }
            (Some(r), None) => content(r),
            (None, None) => not_a_response(tool, body),
        },
        None => not_a_response(tool, body),
    };
    let text = if text.trim().is_empty() { format!("'{tool}' succeeded with no content.") } else { text };
    truncate(&text, max).into_owned()
}

/// Why a handshake step failed, or `None` when it succeeded (a 2xx without a JSON-RPC error).
pub fn handshake_error(status: u16, body: &[u8]) -> Option<String> {
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(body);
        return Some(format!("HTTP {status}: {}", truncate(text.trim(), 300)));
    }
    match response(body) {
        Some(m) => m.get("error").map(|e| format!("MCP error {}", rpc_error(e))),
        None if body.iter().all(u8::is_ascii_whitespace) => None,
        None => Some(format!("not a JSON-RPC response: {}", truncate(String::from_utf8_lossy(body).trim(), 300))),
    }
}

/// A reply to a request sent in a session that says the server no longer has it: 404, as the
/// specification says, or the 400 "No valid session ID" that servers built on the TypeScript SDK send.
pub fn session_lost(status: u16, body: &[u8]) -> bool {
    let says_session = || String::from_utf8_lossy(body).to_ascii_lowercase().contains("session");
    status == 404 || (status == 400 && says_session())
}

/// The JSON-RPC response in a body: the body itself, or the last SSE `data:` event that is a response
/// (a stream may carry notifications, e.g. progress, before it).
pub(super) fn response(body: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed).ok();
    }
    sse_events(&text)
        .into_iter()
        .filter_map(|data| serde_json::from_str::<Value>(&data).ok())
        .rfind(|m| m.get("result").is_some() || m.get("error").is_some())
}

/// The data of each SSE event (`data:` lines joined by newlines, events split by blank lines).
fn sse_events(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                events.push(data.join("\n"));
                data.clear();
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    events
}

fn rpc_error(e: &Value) -> String {
    let code = e.get("code").map_or_else(String::new, Value::to_string);
    let message = e.get("message").and_then(Value::as_str).unwrap_or("(no message)");
    match e.get("data").filter(|d| !d.is_null()) {
        Some(d) => format!("{code}: {message} ({})", truncate(&d.to_string(), 500)),
        None => format!("{code}: {message}"),
    }
}

/// The result's content items in order; structured content when no item is text.
fn content(result: &Value) -> String {
    let items = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut parts: Vec<String> = items.iter().map(item).collect();
    let has_text = items.iter().any(|i| i.get("type").and_then(Value::as_str) == Some("text"));
    if let Some(s) = result.get("structuredContent").filter(|_| !has_text) {
        parts.push(s.to_string());
    }
    parts.join("\n")
}

fn item(i: &Value) -> String {
    let s = |k: &str| i.get(k).and_then(Value::as_str).unwrap_or("");
    let size = |k: &str| s(k).len() / 4 * 3;
    match s("type") {
        "text" => s("text").to_string(),
        "image" | "audio" => {
            format!("[{} of type {}, about {} bytes, not shown]", s("type"), s("mimeType"), size("data"))
        }
        "resource_link" => format!("[resource link: {} {}]", s("uri"), s("name")).replace(" ]", "]"),
        "resource" => match i.get("resource") {
            Some(r) if r.get("text").is_some() => r["text"].as_str().unwrap_or("").to_string(),
            Some(r) => format!("[binary resource {}, not shown]", r.get("uri").and_then(Value::as_str).unwrap_or("")),
            None => "[empty resource]".to_string(),
        },
        other => format!("[content of type '{}', not shown]", truncate(other, 40)),
    }
}

fn not_a_response(tool: &str, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    format!("'{tool}' replied with something that is not a JSON-RPC response: {}", truncate(text.trim(), 500))
}
