//! Large catalogs (issue 31): each request is offered the tools the catalog index ranks best for its
//! conversation, within `tools.maxPromptBytes`, plus `find_tools`, which searches the whole catalog.
//! Small catalogs are offered whole, as before.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/big_spec.rs"]
mod big_spec;
mod common;

use api_agent::config::{Config, Plugin};
use big_spec::{big_spec, cap, NOUNS, VERBS};
use common::*;
use serde_json::{json, Value};

/// The big API and the weather API, in `mode`, with `tools` settings.
fn cfg(mode: &str, ops: usize, tools: Value) -> String {
    let mut c = json!({
        "mode": mode,
        "llm": {"serviceName": "llm.svc", "servicePort": 443, "path": "/v1/chat/completions", "maxIterations": 4},
        "apis": [
            {"apiProvider": {"serviceName": "big.svc", "servicePort": 80}, "api": big_spec(ops)},
            {"apiProvider": {"serviceName": "weather.svc", "servicePort": 80}, "api": spec_text("weather.yaml")},
        ],
    });
    if !tools.is_null() {
        c["tools"] = tools;
    }
    c.to_string()
}

const WEATHER: &str = "outbound|80||weather.svc";
const BIG: &str = "outbound|80||big.svc";

fn system(out: &Outcome, n: usize) -> String {
    out.llm_requests[n]["messages"][0]["content"].as_str().unwrap().to_string()
}

