//! A tool's HTTP reply as an observation.

use crate::doc::truncate;

/// A 2xx body verbatim (cut to `max_bytes`), else the status and body. A compressed body (sent although
/// the call asked for identity) is described, never passed as bytes.
pub fn http_observation(
    tool: &str,
    max_bytes: usize,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> String {
    if let Some(described) = compressed(tool, status, headers, body) {
        return described;
    }
    let text = String::from_utf8_lossy(body);
    let text = truncate(text.trim(), max_bytes);
    match (status, text.is_empty()) {
        (200..=299, false) => text.into_owned(),
        (200..=299, true) => format!("HTTP {status}: '{tool}' succeeded with an empty body."),
        (_, true) => format!("HTTP {status}: '{tool}' failed with an empty body."),
        (_, false) => format!("HTTP {status}: '{tool}' failed: {text}"),
    }
}

/// The observation for a body in a content-encoding other than identity.
pub fn compressed(tool: &str, status: u16, headers: &[(String, String)], body: &[u8]) -> Option<String> {
    let encoding = headers.iter().find(|(k, _)| k == "content-encoding").map(|(_, v)| v.trim());
    let enc = encoding.filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"))?;
    Some(format!(
        "HTTP {status}: '{tool}' replied with a compressed body (content-encoding: {}, {} bytes) that cannot be read.",
        truncate(enc, 40),
        body.len()
    ))
}
