//! Fuzzing of the parsers, with proptest on the stable toolchain. Each property feeds one parser
//! arbitrary input and structure-aware input (fragments of what it reads, mutations of valid documents)
//! and checks that it returns, without panicking, within bounded time: a call slower than `FUZZ_MAX_MS`
//! (default 2000) fails its case, and one that has not returned after five times that stops the run,
//! printing its input (a hang fails nothing on its own).
//!
//! The number of cases per property comes from `PROPTEST_CASES` (default 256, so that `make test`
//! runs the file in seconds; the costly validation property runs a 64th of it). To fuzz for long:
//!
//! ```sh
//! PROPTEST_CASES=200000 cargo test --release --test fuzz
//! ```
//!
//! A failing case is shrunk to a small input and saved in `tests/fuzz.proptest-regressions`, which later
//! runs try first.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

use api_agent::config::Config;
use api_agent::openai::{ChatRequest, LlmReply};
use api_agent::prompt::{json_format, react};
use api_agent::schema::Schema;
use api_agent::{doc, openapi};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::TestCaseError;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

const DEFAULT_CASES: u32 = 256;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

fn limit() -> Duration {
    let ms = std::env::var("FUZZ_MAX_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    Duration::from_millis(ms)
}

// ---------------------------------------------------------------------------------------------------
// Bounded work

/// The call each test thread is in, with its start and input, for the watchdog.
fn calls() -> &'static Mutex<HashMap<ThreadId, (Instant, String)>> {
    static CALLS: OnceLock<Mutex<HashMap<ThreadId, (Instant, String)>>> = OnceLock::new();
    CALLS.get_or_init(|| {
        std::thread::spawn(watchdog);
        Mutex::new(HashMap::new())
    })
}

fn watchdog() {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        for (start, input) in calls().lock().unwrap_or_else(|e| e.into_inner()).values() {
            if start.elapsed() > 5 * limit() {
                // Straight to stderr: `eprintln!` would go to the test's captured output, lost on abort.
                let line = format!("\nfuzz: no return after {:?}: {input}\n", start.elapsed());
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                std::process::abort();
            }
        }
    }
}

/// A call the watchdog looks at, until it returns or panics.
struct Watched(ThreadId);

