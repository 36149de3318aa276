//! What the gateway writes into a chat conversation, typed: the agent's own messages to the LLM, the
//! tool calls it returns to the client, and a client's conversation as a front door (Responses,
//! Messages) translates it (`ChatMessage`, `ChatTool`, `ToolChoice`, `ResponseFormat`). Each
//! serialises its keys in the order below (`role`, `type` or `id` first), as the bodies always had them.

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

/// A client's message as a front door writes it into the chat request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    System {
        content: Content,
    },
    Developer {
        content: Content,
    },
    User {
        content: Content,
    },
    /// An earlier turn of the model: its text (null beside calls), its calls, its thinking.
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ClientCall>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A message's content: text, or parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// A content part of a user or system message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    File { file: FileData },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageUrl {
    pub url: String,
    /// As the client sent it (`auto`, `low`, `high`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileData {
    pub file_data: String,
    /// As the client sent it, null when it sent none.
    pub filename: Value,
}

/// A function tool of the chat request (`tools[]`); the fields other than `name` as given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatTool<'a> {
    #[serde(rename = "type")]
    pub kind: CallKind,
    pub function: FunctionDef<'a>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionDef<'a> {
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<&'a Value>,
}

impl<'a> ChatTool<'a> {
    pub fn function(name: &'a str, description: Option<&'a Value>, parameters: Option<&'a Value>) -> ChatTool<'a> {
        ChatTool { kind: CallKind::Function, function: FunctionDef { name, description, parameters, strict: None } }
    }
}

/// Chat's `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    /// This function, by name.
    #[serde(untagged)]
    Function(Named),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Named {
    #[serde(rename = "type")]
    pub kind: CallKind,
    pub function: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Name {
    pub name: String,
}

impl ToolChoice {
    pub fn function(name: &str) -> ToolChoice {
        ToolChoice::Function(Named { kind: CallKind::Function, function: Name { name: name.to_string() } })
    }
}

impl From<ToolChoice> for Value {
    fn from(c: ToolChoice) -> Value {
        to_value(&c)
    }
}

/// Chat's `response_format` (JSON mode).
#[allow(clippy::large_enum_variant)] // made once per request and written at once: no boxing
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonSchemaFormat {
    pub name: Value,
    pub schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<Value>,
}

impl From<ResponseFormat> for Value {
    fn from(f: ResponseFormat) -> Value {
        to_value(&f)
    }
}

impl ResponseFormat {
    /// The gateway's own JSON mode (`jsonResp`): the schema named `answer`, not strict.
    pub fn answer(schema: &Value) -> ResponseFormat {
        let json_schema =
            JsonSchemaFormat { name: "answer".into(), schema: schema.clone(), strict: Some(false.into()) };
        ResponseFormat::JsonSchema { json_schema }
    }
}

impl From<&super::ToolCall> for ClientCall {
    fn from(c: &super::ToolCall) -> ClientCall {
        let function = FunctionCall { name: c.name.clone(), arguments: c.arguments.clone() };
        ClientCall { id: c.id.clone(), kind: CallKind::Function, function }
    }
}

/// A typed value as the JSON tree the chat request is kept in.
pub fn to_value<T: Serialize>(v: &T) -> Value {
    // The types of this file serialise to JSON without fail (string keys only).
    serde_json::to_value(v).unwrap_or(Value::Null)
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
