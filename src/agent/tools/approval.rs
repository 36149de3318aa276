//! yaa's approval gate: a `policy.confirm` tool never runs on the model's word alone. Its call goes back
//! to the client as a tool call; it runs when the client sends the conversation back ending with a
//! `tool` message for that call whose content is `{"approved": true}`. Anything else is told to the
//! model as a refusal.

use super::rule_view::{approvable, Approvable};
use super::work::{self, Work};
use crate::agent::protocol::RequestMeta;
use crate::config::Config;
use crate::openai::message::{CallKind, ClientCall, FunctionCall};
use crate::openai::{ChatRequest, Role};
use serde_json::Value;

/// A call the client approved: the index of its `tool` message, the tool and the model's arguments.
#[derive(Debug, Clone)]
pub struct Approved {
    pub message: usize,
    pub name: String,
    pub arguments: String,
}

/// The approved calls at the end of the conversation; refused ones have their `tool` message replaced
/// by what the model is told. Only the `tool` messages that end the conversation, right after the
/// assistant's calls, count: older approvals were run when they were given.
pub fn scan(cfg: &Config, req: &mut ChatRequest, meta: &RequestMeta) -> Vec<Approved> {
    if cfg.confirm.is_empty() && !cfg.call_policy.as_ref().is_some_and(|p| p.may_confirm()) {
        return Vec::new();
    }
    let n = req.messages.len();
    let first_tool = req.messages.iter().rposition(|m| m.role != Role::Tool).map_or(0, |i| i + 1);
    let Some(calls) = first_tool.checked_sub(1).map(|i| &req.messages[i]).filter(|m| m.role == Role::Assistant) else {
        return Vec::new();
    };
    let calls = calls.tool_calls.clone();
    let mut approved = Vec::new();
    for i in first_tool..n {
        let Some(id) = req.messages[i].tool_call_id.clone() else { continue };
        let Some(call) = calls.iter().find(|c| c.id == id) else { continue };
        let refusal = match approvable(cfg, meta, &call.name, &call.arguments) {
            Approvable::NotAsked => continue,
            Approvable::Denied(rule) => {
                Some(format!("The call to '{}' was not made: policy rule '{rule}' denies it.", call.name))
            }
            Approvable::Yes => None,
        };
        if let Some(refusal) = refusal {
            set_content(req, i, &refusal);
        } else if is_approval(&req.messages[i].text) {
            approved.push(Approved { message: i, name: call.name.clone(), arguments: call.arguments.clone() });
        } else {
            let refusal = format!("The user did not approve this call to '{}'; it was not run.", call.name);
            set_content(req, i, &refusal);
        }
    }
    approved
}

/// The work of the approved calls, in call order.
pub fn work(cfg: &Config, approved: &[Approved]) -> Vec<Work> {
    approved
        .iter()
        .map(|a| {
            let args = serde_json::from_str::<Value>(&a.arguments).unwrap_or(Value::Null);
            work::approved_work(cfg, &a.name, args)
        })
        .collect()
}

/// The turn's calls that need approval, as tool calls for the client (native shape in both modes):
/// under the model's call ids, or ids made from the request's id and the turn.
pub fn calls_for_client(work: &[Work], call_ids: &[String], request: &str, turn: u32) -> Vec<ClientCall> {
    let calls = work.iter().enumerate().filter_map(|(i, w)| match w {
        Work::Confirm { name, args } => {
            let id = call_ids.get(i).cloned().unwrap_or_else(|| format!("call_{request}_{turn}_{i}"));
            let function = FunctionCall { name: name.clone(), arguments: args.clone() };
            Some(ClientCall { id, kind: CallKind::Function, function })
        }
        _ => None,
    });
    calls.collect()
}

fn is_approval(text: &str) -> bool {
    serde_json::from_str::<Value>(text.trim()).is_ok_and(|v| v.get("approved") == Some(&Value::Bool(true)))
}

/// Replaces the content of message `i`, in the typed view (ReAct history) and as sent (native mode).
pub fn set_content(req: &mut ChatRequest, i: usize, text: &str) {
    if let Some(m) = req.messages.get_mut(i) {
        m.text = text.to_string();
    }
    if let Some(Value::Array(raw)) = req.raw.get_mut("messages") {
        if let Some(Value::Object(m)) = raw.get_mut(i) {
            m.insert("content".into(), Value::String(text.to_string()));
        }
    }
}
