//! A tool call (the model's JSON arguments) → an HTTP request. Path parameters are percent-encoded as
//! one segment each, so no value can change the path; query and form values are percent-encoded; header
//! values must be printable ASCII of bounded size. Arguments the model got wrong are reported back to
//! it, never sent.

use super::{Body, BodyLayout, Location, Media, Param, Style, Tool};
use crate::doc::type_name;
use crate::upstream::{Api, ApiKey};
use serde_json::{Map, Value};
use std::fmt::Write;

/// The longest header or cookie parameter value sent: far above real ones, well below what proxies and
/// servers accept for all headers together (Envoy's default is 60 KiB).
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;

/// The request type is the registry's, so that every tool source builds the same thing.
pub use crate::upstream::Request as ToolRequest;

/// Builds the request for `tool` called with `args` on `api`. `Err` is a message for the model.
pub fn build(tool: &Tool, api: &Api, args: &Value) -> Result<ToolRequest, String> {
    let empty = Map::new();
    let args = match args {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => return Err(format!("the arguments must be a JSON object, not {}", type_name(other))),
    };
    check_arguments(tool, args)?;
    let mut path = format!("{}{}", tool.server.base_path, expand_path(&tool.path, &tool.params, args)?);
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    let mut query = Query::default();
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut cookies: Vec<String> = Vec::new();
    for p in &tool.params {
        let Some(v) = args.get(&p.name).filter(|v| !v.is_null()) else {
            continue;
        };
        match p.location {
            Location::Path => {}
            Location::Query => append_query(&mut query, p, v, &tool.params)?,
            Location::Header => headers.push((p.name.to_ascii_lowercase(), header_value(p, v)?)),
            Location::Cookie => cookies.push(format!("{}={}", p.name, cookie_value(p, v)?)),
        }
    }
    if !cookies.is_empty() {
        headers.push(("cookie".into(), cookies.join("; ")));
    }
    let body = match &tool.body {
        Some(b) => body(b, args)?,
        None => None,
    };
    if let (Some(_), Some(b)) = (&body, &tool.body) {
        headers.push(("content-type".into(), b.content_type.clone()));
    }
    // The operator's credentials replace anything of the same name the model put in.
    if let Some(ApiKey::Query { name, value }) = &api.api_key {
        query.0.retain(|(n, _)| n != name);
        query.pair(name, value);
    }
    credential_headers(api, &mut headers);
    if !query.0.is_empty() {
        path.push('?');
        path.push_str(&query.encoded());
    }
    let up = &api.upstream;
    let authority = match (&up.authority, &tool.server.host) {
        (Some(domain), _) => domain.clone(),
        (None, Some(host)) => host.clone(),
        (None, None) => up.authority_or_service(),
    };
    Ok(ToolRequest { method: tool.method, path, authority, headers, body })
}

/// The operator's header credentials (a header `apiKey`, static `headers`), replacing any header of the
/// same name already in `headers`. Every tool source attaches them the same way.
pub fn credential_headers(api: &Api, headers: &mut Vec<(String, String)>) {
    if let Some(ApiKey::Header { name, value }) = &api.api_key {
        // Higress's meaning: `Authorization: <name> <value>` (its DeepL example:
        // `Authorization: DeepL-Auth-Key <key>`); the named header as well, as api-agent sent it
        // before and as APIs keyed by a custom header (`X-Api-Key`) expect.
        let name = name.to_ascii_lowercase();
        headers.retain(|(n, _)| *n != name && n != "authorization");
        if name == "authorization" {
            headers.push((name, value.clone()));
        } else {
            headers.push(("authorization".into(), format!("{} {value}", api_key_scheme(&api.api_key))));
            headers.push((name, value.clone()));
        }
    }
    for (name, value) in &api.headers {
        headers.retain(|(n, _)| n != name);
        headers.push((name.clone(), value.clone()));
    }
}

/// The configured spelling of the header key's name, for `Authorization: <name> <value>`.
fn api_key_scheme(key: &Option<ApiKey>) -> &str {
    match key {
        Some(ApiKey::Header { name, .. }) => name,
        _ => "",
    }
}

/// Required arguments present, no unknown ones, top-level types and enums right.
fn check_arguments(tool: &Tool, args: &Map<String, Value>) -> Result<(), String> {
    let props = tool.schema.get("properties").and_then(Value::as_object);
    let known = |k: &str| props.is_some_and(|p| p.contains_key(k));
    let unknown: Vec<&str> = args.keys().map(String::as_str).filter(|k| !known(k)).collect();
    if !unknown.is_empty() {
        let valid: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
        return Err(format!(
            "unknown argument(s) {}; '{}' takes: {}",
            quoted(&unknown),
            tool.name,
            if valid.is_empty() { "no arguments".to_string() } else { valid.join(", ") }
        ));
    }
    if let Some(required) = tool.schema.get("required").and_then(Value::as_array) {
        let missing: Vec<&str> =
            required.iter().filter_map(Value::as_str).filter(|k| args.get(*k).is_none_or(Value::is_null)).collect();
        if !missing.is_empty() {
            return Err(format!("missing required argument(s) {}", quoted(&missing)));
        }
    }
    for (k, v) in args {
        let Some(schema) = props.and_then(|p| p.get(k)) else {
            continue;
        };
        let textual = tool.params.iter().any(|p| &p.name == k);
        check_value(k, schema, v, textual)?;
    }
    Ok(())
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
}

