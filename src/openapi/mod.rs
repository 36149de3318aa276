//! OpenAPI 3.0 / 3.1 documents → tools. Every operation (GET, POST, PUT, PATCH, DELETE, HEAD) becomes
//! one tool whose arguments are a JSON Schema object: the operation's parameters, and the JSON or form
//! body's properties. Tools keep the document's order so prompts are deterministic.

pub mod call;
mod headers;
mod refs;
mod server;

use crate::doc;
use refs::{Defs, Resolver};
use serde_json::{json, Map, Value};
pub use server::Server;
use std::fmt;

const METHODS: [&str; 6] = ["get", "put", "post", "delete", "patch", "head"];
const MAX_NAME: usize = 64;

/// Why a document cannot be used. The code is stable and documented in the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    NotADocument,
    UnsupportedVersion,
    NoOperations,
    ExternalRef,
    BrokenRef,
    RefCycle,
    TooDeep,
    DuplicateName,
    BadParameter,
    BadServer,
}

impl ErrorKind {
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotADocument => "not-a-document",
            ErrorKind::UnsupportedVersion => "unsupported-version",
            ErrorKind::NoOperations => "no-operations",
            ErrorKind::ExternalRef => "external-ref",
            ErrorKind::BrokenRef => "broken-ref",
            ErrorKind::RefCycle => "ref-cycle",
            ErrorKind::TooDeep => "too-deep",
            ErrorKind::DuplicateName => "duplicate-tool-name",
            ErrorKind::BadParameter => "bad-parameter",
            ErrorKind::BadServer => "bad-server",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApiError {
    pub kind: ErrorKind,
    pub detail: String,
}

impl OpenApiError {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        OpenApiError { kind, detail: detail.into() }
    }

    fn at(mut self, place: &str) -> Self {
        self.detail = format!("{place}: {}", self.detail);
        self
    }
}

impl fmt::Display for OpenApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenAPI {}: {}", self.kind.code(), self.detail)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Path,
    Query,
    Header,
    Cookie,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Simple,
    Label,
    Matrix,
    Form,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub location: Location,
    pub required: bool,
    pub schema: Value,
    pub style: Style,
    pub explode: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Json,
    Form,
}

/// How the tool's arguments map onto the request body.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyLayout {
    /// The body is an object; these arguments are its properties.
    Properties(Vec<String>),
    /// The whole body is the argument of this name (arrays, scalars, or names clashing with parameters).
    Whole(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub media: Media,
    pub content_type: String,
    pub required: bool,
    pub layout: BodyLayout,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub method: &'static str,
    pub path: String,
    pub server: Server,
    pub params: Vec<Param>,
    pub body: Option<Body>,
    /// The JSON Schema of the arguments object (what the model sees).
    pub schema: Value,
    /// Index of the `apis[]` entry that owns the tool.
    pub api: usize,
    /// The operation's `tags`, words the catalog index searches.
    pub tags: Vec<String>,
}

#[derive(Debug)]
pub struct Loaded {
    pub tools: Vec<Tool>,
    /// Operations skipped or renamed, for the operator's log.
    pub warnings: Vec<String>,
}