impl Drop for Watched {
    fn drop(&mut self) {
        calls().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

/// Runs one parser call on `input` within the time bound.
fn bounded<T>(what: &str, input: &dyn Debug, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let me = std::thread::current().id();
    let start = Instant::now();
    calls().lock().unwrap_or_else(|e| e.into_inner()).insert(me, (start, format!("{what} {input:?}")));
    let watched = Watched(me);
    let out = f();
    drop(watched);
    let took = start.elapsed();
    if took > limit() {
        return Err(TestCaseError::fail(format!("{what} took {took:?}")));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// Inputs

/// Any text from these pieces, in any order.
fn pieces(of: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(select(of), 0..max).prop_map(|p| p.concat())
}

/// Text, printable or not.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "\\PC{0,300}"]
}

const STRINGS: &[&str] = &[
    "",
    "a",
    "string",
    "object",
    "array",
    "integer",
    "number",
    "boolean",
    "null",
    "#",
    "#/",
    "#/$defs/a",
    "$ref",
    "天气",
    "\u{1}",
    "\n",
    "{",
    "[",
    "\"",
    "../x",
    "http://h:99999/",
    "https://{v}.example.com",
    "1e400",
    "-0",
];

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        select(STRINGS).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop_oneof![select(STRINGS).prop_map(String::from), "\\PC{0,6}"], inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// One change to a JSON tree, at the node a path of child picks leads to.
#[derive(Debug, Clone)]
enum Edit {
    Replace(Value),
    Remove,
    /// Puts the node `n` levels deep inside arrays (not so deep that this test's own recursion on the
    /// tree overflows: deeper texts come from `ByteEdit::Nest`).
    Bury(usize),
    Add(String, Value),
}

fn edits(values: BoxedStrategy<Value>) -> impl Strategy<Value = Vec<(Vec<Index>, Edit)>> {
    let edit = prop_oneof![
        4 => values.clone().prop_map(Edit::Replace),
        1 => Just(Edit::Remove),
        1 => prop_oneof![1..20usize, 90..140usize, Just(300)].prop_map(Edit::Bury),
        2 => (select(STRINGS).prop_map(String::from), values).prop_map(|(k, v)| Edit::Add(k, v)),
    ];
    prop::collection::vec((prop::collection::vec(any::<Index>(), 0..8), edit), 1..4)
}

fn apply(tree: &mut Value, path: &[Index], edit: Edit) {
    let mut node = tree;
    for pick in path {
        let n = match &*node {
            Value::Array(items) if !items.is_empty() => items.len(),
            Value::Object(map) if !map.is_empty() => map.len(),
            _ => break,
        };
        let i = pick.index(n);
        node = match node {
            Value::Array(items) => &mut items[i],
            Value::Object(map) => map.values_mut().nth(i).unwrap(),
            _ => unreachable!(),
        };
    }
    match edit {
        Edit::Replace(v) => *node = v,
        Edit::Remove => *node = Value::Null,
        Edit::Bury(n) => *node = (0..n).fold(node.take(), |v, _| Value::Array(vec![v])),
        Edit::Add(k, v) => {
            if let Value::Object(map) = node {
                map.insert(k, v);
            }
        }
    }
}

fn edited(mut tree: Value, edits: Vec<(Vec<Index>, Edit)>) -> Value {
    for (path, edit) in edits {
        apply(&mut tree, &path, edit);
    }
    tree
}

/// Byte-level damage: insertions of significant fragments, deletions, cuts.
#[derive(Debug, Clone)]
enum ByteEdit {
    Insert(Index, &'static str),
    Delete(Index, usize),
    Set(Index, u8),
    Cut(Index),
    /// A piece repeated: nesting far deeper than any limit.
    Nest(Index, &'static str, usize),
}

const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    ":",
    ": ",
    ",",
    "\n",
    "\n  ",
    "- ",
    "#",
    "|",
    "&a ",
    "*a",
    "!!str ",
    "<<: ",
    "\\",
    "\\u",
    "\u{0}",
    "\u{1}",
    "\u{85}",
    "\u{2028}",
    "\u{feff}",
    "天",
    "null",
    "1e999",
    "-",
    "$ref: '#/'",
];

const NESTS: &[&str] = &["[", "{", "{\"a\": ", "{a: ", "- ", "[a, ", "? ", "a:\n "];

fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    let edit = prop_oneof![
        (any::<Index>(), select(FRAGMENTS)).prop_map(|(i, f)| ByteEdit::Insert(i, f)),
        (any::<Index>(), 1..16usize).prop_map(|(i, n)| ByteEdit::Delete(i, n)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Set(i, b)),
        any::<Index>().prop_map(ByteEdit::Cut),
        (any::<Index>(), select(NESTS), 100..5000usize).prop_map(|(i, p, n)| ByteEdit::Nest(i, p, n)),
    ];
    prop::collection::vec(edit, 1..6)
}

fn damaged(mut bytes: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for edit in edits {
        let at = |i: &Index| i.index(bytes.len() + 1);
        match edit {
            ByteEdit::Insert(i, f) => {
                let at = at(i);
                bytes.splice(at..at, f.bytes());
            }
            ByteEdit::Delete(i, n) => {
                let at = at(i);
                bytes.drain(at..(at + n).min(bytes.len()));
            }
            ByteEdit::Set(i, b) if !bytes.is_empty() => {
                let at = i.index(bytes.len());
                bytes[at] = *b;
            }
            ByteEdit::Set(..) => {}
            ByteEdit::Cut(i) => bytes.truncate(at(i)),
            ByteEdit::Nest(i, piece, n) => {
                let at = at(i);
                bytes.splice(at..at, piece.repeat(*n).into_bytes());
            }
        }
    }
    bytes
}

fn damaged_text(text: &str, edits: &[ByteEdit]) -> String {
    String::from_utf8_lossy(&damaged(text.as_bytes().to_vec(), edits)).into_owned()
}

// ---------------------------------------------------------------------------------------------------
// ReAct replies and JSON answers

const REACT_PIECES: &[&str] = &[
    "Thought: ",
    "Action:",
    "Action: ",
    "Action Input:",
    "Action Input: ",
    "Final Answer:",
    "Observation:",
    "```",
    "```json\n",
    "\n```",
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "\n",
    " ",
    "\\",
    "null",
    "get_weather",
    "\"action\"",
    "\"action_input\"",
    "\"Final Answer\"",
    "{\"action\": \"get_weather\", \"action_input\": {\"a\": 1}}",
    "{\"action\": \"Final Answer\", \"action_input\": \"done\"}",
    "\"{\\\"a\\\": 1}\"",
    "天气",
    "\u{1}",
    "\u{0}",
    "Final",
    "Answer",
    "Action",
    "action_input",
    "{\"",
    "{{",
    "}}",
    "\u{feff}",
    "*",
    "`",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn react_parse_returns(text in prop_oneof![any_text(), pieces(REACT_PIECES, 60)]) {
        let _ = bounded("react::parse", &text, || react::parse(&text))?;
    }

    #[test]
    fn react_parse_returns_on_long_replies(piece in select(REACT_PIECES), n in 1..20_000usize) {
        let text = piece.repeat(n);
        let _ = bounded("react::parse", &text, || react::parse(&text))?;
    }

    #[test]
    fn json_extract_returns(text in prop_oneof![any_text(), pieces(REACT_PIECES, 60), pieces(FRAGMENTS, 60)]) {
        let _ = bounded("json_format::extract", &text, || json_format::extract(&text))?;
    }
}

// ---------------------------------------------------------------------------------------------------
// OpenAI bodies

fn chat_request() -> Value {
    json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
           "messages": [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": [{"type": "text", "text": "weather?"}, {"type": "image_url"}]},
                        {"role": "assistant", "content": null,
                         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "21"},
                        {"role": "user", "content": "and tomorrow?"}],
           "tools": [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}],
           "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}})
}

fn llm_reply() -> Value {
    json!({"id": "x", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "hi",
               "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"a\": 1}"}}]}}],
           "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})
}