/// `textual`: the value ends up as text (path, query, header), so `"3"` for an integer and `3` for a
/// string are the same thing; a body value must have the declared JSON type.
fn check_value(name: &str, schema: &Value, v: &Value, textual: bool) -> Result<(), String> {
    if v.is_null() {
        return Ok(());
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| type_ok(t, v, textual)) {
        return Err(format!(
            "argument '{name}' must be of type {}, got {} {}",
            types.join(" or "),
            type_name(v),
            crate::doc::truncate(&v.to_string(), 100)
        ));
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        let ok = allowed.iter().any(|a| a == v || (textual && text_of(a) == text_of(v)));
        if !ok {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!("argument '{name}' must be one of {}, got {v}", list.join(", ")));
        }
    }
    Ok(())
}

fn type_ok(t: &str, v: &Value, textual: bool) -> bool {
    let text = v.as_str().map(str::trim);
    match t {
        "string" => v.is_string() || (textual && (v.is_number() || v.is_boolean())),
        "integer" => {
            v.as_f64().is_some_and(|f| f.fract() == 0.0) || (textual && text.is_some_and(|s| s.parse::<i64>().is_ok()))
        }
        "number" => v.is_number() || (textual && text.is_some_and(|s| s.parse::<f64>().is_ok())),
        "boolean" => v.is_boolean() || (textual && matches!(text, Some("true" | "false"))),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn expand_path(template: &str, params: &[Param], args: &Map<String, Value>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let len = rest[start..].find('}').unwrap_or(rest.len() - start);
        let name = &rest[start + 1..start + len];
        let p = params.iter().find(|p| p.location == Location::Path && p.name == name);
        let v = args.get(name).filter(|v| !v.is_null()).ok_or_else(|| format!("missing required argument '{name}'"))?;
        let items = flatten(v, false);
        if items.is_empty() || items.iter().any(String::is_empty) {
            return Err(format!("argument '{name}' is part of the path and must not be empty"));
        }
        out.push_str(&path_value(p, name, v));
        rest = rest.get(start + len + 1..).unwrap_or("");
    }
    out.push_str(rest);
    Ok(out)
}

/// One path parameter, `simple` style unless the spec says `label` or `matrix`. Every item is encoded
/// so that it stays inside its segment: `/`, `?`, `#` and a lone `.` or `..` are escaped.
fn path_value(p: Option<&Param>, name: &str, v: &Value) -> String {
    let style = p.map_or(Style::Simple, |p| p.style);
    let explode = p.is_some_and(|p| p.explode);
    let items = flatten(v, explode);
    let enc: Vec<String> = items.iter().map(|s| encode_segment(s)).collect();
    match style {
        Style::Label => format!(".{}", enc.join(if explode { "." } else { "," })),
        Style::Matrix if explode && v.is_array() => enc.iter().map(|e| format!(";{name}={e}")).collect(),
        Style::Matrix => format!(";{name}={}", enc.join(",")),
        _ => enc.join(","),
    }
}

/// Scalars as text; arrays item by item; objects as `k,v,…` (or `k=v` items when exploded).
fn flatten(v: &Value, explode: bool) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(text_of).collect(),
        Value::Object(m) if explode => m.iter().map(|(k, v)| format!("{k}={}", text_of(v))).collect(),
        Value::Object(m) => m.iter().flat_map(|(k, v)| [k.clone(), text_of(v)]).collect(),
        other => vec![text_of(other)],
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn scalar_list(v: &Value, sep: &str) -> String {
    flatten(v, false).join(sep)
}

/// Query pairs by raw name, each value already encoded (a non-exploded list keeps its commas literal).
#[derive(Default)]
struct Query(Vec<(String, String)>);

impl Query {
    fn pair(&mut self, name: &str, value: &str) {
        self.0.push((name.to_string(), encode(value, QUERY)));
    }

    fn encoded(&self) -> String {
        let pairs: Vec<String> = self.0.iter().map(|(n, v)| format!("{}={v}", encode(n, QUERY))).collect();
        pairs.join("&")
    }
}

fn append_query(q: &mut Query, p: &Param, v: &Value, params: &[Param]) -> Result<(), String> {
    match (v, p.style) {
        (Value::Array(items), Style::Form) if p.explode => items.iter().for_each(|i| q.pair(&p.name, &text_of(i))),
        (Value::Array(items), Style::SpaceDelimited | Style::PipeDelimited) => {
            let sep = if p.style == Style::SpaceDelimited { " " } else { "|" };
            q.pair(&p.name, &items.iter().map(text_of).collect::<Vec<_>>().join(sep))
        }
        (Value::Object(m), Style::DeepObject) => {
            m.iter().for_each(|(k, v)| q.pair(&format!("{}[{k}]", p.name), &text_of(v)))
        }
        (Value::Object(m), _) if p.explode => {
            // Exploded, the object's keys become parameter names: only the ones its schema declares
            // (or, for a free-form object, none that is another parameter's name).
            let declared = p.schema.get("properties").and_then(Value::as_object);
            for (k, v) in m {
                let allowed = match declared {
                    Some(props) => props.contains_key(k),
                    None => !params.iter().any(|other| other.name == *k),
                };
                if !allowed {
                    return Err(format!("argument '{}' has a property '{k}' that its schema does not allow", p.name));
                }
                q.pair(k, &text_of(v));
            }
        }
        (Value::Array(_) | Value::Object(_), _) => {
            let items: Vec<String> = flatten(v, false).iter().map(|s| encode(s, QUERY)).collect();
            q.0.push((p.name.clone(), items.join(",")));
        }
        _ => q.pair(&p.name, &text_of(v)),
    }
    Ok(())
}

fn sep(q: &mut String) {
    if !q.is_empty() {
        q.push('&');
    }
}

fn push_pair(q: &mut String, name: &str, value: &str) {
    sep(q);
    let _ = write!(q, "{}={}", encode(name, QUERY), encode(value, QUERY));
}

/// A header parameter's value: what HTTP carries as it is (printable ASCII and tabs), within a size.
fn header_value(p: &Param, v: &Value) -> Result<String, String> {
    let text = flatten(v, p.explode).join(",");
    check_size(p, "a header", &text)?;
    if text.contains(['\r', '\n', '\0']) {
        return Err(format!("argument '{}' is a header and must not contain line breaks", p.name));
    }
    if let Some(c) = text.chars().find(|&c| c != '\t' && !(' '..='~').contains(&c)) {
        return Err(format!("argument '{}' is a header and can only hold printable ASCII, not {c:?}", p.name));
    }
    Ok(text)
}

/// A cookie parameter's value, percent-encoded (so any text is carried), within a size.
fn cookie_value(p: &Param, v: &Value) -> Result<String, String> {
    let text = scalar_list(v, ",");
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!("argument '{}' is a cookie and must not contain control characters, found {c:?}", p.name));
    }
    let encoded = encode(&text, QUERY);
    check_size(p, "a cookie", &encoded)?;
    Ok(encoded)
}

