//! The tool registry, whatever a tool's source. A tool is what the model sees (name, description,
//! argument schema), where it is called (`apis[api]`: cluster, timeout, retries, credentials) and a
//! binding that turns arguments into a request and a reply into an observation. The loop, the prompt,
//! native `tools`, batching, policy, metrics and steps use only this neutral part.

mod catalog;
pub mod mcp;
mod reply;
pub mod search;

use crate::openapi;
use crate::upstream::Api;
pub use crate::upstream::Request;
pub use catalog::Catalog;
pub use reply::http_observation;
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
