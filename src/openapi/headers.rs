//! Header parameters: a name must be an HTTP token (else every call fails), and the headers a call
//! sets itself are not the model's to fill in. What an API's configuration adds (forwarded identity,
//! credentials) is checked where it is known (`config::header_params`).

use crate::doc::is_token_byte;

/// Envoy and the filter write these on every call.
const SET_BY_CALL: [&str; 5] = ["accept", "content-type", "authorization", "host", "content-length"];

/// The client's trace context, which every call carries (`host::admit`'s `TRACE_FAMILIES`).
const TRACE: [&str; 9] = [
    "traceparent",
    "tracestate",
    "x-request-id",
    "b3",
    "x-b3-traceid",
    "x-b3-spanid",
    "x-b3-parentspanid",
    "x-b3-sampled",
    "x-b3-flags",
];

/// A header parameter `name`: `Ok(Some(why))` when the call sets that header itself (the parameter
/// is left out, with a warning), `Err` when it is no header name.
pub fn check(name: &str) -> Result<Option<&'static str>, String> {
    if !name.bytes().all(is_token_byte) {
        return Err("not an HTTP header name (RFC 9110: letters, digits and !#$%&'*+-.^_`|~ only); every call \
                    would fail"
            .into());
    }
    let lower = name.to_ascii_lowercase();
    if SET_BY_CALL.contains(&lower.as_str()) {
        return Ok(Some("Envoy and the filter set it on every call"));
    }
    if TRACE.contains(&lower.as_str()) {
        return Ok(Some("every call carries the client's trace context in it"));
    }
    Ok(None)
}

impl super::Tool {
    /// Leaves parameter `name` out: not sent, not in the arguments' schema.
    pub fn drop_param(&mut self, name: &str) {
        self.params.retain(|p| p.name != name);
        if let Some(props) = self.schema.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
            props.remove(name);
        }
        if let Some(required) = self.schema.get_mut("required").and_then(serde_json::Value::as_array_mut) {
            required.retain(|r| r != name);
        }
    }
}
