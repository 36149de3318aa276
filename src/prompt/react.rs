//! The ReAct prompt (EN and CH, with Higress's four template words) and the parser that reads a model's
//! ReAct reply into one step.

use crate::doc::find_str;
use crate::tools::{Catalog, Tool};
use serde_json::Value;
use std::fmt::Write;

/// The instructions around the tool list. The words (Higress's `promptTemplate` keys `question`,
/// `thought1`, `actionInput`, `observation`, `thought2`, `finalAnswer`, `begin`) fill their places; the
/// markers (`Question:`, `Action:` …) stay English because the parser reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub chinese: bool,
    pub words: Words,
}

/// What the prompt shows of one tool.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub schema: &'a Value,
}

impl<'a> Entry<'a> {
    pub fn of(t: &'a Tool) -> Entry<'a> {
        Entry { name: &t.name, description: &t.description, schema: &t.schema }
    }
}

/// Higress's template words, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    pub question: String,
    pub thought1: String,
    pub action_input: String,
    pub observation: String,
    pub thought2: String,
    pub final_answer: String,
    pub begin: String,
}

/// The configuration's words, each optional.
pub type WordChoices = [Option<String>; 7];

impl Template {
    pub fn english() -> Self {
        let words = Words {
            question: "input question to answer".into(),
            thought1: "consider previous and subsequent steps".into(),
            action_input: "the tool input: a JSON object that matches the tool's parameters".into(),
            observation: "action result".into(),
            thought2: "I know what to respond".into(),
            final_answer: "Final response to human".into(),
            begin: BEGIN_EN.into(),
        };
        Template { chinese: false, words }
    }

    pub fn chinese() -> Self {
        let words = Words {
            question: "输入要回答的问题".into(),
            thought1: "考虑之前和之后的步骤".into(),
            action_input: "工具输入（一个符合该工具参数的 JSON 对象）".into(),
            observation: "行动结果".into(),
            thought2: "我知道该回应什么".into(),
            final_answer: "对人类的最终回复".into(),
            begin: BEGIN_CH.into(),
        };
        Template { chinese: true, words }
    }

    /// Replaces the words the configuration gives, in Higress's order.
    pub fn apply_words(&mut self, choices: WordChoices) {
        let w = &mut self.words;
        let slots = [
            &mut w.question,
            &mut w.thought1,
            &mut w.action_input,
            &mut w.observation,
            &mut w.thought2,
            &mut w.final_answer,
            &mut w.begin,
        ];
        for (slot, word) in slots.into_iter().zip(choices) {
            if let Some(word) = word {
                *slot = word;
            }
        }
    }

    /// The system prompt: instructions, every tool with its JSON Schema, the valid actions. Rendered
    /// once at configuration time.
    pub fn render(&self, tools: &Catalog) -> String {
        let entries: Vec<Entry<'_>> = tools.iter().map(Entry::of).collect();
        self.render_entries(&entries)
    }

    /// The system prompt with these tools only (a selection of a large catalog, and `find_tools`).
    pub fn render_entries(&self, tools: &[Entry<'_>]) -> String {
        // Written in place: a selection is rendered per request.
        let mut list = String::with_capacity(512 * tools.len());
        let mut names = String::with_capacity(24 * tools.len());
        for t in tools {
            self.write_entry(&mut list, t);
            if !names.is_empty() {
                names.push_str(", ");
            }
            let _ = write!(names, "\"{}\"", t.name);
        }
        let text = if self.chinese { CH } else { EN };
        let w = &self.words;
        // The final answer's word sits inside a JSON string of the example: escaped as one.
        let final_answer = crate::doc::json_string_contents(&w.final_answer);
        let example = example(tools.first());
        let slots = [
            ("{tools}", list.trim_end()),
            ("{example}", &example),
            ("{names}", &names),
            ("{question}", &w.question),
            ("{thought1}", &w.thought1),
            ("{action_input}", &w.action_input),
            ("{observation}", &w.observation),
            ("{thought2}", &w.thought2),
            ("{final_answer}", &final_answer),
            ("{begin}", &w.begin),
        ];
        fill(text, &slots, text.len() + list.len() + names.len() + 1024)
    }

    /// One tool as the prompt lists it: name, description, parameters (also how `find_tools` describes
    /// the tools it found).
    pub fn entry(&self, t: &Entry<'_>) -> String {
        let mut out = String::new();
        self.write_entry(&mut out, t);
        out
    }

    fn write_entry(&self, out: &mut String, t: &Entry<'_>) {
        let params_label = if self.chinese { "参数 (JSON Schema)" } else { "Parameters (JSON Schema)" };
        // Writing into a String cannot fail.
        let _ = write!(out, "{}: {}\n{params_label}: {}\n\n", t.name, t.description, t.schema);
    }

    /// Said after a malformed reply, so the model can correct itself.
    pub fn format_reminder(&self) -> &'static str {
        if self.chinese {
            REMINDER_CH
        } else {
            REMINDER_EN
        }
    }