fn tool_names(out: &Outcome, n: usize) -> Vec<String> {
    let tools = out.llm_requests[n]["tools"].as_array().unwrap();
    tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_small_catalog_is_offered_whole_without_find_tools() {
    let c = Config::from_slice(cfg("react", 6, Value::Null).as_bytes()).unwrap();
    assert!(c.offer.is_none());
    let mut h = Harness::new(&cfg("react", 6, Value::Null)).llm([classic_final("ok")]);
    let out = h.run(&user("Weather in Jinan?"));
    let prompt = system(&out, 0);
    assert_eq!(prompt, c.react_prompt);
    assert!(!prompt.contains("find_tools") && prompt.contains("listInvoiceR0") && prompt.contains("get_weather_now"));
}

#[test]
fn a_large_catalog_offers_the_best_tools_within_the_budget_and_find_tools() {
    let mut h = Harness::new(&cfg("react", 600, Value::Null)).llm([classic_final("ok")]);
    let out = h.run(&user("What is the current weather in Jinan?"));
    let prompt = system(&out, 0);
    assert!(prompt.contains("get_weather_now: ") && prompt.contains("find_tools: Search all 602 tools"));
    assert!(!prompt.contains("listInvoiceR0"), "a tool the question has no word of is not offered");
    // The first tool offered is the example the prompt shows.
    assert!(prompt.contains("\"action\": \"get_weather_now\""));
    let body = out.first_body.len();
    assert!(body < 16_000, "first turn {body} bytes");
}

#[test]
fn first_turns_stay_under_16_kb_for_2000_operations_in_both_modes() {
    for mode in ["react", "native"] {
        let config = cfg(mode, 2_400, Value::Null);
        let mut h = Harness::new(&config).llm([text("done")]);
        let out = h.run(&user("Archive the invoice records of region 3, and list the shipments of region 7"));
        assert!(out.first_body.len() <= 16_000, "{mode}: {} bytes", out.first_body.len());
        let body = String::from_utf8(out.first_body.clone()).unwrap();
        assert!(body.contains("archiveInvoiceR3") && body.contains("find_tools"), "{mode}: {body}");
    }
}

#[test]
fn find_tools_round_trip_in_react_mode_keeps_the_prompt_as_a_prefix() {
    let mut h = Harness::new(&cfg("react", 600, Value::Null))
        .llm([
            blob_call("search", "find_tools", json!({"query": "renew a license certificate"})),
            blob_call("found it", "updateLicenseR1", json!({"licenseId": "L-7"})),
            classic_final("renewed"),
        ])
        .tool_json(BIG, r#"{"ok": true}"#)
        .tool_json(WEATHER, "{}");
    let out = h.run(&user("Hello"));
    assert_eq!(out.answer(), "renewed");
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(out.tool_calls[0].path, "/r1/license/update?licenseId=L-7");
    let observation = out.last_message(2);
    assert!(observation.starts_with("Observation: Tools found for \"renew a license certificate\""), "{observation}");
    assert!(observation.contains("updateLicenseR0: Update license records in region 0\nParameters (JSON Schema): "));
    // Every turn repeats the one before as an exact prefix: the system prompt never changes.
    for n in 1..out.llm_requests.len() {
        let (before, after) = (&out.llm_requests[n - 1]["messages"], &out.llm_requests[n]["messages"]);
        let before = before.as_array().unwrap();
        assert_eq!(&after.as_array().unwrap()[..before.len()], &before[..], "turn {n}");
    }
}

#[test]
fn find_tools_round_trip_in_native_mode_appends_the_tools_found() {
    let mut h = Harness::new(&cfg("native", 600, Value::Null))
        .llm([
            native_calls(&[("c1", "find_tools", json!({"query": "update a license of region 1"}))]),
            native_calls(&[("c2", "updateLicenseR1", json!({"licenseId": "L-9"}))]),
            Turn::Message(json!({"role": "assistant", "content": "renewed"})),
        ])
        .tool_json(BIG, r#"{"ok": true}"#);
    let out = h.run(&user("Hello there"));
    assert_eq!(out.answer(), "renewed", "{}", out.body_text());
    assert_eq!(out.tool_calls[0].path, "/r1/license/update?licenseId=L-9");
    let (first, second, third) = (tool_names(&out, 0), tool_names(&out, 1), tool_names(&out, 2));
    assert_eq!(first, ["find_tools"], "no word of 'Hello there' names a tool");
    assert_eq!(&second[..1], &first[..], "the tools found are appended after those offered");
    assert!(second.len() > 1 && second.len() <= 6 && second[1] == "updateLicenseR1", "{second:?}");
    assert_eq!(third, second);
    let found = out.llm_requests[1]["messages"][2]["content"].as_str().unwrap();
    assert!(found.contains("updateLicenseR1: Update license records in region 1"), "{found}");
}

#[test]
fn native_mode_never_sends_more_than_128_tools() {
    // A budget that would fit everything, pinned tools and a find_tools that adds more.
    let pinned: Vec<String> = (0..130).map(|i| format!("{}{}R0", VERBS[i % 6], cap(NOUNS[(i / 6) % 40]))).collect();
    let tools = json!({"maxPromptBytes": 10_000_000, "pinned": pinned[..127]});
    let mut h = Harness::new(&cfg("native", 600, tools))
        .llm([native_calls(&[("c1", "find_tools", json!({"query": "weather"}))]), text("done")]);
    let out = h.run(&user("list every invoice"));
    assert_eq!(tool_names(&out, 0).len(), 128);
    assert_eq!(tool_names(&out, 1).len(), 128);
}

#[test]
fn pinned_tools_are_always_offered_and_must_exist() {
    let tools = json!({"pinned": ["deleteBudgetR0"]});
    let mut h = Harness::new(&cfg("react", 600, tools)).llm([classic_final("ok")]);
    let out = h.run(&user("What is the weather now?"));
    let prompt = system(&out, 0);
    let (pinned, weather) = (prompt.find("deleteBudgetR0: ").unwrap(), prompt.find("get_weather_now: ").unwrap());
    assert!(pinned < weather, "pinned tools come first");
    let e = Config::from_slice(cfg("react", 600, json!({"pinned": ["nope"]})).as_bytes()).unwrap_err();
    assert_eq!(e.to_string(), "tools.pinned[0]: no tool is named 'nope'");
    let e = Config::from_slice(cfg("react", 600, json!({"select": "some"})).as_bytes()).unwrap_err();
    assert_eq!(e.to_string(), "tools.select: must be 'auto' or 'all', found 'some'");
    let e = Config::from_slice(cfg("react", 600, json!({"maxPromptBytes": 10})).as_bytes()).unwrap_err();
    assert_eq!(e.to_string(), "tools.maxPromptBytes: must be between 1024 and 16777216, found 10");
    let e = Config::from_slice(cfg("react", 600, json!({"treshold": 3})).as_bytes()).unwrap_err();
    assert!(e.to_string().starts_with("tools.treshold: unknown key (did you mean 'threshold'?)"), "{e}");
}

#[test]
fn select_all_offers_every_tool_and_rules_choose_it_per_route() {
    let mut all = Harness::new(&cfg("react", 100, json!({"select": "all"}))).llm([classic_final("ok")]);
    let prompt = system(&all.run(&user("weather")), 0);
    assert!(prompt.contains("listInvoiceR0") && prompt.contains("archiveTicketR0") && !prompt.contains("find_tools"));
    // The threshold is the operator's too: 100 tools under a threshold of 200 and a large budget.
    let roomy = json!({"threshold": 200, "maxPromptBytes": 1_000_000});
    assert!(Config::from_slice(cfg("react", 100, roomy).as_bytes()).unwrap().offer.is_none());
    let mut rule: Value = serde_json::from_str(&cfg("react", 100, json!({"select": "all"}))).unwrap();
    rule["_match_route_"] = json!(["everything"]);
    let mut plugin: Value = serde_json::from_str(&cfg("react", 100, Value::Null)).unwrap();
    plugin["_rules_"] = json!([rule]);
    let p = Plugin::from_value(&plugin).unwrap();
    assert!(p.global.as_ref().unwrap().offer.is_some() && p.rules[0].config.offer.is_none());
    rule["tools"] = json!({"pinned": ["nothing"]});
    plugin["_rules_"] = json!([rule]);
    let e = Plugin::from_value(&plugin).unwrap_err().to_string();
    assert_eq!(e, "_rules_[0].tools.pinned[0]: no tool is named 'nothing'");
}

#[test]
fn an_unknown_tool_points_to_find_tools_and_a_known_one_not_offered_still_runs() {
    let mut h = Harness::new(&cfg("react", 600, Value::Null))
        .llm([
            blob_call("guess", "getNothing", json!({})),
            blob_call("I know this one", "getBuildR1", json!({"buildId": "b1"})),
            classic_final("ok"),
        ])
        .tool_json(BIG, "{}");
    let out = h.run(&user("weather now"));
    let told = out.last_message(2);
    assert_eq!(
        told,
        "Observation: Unknown tool 'getNothing'. Call 'find_tools' with what you want to do to find the right tool."
    );
    assert_eq!(out.tool_calls[0].path, "/r1/build/get?buildId=b1");
    // find_tools without a query is refused, with what it needs.
    let mut h = Harness::new(&cfg("react", 600, Value::Null))
        .llm([blob_call("search", "find_tools", json!({})), classic_final("ok")]);
    let out = h.run(&user("weather now"));
    assert!(out.last_message(2).contains("'find_tools' needs a 'query'"), "{}", out.last_message(2));
}

#[test]
fn mcp_tools_join_the_index_when_they_are_listed() {
    let mut c: Value = serde_json::from_str(&cfg("react", 600, Value::Null)).unwrap();
    c["apis"]
        .as_array_mut()
        .unwrap()
        .push(json!({"mcpServer": {"serviceName": "mcp.svc", "servicePort": 80, "path": "/mcp"}}));
    let cfg = Config::from_value(&c).unwrap();
    let before = cfg.offer.as_ref().unwrap();
    assert!(before.index.rank("translate a sentence into French").is_empty());
    let list = json!({"tools": [{"name": "translate_text", "description": "Translate a sentence into another language",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "target": {"type": "string"}}}}]});
    let next = cfg.with_mcp_tools(2, &list).unwrap();
    let offer = next.offer.as_ref().unwrap();
    let best = offer.index.rank("translate a sentence into French")[0].0 as usize;
    assert_eq!(next.tools.iter().nth(best).unwrap().name, "translate_text");
    assert_eq!(offer.costs.len(), 603);
}

#[test]
fn the_startup_log_says_when_a_catalog_is_offered_as_a_selection() {
    let p = Plugin::from_slice(cfg("react", 600, Value::Null).as_bytes()).unwrap();
    let (_, lines) = p.startup_lines();
    let line = lines.iter().find(|l| l.contains("selection")).expect("a selection line");
    assert!(line.starts_with("api-agent (global): the catalog is offered per request as a selection of at most 10240 bytes of tools, with find_tools (index: "), "{line}");
    let small = Plugin::from_slice(cfg("react", 6, Value::Null).as_bytes()).unwrap();
    assert!(!small.startup_lines().1.iter().any(|l| l.contains("selection")));
}
