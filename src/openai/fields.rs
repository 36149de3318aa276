//! The JSON types of the request fields the gateway reads, echoes or owns, checked once where a body
//! is read (chat completions and Responses): a field of the wrong type is a 400 naming it (`param`),
//! never a value passed on, echoed or read as absent. `null` is always accepted: the field is unset.

use crate::doc::type_name;
use serde_json::{Map, Value};

/// Why a client's request is refused (a 400): what is wrong, and the field it is about (the error
/// object's `param`, as OpenAI writes it: `model`, `tools[0].name`, `input[2].call_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub param: Option<String>,
    pub why: String,
}

impl Invalid {
    pub fn new(param: impl Into<String>, why: impl Into<String>) -> Invalid {
        Invalid { param: Some(param.into()), why: why.into() }
    }

    /// The body as a whole (not JSON, not an object).
    pub fn body(why: impl Into<String>) -> Invalid {
        Invalid { param: None, why: why.into() }
    }

    /// The same error inside `outer` (`input[2]`): the param and the message say where.
    pub fn within(self, outer: &str) -> Invalid {
        let param = match self.param {
            Some(p) if p.is_empty() => outer.to_string(),
            Some(p) if p.starts_with('[') => format!("{outer}{p}"),
            Some(p) => format!("{outer}.{p}"),
            None => outer.to_string(),
        };
        Invalid { param: Some(param), why: format!("{outer}: {}", self.why) }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// What a field must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Number,
    /// A non-negative integer.
    Count,
    Integer,
    Flag,
    Object,
    Array,
    /// An array of strings.
    Texts,
    /// A string or an array of strings (`stop`).
    TextOrTexts,
    /// An object of strings (`metadata`).
    Metadata,
    /// A model name (`check_model`).
    Model,
}

/// The longest model name taken: provider names are short (a Bedrock ARN is about 200 characters).
pub const MAX_MODEL_BYTES: usize = 256;

/// Checks each field of `table` that `raw` has; with several wrong, the first in `table` is named.
/// One pass over the request's few keys: a lookup per table entry hashed ~20 names per request.
pub fn check(raw: &Map<String, Value>, table: &[(&str, Kind)]) -> Result<(), Invalid> {
    let mut first: Option<(usize, Invalid)> = None;
    for (key, v) in raw {
        let Some(at) = table.iter().position(|(field, _)| field == key) else { continue };
        if v.is_null() || first.as_ref().is_some_and(|(seen, _)| *seen < at) {
            continue;
        }
        if let Err(e) = check_one(table[at].0, table[at].1, v) {
            first = Some((at, e));
        }
    }
    first.map_or(Ok(()), |(_, e)| Err(e))
}

fn check_one(field: &str, kind: Kind, v: &Value) -> Result<(), Invalid> {
    let ok = match kind {
        Kind::Text => v.is_string(),
        Kind::Number => v.is_number(),
        Kind::Count => v.is_u64(),
        Kind::Integer => v.is_i64() || v.is_u64(),
        Kind::Flag => v.is_boolean(),
        Kind::Object => v.is_object(),
        Kind::Array => v.is_array(),
        Kind::Texts => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        Kind::TextOrTexts => v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        Kind::Metadata => v.as_object().is_some_and(|m| m.values().all(Value::is_string)),
        Kind::Model => return check_model(v),
    };
    if ok {
        return Ok(());
    }
    let wanted = match kind {
        Kind::Text => "a string",
        Kind::Number => "a number",
        Kind::Count => "a non-negative integer",
        Kind::Integer => "an integer",
        Kind::Flag => "true or false",
        Kind::Object => "an object",
        Kind::Array => "an array",
        Kind::Texts => "an array of strings",
        Kind::Metadata => "an object of strings",
        _ => "a string or an array of strings",
    };
    Err(Invalid::new(field, format!("'{field}' must be {wanted}, not {}", type_name(v))))
}

/// A model name: a non-empty string of printable characters, at most `MAX_MODEL_BYTES`.
pub fn check_model(v: &Value) -> Result<(), Invalid> {
    let why = match v {
        Value::String(s) if s.is_empty() => "'model' must not be empty".to_string(),
        Value::String(s) if s.len() > MAX_MODEL_BYTES => {
            format!("'model' is {} bytes; at most {MAX_MODEL_BYTES} are taken", s.len())
        }
        Value::String(s) if s.chars().any(char::is_control) => "'model' must not hold control characters".into(),
        Value::String(_) => return Ok(()),
        other => format!("'model' must be a string, not {}", type_name(other)),
    };
    Err(Invalid::new("model", why))
}

/// A function tool's name as OpenAI takes it: 1 to 64 of `[A-Za-z0-9_-]` (the gateway's own tools
/// are named so too).
pub fn check_tool_name(name: &str) -> Result<(), String> {
    let ok =
        (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        return Ok(());
    }
    let shown = crate::doc::truncate(name, 64);
    Err(format!("the tool name '{shown}' ({} bytes) must be 1 to 64 of A-Z, a-z, 0-9, '_' and '-'", name.len()))
}

/// The chat-completions fields the gateway reads, sends on every turn or echoes, with their types
/// (`messages`, `stream`, `n`, `tools` and `response_format` are read with their own checks).
pub const CHAT: [(&str, Kind); 20] = [
    ("model", Kind::Model),
    ("temperature", Kind::Number),
    ("top_p", Kind::Number),
    ("presence_penalty", Kind::Number),
    ("frequency_penalty", Kind::Number),
    ("max_tokens", Kind::Count),
    ("max_completion_tokens", Kind::Count),
    ("top_logprobs", Kind::Count),
    ("seed", Kind::Integer),
    ("user", Kind::Text),
    ("safety_identifier", Kind::Text),
    ("prompt_cache_key", Kind::Text),
    ("reasoning_effort", Kind::Text),
    ("verbosity", Kind::Text),
    ("service_tier", Kind::Text),
    ("stop", Kind::TextOrTexts),
    ("stream_options", Kind::Object),
    ("metadata", Kind::Metadata),
    ("parallel_tool_calls", Kind::Flag),
    ("logprobs", Kind::Flag),
];

/// The Responses fields with a simple type (`input`, `tool_choice` and the tools' items are read
/// with their own checks).
pub const RESPONSES: [(&str, Kind); 23] = [
    ("model", Kind::Model),
    ("instructions", Kind::Text),
    ("user", Kind::Text),
    ("safety_identifier", Kind::Text),
    ("prompt_cache_key", Kind::Text),
    ("service_tier", Kind::Text),
    ("truncation", Kind::Text),
    ("previous_response_id", Kind::Text),
    ("metadata", Kind::Metadata),
    ("temperature", Kind::Number),
    ("top_p", Kind::Number),
    ("max_output_tokens", Kind::Count),
    ("top_logprobs", Kind::Count),
    ("max_tool_calls", Kind::Count),
    ("parallel_tool_calls", Kind::Flag),
    ("store", Kind::Flag),
    ("background", Kind::Flag),
    ("stream", Kind::Flag),
    ("include", Kind::Texts),
    ("tools", Kind::Array),
    ("text", Kind::Object),
    ("reasoning", Kind::Object),
    ("stream_options", Kind::Object),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn the_first_wrong_field_of_the_table_is_named_whatever_the_request_order() {
        let raw = object(json!({"max_tokens": -1, "x_unknown": {}, "temperature": "hot", "top_p": null}));
        let e = check(&raw, &CHAT).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("temperature"), "{}", e.why);
        assert_eq!(e.why, "'temperature' must be a number, not string");
        let raw = object(json!({"top_p": null, "model": "m", "stream_options": {}, "unknown": 1}));
        assert!(check(&raw, &CHAT).is_ok());
        let raw = object(json!({"max_tokens": -1}));
        assert_eq!(check(&raw, &CHAT).unwrap_err().param.as_deref(), Some("max_tokens"));
    }
}