fn body(valid: fn() -> Value) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600),
        edits(any_json().boxed()).prop_map(move |e| edited(valid(), e).to_string().into_bytes()),
        byte_edits().prop_map(move |e| damaged(valid().to_string().into_bytes(), &e)),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn chat_request_parse_returns(bytes in body(chat_request)) {
        let _ = bounded("ChatRequest::parse", &String::from_utf8_lossy(&bytes), || ChatRequest::parse(&bytes).map(|r| r.question().len()))?;
    }

    #[test]
    fn llm_reply_parse_returns(bytes in body(llm_reply)) {
        let _ = bounded("LlmReply::parse", &String::from_utf8_lossy(&bytes), || LlmReply::parse(&bytes))?;
    }
}

// ---------------------------------------------------------------------------------------------------
// JSON Schemas

const REFS: &[&str] = &[
    "#",
    "#/$defs/a",
    "#/$defs/b",
    "#/properties/x",
    "#/$defs/a/items",
    "#a",
    "#/definitions/a",
    "x.json",
    "#/$defs/%61",
];

/// Keywords whose value is one schema, a list of schemas, or a map of schemas.
const ONE: &[&str] = &[
    "not",
    "items",
    "if",
    "then",
    "else",
    "additionalProperties",
    "contains",
    "propertyNames",
    "additionalItems",
    "unevaluatedItems",
];
const LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
const MAP: &[&str] = &["properties", "$defs", "definitions", "patternProperties", "dependentSchemas", "dependencies"];
const NUMBERS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
];
const TYPES: &[&str] = &["string", "integer", "number", "object", "array", "boolean", "null"];

/// One keyword with a value of roughly the right kind (and sometimes of any kind).
fn keyword(schema: BoxedStrategy<Value>) -> impl Strategy<Value = (String, Value)> {
    let name = || "[abx]|[a-z]{1,3}|\\PC{0,4}";
    let number = prop_oneof![
        any::<i64>().prop_map(Value::from),
        (-3i64..10).prop_map(Value::from),
        any::<f64>().prop_map(Value::from)
    ];
    prop_oneof![
        (select(ONE), schema.clone()).prop_map(|(k, v)| (k.to_string(), v)),
        (select(LIST), prop::collection::vec(schema.clone(), 0..4)).prop_map(|(k, v)| (k.to_string(), Value::Array(v))),
        (select(MAP), prop::collection::vec((name(), schema), 0..4))
            .prop_map(|(k, v)| (k.to_string(), Value::Object(v.into_iter().collect()))),
        (select(NUMBERS), number).prop_map(|(k, v)| (k.to_string(), v)),
        prop::collection::vec(name(), 0..3).prop_map(|r| ("required".to_string(), json!(r))),
        prop::collection::vec(any_json(), 0..4).prop_map(|e| ("enum".to_string(), Value::Array(e))),
        any_json().prop_map(|c| ("const".to_string(), c)),
        prop::collection::vec(select(TYPES), 1..3).prop_map(|t| ("type".to_string(), json!(t))),
        select(TYPES).prop_map(|t| ("type".to_string(), json!(t))),
        select(REFS).prop_map(|r| ("$ref".to_string(), json!(r))),
        select(&["a", "b", "%"][..]).prop_map(|a| ("$anchor".to_string(), json!(a))),
        "[a-z.*+?()\\[\\]{}^$|\\\\0-9]{0,12}".prop_map(|p| ("pattern".to_string(), json!(p))),
        any::<bool>().prop_map(|u| ("uniqueItems".to_string(), json!(u))),
        (select([ONE, LIST, MAP, NUMBERS].concat()), any_json()).prop_map(|(k, v)| (k.to_string(), v)),
    ]
}