/// Loads one document (JSON or YAML text) for `apis[api]`.
pub fn load(text: &str, api: usize) -> Result<Loaded, OpenApiError> {
    let root = doc::parse(text).map_err(|e| match e {
        doc::DocError::TooDeep(m) => OpenApiError::new(ErrorKind::TooDeep, m),
        doc::DocError::Invalid(m) => OpenApiError::new(ErrorKind::NotADocument, m),
    })?;
    check_version(&root)?;
    let resolver = Resolver::new(&root);
    let root_servers = root.get("servers");
    let paths = match root.get("paths") {
        Some(Value::Object(p)) if !p.is_empty() => p,
        _ => {
            return Err(OpenApiError::new(
                ErrorKind::NoOperations,
                "the document has no `paths` (webhooks are not tools)",
            ))
        }
    };
    let mut out = Loaded { tools: Vec::new(), warnings: Vec::new() };
    for (path, item) in paths {
        let item = resolver.deref(item).map_err(|e| e.at(path))?;
        let Value::Object(item) = item else { continue };
        let path_servers = item.get("servers").or(root_servers);
        for (method, op) in item {
            let lower = method.to_ascii_lowercase();
            if !METHODS.contains(&lower.as_str()) {
                if matches!(lower.as_str(), "options" | "trace") {
                    out.warnings.push(format!(
                        "{} {path}: {lower} operations are not turned into tools",
                        lower.to_ascii_uppercase()
                    ));
                }
                continue;
            }
            let place = format!("{} {path}", lower.to_ascii_uppercase());
            let servers = op.get("servers").or(path_servers);
            let server = Server::pick(servers).map_err(|e| e.at(&place))?;
            match operation(&resolver, &lower, path, item, op, server, api, &mut out.warnings) {
                Ok(Some(tool)) => {
                    if out.tools.iter().any(|t| t.name == tool.name) {
                        return Err(OpenApiError::new(
                            ErrorKind::DuplicateName,
                            format!("{place}: tool name '{}' is used twice", tool.name),
                        ));
                    }
                    out.tools.push(tool)
                }
                Ok(None) => {}
                Err(e) => return Err(e.at(&place)),
            }
        }
    }
    if out.tools.is_empty() {
        return Err(OpenApiError::new(ErrorKind::NoOperations, "no operation could be turned into a tool"));
    }
    Ok(out)
}

fn check_version(root: &Value) -> Result<(), OpenApiError> {
    if !root.is_object() {
        return Err(OpenApiError::new(ErrorKind::NotADocument, "the document is not a map"));
    }
    match root.get("openapi") {
        Some(Value::String(v)) if v.starts_with("3.0") || v.starts_with("3.1") => Ok(()),
        Some(v) => {
            Err(OpenApiError::new(ErrorKind::UnsupportedVersion, format!("openapi {v}; 3.0.x and 3.1.x are supported")))
        }
        None if root.get("swagger").is_some() => Err(OpenApiError::new(
            ErrorKind::UnsupportedVersion,
            "Swagger 2.0; convert it to OpenAPI 3 (e.g. with swagger2openapi)",
        )),
        None => Err(OpenApiError::new(ErrorKind::NotADocument, "no `openapi` version field")),
    }
}

#[allow(clippy::too_many_arguments)]
fn operation(
    r: &Resolver<'_>,
    method: &str,
    path: &str,
    item: &Map<String, Value>,
    op: &Value,
    server: Server,
    api: usize,
    warnings: &mut Vec<String>,
) -> Result<Option<Tool>, OpenApiError> {
    let name = tool_name(op, method, path, warnings);
    let mut defs = Defs::default();
    let place = format!("{} {path}", method.to_ascii_uppercase());
    let params = merged_params(r, item.get("parameters"), op.get("parameters"), &mut defs, &place, warnings)?;
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut list = Vec::with_capacity(params.len());
    for (p, schema) in params {
        if p.required {
            required.push(Value::String(p.name.clone()));
        }
        properties.insert(p.name.clone(), schema);
        list.push(p);
    }
    check_path_template(path, &list)?;
    let body = match op.get("requestBody") {
        None => None,
        Some(b) => match request_body(r, b, &mut properties, &mut required, &mut defs)? {
            Ok(body) => Some(body),
            Err(why) => {
                warnings.push(format!("{} {path}: skipped ({why})", method.to_ascii_uppercase()));
                return Ok(None);
            }
        },
    };
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    let defs = r.finish_defs(defs)?;
    if !defs.is_empty() {
        schema["$defs"] = Value::Object(defs);
    }
    Ok(Some(Tool {
        name,
        description: description(op),
        method: method_name(method),
        path: path.to_string(),
        server,
        params: list,
        body,
        schema,
        api,
        tags: tags(op),
    }))
}

fn method_name(m: &str) -> &'static str {
    match m {
        "get" => "GET",
        "put" => "PUT",
        "post" => "POST",
        "delete" => "DELETE",
        "patch" => "PATCH",
        _ => "HEAD",
    }
}

