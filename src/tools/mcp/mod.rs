//! MCP servers as a tool source (Streamable HTTP). A call is a JSON-RPC `tools/call` POST to the
//! server's endpoint; the session handshake (`initialize`, `notifications/initialized`) is built here and
//! sequenced by the agent (`agent::mcp`). JSON-RPC ids are set by the agent at dispatch.

pub mod discovery;
mod list;
mod reply;

use super::Request;
use crate::openapi::call::{credential_headers, encode_query};
use crate::schema::Schema;
use crate::upstream::{Api, ApiKey};
pub use list::{load, ListError, Loaded};
pub use reply::{handshake_error, observation, session_lost};
use serde_json::{json, Value};

/// The protocol revision asked for in `initialize`; servers answer with one they support.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
pub const SESSION_HEADER: &str = "mcp-session-id";

/// A tool of an MCP server: its name on the server (the model's may be sanitized) and its compiled
/// `inputSchema`, checked before anything is sent.
#[derive(Debug, Clone)]
pub struct McpTool {
    pub remote: String,
    pub input: Schema,
    /// The server's Streamable HTTP endpoint (`mcpServer.path`).
    pub path: String,
}

/// `tools/call` for `tool` with `args`, with JSON-RPC id 0 until the agent sets the call's id.
pub fn call(tool: &McpTool, api: &Api, args: &Value) -> Result<Request, String> {
    if let Err(errors) = tool.input.validate(args) {
        return Err(crate::schema::describe(&errors, 5).replace('\n', "; "));
    }
    let params = json!({"name": tool.remote, "arguments": args});
    Ok(post(api, &tool.path, rpc(0, "tools/call", params)))
}

/// The `initialize` request that opens a session.
pub fn initialize(api: &Api, path: &str) -> Request {
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "api-agent", "version": env!("CARGO_PKG_VERSION")},
    });
    post(api, path, rpc(0, "initialize", params))
}

/// A `tools/list` request, for the page after `cursor`.
pub fn list(api: &Api, path: &str, cursor: Option<&str>) -> Request {
    let params = match cursor {
        Some(c) => json!({"cursor": c}),
        None => json!({}),
    };
    post(api, path, rpc(0, "tools/list", params))
}

/// The notification that ends the handshake (no id: the server answers 202 without a body).
pub fn initialized(api: &Api, path: &str) -> Request {
    post(api, path, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
}

/// `request` with the JSON-RPC id `id`, which must be unique within the session.
pub fn with_id(mut request: Request, id: &str) -> Request {
    if let Some(Value::Object(mut m)) = request.body.as_deref().and_then(|b| serde_json::from_slice(b).ok()) {
        if m.contains_key("id") {
            m.insert("id".into(), id.into());
            request.body = Some(Value::Object(m).to_string().into_bytes());
        }
    }
    request
}

/// `request` in session `session` (servers without sessions give none).
pub fn in_session(mut request: Request, session: Option<&str>) -> Request {
    request.headers.retain(|(k, _)| k != SESSION_HEADER);
    if let Some(s) = session {
        request.headers.push((SESSION_HEADER.into(), s.to_string()));
    }
    request
}

/// The session id a server gave in its reply to `initialize`.
pub fn session_of(headers: &[(String, String)]) -> Option<String> {
    headers.iter().find(|(k, _)| k == SESSION_HEADER).map(|(_, v)| v.trim().to_string()).filter(|v| !v.is_empty())
}

fn rpc(id: u32, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn post(api: &Api, path: &str, message: Value) -> Request {
    let mut path = path.to_string();
    if let Some(ApiKey::Query { name, value }) = &api.api_key {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(&format!("{}={}", encode_query(name), encode_query(value)));
    }
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "application/json, text/event-stream".to_string()),
        ("mcp-protocol-version".to_string(), PROTOCOL_VERSION.to_string()),
    ];
    credential_headers(api, &mut headers);
    Request {
        method: "POST",
        path,
        authority: api.upstream.authority_or_service(),
        headers,
        body: Some(message.to_string().into_bytes()),
    }
}
