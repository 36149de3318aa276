//! What the call rules (`policy.rules`) know of one request, and their decisions outside the turn
//! loop: a tool as a rule reads it, and whether an approval the client sent may run its call.

use super::guard::Flow;
use crate::agent::protocol::RequestMeta;
use crate::config::call_policy::Guard;
use crate::config::Config;
use crate::policy::{self, Decision};
use crate::tools::Tool;
use serde_json::{json, Map, Value};

/// The rules' view of one request.
#[derive(Debug, Default)]
pub struct CallRules {
    /// `headers` as the rules read it: the listed request headers the request has.
    pub headers: Value,
    /// Catalog positions of the tools the rules refuse whatever the arguments, in order: never offered.
    pub hidden: Vec<u32>,
    /// The decisions not yet recorded, in order: (tool, rule name or `_guard_`, decision).
    pub decided: Vec<(String, String, &'static str)>,
    /// With `policy.guard`: what the client said and the tools replied so far.
    pub flow: Option<Flow>,
    /// Calls the data-flow guard stopped (denied or sent to approval).
    pub guarded: u32,
}

impl CallRules {
    pub fn hides(&self, position: u32) -> bool {
        self.hidden.binary_search(&position).is_ok()
    }
}

/// `headers` as the rules read it: the listed request headers the request has.
pub fn headers_view(meta: &RequestMeta) -> Value {
    Value::Object(meta.policy_headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<_, _>>())
}

/// The tool as a rule reads it (`tool`).
pub fn tool_view(cfg: &Config, t: &Tool) -> Value {
    let api = cfg.apis.get(t.api).map_or("", |a| a.upstream.cluster.as_str());
    let (path, tags, server) = match (t.openapi(), cfg.mcp.iter().find(|m| m.api == t.api)) {
        (Some(op), _) => (op.path.as_str(), op.tags.clone(), ""),
        (None, Some(m)) => ("", Vec::new(), m.path.as_str()),
        (None, None) => ("", Vec::new(), ""),
    };
    json!({"name": t.name, "api": api, "method": t.method(), "path": path, "tags": tags, "server": server})
}

/// Whether a call the client approved may run: a rule must not deny it (the approval cannot lift a
/// denial), and either `apis[].policy.confirm` or a rule asked for the approval.
pub fn approvable(cfg: &Config, meta: &RequestMeta, name: &str, arguments: &str) -> Approvable {
    let tool = cfg.tools.get(name);
    // The guard asks for approvals it cannot see again: the run that found the values is over.
    let guard = cfg.call_policy.as_ref().and_then(|p| p.guard.as_ref());
    let guarded = guard.zip(tool).is_some_and(|(g, t)| !g.deny && sensitive(g, t));
    let confirm = cfg.confirm.iter().any(|n| n == name) || guarded;
    let Some((tool, p)) = tool.zip(cfg.call_policy.as_ref()).filter(|(_, p)| !p.rules.is_empty()) else {
        return if confirm { Approvable::Yes } else { Approvable::NotAsked };
    };
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    match policy::decide(&p.rules, &tool_view(cfg, tool), &args, &headers_view(meta)) {
        Some(v) if v.decision == Decision::Deny => Approvable::Denied(p.rules[v.rule].name.clone()),
        Some(v) if v.decision == Decision::Confirm => Approvable::Yes,
        _ if confirm => Approvable::Yes,
        _ => Approvable::NotAsked,
    }
}

/// What an approval in the conversation can do.
#[derive(Debug, PartialEq, Eq)]
pub enum Approvable {
    /// The call needed the approval: it runs.
    Yes,
    /// A rule denies the call: it does not run.
    Denied(String),
    /// Nothing asked for an approval of this call: the `tool` message is the client's own.
    NotAsked,
}

/// A call of `tool` is checked by the guard whatever the rules say: its method or its tags.
pub fn sensitive(g: &Guard, tool: &Tool) -> bool {
    (g.non_get && !matches!(tool.method(), "GET" | "HEAD"))
        || tool.openapi().is_some_and(|op| op.tags.iter().any(|t| g.tags.contains(t)))
}
