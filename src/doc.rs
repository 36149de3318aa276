//! Text documents (plugin configuration, OpenAPI specs, JSON Schemas) arrive as JSON or YAML. Both are
//! read into one `serde_json::Value` tree, keeping key order, so every later step works on one type.

use serde_json::{Map, Number, Value};

/// Parses JSON, or YAML when the text is not JSON. YAML's non-string keys (`200:` response codes) become
/// strings, merge keys (`<<`) are applied, and tags are dropped (their values are kept).
pub fn parse(text: &str) -> Result<Value, String> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            return Ok(v);
        }
    }
    let mut yaml: yaml_serde::Value =
        yaml_serde::from_str(trimmed).map_err(|e| format!("not valid JSON or YAML: {e}"))?;
    yaml.apply_merge().map_err(|e| format!("YAML merge key: {e}"))?;
    from_yaml(yaml)
}

fn from_yaml(v: yaml_serde::Value) -> Result<Value, String> {
    use yaml_serde::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => yaml_number(&n),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(from_yaml).collect::<Result<_, _>>()?),
        Y::Mapping(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m {
                out.insert(yaml_key(k)?, from_yaml(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => from_yaml(t.value)?,
    })
}

fn yaml_number(n: &yaml_serde::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Number(i.into())
    } else if let Some(u) = n.as_u64() {
        Value::Number(u.into())
    } else {
        n.as_f64().and_then(Number::from_f64).map(Value::Number).unwrap_or(Value::Null)
    }
}

fn yaml_key(k: yaml_serde::Value) -> Result<String, String> {
    use yaml_serde::Value as Y;
    match k {
        Y::String(s) => Ok(s),
        Y::Number(n) => Ok(n.to_string()),
        Y::Bool(b) => Ok(b.to_string()),
        Y::Null => Ok("null".into()),
        Y::Tagged(t) => yaml_key(t.value),
        Y::Sequence(_) | Y::Mapping(_) => Err("a YAML mapping key that is a list or a map".into()),
    }
}

/// The JSON type name of a value, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// At most `max` bytes of `s`, cut on a character boundary, with a marker when cut. Used for every body
/// that reaches a log line or a prompt.
pub fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…[truncated, {} bytes in all]", &s[..end], s.len()))
}

/// `%XX` escapes decoded (as in URI fragments holding JSON pointers); invalid escapes kept as they are.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_integer_keys_become_strings() {
        let v = parse("responses:\n  200:\n    description: ok\n").unwrap();
        assert_eq!(v, json!({"responses": {"200": {"description": "ok"}}}));
    }

    #[test]
    fn json_and_yaml_agree_and_keep_order() {
        let v = parse("{\"b\": 1, \"a\": [true, null]}").unwrap();
        let y = parse("b: 1\na: [true, null]\n").unwrap();
        assert_eq!(v, y);
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "a"]);
    }

    #[test]
    fn merge_keys_are_applied() {
        let v = parse("base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n").unwrap();
        assert_eq!(v["derived"], json!({"x": 1, "y": 2}));
    }

    #[test]
    fn bad_text_is_an_error() {
        assert!(parse("a: [1, 2").unwrap_err().contains("not valid JSON or YAML"));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("%7Bb%7D/%e5%8c%97"), "{b}/北");
        assert_eq!(percent_decode("50%"), "50%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        let s = "天气".repeat(10);
        let t = truncate(&s, 4);
        assert!(t.starts_with("天…"));
        assert!(t.contains("60 bytes"));
        assert_eq!(truncate("short", 10), "short");
    }
}