fn schema_like() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        Just(json!({})),
        select(TYPES).prop_map(|t| json!({"type": t})),
        select(REFS).prop_map(|r| json!({"$ref": r})),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let draft = prop_oneof![
            3 => Just(None),
            1 => Just(Some("http://json-schema.org/draft-07/schema#")),
            1 => Just(Some("https://json-schema.org/draft/2020-12/schema")),
        ];
        (prop::collection::vec(keyword(inner.boxed()), 1..5), draft).prop_map(|(kv, draft)| {
            let mut map: Map<String, Value> = kv.into_iter().collect();
            if let Some(d) = draft {
                map.insert("$schema".into(), json!(d));
            }
            Value::Object(map)
        })
    })
}

/// Instances large enough that work proportional to their size, repeated per check, shows.
fn big_instance() -> impl Strategy<Value = Value> {
    (0..4usize, 100..5000usize).prop_map(|(kind, n)| match kind {
        0 => Value::String("b".repeat(n * 20)),
        1 => Value::Object((0..n).map(|i| (format!("k{i}"), json!(i))).collect()),
        2 => Value::Array((0..n).map(|i| json!(i)).collect()),
        _ => Value::Array((0..n).map(|i| json!({"a": i, "b": [i]})).collect()),
    })
}

/// Schemas that check one instance many times over (`anyOf` of self-references), with keywords whose
/// work grows with the instance or with themselves.
fn recursive_schema() -> impl Strategy<Value = Value> {
    let costly = prop_oneof![
        Just(json!({"minLength": 1})),
        Just(json!({"pattern": "^a"})),
        Just(json!({"required": ["zz"]})),
        Just(json!({"dependentSchemas": {"k0": {"minProperties": 1}}})),
        Just(json!({"propertyNames": {"maxLength": 1}})),
        Just(json!({"uniqueItems": true})),
        Just(json!({"items": {"enum": (5000..10_000).collect::<Vec<i32>>()}})),
        Just(json!({"enum": (0..20_000).map(|i| json!({"a": i})).collect::<Vec<_>>()})),
        Just(json!({"contains": {"const": -1}})),
        Just(json!({"required": (0..20_000).map(|i| format!("n{i}")).collect::<Vec<_>>()})),
    ];
    (costly, any::<bool>()).prop_map(|(mut s, recursive)| {
        if recursive {
            s["anyOf"] = json!([{"$ref": "#"}, {"$ref": "#"}]);
        }
        s
    })
}

