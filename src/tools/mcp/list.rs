//! A server's `tools/list` result (pinned by the operator in `toolsList`) → tools. Names outside
//! `[A-Za-z0-9_-]` are sanitized for the model (OpenAI's rule) and the server's name is kept for calls.

use super::McpTool;
use crate::openapi::sanitized_name;
use crate::schema::Schema;
use crate::tools::{Binding, Tool};
use serde_json::Value;
use std::fmt;

/// Why a list gives no tools: the field at fault (`path`, under the `toolsList` field) and what is wrong
/// with it. The configuration reports it as its own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError {
    pub path: String,
    pub message: String,
}

impl ListError {
    fn new(path: &str, message: impl Into<String>) -> Self {
        ListError { path: path.to_string(), message: message.into() }
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug)]
pub struct Loaded {
    pub tools: Vec<Tool>,
    pub warnings: Vec<String>,
}

/// The tools of `list` (a `tools/list` result, its `tools` array, or either as JSON/YAML text) for
/// `apis[api]`, whose endpoint is `endpoint`, keeping only `allow` when it is given. `path` is the
/// `toolsList` field, for errors.
pub fn load(list: &Value, allow: &[String], endpoint: &str, api: usize, path: &str) -> Result<Loaded, ListError> {
    let parsed;
    let list = match list {
        Value::String(text) => {
            parsed = crate::doc::parse(text).map_err(|e| ListError::new(path, format!("{e:?}")))?;
            &parsed
        }
        other => other,
    };
    let items = match list.get("tools").unwrap_or(list) {
        Value::Array(items) => items,
        _ => return Err(ListError::new(path, "must be a tools/list result ({tools: [...]}) or its tools array")),
    };
    let mut out = Loaded { tools: Vec::new(), warnings: Vec::new() };
    for (i, item) in items.iter().enumerate() {
        let tool = one(item, endpoint, api, &format!("{path}.tools[{i}]"))?;
        if !allow.is_empty() && !allow.iter().any(|a| *a == remote_name(&tool)) {
            continue;
        }
        if let Some(t) = out.tools.iter().find(|t| t.name == tool.name) {
            return Err(ListError::new(
                path,
                format!("tools '{}' and '{}' would both be named '{}'", remote_name(t), remote_name(&tool), tool.name),
            ));
        }
        if tool.name != remote_name(&tool) {
            out.warnings.push(format!("MCP tool '{}' is named '{}' for the model", remote_name(&tool), tool.name));
        }
        out.tools.push(tool);
    }
    if let Some(missing) =
        allow.iter().find(|a| !items.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(a)))
    {
        return Err(ListError::new(path, format!("no tool '{missing}' in this list (named in 'tools')")));
    }
    if out.tools.is_empty() {
        return Err(ListError::new(path, "lists no tool"));
    }
    Ok(out)
}

fn one(item: &Value, endpoint: &str, api: usize, path: &str) -> Result<Tool, ListError> {
    let remote = match item.get("name").and_then(Value::as_str).map(str::trim) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => return Err(ListError::new(&format!("{path}.name"), "required")),
    };
    let name = sanitized_name(&remote);
    if name.is_empty() {
        return Err(ListError::new(&format!("{path}.name"), format!("'{remote}' has no usable character")));
    }
    let description = item.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string();
    let schema = match item.get("inputSchema") {
        Some(s @ Value::Object(_)) => s.clone(),
        _ => return Err(ListError::new(&format!("{path}.inputSchema"), "required (a JSON Schema object)")),
    };
    let input = Schema::compile(&schema).map_err(|e| ListError::new(&format!("{path}.inputSchema"), e))?;
    Ok(Tool {
        name,
        description,
        schema,
        api,
        binding: Binding::Mcp(Box::new(McpTool { remote, input, path: endpoint.to_string() })),
    })
}

fn remote_name(t: &Tool) -> &str {
    match &t.binding {
        Binding::Mcp(m) => &m.remote,
        Binding::OpenApi(_) => &t.name,
    }
}
