//! The client's conversation folded into ReAct messages by role: system messages join the system
//! prompt, user and assistant turns stay turns, earlier tool calls and results become the Action and
//! Observation text a ReAct model reads. The question (the last user message) is marked `Question:`.

use crate::openai::{ChatRequest, Role};
use serde_json::{json, Value};

pub fn react_messages(system_prompt: &str, req: &ChatRequest) -> Vec<Value> {
    let client_system: Vec<&str> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.text.trim().is_empty())
        .map(|m| m.text.as_str())
        .collect();
    let system = if client_system.is_empty() {
        system_prompt.to_string()
    } else {
        format!("{}\n\n{system_prompt}", client_system.join("\n\n"))
    };
    let mut out = vec![json!({"role": "system", "content": system})];
    let question = req.messages.iter().rposition(|m| m.role == Role::User);
    for (i, m) in req.messages.iter().enumerate() {
        match m.role {
            Role::System => {}
            Role::User if Some(i) == question => {
                out.push(json!({"role": "user", "content": format!("Question: {}", m.text)}))
            }
            Role::User => out.push(json!({"role": "user", "content": m.text})),
            Role::Assistant => {
                let mut text = m.text.clone();
                for c in &m.tool_calls {
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                    let blob = json!({"action": c.name, "action_input": input});
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("Action:\n```json\n{blob}\n```"));
                }
                out.push(json!({"role": "assistant", "content": text}));
            }
            Role::Tool => {
                out.push(json!({"role": "user", "content": format!("Observation: {}", m.text)}))
            }
        }
    }
    out
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
        let msgs = react_messages("TOOLS", &req);
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "user"]
        );
        assert_eq!(msgs[0]["content"], "Be terse.\n\nTOOLS");
        assert_eq!(
            msgs[2]["content"],
            "Action:\n```json\n{\"action\":\"list\",\"action_input\":{\"u\":\"alice\"}}\n```"
        );
        assert_eq!(msgs[3]["content"], "Observation: [\"gateway\"]");
        assert_eq!(msgs[5]["content"], "Question: How many PRs?");
    }
}
