//! What the agent writes into a conversation, typed: its own messages to the LLM, and the tool calls
//! it returns to the client. Each serialises its keys in the order below (`role` or `id` first), as
//! the bodies always had them.

use serde::Serialize;
use serde_json::Value;

/// A message the agent writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum AgentMessage {
    /// Observations and instructions, as the user (ReAct mode; corrections in native mode).
    User { content: String },
    /// The model's ReAct text as the conversation keeps it, or its formatting reply.
    Assistant { content: String },
    /// A tool call's result (native mode).
    Tool { tool_call_id: String, content: String },
}

/// One message of a conversation as sent: as the client or the model wrote it, or as the agent did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum OutMessage {
    Kept(Value),
    Agent(AgentMessage),
}

impl From<AgentMessage> for OutMessage {
    fn from(m: AgentMessage) -> OutMessage {
        OutMessage::Agent(m)
    }
}

/// A tool call returned to the client to run or approve (`message.tool_calls[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: CallKind,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CallKind {
    Function,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, as the model wrote it.
    pub arguments: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }

    #[test]
    fn typed_messages_keep_the_wire_text_of_json_trees() {
        let tool = OutMessage::from(AgentMessage::Tool { tool_call_id: "c1".into(), content: "ok \"x\"".into() });
        let tree = json!({"role": "tool", "tool_call_id": "c1", "content": "ok \"x\""});
        assert_eq!(text(&tool), tree.to_string());
        let user = OutMessage::from(AgentMessage::User { content: "Observation: 天气".into() });
        assert_eq!(text(&user), json!({"role": "user", "content": "Observation: 天气"}).to_string());
        let said = OutMessage::from(AgentMessage::Assistant { content: "Thought: x".into() });
        assert_eq!(text(&said), json!({"role": "assistant", "content": "Thought: x"}).to_string());
        let kept = OutMessage::Kept(json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}));
        assert_eq!(text(&kept), r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#);
        let call = ClientCall {
            id: "call_1".into(),
            kind: CallKind::Function,
            function: FunctionCall { name: "f".into(), arguments: "{\"a\":1}".into() },
        };
        let tree = json!({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}});
        assert_eq!(text(&call), tree.to_string());
    }
}