    /// Native mode: said after a reply with neither content nor tool calls.
    pub fn empty_reply_reminder(&self) -> &'static str {
        if self.chinese {
            "你的回复是空的。请调用一个工具，或者给出对问题的最终回答。"
        } else {
            "Your reply was empty. Call a tool, or give your final answer to the question."
        }
    }

    /// Native mode's words for the same (no ReAct markers).
    pub fn native_final_request(&self) -> &'static str {
        if self.chinese {
            "你已达到工具调用次数上限。不要再调用任何工具：现在根据已有的结果回答问题。"
        } else {
            "You have reached the maximum number of tool calls. Do not call any more tools: answer the question now, from the results you already have."
        }
    }

    /// Said when the tool-call limit is reached: answer now, from what you have.
    pub fn final_request(&self) -> &'static str {
        if self.chinese {
            FINAL_CH
        } else {
            FINAL_EN
        }
    }
}

/// `text` with each `{slot}` replaced by its value, in one pass: the operator's text (descriptions,
/// template words) is never read for slots, and the prompt is written into one allocation.
fn fill(text: &str, slots: &[(&str, &str)], capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        match slots.iter().find(|(k, _)| tail.starts_with(k)) {
            Some((k, v)) => {
                out.push_str(v);
                rest = &tail[k.len()..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// One concrete action, built from the first tool: models copy the shape of an example far better
/// than they fill `$TOOL_NAME` / `$INPUT` placeholders.
fn example(first: Option<&Entry<'_>>) -> String {
    let Some(tool) = first else {
        return r#"{"action": "Final Answer", "action_input": "..."}"#.to_string();
    };
    let input = example_input(tool.schema);
    format!("{{\n  \"action\": {},\n  \"action_input\": {input}\n}}", Value::String(tool.name.to_string()))
}

/// The required arguments (or the first one, when none is required) with a value from the schema
/// (`example`, `examples`, `default`, `enum`), or a placeholder of the right type.
fn example_input(schema: &Value) -> Value {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(serde_json::Map::new());
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).filter(|k| props.contains_key(*k)).collect())
        .unwrap_or_default();
    let names: Vec<&str> =
        if required.is_empty() { props.keys().take(1).map(String::as_str).collect() } else { required };
    let mut out = serde_json::Map::new();
    for name in names.into_iter().take(4) {
        let p = &props[name];
        let known = p
            .get("example")
            .or_else(|| p.get("examples").and_then(|e| e.get(0)))
            .or_else(|| p.get("default"))
            .or_else(|| p.get("enum").and_then(|e| e.get(0)))
            .cloned();
        let value = known.unwrap_or_else(|| match p.get("type").and_then(Value::as_str) {
            Some("integer") => Value::from(1),
            Some("number") => Value::from(1.5),
            Some("boolean") => Value::Bool(true),
            Some("array") => Value::Array(Vec::new()),
            Some("object") => Value::Object(serde_json::Map::new()),
            _ => Value::String(format!("<{name}>")),
        });
        out.insert(name.to_string(), value);
    }
    Value::Object(out)
}

const EN: &str = r#"Respond to the human as helpfully and accurately as possible. You have access to the following tools:

{tools}

Use a json blob to specify a tool by providing an "action" key (the tool name) and an "action_input" key ({action_input}).

Valid "action" values: "Final Answer" or {names}

Provide only ONE action per json blob. For example:

```
{example}
```

Follow this format:

Question: {question}
Thought: {thought1}
Action:
```
{"action": "<tool name>", "action_input": {<arguments>}}
```
Observation: {observation}
... (repeat Thought/Action/Observation N times)
Thought: {thought2}
Action:
```
{
  "action": "Final Answer",
  "action_input": "{final_answer}"
}
```

{begin}"#;

const BEGIN_EN: &str = "Begin! Reminder to ALWAYS respond with a valid json blob of a single action. Use tools if necessary. Respond directly if appropriate. Format is Action:```json blob```then Observation:.";
const BEGIN_CH: &str = "开始！提醒：始终用只含一个 action 的有效 json blob 回复。必要时使用工具，合适时直接回复。格式为 Action:```json blob``` 然后是 Observation:。";

const CH: &str = r#"尽可能有帮助且准确地回答人类的问题。你可以使用以下工具：

{tools}

使用 json blob 指定一个工具：用 "action" 键给出工具名称，用 "action_input" 键给出{action_input}。

有效的 "action" 值："Final Answer" 或 {names}

每个 json blob 只提供一个 action。例如：

```
{example}
```

遵循以下格式：

Question: {question}
Thought: {thought1}
Action:
```
{"action": "<tool name>", "action_input": {<arguments>}}
```
Observation: {observation}
...（Thought/Action/Observation 可以重复 N 次）
Thought: {thought2}
Action:
```
{
  "action": "Final Answer",
  "action_input": "{final_answer}"
}
```

{begin}"#;

const REMINDER_EN: &str = "Reply in the format given above: either Action: with a json blob {\"action\": <tool name>, \"action_input\": {<arguments as a JSON object>}}, or Action: with {\"action\": \"Final Answer\", \"action_input\": <your answer>}.";
const REMINDER_CH: &str = "请按上面给出的格式回复：要么 Action: 加 json blob {\"action\": <工具名称>, \"action_input\": {<JSON 对象形式的参数>}}，要么 Action: 加 {\"action\": \"Final Answer\", \"action_input\": <你的回答>}。";
const FINAL_EN: &str = "You have reached the maximum number of tool calls. Do not call any more tools: give your Final Answer now, from the observations you already have.";
const FINAL_CH: &str = "你已达到工具调用次数上限。不要再调用任何工具：现在根据已有的观察结果给出你的 Final Answer。";

/// One reading of a model's ReAct reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Action { name: String, input: Value },
    Final { answer: String },
    Malformed { why: String },
}

const FINAL_MARKER: &str = "Final Answer:";
const ACTION_MARKER: &str = "Action:";
const INPUT_MARKER: &str = "Action Input:";
/// How many `{` a reply may make the parser try; bounds the work on adversarial text.
const MAX_BLOB_TRIES: usize = 256;

/// Reads a reply: the first action wins, whether a JSON blob (fenced or not, after `Action:` or bare),
/// classic `Action:` / `Action Input:` lines, or `Final Answer:`. A reply with no ReAct marker at all is
/// the model answering directly, and so a final answer.
pub fn parse(text: &str) -> Step {
    // A model that runs on past its answer invents the next turn: everything from a new `Question:`
    // line on is not its reply (the stop sequences ask the server to cut there too).
    let text = cut_invented_observation(cut_invented_question(text.trim()));
    if text.is_empty() {
        return Step::Malformed { why: "the reply is empty".into() };
    }
    let fin = find_marker(text, FINAL_MARKER, 0);
    let act = find_marker(text, ACTION_MARKER, 0);
    let blob = find_blob(text, 0);
    let first = [fin, act, blob.as_ref().map(|b| b.0)].into_iter().flatten().min();
    match first {
        None if ["Thought:", "Action", "\"action\""].iter().any(|m| find_marker(text, m, 0).is_some()) => {
            Step::Malformed { why: "the reply has neither an 'Action:' with a json blob nor a 'Final Answer:'".into() }
        }
        None => Step::Final { answer: text.to_string() },
        Some(p) if Some(p) == fin => Step::Final { answer: clean_answer(&text[p + FINAL_MARKER.len()..]) },
        Some(p) if Some(p) == act => after_action(text, p + ACTION_MARKER.len()),
        Some(_) => match blob {
            Some((_, obj)) => from_blob(&obj),
            None => Step::Malformed { why: "no action found".into() },
        },
    }
}

/// `Action:` followed by a tool name on the same line (classic), or by a json blob.
fn after_action(text: &str, from: usize) -> Step {
    let rest = &text[from..];
    let line = rest.lines().next().unwrap_or("").trim();
    let blob_style = line.is_empty() || line.starts_with('{') || line.starts_with("```");
    if !blob_style {
        let name = line.trim_matches(|c| c == '`' || c == '"' || c == '\'' || c == '*').trim();
        let input = match find_marker(rest, INPUT_MARKER, 0) {
            Some(i) => match parse_input(&rest[i + INPUT_MARKER.len()..]) {
                Ok(v) => v,
                Err(why) => return Step::Malformed { why },
            },
            None => Value::Null,
        };
        return if name.eq_ignore_ascii_case("Final Answer") {
            Step::Final { answer: value_text(&input) }
        } else {
            Step::Action { name: name.to_string(), input }
        };
    }
    match find_blob(text, from) {
        Some((_, obj)) => from_blob(&obj),
        None => {
            Step::Malformed { why: format!("the json blob after 'Action:' is not valid JSON: {}", json_error(rest)) }
        }
    }
}

fn from_blob(obj: &serde_json::Map<String, Value>) -> Step {
    let name = obj.get("action").and_then(Value::as_str).unwrap_or("").trim().to_string();
    let input = obj
        .get("action_input")
        .or_else(|| obj.iter().find(|(k, _)| k.contains("input")).map(|(_, v)| v))
        .cloned()
        .unwrap_or_else(|| flattened_input(obj));
    if name.eq_ignore_ascii_case("Final Answer") || name.eq_ignore_ascii_case("final_answer") {
        return Step::Final { answer: value_text(&input) };
    }
    if name.is_empty() {
        return Step::Malformed { why: "the json blob's \"action\" is empty".into() };
    }
    // Some models put the arguments object in a string.
    let input = match input {
        Value::String(s) if s.trim_start().starts_with('{') => match serde_json::from_str::<Value>(s.trim()) {
            Ok(v) => v,
            Err(e) => {
                return Step::Malformed {
                    why: format!("\"action_input\" is a string that is not a valid JSON object: {e}"),
                }
            }
        },
        other => other,
    };
    Step::Action { name, input }
}

/// Small models flatten the arguments into the blob (`{"action": "t", "city": "Oslo"}`): without an
/// input key, the other keys are the input.
fn flattened_input(obj: &serde_json::Map<String, Value>) -> Value {
    let rest: serde_json::Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "action" | "thought"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rest.is_empty() {
        Value::Null
    } else {
        Value::Object(rest)
    }
}

/// The text after `Action Input:` up to an `Observation:` line: JSON, or else a plain string.
fn parse_input(rest: &str) -> Result<Value, String> {
    let end = find_marker(rest, "Observation:", 0).unwrap_or(rest.len());
    let raw = strip_fence(rest[..end].trim());
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    if raw.starts_with('{') || raw.starts_with('[') || raw.starts_with('"') {
        let mut stream = serde_json::Deserializer::from_str(raw).into_iter::<Value>();
        return match stream.next() {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(format!("'Action Input' is not valid JSON: {e}")),
            None => Ok(Value::Null),
        };
    }
    Ok(Value::String(raw.to_string()))
}

fn strip_fence(s: &str) -> &str {
    let Some(inner) = s.strip_prefix("```") else {
        return s;
    };
    let inner = inner.split_once('\n').map_or("", |(first, rest)| {
        if first.trim().chars().all(|c| c.is_ascii_alphanumeric()) {
            rest
        } else {
            inner
        }
    });
    inner.trim_end().strip_suffix("```").unwrap_or(inner).trim()
}

/// The first JSON object at or after `from` that has an "action" key: its position and contents.
fn find_blob(text: &str, from: usize) -> Option<(usize, serde_json::Map<String, Value>)> {
    let mut tries = 0;
    for (i, _) in text[from..].match_indices('{') {
        let start = from + i;
        if !text[start + 1..].trim_start().starts_with('"') {
            continue;
        }
        tries += 1;
        if tries > MAX_BLOB_TRIES {
            return None;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(obj))) = stream.next() {
            if obj.contains_key("action") {
                return Some((start, obj));
            }
        }
    }
    None
}