/// `operationId` with characters outside `[A-Za-z0-9_-]` replaced by `_` (OpenAI's rule for function
/// names, applied in both modes so names never differ between them); without one, `<method>_<path>`.
fn tool_name(op: &Value, method: &str, path: &str, warnings: &mut Vec<String>) -> String {
    let (raw, given) = match op.get("operationId").and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
        Some(id) => (id.to_string(), true),
        None => (format!("{method}_{path}"), false),
    };
    let mut name = sanitized_name(&raw);
    if name.is_empty() {
        name = method.to_string();
    }
    if given && name != raw {
        warnings.push(format!("operationId '{raw}' is used as tool name '{name}'"));
    }
    name
}

/// An operation name as a tool name: characters outside `[A-Za-z0-9_-]` become `_` (runs folded,
/// trimmed), at most 64 characters. Policies match operation names through it.
pub fn sanitized_name(raw: &str) -> String {
    let mut name = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' };
        if !(c == '_' && name.ends_with('_')) {
            name.push(c);
        }
    }
    let mut name = name.trim_matches('_').to_string();
    name.truncate(MAX_NAME);
    name
}

fn tags(op: &Value) -> Vec<String> {
    let list = op.get("tags").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    list.iter().filter_map(Value::as_str).map(str::to_string).collect()
}

fn description(op: &Value) -> String {
    let summary = op.get("summary").and_then(Value::as_str).map(str::trim).unwrap_or("");
    let text = op.get("description").and_then(Value::as_str).map(str::trim).unwrap_or("");
    match (summary.is_empty(), text.is_empty()) {
        (true, _) => text.to_string(),
        (false, true) => summary.to_string(),
        (false, false) if text.starts_with(summary) => text.to_string(),
        (false, false) => format!("{}. {text}", summary.trim_end_matches('.')),
    }
}

/// Path-item parameters overridden by operation parameters of the same name and location.
fn merged_params(
    r: &Resolver<'_>,
    shared: Option<&Value>,
    own: Option<&Value>,
    defs: &mut Defs,
    place: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<(Param, Value)>, OpenApiError> {
    let mut out: Vec<(Param, Value)> = Vec::new();
    for list in [shared, own].into_iter().flatten() {
        let Value::Array(list) = list else {
            return Err(OpenApiError::new(ErrorKind::BadParameter, "`parameters` is not a list"));
        };
        for raw in list {
            let Some((p, schema)) = parameter(r, raw, defs, place, warnings)? else {
                continue;
            };
            if let Some(slot) = out.iter_mut().find(|(q, _)| q.name == p.name && q.location == p.location) {
                *slot = (p, schema);
            } else if out.iter().any(|(q, _)| q.name == p.name) {
                return Err(OpenApiError::new(
                    ErrorKind::BadParameter,
                    format!("two parameters named '{}' in different places; tool arguments need unique names", p.name),
                ));
            } else {
                out.push((p, schema));
            }
        }
    }
    Ok(out)
}

/// A parameter, or none when it is left out (`warnings` says why); `place`: its operation.
fn parameter(
    r: &Resolver<'_>,
    raw: &Value,
    defs: &mut Defs,
    place: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<(Param, Value)>, OpenApiError> {
    let p = r.deref(raw)?;
    let name = p.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let bad = |why: &str| OpenApiError::new(ErrorKind::BadParameter, format!("parameter '{name}': {why}"));
    if name.is_empty() {
        return Err(bad("no name"));
    }
    let location = match p.get("in").and_then(Value::as_str) {
        Some("path") => Location::Path,
        Some("query") => Location::Query,
        Some("header") => Location::Header,
        Some("cookie") => Location::Cookie,
        other => return Err(bad(&format!("unknown location {other:?}"))),
    };
    if location == Location::Header {
        // A header the call sets itself is not the model's to fill in.
        if let Some(why) = headers::check(&name).map_err(|e| bad(&e))? {
            warnings.push(format!("{place}: header parameter '{name}' is not a tool argument: {why}"));
            return Ok(None);
        }
    }
    let raw_schema = p
        .get("schema")
        .or_else(|| {
            p.get("content").and_then(Value::as_object).and_then(|c| c.values().next()).and_then(|m| m.get("schema"))
        })
        .cloned()
        .unwrap_or_else(|| json!({"type": "string"}));
    let mut schema = r.schema(&raw_schema, defs)?;
    if let (Some(d), Value::Object(m)) = (p.get("description").and_then(Value::as_str), &mut schema) {
        m.entry("description").or_insert_with(|| Value::String(d.trim().to_string()));
    }
    let style = match p.get("style").and_then(Value::as_str) {
        None => default_style(location),
        Some("simple") => Style::Simple,
        Some("label") => Style::Label,
        Some("matrix") => Style::Matrix,
        Some("form") => Style::Form,
        Some("spaceDelimited") => Style::SpaceDelimited,
        Some("pipeDelimited") => Style::PipeDelimited,
        Some("deepObject") => Style::DeepObject,
        Some(other) => return Err(bad(&format!("unknown style '{other}'"))),
    };
    let explode = p.get("explode").and_then(Value::as_bool).unwrap_or(style == Style::Form);
    let required = location == Location::Path || p.get("required").and_then(Value::as_bool).unwrap_or(false);
    Ok(Some((Param { name, location, required, schema: schema.clone(), style, explode }, schema)))
}

fn default_style(location: Location) -> Style {
    match location {
        Location::Path | Location::Header => Style::Simple,
        Location::Query | Location::Cookie => Style::Form,
    }
}

/// Every `{name}` in the path must be a path parameter.
fn check_path_template(path: &str, params: &[Param]) -> Result<(), OpenApiError> {
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            return Err(OpenApiError::new(ErrorKind::BadParameter, "unclosed '{' in the path"));
        };
        let name = &rest[start + 1..start + len];
        if !params.iter().any(|p| p.location == Location::Path && p.name == name) {
            return Err(OpenApiError::new(ErrorKind::BadParameter, format!("path parameter '{name}' is not declared")));
        }
        rest = &rest[start + len + 1..];
    }
    Ok(())
}