/// A case can take the validator's whole budget of work (50 ms natively, half a second in debug), so
/// this runs a 64th of the cases; by hand, since `proptest!` lets `PROPTEST_CASES` override any config.
#[test]
fn validation_work_is_bounded_on_large_instances() {
    let cases = (config().cases / 64).max(8);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
    let result = runner.run(&(recursive_schema(), big_instance()), |(schema, instance)| {
        let compiled = Schema::compile(&schema).unwrap();
        let _ = bounded("Schema::validate", &(&schema, &instance), || compiled.validate(&instance))?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn schemas_compile_and_validate_in_bounded_time(schema in prop_oneof![1 => any_json(), 4 => schema_like()], instances in prop::collection::vec(any_json(), 1..4)) {
        let compiled = bounded("Schema::compile", &schema, || Schema::compile(&schema))?;
        if let Ok(compiled) = compiled {
            for instance in &instances {
                let _ = bounded("Schema::validate", &(&schema, instance), || compiled.validate(instance))?;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Documents: OpenAPI and the configuration

const SPEC: &str = r##"openapi: 3.1.0
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com/v1", variables: {}}]
paths:
  /items/{id}:
    parameters: [{$ref: "#/components/parameters/Id"}]
    get:
      operationId: getItem
      parameters:
        - {name: limit, in: query, schema: {type: integer, maximum: 100}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: s, in: cookie, schema: {type: string}}
      responses: {"200": {description: ok}}
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Node"}
components:
  parameters:
    Id: {name: id, in: path, required: true, schema: {type: string}}
  schemas:
    Node:
      type: object
      required: [name]
      properties:
        name: {type: string, nullable: true}
        children: {type: array, items: {$ref: "#/components/schemas/Node"}}
        tag: {allOf: [{$ref: "#/components/schemas/Tag"}], description: a tag}
    Tag: {type: string, enum: [a, b]}
"##;

const DOC_REFS: &[&str] = &[
    "#/components/schemas/Node",
    "#/components/schemas/Tag",
    "#/components/schemas/Missing",
    "#/components/parameters/Id",
    "#/paths/~1items~1{id}",
    "#/paths/~1items~1%7Bid%7D/get",
    "#",
    "#/components",
    "other.yaml#/x",
    "#/components/schemas/Node/properties/children",
];

const SERVER_URLS: &[&str] = &[
    "",
    "/",
    "//",
    "http://",
    "http://:80",
    "http://h:99999",
    "http://h:0",
    "http://[::1]:8080/x",
    "http://u@h/",
    "{s}://h",
    "https://h/{v}",
    "https://h/{",
    "https://h?q#f",
    "h:80",
    "ftp://h",
    "http://h:+1",
    "http:// h",
];

fn doc_values() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => any_json(),
        2 => select(DOC_REFS).prop_map(|r| json!({"$ref": r})),
        1 => select(DOC_REFS).prop_map(|r| json!({"type": "array", "items": {"$ref": r}})),
        1 => select(SERVER_URLS).prop_map(|u| json!([{"url": u, "variables": {"v": {"default": "x"}}}])),
        1 => select(&["path", "query", "header", "cookie", "body"][..]).prop_map(|at| json!([{"name": "id", "in": at}])),
    ]
    .boxed()
}

fn spec_text() -> impl Strategy<Value = String> {
    let tree = || doc::parse(SPEC).unwrap();
    prop_oneof![
        3 => edits(doc_values()).prop_map(move |e| edited(tree(), e).to_string()),
        2 => edits(doc_values()).prop_map(move |e| yaml_serde::to_string(&edited(tree(), e)).unwrap()),
        2 => byte_edits().prop_map(|e| damaged_text(SPEC, &e)),
        1 => any_text(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn doc_parse_returns(text in prop_oneof![any_text(), pieces(FRAGMENTS, 80), spec_text()]) {
        let _ = bounded("doc::parse", &text, || doc::parse(&text))?;
    }

    #[test]
    fn openapi_load_returns(text in spec_text()) {
        let _ = bounded("openapi::load", &text, || openapi::load(&text, 0))?;
    }
}

fn config_value() -> Value {
    json!({"mode": "native",
           "llm": {"serviceName": "llm", "servicePort": 80, "path": "/v1/chat/completions", "model": "m", "apiKey": "k",
                   "maxIterations": 3, "maxObservationBytes": 1000},
           "apis": [{"apiProvider": {"serviceName": "api", "servicePort": 80, "domain": "api.example.com",
                                     "apiKey": {"in": "header", "name": "X-Key", "value": "K"}, "headers": {"X-A": "b"}},
                     "api": SPEC}],
           "promptTemplate": {"language": "CH", "chTemplate": {"question": "问题"}},
           "jsonResp": {"enable": true, "jsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}})
}

fn config_values() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => any_json(),
        1 => select(&["react", "native", "", "REACT"][..]).prop_map(Value::from),
        1 => spec_text().prop_map(Value::from),
        1 => doc_values(),
    ]
    .boxed()
}

fn config_text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => edits(config_values()).prop_map(|e| edited(config_value(), e).to_string().into_bytes()),
        2 => edits(config_values()).prop_map(|e| yaml_serde::to_string(&edited(config_value(), e)).unwrap().into_bytes()),
        2 => byte_edits().prop_map(|e| damaged(config_value().to_string().into_bytes(), &e)),
        1 => prop::collection::vec(any::<u8>(), 0..300),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn config_from_slice_returns(bytes in config_text()) {
        let _ = bounded("Config::from_slice", &String::from_utf8_lossy(&bytes), || Config::from_slice(&bytes).map(|c| c.tools.len()))?;
    }
}

#[test]
fn the_valid_inputs_are_valid() {
    assert!(ChatRequest::parse(chat_request().to_string().as_bytes()).is_ok());
    assert!(LlmReply::parse(llm_reply().to_string().as_bytes()).is_ok());
    assert_eq!(openapi::load(SPEC, 0).unwrap().tools.len(), 2);
    assert_eq!(Config::from_slice(config_value().to_string().as_bytes()).unwrap().tools.len(), 2);
}
