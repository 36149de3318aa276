//! JSON mode's last step: ask the model to express its final answer as JSON matching a schema, and read
//! the JSON out of its reply.

use crate::openai::message::{to_value, ChatMessage, Content};
use serde_json::Value;

const SYSTEM_EN: &str = "You convert an answer into JSON that matches a JSON Schema. Reply with the JSON value only: no prose, no code fences.";

/// The messages of the formatting request: the question for context, the answer, the schema.
pub fn request_messages(question: &str, answer: &str, schema: &Value) -> Vec<Value> {
    let schema_text = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    let user = format!(
        "Question:\n{question}\n\nAnswer:\n{answer}\n\nJSON Schema:\n{schema_text}\n\nExpress the answer as one JSON value that is valid against the schema. Reply with the JSON only."
    );
    vec![
        to_value(&ChatMessage::System { content: Content::Text(SYSTEM_EN.to_string()) }),
        to_value(&ChatMessage::User { content: Content::Text(user) }),
    ]
}

/// What the model is told when its reply did not fit.
pub fn retry_message(problem: &str) -> Value {
    let content = format!(
        "That reply is not valid against the schema:\n{problem}\nReply again with only the corrected JSON value."
    );
    to_value(&ChatMessage::User { content: Content::Text(content) })
}

/// The JSON in a reply: the whole text (code fences stripped) if it is one JSON value, else the first
/// complete object or array in it. Not "first `{` to last `}`", which breaks on two objects or on
/// braces in prose around the JSON.
pub fn extract(text: &str) -> Result<Value, String> {
    let inner = strip_fences(text.trim());
    if let Ok(v) = serde_json::from_str::<Value>(inner) {
        return Ok(v);
    }
    let mut first_error = None;
    for (i, _) in inner.match_indices(['{', '[']).take(64) {
        let mut stream = serde_json::Deserializer::from_str(&inner[i..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => return Ok(v),
            Some(Err(e)) => {
                first_error.get_or_insert_with(|| e.to_string());
            }
            None => {}
        }
    }
    Err(match first_error {
        Some(e) => {
            format!("the reply holds no complete JSON value (the first candidate fails: {e})")
        }
        None => "the reply holds no JSON value".into(),
    })
}

/// The body of the first fenced block, if the text has one.
fn strip_fences(text: &str) -> &str {
    let Some(start) = text.find("```") else {
        return text;
    };
    let after = &text[start + 3..];
    let body = match after.find('\n') {
        Some(nl) if after[..nl].trim().chars().all(|c| c.is_ascii_alphanumeric()) => &after[nl + 1..],
        _ => after,
    };
    match body.find("```") {
        Some(end) => body[..end].trim(),
        None => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extracts_fenced_bare_and_embedded_json() {
        assert_eq!(extract("{\"a\": 1}").unwrap(), json!({"a": 1}));
        assert_eq!(extract("```json\n{\"a\": [1, 2]}\n```").unwrap(), json!({"a": [1, 2]}));
        assert_eq!(extract("Here you go:\n```\n[1]\n```\nthanks").unwrap(), json!([1]));
        assert_eq!(extract("Sure! {\"a\": 1} and also {\"b\": 2}").unwrap(), json!({"a": 1}));
        assert_eq!(extract("The set {x} is {\"a\": \"}\"}").unwrap(), json!({"a": "}"}));
        assert_eq!(extract("\"just a string\"").unwrap(), json!("just a string"));
    }

    #[test]
    fn no_json_is_an_error() {
        assert!(extract("no json here").unwrap_err().contains("no JSON value"));
        assert!(extract("{\"a\": ").unwrap_err().contains("first candidate fails"));
    }

    #[test]
    fn request_carries_question_answer_and_schema() {
        let m = request_messages("How many?", "Two.", &json!({"type": "integer"}));
        let text = m[1]["content"].as_str().unwrap();
        assert!(text.contains("How many?") && text.contains("Two.") && text.contains("\"type\": \"integer\""));
    }
}
