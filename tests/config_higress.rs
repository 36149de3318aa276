//! Higress's documented behaviour: other languages fall back to English with a warning, all seven
//! template words are used, `jsonResp` without a schema means a JSON object, and Higress's own README
//! examples (both languages) load unchanged.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

use api_agent::config::{Config, Plugin};
use serde_json::{json, Value};

const SPEC: &str = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: 'https://api.example.com'}]\npaths:\n  /weather:\n    get:\n      operationId: getWeather\n      parameters: [{name: city, in: query, required: true, schema: {type: string}}]\n";

fn base(extra: Value) -> Value {
    let mut v = json!({
        "llm": {"apiKey": "k", "serviceName": "llm-service", "servicePort": 8080, "domain": "llm.example.com", "path": "/v1/chat/completions", "model": "qwen-turbo"},
        "apis": [{"apiProvider": {"serviceName": "api-service", "servicePort": 9090, "domain": "api.example.com"}, "api": SPEC}],
    });
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

#[test]
fn another_language_is_english_with_a_warning() {
    let c = Config::from_value(&base(json!({"promptTemplate": {"language": "FR"}}))).unwrap();
    assert!(!c.template.chinese);
    assert!(c.warnings.iter().any(|w| w.contains("'FR'") && w.contains("English")), "{:?}", c.warnings);
}

#[test]
fn all_seven_template_words_are_used() {
    let words = json!({"question": "Q-WORD", "thought1": "T1-WORD", "actionInput": "AI-WORD", "observation": "O-WORD",
                       "thought2": "T2-WORD", "finalAnswer": "FA \"WORD\"", "begin": "BEGIN-WORD"});
    for (language, key) in [("EN", "enTemplate"), ("CH", "chTemplate")] {
        let c =
            Config::from_value(&base(json!({"promptTemplate": {"language": language, key: words.clone()}}))).unwrap();
        for w in ["Q-WORD", "T1-WORD", "AI-WORD", "O-WORD", "T2-WORD", "BEGIN-WORD"] {
            assert!(c.react_prompt.contains(w), "{language}: {w} missing");
        }
        assert!(
            c.react_prompt.contains(r#""action_input": "FA \"WORD\"""#),
            "{language}: the final answer word, escaped"
        );
        assert!(c.react_prompt.trim_end().ends_with("BEGIN-WORD"));
    }
}

#[test]
fn json_resp_without_a_schema_asks_for_a_json_object() {
    let c = Config::from_value(&base(json!({"jsonResp": {"enable": true}}))).unwrap();
    let j = c.json_resp.unwrap();
    assert!(j.json_object);
    assert!(j.schema.validate(&json!({"any": 1})).is_ok());
    assert!(j.schema.validate(&json!([1])).is_err());
}

/// Higress's README (both languages): its one complete configuration, alone and with each `jsonResp`
/// block the README says to add to it ("Add jsonResp configuration to the above configuration").
fn higress_examples(file: &str) -> Vec<(String, Value)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/higress").join(file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let blocks: Vec<Value> = text
        .split("```yaml")
        .skip(1)
        .map(|b| api_agent::doc::parse(b.split("```").next().unwrap_or("")).unwrap())
        .collect();
    let base = blocks.iter().find(|b| b.get("apis").is_some()).expect("the complete example").clone();
    let mut out = vec![("base".to_string(), base.clone())];
    for (i, b) in blocks.iter().enumerate().filter(|(_, b)| b.get("jsonResp").is_some() && b.get("apis").is_none()) {
        let mut merged = base.clone();
        merged["jsonResp"] = b["jsonResp"].clone();
        out.push((format!("base + jsonResp block {i}"), merged));
    }
    out
}

#[test]
fn higress_readme_examples_load_unchanged() {
    let mut seen = Vec::new();
    for file in ["ai-agent-README.md", "ai-agent-README_EN.md"] {
        for (name, cfg) in higress_examples(file) {
            let p = Plugin::from_value(&cfg).unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            let c = p.global.unwrap();
            assert!(c.tools.len() >= 2, "{file} {name}: {} tools", c.tools.len());
            seen.push(format!("{file} {name}: json_object={:?}", c.json_resp.as_ref().map(|j| j.json_object)));
        }
    }
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/higress").exists() {
        assert_eq!(seen.len(), 6, "{seen:#?}");
        assert!(seen.iter().filter(|s| s.ends_with("Some(true)")).count() == 2, "jsonResp without a schema: {seen:#?}");
    }
}
