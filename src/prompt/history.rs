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
}
