//! Tool calls written as text. Qwen, Hermes and many fine-tunes served without a tool-call parser
//! answer a native-mode turn with `<tool_call>{"name": …, "arguments": …}</tool_call>` blocks in
//! `content`; Mistral's models with `[TOOL_CALLS][{"name": …, "arguments": …}, …]` (or the newer
//! `[TOOL_CALLS]name[ARGS]{…}`). Read as calls, the text around them is not an answer.

use super::ToolCall;
use serde_json::Value;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
const MISTRAL: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";

/// The calls written in `content`, if any call is there and every one reads; `Err` names the first
/// that does not (a block the model meant as a call, but malformed: its observation says why).
pub fn read(content: &str) -> Option<Result<Vec<ToolCall>, String>> {
    if content.contains(OPEN) {
        return Some(tagged(content));
    }
    let at = content.find(MISTRAL)?;
    Some(mistral(content[at + MISTRAL.len()..].trim()))
}

fn tagged(content: &str) -> Result<Vec<ToolCall>, String> {
    let mut calls = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find(OPEN) {
        let body = &rest[start + OPEN.len()..];
        // An unclosed last block (the turn ended there) is read to the end.
        let (inner, next) = match body.find(CLOSE) {
            Some(end) => (&body[..end], &body[end + CLOSE.len()..]),
            None => (body, ""),
        };
        let value: Value =
            serde_json::from_str(inner.trim()).map_err(|e| format!("a <tool_call> block is not valid JSON ({e})"))?;
        calls.push(call(&value, calls.len())?);
        rest = next;
    }
    Ok(calls)
}

fn mistral(rest: &str) -> Result<Vec<ToolCall>, String> {
    if rest.starts_with('[') {
        let list: Value = serde_json::from_str(first_json(rest)?)
            .map_err(|e| format!("the [TOOL_CALLS] list is not valid JSON ({e})"))?;
        let Value::Array(items) = list else {
            return Err("[TOOL_CALLS] is not followed by a list".into());
        };
        return items.iter().enumerate().map(|(i, v)| call(v, i)).collect();
    }
    // `name[ARGS]{…}`, possibly several in a row.
    let mut calls = Vec::new();
    let mut rest = rest;
    while let Some(at) = rest.find(MISTRAL_ARGS) {
        let name = rest[..at].trim().trim_start_matches(MISTRAL).trim();
        let after = rest[at + MISTRAL_ARGS.len()..].trim_start();
        let json = first_json(after)?;
        let args: Value =
            serde_json::from_str(json).map_err(|e| format!("the arguments of '{name}' are not valid JSON ({e})"))?;
        calls.push(ToolCall { id: id(calls.len()), name: name.to_string(), arguments: args.to_string() });
        rest = &after[json.len()..];
    }
    if calls.is_empty() {
        return Err("[TOOL_CALLS] is followed by neither a list nor a name and [ARGS]".into());
    }
    Ok(calls)
}

/// The first complete JSON value at the start of `text` (its own text).
fn first_json(text: &str) -> Result<&str, String> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        Some(Ok(_)) => Ok(&text[..stream.byte_offset()]),
        Some(Err(e)) => Err(format!("the tool call is not valid JSON ({e})")),
        None => Err("the tool call is empty".into()),
    }
}

/// One call object: `name` and `arguments` (an object, or JSON text of one).
fn call(v: &Value, index: usize) -> Result<ToolCall, String> {
    let name = v
        .get("name")
        .or_else(|| v.pointer("/function/name"))
        .and_then(Value::as_str)
        .ok_or("a tool call written as text has no 'name'")?;
    let args = v.get("arguments").or_else(|| v.get("parameters")).or_else(|| v.pointer("/function/arguments"));
    let arguments = match args {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Ok(ToolCall { id: id(index), name: name.to_string(), arguments })
}

/// Text calls have no ids: the loop numbers them so that their results can be matched.
fn id(index: usize) -> String {
    format!("call_text_{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(calls: &[ToolCall]) -> Vec<(&str, &str)> {
        calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect()
    }

    #[test]
    fn one_and_several_tagged_calls() {
        let one = read("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Jinan\"}}\n</tool_call>");
        assert_eq!(names(&one.unwrap().unwrap()), [("get_weather", "{\"city\":\"Jinan\"}")]);
        let two = read(
            "Let me check both.\n<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\":1}\"}</tool_call>\n\
             <tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
        );
        assert_eq!(names(&two.unwrap().unwrap()), [("a", "{\"x\":1}"), ("b", "{}")]);
    }

    #[test]
    fn mistral_lists_and_args_form() {
        let list = read("[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]");
        assert_eq!(names(&list.unwrap().unwrap()), [("get_time", "{\"zone\":\"UTC\"}")]);
        let args = read("[TOOL_CALLS]get_time[ARGS]{\"zone\": \"UTC\"}[TOOL_CALLS]get_date[ARGS]{}");
        assert_eq!(names(&args.unwrap().unwrap()), [("get_time", "{\"zone\":\"UTC\"}"), ("get_date", "{}")]);
    }

    #[test]
    fn malformed_blocks_say_why_and_plain_text_is_no_call() {
        assert!(read("<tool_call>{not json}</tool_call>").unwrap().unwrap_err().contains("not valid JSON"));
        assert!(read("<tool_call>{\"arguments\": {}}</tool_call>").unwrap().unwrap_err().contains("no 'name'"));
        assert!(read("It is sunny in Jinan.").is_none());
        assert!(read("[TOOL_CALLS] nothing").unwrap().is_err());
    }
}
