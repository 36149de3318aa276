//! The tool registry, whatever a tool's source. A tool is what the model sees (name, description,
//! argument schema), where it is called (`apis[api]`: cluster, timeout, retries, credentials) and a
//! binding that turns arguments into a request and a reply into an observation. The loop, the prompt,
//! native `tools`, batching, policy, metrics and steps use only this neutral part: the `Tool`, the
//! `Catalog` of all of them, and a tool's HTTP reply as an observation (`http_observation`).

pub mod mcp;
pub mod search;

use crate::doc::truncate;
use crate::openapi;
use crate::upstream::Api;
pub use crate::upstream::Request;
use crate::vec_map::VecMap;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the arguments object (what the model sees).
    pub schema: Value,
    /// Index of the `apis[]` entry that owns the tool.
    pub api: usize,
    pub binding: Binding,
}

/// How a call of the tool becomes a request, and its reply an observation.
#[derive(Debug, Clone)]
pub enum Binding {
    /// An OpenAPI operation.
    OpenApi(Box<openapi::Tool>),
    /// A tool of the MCP server of `apis[api].mcpServer`.
    Mcp(Box<mcp::McpTool>),
}

impl Tool {
    pub fn from_openapi(op: openapi::Tool) -> Tool {
        Tool {
            name: op.name.clone(),
            description: op.description.clone(),
            schema: op.schema.clone(),
            api: op.api,
            binding: Binding::OpenApi(Box::new(op)),
        }
    }

    /// The request for a call with `args` (an object whose unknown keys were dropped). `Err` is a message
    /// for the model.
    pub fn request(&self, api: &Api, args: &Value) -> Result<Request, String> {
        match &self.binding {
            Binding::OpenApi(op) => openapi::call::build(op, api, args),
            Binding::Mcp(t) => mcp::call(t, api, args),
        }
    }

    /// How often a call may be sent again after a retryable failure: only reads, as another method may
    /// not be idempotent.
    pub fn retries(&self, api: &Api) -> u32 {
        match &self.binding {
            Binding::OpenApi(op) if matches!(op.method, "GET" | "HEAD") => api.max_retries,
            // A `tools/call` may not be idempotent.
            Binding::OpenApi(_) | Binding::Mcp(_) => 0,
        }
    }

    /// The HTTP method of the tool's calls, for `policy.methods`.
    pub fn method(&self) -> &'static str {
        match &self.binding {
            Binding::OpenApi(op) => op.method,
            Binding::Mcp(_) => "POST",
        }
    }

    /// What the model is told of a reply, cut to `max_bytes`.
    pub fn observation(&self, max_bytes: usize, status: u16, headers: &[(String, String)], body: &[u8]) -> String {
        match &self.binding {
            Binding::OpenApi(_) => http_observation(&self.name, max_bytes, status, headers, body),
            Binding::Mcp(_) => mcp::observation(&self.name, max_bytes, status, headers, body),
        }
    }

    /// The OpenAPI operation behind the tool, if it has one.
    pub fn openapi(&self) -> Option<&openapi::Tool> {
        match &self.binding {
            Binding::OpenApi(op) => Some(op),
            Binding::Mcp(_) => None,
        }
    }

    /// Whether the tool's calls need an MCP session first.
    pub fn is_mcp(&self) -> bool {
        matches!(self.binding, Binding::Mcp(_))
    }
}

/// All configured tools, in configuration then source order, looked up by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tools: Vec<Tool>,
    index: VecMap<String, usize>,
}

impl Catalog {
    /// Adds tools; a name already taken is refused, naming the `apis[]` entry that has it.
    pub fn extend(&mut self, tools: Vec<Tool>) -> Result<(), String> {
        for tool in tools {
            if let Some(&i) = self.index.get(&tool.name) {
                // Both entries are named: the operator renames or filters one of them.
                return Err(match tool.binding {
                    Binding::OpenApi(_) => format!(
                        "OpenAPI duplicate-tool-name: tool '{}' is already defined by apis[{}]",
                        tool.name, self.tools[i].api
                    ),
                    Binding::Mcp(_) => format!(
                        "duplicate-tool-name: MCP tool '{}' of apis[{}] is already defined by apis[{}]",
                        tool.name, tool.api, self.tools[i].api
                    ),
                });
            }
            self.index.insert(tool.name.clone(), self.tools.len());
            self.tools.push(tool);
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The tool at catalog position `i` (the catalog index's documents).
    pub fn at(&self, i: usize) -> Option<&Tool> {
        self.tools.get(i)
    }

    /// The catalog position of the tool named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

// A tool's HTTP reply as an observation.

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
