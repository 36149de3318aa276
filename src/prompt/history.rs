//! The client's conversation folded into ReAct messages by role: system messages join the system
//! prompt, user and assistant turns stay turns, earlier tool calls and results become the Action and
//! Observation text a ReAct model reads. The question (the last user message) is marked `Question:`.

use crate::openai::message::{to_value, ChatMessage, Content};
use crate::openai::{ChatRequest, Role};
use serde::Serialize;
use serde_json::Value;

/// An earlier tool call as the ReAct model reads it, in the blob syntax its prompt teaches.
#[derive(Serialize)]
struct Action<'a> {
    action: &'a str,
    action_input: Value,
}

fn user(content: String) -> Value {
    to_value(&ChatMessage::User { content: Content::Text(content) })
}

/// The client's system text (to go before the ReAct prompt in one system message) and the other
/// messages, folded by role.
pub fn react_messages(req: &ChatRequest) -> (Option<String>, Vec<Value>) {
    let client_system: Vec<&str> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.text.trim().is_empty())
        .map(|m| m.text.as_str())
        .collect();
    let system = (!client_system.is_empty()).then(|| client_system.join("\n\n"));
    let mut out = Vec::with_capacity(req.messages.len());
    let question = req.messages.iter().rposition(|m| m.role == Role::User);
    for (i, m) in req.messages.iter().enumerate() {
        match m.role {
            Role::System => {}
            Role::User if Some(i) == question => out.push(user(format!("Question: {}", m.text))),
            Role::User => out.push(user(m.text.clone())),
            Role::Assistant => {
                let mut text = m.text.clone();
                for c in &m.tool_calls {
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                    let blob =
                        serde_json::to_string(&Action { action: &c.name, action_input: input }).unwrap_or_default();
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("Action:\n```json\n{blob}\n```"));
                }
                let said =
                    ChatMessage::Assistant { content: Some(text), tool_calls: Vec::new(), reasoning_content: None };
                out.push(to_value(&said));
            }
            Role::Tool => out.push(user(format!("Observation: {}", m.text))),
        }
    }
    (system, out)
}

/// The client's messages as sent, with one repair: an assistant's tool call that has no `tool` answer
/// gets a synthetic failed result, so that the provider accepts the conversation.
pub fn native_messages(req: &ChatRequest) -> Vec<Value> {
    let raw = req.raw.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut out = Vec::with_capacity(raw.len());
    let mut unanswered: Vec<String> = Vec::new();
    for m in raw {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            unanswered.retain(|u| u != id);
        } else {
            answer_dangling(&mut out, &mut unanswered);
        }
        out.push(m.clone());
        if role == "assistant" {
            unanswered = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls.iter().filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string)).collect()
                })
                .unwrap_or_default();
        }
    }
    answer_dangling(&mut out, &mut unanswered);
    out
}

fn answer_dangling(out: &mut Vec<Value>, unanswered: &mut Vec<String>) {
    for id in unanswered.drain(..) {
        let content = "The tool call failed: no result was provided for it.".to_string();
        out.push(to_value(&ChatMessage::Tool { tool_call_id: id, content }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_roles_in_order() {
        let req = ChatRequest::parse(
            br#"{"messages":[
            {"role":"system","content":"Be terse."},
            {"role":"user","content":"Which repos?"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"list","arguments":"{\"u\":\"alice\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"[\"gateway\"]"},
            {"role":"assistant","content":"alice owns gateway."},
            {"role":"user","content":"How many PRs?"}]}"#,
        )
        .unwrap();
        let (system, msgs) = react_messages(&req);
        assert_eq!(system.as_deref(), Some("Be terse."));
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        assert_eq!(
            msgs[1]["content"],
            "Action:\n```json\n{\"action\":\"list\",\"action_input\":{\"u\":\"alice\"}}\n```"
        );
        assert_eq!(msgs[2]["content"], "Observation: [\"gateway\"]");
        assert_eq!(msgs[4]["content"], "Question: How many PRs?");
    }

    #[test]
    fn dangling_tool_calls_get_a_failed_result() {
        let req = ChatRequest::parse(
            br#"{"messages":[
            {"role":"user","content":"weather in Oslo and Rome?"},
            {"role":"assistant","content":null,"tool_calls":[
                {"id":"a","type":"function","function":{"name":"w","arguments":"{}"}},
                {"id":"b","type":"function","function":{"name":"w","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"a","content":"-3"},
            {"role":"user","content":"and Paris?"}]}"#,
        )
        .unwrap();
        let msgs = native_messages(&req);
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
        assert_eq!(msgs[3]["tool_call_id"], "b");
        assert!(msgs[3]["content"].as_str().unwrap().contains("failed"));
    }
}
