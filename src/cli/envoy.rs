//! The wasm filters of an Envoy configuration (a bootstrap, or any part of one), and the plugin
//! configuration Envoy hands each: the `value` of its `google.protobuf.StringValue` `configuration`.

use super::found::Found;
use serde_json::{Map, Value};

const WASM_FILTER: &str = "envoy.filters.http.wasm";
const WASM_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const STRING_VALUE: &str = "type.googleapis.com/google.protobuf.StringValue";

/// A bootstrap, or a document that holds a wasm filter somewhere.
pub fn is_envoy(value: &Value) -> bool {
    let top = ["static_resources", "dynamic_resources", "admin", "node"];
    value.as_object().is_some_and(|m| top.iter().any(|k| m.contains_key(*k))) || holds_filter(value)
}

fn holds_filter(value: &Value) -> bool {
    match value {
        Value::Object(m) => is_wasm_filter(m) || m.values().any(holds_filter),
        Value::Array(items) => items.iter().any(holds_filter),
        _ => false,
    }
}

fn is_wasm_filter(m: &Map<String, Value>) -> bool {
    let typed = m.get("typed_config").and_then(|t| t.get("@type")).and_then(Value::as_str);
    m.get("name").and_then(Value::as_str) == Some(WASM_FILTER) || typed == Some(WASM_TYPE)
}

/// Every wasm filter, named by its listener and its place in `http_filters`.
pub fn filters(label: &str, root: &Value) -> Vec<Found> {
    let mut out = Vec::new();
    walk(root, &mut Vec::new(), label, &mut out);
    if out.is_empty() {
        out.push(Found::unusable(label.to_string(), format!("no {WASM_FILTER} filter in this Envoy configuration")));
    }
    out
}

fn walk(value: &Value, trail: &mut Vec<String>, label: &str, out: &mut Vec<Found>) {
    match value {
        Value::Object(m) if is_wasm_filter(m) => out.push(filter(m, trail, label)),
        Value::Object(m) => {
            for (key, child) in m {
                match (key.as_str(), child) {
                    ("listeners", Value::Array(items)) => each(items, trail, label, out, |i, l| {
                        format!(
                            "listener {}",
                            l.get("name").and_then(Value::as_str).map_or(i.to_string(), str::to_string)
                        )
                    }),
                    ("http_filters", Value::Array(items)) => {
                        each(items, trail, label, out, |i, _| format!("http_filters[{i}]"))
                    }
                    _ => walk(child, trail, label, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| walk(v, trail, label, out)),
        _ => {}
    }
}

fn each(
    items: &[Value],
    trail: &mut Vec<String>,
    label: &str,
    out: &mut Vec<Found>,
    name: impl Fn(usize, &Value) -> String,
) {
    for (i, item) in items.iter().enumerate() {
        trail.push(name(i, item));
        walk(item, trail, label, out);
        trail.pop();
    }
}

/// One filter's configuration as Envoy passes it: the string value, or nothing at all.
fn filter(m: &Map<String, Value>, trail: &[String], label: &str) -> Found {
    let config = m.get("typed_config").and_then(|t| t.get("config"));
    let name = config.and_then(|c| c.get("name")).and_then(Value::as_str).filter(|n| !n.is_empty());
    let mut place = trail.join(", ");
    if let Some(n) = name {
        place = if place.is_empty() { n.to_string() } else { format!("{place} ({n})") };
    }
    let label = if place.is_empty() { label.to_string() } else { format!("{label}: {place}") };
    if m.get("typed_config").is_none() {
        return Found::unusable(label, "the filter has no typed_config (its configuration is not in this file)");
    }
    match config.and_then(|c| c.get("configuration")) {
        None | Some(Value::Null) => Found::config(label, Vec::new()),
        Some(c) => match c.get("@type").and_then(Value::as_str) {
            Some(STRING_VALUE) => match c.get("value") {
                None | Some(Value::Null) => Found::config(label, Vec::new()),
                Some(Value::String(s)) => Found::config(label, s.clone().into_bytes()),
                Some(other) => Found::unusable(
                    label,
                    format!("configuration.value must be a string, found {}", crate::doc::type_name(other)),
                ),
            },
            other => Found::unusable(
                label,
                format!("configuration has @type {}; api-agent reads a {STRING_VALUE}", other.unwrap_or("(none)")),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::found::What;
    use serde_json::json;

    fn wasm(name: &str, configuration: Value) -> Value {
        json!({"name": WASM_FILTER, "typed_config": {"@type": WASM_TYPE, "config": {"name": name, "configuration": configuration}}})
    }

    #[test]
    fn filters_are_named_by_listener_and_place() {
        let root = json!({"static_resources": {"listeners": [
            {"name": "a", "filter_chains": [{"filters": [{"typed_config": {"http_filters": [
                {"name": "envoy.filters.http.cors"},
                wasm("agent", json!({"@type": STRING_VALUE, "value": "llm: {}"})),
            ]}}]}]},
        ]}});
        let found = filters("e.yaml", &root);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].label, "e.yaml: listener a, http_filters[1] (agent)");
        assert!(matches!(&found[0].what, What::Config(b) if b == b"llm: {}"));
    }

    #[test]
    fn other_configuration_types_and_missing_filters_are_named() {
        let found = filters("e.yaml", &json!({"http_filters": [wasm("x", json!({"@type": "t.Struct"}))]}));
        assert!(matches!(&found[0].what, What::Unusable(m) if m.contains("@type t.Struct")));
        let found = filters("e.yaml", &json!({"admin": {}}));
        assert!(matches!(&found[0].what, What::Unusable(m) if m.starts_with("no envoy.filters.http.wasm")));
        let found = filters("e.yaml", &json!({"http_filters": [wasm("x", Value::Null)]}));
        assert!(matches!(&found[0].what, What::Config(b) if b.is_empty()));
    }
}