fn check_size(p: &Param, what: &str, text: &str) -> Result<(), String> {
    if text.len() > MAX_HEADER_VALUE_BYTES {
        return Err(format!(
            "argument '{}' is {what} and too long: {} bytes, at most {MAX_HEADER_VALUE_BYTES} can be sent",
            p.name,
            text.len()
        ));
    }
    Ok(())
}

fn body(b: &Body, args: &Map<String, Value>) -> Result<Option<Vec<u8>>, String> {
    let value = match &b.layout {
        BodyLayout::Whole(name) => match args.get(name) {
            Some(v) if !v.is_null() => v.clone(),
            _ => return Ok(None),
        },
        BodyLayout::Properties(names) => {
            let m: Map<String, Value> =
                names.iter().filter_map(|n| args.get(n).map(|v| (n.clone(), v.clone()))).collect();
            if m.is_empty() && !b.required {
                return Ok(None);
            }
            Value::Object(m)
        }
    };
    Ok(Some(match b.media {
        Media::Json => serde_json::to_vec(&value).map_err(|e| e.to_string())?,
        Media::Form => form(&value).into_bytes(),
    }))
}

fn form(v: &Value) -> String {
    let mut q = String::new();
    if let Value::Object(m) = v {
        for (k, v) in m {
            match v {
                Value::Array(items) => items.iter().for_each(|i| push_pair(&mut q, k, &text_of(i))),
                Value::Object(_) => push_pair(&mut q, k, &v.to_string()),
                other => push_pair(&mut q, k, &text_of(other)),
            }
        }
    }
    q
}

/// Bytes kept as they are: RFC 3986 unreserved characters only.
const QUERY: fn(u8) -> bool = |b| b.is_ascii_alphanumeric() || b"-._~".contains(&b);

fn encode(s: &str, keep: fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if keep(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// One path segment: unreserved bytes kept, and a value of `.` or `..` escaped as well, since a server
/// would read it as a relative step.
pub fn encode_segment(s: &str) -> String {
    if s == "." || s == ".." {
        return s.replace('.', "%2E");
    }
    encode(s, QUERY)
}

/// A query-string value as `build` writes it.
pub fn encode_query(s: &str) -> String {
    encode(s, QUERY)
}

#[cfg(test)]
mod tests;