/// The request body's arguments. `Ok(Err(why))`: the operation cannot be a tool (its body is not JSON
/// or a form), which is a warning, not a failure of the whole document.
fn request_body(
    r: &Resolver<'_>,
    raw: &Value,
    properties: &mut Map<String, Value>,
    required: &mut Vec<Value>,
    defs: &mut Defs,
) -> Result<Result<Body, String>, OpenApiError> {
    let b = r.deref(raw)?;
    let body_required = b.get("required").and_then(Value::as_bool).unwrap_or(false);
    let Some(content) = b.get("content").and_then(Value::as_object) else {
        return Ok(Err("request body without content".into()));
    };
    let picked = content.iter().find_map(|(ct, m)| media_of(ct).map(|media| (ct, media, m)));
    let Some((content_type, media, m)) = picked else {
        let types: Vec<&str> = content.keys().map(String::as_str).collect();
        return Ok(Err(format!("request body types {} are not supported; JSON and form bodies are", types.join(", "))));
    };
    let schema = r.schema(m.get("schema").unwrap_or(&json!({})), defs)?;
    let content_type = if content_type.contains('*') { "application/json".to_string() } else { content_type.clone() };
    let flat = schema
        .get("properties")
        .and_then(Value::as_object)
        .filter(|props| !props.is_empty() && props.keys().all(|k| !properties.contains_key(k)));
    let layout = match flat {
        Some(props) => {
            let names: Vec<String> = props.keys().cloned().collect();
            let req: Vec<&Value> =
                schema.get("required").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
            for (k, v) in props {
                properties.insert(k.clone(), v.clone());
                if body_required && req.iter().any(|r| r.as_str() == Some(k)) {
                    required.push(Value::String(k.clone()));
                }
            }
            BodyLayout::Properties(names)
        }
        None => {
            let name = if properties.contains_key("body") { "requestBody" } else { "body" }.to_string();
            properties.insert(name.clone(), schema);
            if body_required {
                required.push(Value::String(name.clone()));
            }
            BodyLayout::Whole(name)
        }
    };
    Ok(Ok(Body { media, content_type, required: body_required, layout }))
}

fn media_of(content_type: &str) -> Option<Media> {
    let ct = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if ct == "application/json" || ct.ends_with("+json") || ct == "*/*" || ct == "application/*" {
        Some(Media::Json)
    } else if ct == "application/x-www-form-urlencoded" {
        Some(Media::Form)
    } else {
        None
    }
}