/// Why the first `{` after an `Action:` does not parse, for the model.
fn json_error(rest: &str) -> String {
    let Some(i) = rest.find('{') else {
        return "no JSON object found".into();
    };
    let mut stream = serde_json::Deserializer::from_str(&rest[i..]).into_iter::<Value>();
    match stream.next() {
        Some(Err(e)) => e.to_string(),
        Some(Ok(_)) => "the object has no \"action\" key".into(),
        None => "no JSON object found".into(),
    }
}

/// A marker at a line start or after white space, so `Action:` inside a word does not count.
fn find_marker(text: &str, marker: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = find_str(&text[at..], marker) {
        let pos = at + i;
        let before = text[..pos].chars().next_back();
        if before.is_none_or(|c| !c.is_alphanumeric()) {
            return Some(pos);
        }
        at = pos + marker.len();
    }
    None
}

/// `text` up to a line that starts with `Question:` (the first line itself is kept: it may quote one).
fn cut_invented_question(text: &str) -> &str {
    match find_str(text, "\nQuestion:") {
        Some(i) => text[..i].trim_end(),
        None => text,
    }
}

/// `text` up to its first line that starts with `Observation:`: the tool's answer is the filter's to
/// give; a model that writes one invents it. The `stop` sequence asks the server to cut there, but a
/// server that refuses `stop` does not.
fn cut_invented_observation(text: &str) -> &str {
    if text.starts_with("Observation:") {
        return "";
    }
    match find_str(text, "\nObservation:") {
        Some(i) => text[..i].trim_end(),
        None => text,
    }
}

fn clean_answer(s: &str) -> String {
    let s = s.trim_start_matches('*').trim();
    strip_fence(s).to_string()
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
