//! MCP servers as a tool source (Streamable HTTP). A call is a JSON-RPC `tools/call` POST to the
//! server's endpoint, in the revision the server speaks (`Revision`, docs/mcp.md): 2026-07-28 carries
//! its version and capabilities on every request (`_meta`, `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name`) and has no session; the 2025 revisions open one with `initialize` and
//! `notifications/initialized`, built here and sequenced by the agent (`agent::mcp`) and the listing
//! (`discovery`). JSON-RPC ids and the revision's marks are set at dispatch (`speaking`).

pub mod discovery;
mod list;
mod reply;

use super::Request;
use crate::openapi::call::{credential_headers, encode_query};
use crate::schema::Schema;
use crate::upstream::{Api, ApiKey};
pub use list::{load, ListError, Loaded};
pub use reply::{agreed, handshake_error, observation, refusal, session_lost, Refusal};
use serde::Serialize;
use serde_json::{Map, Value};

/// The stateless revision, tried first.
pub const MODERN: &str = "2026-07-28";
/// The revision asked for in `initialize`; servers answer with one they support (`LEGACY`).
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The handshake revisions the gateway speaks, newest first.
pub const LEGACY: [&str; 3] = ["2025-11-25", PROTOCOL_VERSION, "2025-03-26"];
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The revision a request is sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// 2026-07-28: every request says its version and capabilities; no session.
    Modern,
    /// A handshake revision (one of `LEGACY`), as the server's `initialize` result named it.
    Legacy(&'static str),
}

impl Revision {
    pub fn version(self) -> &'static str {
        match self {
            Revision::Modern => MODERN,
            Revision::Legacy(v) => v,
        }
    }

    /// The handshake revision `version` names, if the gateway speaks it.
    pub fn legacy(version: &str) -> Option<Revision> {
        LEGACY.iter().find(|v| **v == version).map(|v| Revision::Legacy(v))
    }
}

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
    let params = CallParams { name: &tool.remote, arguments: args };
    Ok(post(api, &tool.path, body(&Rpc::request("tools/call", params))))
}

/// The `initialize` request that opens a session.
pub fn initialize(api: &Api, path: &str) -> Request {
    let params = InitializeParams { protocol_version: PROTOCOL_VERSION, capabilities: Empty {}, client_info: CLIENT };
    post(api, path, body(&Rpc::request("initialize", params)))
}

/// A `tools/list` request, for the page after `cursor`.
pub fn list(api: &Api, path: &str, cursor: Option<&str>) -> Request {
    post(api, path, body(&Rpc::request("tools/list", ListParams { cursor })))
}

/// The notification that ends the handshake (no id: the server answers 202 without a body).
pub fn initialized(api: &Api, path: &str) -> Request {
    let note = Rpc { jsonrpc: JSONRPC, id: None, method: "notifications/initialized", params: None::<Empty> };
    post(api, path, body(&note))
}

/// `request` with the JSON-RPC id `id` (unique within a session; a notification keeps none) in
/// `revision`: its `MCP-Protocol-Version`, and in 2026-07-28 the request's `_meta` (version, client,
/// capabilities) with the `Mcp-Method` and `Mcp-Name` headers that mirror the body.
pub fn speaking(mut request: Request, revision: Revision, id: &str) -> Request {
    let version = revision.version();
    request.headers.retain(|(k, _)| !matches!(k.as_str(), "mcp-protocol-version" | "mcp-method" | "mcp-name"));
    request.headers.push(("mcp-protocol-version".into(), version.into()));
    let Some(Value::Object(mut m)) = request.body.as_deref().and_then(|b| serde_json::from_slice(b).ok()) else {
        return request;
    };
    if m.contains_key("id") {
        m.insert("id".into(), id.into());
    }
    if revision == Revision::Modern {
        let method = m.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
        let params = m.entry("params").or_insert_with(|| Value::Object(Map::new()));
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            request.headers.push(("mcp-name".into(), header_value(name)));
        }
        if let Value::Object(p) = params {
            p.insert("_meta".into(), request_meta());
        }
        request.headers.push(("mcp-method".into(), method));
    }
    request.body = Some(Value::Object(m).to_string().into_bytes());
    request
}

/// What a 2026-07-28 request says of its client: no optional capability (no sampling, elicitation
/// or roots to offer: a result that asks for input is the model's to hear about).
fn request_meta() -> Value {
    let mut meta = Map::new();
    meta.insert("io.modelcontextprotocol/protocolVersion".into(), MODERN.into());
    meta.insert("io.modelcontextprotocol/clientInfo".into(), serde_json::to_value(CLIENT).unwrap_or_default());
    meta.insert("io.modelcontextprotocol/clientCapabilities".into(), Value::Object(Map::new()));
    Value::Object(meta)
}

/// Who the gateway is, to an MCP server.
#[derive(Debug, Clone, Copy, Serialize)]
struct ClientInfo {
    name: &'static str,
    version: &'static str,
}

const CLIENT: ClientInfo = ClientInfo { name: "api-agent", version: env!("CARGO_PKG_VERSION") };

const JSONRPC: &str = "2.0";

/// A JSON-RPC message; a request's id is 0 until `speaking` sets it, a notification has none.
#[derive(Serialize)]
struct Rpc<'a, P> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u32>,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<P>,
}

impl<'a, P> Rpc<'a, P> {
    fn request(method: &'a str, params: P) -> Rpc<'a, P> {
        Rpc { jsonrpc: JSONRPC, id: Some(0), method, params: Some(params) }
    }
}

/// `{}`.
#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct CallParams<'a> {
    name: &'a str,
    arguments: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    protocol_version: &'static str,
    capabilities: Empty,
    client_info: ClientInfo,
}

#[derive(Serialize)]
struct ListParams<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<&'a str>,
}

/// A header value as 2026-07-28 carries it: as it is when it is plain visible ASCII (spaces inside),
/// else base64 in the `=?base64?…?=` sentinel (also a value that looks like one).
pub fn header_value(value: &str) -> String {
    let visible = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = visible && !padded && !sentinel;
    match plain {
        true => value.to_string(),
        false => format!("=?base64?{}?=", crate::doc::base64(value.as_bytes())),
    }
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

/// A message's bytes; typed messages into a Vec cannot fail.
fn body<T: Serialize>(message: &T) -> Vec<u8> {
    serde_json::to_vec(message).unwrap_or_default()
}

fn post(api: &Api, path: &str, body: Vec<u8>) -> Request {
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
    Request { method: "POST", path, authority: api.upstream.authority_or_service(), headers, body: Some(body) }
}
