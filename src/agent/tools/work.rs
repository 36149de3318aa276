//! A turn's tool work: what each call the model asked for becomes (a request to send, a refusal, a
//! call that needs the client's approval), and what its reply tells the model.

use crate::agent::mcp::Handshake;
use crate::agent::protocol::{Call, CallId};
use crate::config::Config;
use crate::doc::truncate;
use crate::tools::{self, Binding, Tool};
use serde_json::{Map, Value};

/// One tool call of a turn: a request to send, or an observation known already (bad arguments,
/// unknown tool, malformed output).
#[derive(Debug)]
pub enum Work {
    /// `retries`: how often the call may be sent again after a retryable failure; `note`: said to the
    /// model before the reply (e.g. arguments that were dropped).
    Call { name: String, call: ToolCall, retries: u32, note: Option<String>, args: String },
    /// Malformed output: what the model is told instead.
    Known(String),
    /// A call of `name` refused before sending (unknown tool, arguments its schema refuses): what the
    /// model is told, and why in a few words.
    Refused { name: String, observation: String, why: String },
    /// A call of a `policy.confirm` tool: it goes back to the client for approval (the arguments, as
    /// JSON text, were checked).
    Confirm { name: String, args: String },
    /// A `find_tools` call of a large catalog (`offer`): the tools found for `query`, described.
    Found { query: String, observation: String },
}

/// A tool request before it has a call id.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The `apis[]` entry of the tool.
    pub api: usize,
    pub cluster: String,
    pub request: tools::Request,
    pub timeout_ms: u64,
    /// An MCP tool's call: where it is in its session handshake (`agent::mcp`).
    pub mcp: Option<Box<Handshake>>,
}

impl ToolCall {
    /// The call as it goes out under `id`, with the client's identity (`identity`) added.
    pub fn into_call(self, id: CallId, timeout_ms: u64, identity: Vec<(String, String)>) -> Call {
        let mut r = self.request;
        r.headers.extend(identity);
        if !r.headers.iter().any(|(k, _)| k == "accept-encoding") {
            // A compressed body could not be read as an observation.
            r.headers.push(("accept-encoding".into(), "identity".into()));
        }
        Call {
            id,
            cluster: self.cluster,
            method: r.method,
            path: r.path,
            authority: r.authority,
            headers: r.headers,
            body: r.body.map(Into::into),
            timeout_ms,
            stream: false,
        }
    }
}

/// The request for `name` called with `input`, or what to tell the model instead.
pub fn tool_work(cfg: &Config, name: &str, input: Value) -> Work {
    let work = call_work(cfg, name, input);
    match work {
        Work::Call { name, args, .. } if cfg.confirm.contains(&name) => Work::Confirm { name, args },
        other => other,
    }
}

/// The request for a call the client approved.
pub fn approved_work(cfg: &Config, name: &str, input: Value) -> Work {
    call_work(cfg, name, input)
}

fn call_work(cfg: &Config, name: &str, input: Value) -> Work {
    let Some(tool) = cfg.tools.get(name) else {
        let observation = unknown_tool(cfg, name);
        return Work::Refused { name: name.to_string(), why: observation.clone(), observation };
    };
    let api = &cfg.apis[tool.api];
    let (args, note) = match arguments(tool, input) {
        Ok(args) => drop_unknown(tool, args),
        Err(why) => return refused(tool, why),
    };
    match tool.request(api, &args) {
        Ok(request) => Work::Call {
            name: tool.name.clone(),
            retries: tool.retries(api),
            call: ToolCall {
                api: tool.api,
                cluster: api.upstream.cluster.clone(),
                request,
                timeout_ms: api.upstream.timeout_ms,
                mcp: match &tool.binding {
                    Binding::Mcp(t) => Some(Handshake::new(tool.api, t)),
                    Binding::OpenApi(_) => None,
                },
            },
            note,
            args: args.to_string(),
        },
        Err(why) => refused(tool, note.map_or_else(|| why.clone(), |n| format!("{why} ({n})"))),
    }
}

/// What the model is told of a name no tool has: the tools' names, or, for a catalog too large to
/// list, where to search it.
fn unknown_tool(cfg: &Config, name: &str) -> String {
    let name = truncate(name, 100);
    if cfg.offer.is_some() {
        let find = crate::tools::search::FIND_TOOLS;
        return format!("Unknown tool '{name}'. Call '{find}' with what you want to do to find the right tool.");
    }
    let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
    format!("Unknown tool '{name}'. The tools are: {}.", names.join(", "))
}

fn refused(tool: &Tool, why: String) -> Work {
    Work::Refused {
        name: tool.name.clone(),
        observation: format!("Invalid arguments for '{}': {why}. Its parameters: {}", tool.name, tool.schema),
        why: format!("invalid arguments for '{}': {why}", tool.name),
    }
}

/// Keys the tool does not take are dropped, never sent (small models copy extra keys from examples);
/// the note tells the model which. Credentials are added after this, so no key can shadow one.
fn drop_unknown(tool: &Tool, mut args: Value) -> (Value, Option<String>) {
    let Some(props) = tool.schema.get("properties").and_then(Value::as_object) else {
        return (args, None);
    };
    let Value::Object(map) = &mut args else {
        return (args, None);
    };
    let unknown: Vec<String> = map.keys().filter(|k| !props.contains_key(*k)).cloned().collect();
    if unknown.is_empty() {
        return (args, None);
    }
    for k in &unknown {
        map.remove(k);
    }
    let names: Vec<String> = unknown.iter().map(|k| format!("'{}'", truncate(k, 60))).collect();
    let note = format!("{} not parameters of '{}' and were not sent", names.join(", "), tool.name);
    (args, Some(note))
}

/// The model's input as an arguments object. A plain string is accepted for a tool with a single
/// parameter, as ReAct models often write `"action_input": "Beijing"`.
fn arguments(tool: &Tool, input: Value) -> Result<Value, String> {
    match input {
        Value::Object(_) => Ok(input),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) => {
            let props = tool.schema.get("properties").and_then(Value::as_object);
            match props.map(|p| p.keys().collect::<Vec<_>>()).as_deref() {
                Some([only]) => Ok(serde_json::json!({ only.as_str(): s })),
                Some([]) | None if s.trim().is_empty() => Ok(Value::Object(Map::new())),
                _ => Err("the input must be a JSON object of the tool's arguments".into()),
            }
        }
        other => Err(format!("the input must be a JSON object, not {}", crate::doc::type_name(&other))),
    }
}

/// The observation for a tool's reply, as the tool's binding reads it (a name no tool has, which
/// cannot happen for a call that was sent, is read as plain HTTP).
pub fn tool_observation(cfg: &Config, tool: &str, status: u16, headers: &[(String, String)], body: &[u8]) -> String {
    let max = cfg.llm.max_observation_bytes;
    match cfg.tools.get(tool) {
        Some(t) => t.observation(max, status, headers, body),
        None => tools::http_observation(tool, max, status, headers, body),
    }
}
