//! The request's token budget (`llm.maxTotalTokens`) and the summary a host hands to Envoy, in both
//! modes: a run that spends its budget ends with the best-effort answer, as at the iteration limit.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use common::*;
use serde_json::json;

const PETS: &str = "outbound|8080||pets.svc";

fn pets(extra: serde_json::Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

#[test]
fn a_spent_budget_ends_the_loop_with_the_last_result() {
    for mode in ["react", "native"] {
        let call = || match mode {
            "react" => classic_call("more", "listPets", json!({"limit": 1})),
            _ => native_calls(&[("c1", "listPets", json!({"limit": 1}))]),
        };
        // Each scripted turn costs 15 tokens: the budget of 40 is spent by the third.
        let cfg = pets(json!({"mode": mode, "llm": {"maxTotalTokens": 40, "maxIterations": 10}}));
        let mut h = Harness::new(&cfg).llm([call(), call(), call(), call()]).tool_json(PETS, "[{\"id\": 1}]");
        let out = h.run(&user("Pets?"));
        assert_eq!(out.llm_requests.len(), 3, "{mode}: no turn after the budget");
        assert_eq!(out.finish_reason(), "length", "{mode}");
        let answer = out.answer();
        assert!(answer.contains("budget of 40 tokens") && answer.contains("[{\"id\": 1}]"), "{mode}: {answer}");
        assert!(out.summary.contains("outcome=budget") && out.summary.contains("total_tokens=45"), "{}", out.summary);
        assert!(out.summary.contains("turns=3 tool_calls=2 tool_errors=0"), "{}", out.summary);
    }
}

#[test]
fn an_answer_within_the_budget_is_an_answer() {
    let cfg = pets(json!({"llm": {"maxTotalTokens": 40}}));
    let mut h = Harness::new(&cfg)
        .llm([classic_call("t", "listPets", json!({})), classic_final("None.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "None.");
    assert!(out.summary.starts_with("turns=2 tool_calls=1 tool_errors=0 input_tokens=20 output_tokens=10 total_tokens=30 model=mock-llm outcome=answer"), "{}", out.summary);
}

#[test]
fn the_summary_says_how_a_run_ended() {
    let limited = pets(json!({"llm": {"maxIterations": 1}}));
    let mut h = Harness::new(&limited)
        .llm([classic_call("t", "listPets", json!({})), classic_call("t", "listPets", json!({}))])
        .tool_json(PETS, "[]");
    assert!(h.run(&user("Pets?")).summary.contains("outcome=limit"));
    let mut h = Harness::new(&pets(json!({"loop": "request"}))).llm([Turn::Raw(500, "{}".into())]);
    let out = h.run(&user("Pets?"));
    assert!(out.summary.contains("outcome=error:"), "{}", out.summary);
    let mut h = Harness::new(&pets(json!({})))
        .llm([classic_call("t", "listPets", json!({})), classic_final("Busy.")])
        .tool(PETS, |_| ToolReply::Http(503, "busy".into()));
    assert!(h.run(&user("Pets?")).summary.contains("tool_calls=1 tool_errors=1"));
}

#[test]
fn a_bad_budget_is_refused_naming_the_field() {
    let err =
        api_agent::config::Config::from_slice(pets(json!({"llm": {"maxTotalTokens": 0}})).as_bytes()).unwrap_err();
    assert!(err.to_string().contains("llm.maxTotalTokens"), "{err}");
}

/// The warnings the agent logged on this thread (each test runs the agent on its own thread).
mod logs {
    use std::cell::RefCell;
    use std::sync::Once;

    thread_local!(static LINES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) });

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.level() <= log::Level::Warn
        }
        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                LINES.with(|l| l.borrow_mut().push(r.args().to_string()));
            }
        }
        fn flush(&self) {}
    }

    /// Starts capturing: what this thread logged from now on.
    pub fn start() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            log::set_logger(&Capture).unwrap();
            log::set_max_level(log::LevelFilter::Warn);
        });
        LINES.with(|l| l.borrow_mut().clear());
    }

    pub fn take() -> Vec<String> {
        LINES.with(|l| std::mem::take(&mut *l.borrow_mut()))
    }
}

/// A turn calling `listPets` in `mode`, with `usage` as the reply's usage (`None`: no usage key).
fn call_with_usage(mode: &str, usage: Option<&str>) -> Turn {
    let message = match mode {
        "react" => {
            json!({"role": "assistant", "content": "Thought: more\nAction: listPets\nAction Input: {\"limit\": 1}"})
        }
        _ => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "listPets", "arguments": "{\"limit\": 1}"}}]}),
    };
    let mut reply = json!({"model": "mock-llm", "choices": [{"index": 0, "message": message}]}).to_string();
    if let Some(u) = usage {
        reply.insert_str(reply.len() - 1, &format!(",\"usage\":{u}"));
    }
    Turn::Raw(200, reply)
}

fn summary_number(summary: &str, key: &str) -> u64 {
    let field = summary.split(' ').find_map(|f| f.strip_prefix(&format!("{key}="))).unwrap();
    field.parse().unwrap()
}

/// Counts the provider wrote in another type, or not at all, still spend the budget: a number in a
/// string or a float is read (floored); what cannot be read is estimated from the bytes, with one
/// warning per request; a total below prompt + completion counts as their sum.
#[test]
fn malformed_usage_still_spends_the_budget() {
    let readable = [
        (r#"{"prompt_tokens":"10","completion_tokens":"5","total_tokens":"15"}"#, 3),
        (r#"{"prompt_tokens":10.9,"completion_tokens":5.2,"total_tokens":15.5}"#, 3),
        (r#"{"prompt_tokens":" 10 ","completion_tokens":"5.7"}"#, 3),
        (r#"{"prompt_tokens":10,"completion_tokens":5,"total_tokens":1}"#, 3),
        (r#"{"prompt_tokens":10,"completion_tokens":5,"total_tokens":-1}"#, 3),
        (r#"{"total_tokens":"15"}"#, 3),
        (r#"{"prompt_tokens":18446744073709551616,"completion_tokens":5}"#, 1),
        (r#"{"prompt_tokens":1e300,"completion_tokens":1e300,"total_tokens":1e300}"#, 1),
    ];
    let unreadable = [
        None,
        Some("null"),
        Some("{}"),
        Some("[]"),
        Some("\"lots\""),
        Some(r#"{"prompt_tokens":null,"completion_tokens":null,"total_tokens":null}"#),
        Some(r#"{"prompt_tokens":-10,"completion_tokens":-5,"total_tokens":-15}"#),
        Some(r#"{"prompt_tokens":"many","completion_tokens":"NaN","total_tokens":"inf"}"#),
        Some(r#"{"prompt_tokens":true,"completion_tokens":[5],"total_tokens":{"n":15}}"#),
        Some(r#"{"prompt_tokens":10}"#),
    ];
    let cases = readable.iter().map(|(u, turns)| (Some(*u), Some(*turns))).chain(unreadable.iter().map(|u| (*u, None)));
    for mode in ["react", "native"] {
        for (usage, turns) in cases.clone() {
            logs::start();
            let cfg = pets(json!({"mode": mode, "llm": {"maxTotalTokens": 40, "maxIterations": 10}}));
            let mut h = Harness::new(&cfg).llm((0..12).map(|_| call_with_usage(mode, usage))).tool_json(PETS, "[]");
            let out = h.run(&user("Pets?"));
            let warned: Vec<String> = logs::take().into_iter().filter(|l| l.contains("usage")).collect();
            let at = format!("{mode} usage {usage:?}: {}", out.summary);
            assert!(out.summary.contains("outcome=budget"), "{at}");
            let total = summary_number(&out.summary, "total_tokens");
            let (prompt, completion) =
                (summary_number(&out.summary, "input_tokens"), summary_number(&out.summary, "output_tokens"));
            assert!(total >= prompt.saturating_add(completion) && total >= 40, "{at}");
            // No count reaches the client beyond u32 per turn: sums stay exact in any JSON reader.
            let client = &out.json()["usage"];
            assert_eq!(client["total_tokens"].as_u64(), Some(total), "{at}: {client}");
            assert!(total <= 10 * u64::from(u32::MAX), "{at}");
            match turns {
                Some(n) => {
                    assert_eq!(out.llm_requests.len(), n, "{at}");
                    assert!(warned.is_empty(), "{at}: {warned:?}");
                }
                None => {
                    // Each side's bytes / 4: the first request alone is well over 40 tokens.
                    assert_eq!(out.llm_requests.len(), 1, "{at}");
                    assert_eq!(warned.len(), 1, "{at}: one warning per request: {warned:?}");
                    assert!(warned[0].contains("estimated"), "{}", warned[0]);
                }
            }
        }
    }
}

/// The estimate is ceil(bytes / 4) for each side: the request the agent sent, the reply it read.
#[test]
fn an_unreadable_usage_is_estimated_from_the_bytes() {
    let cfg = pets(json!({"mode": "native", "llm": {"maxTotalTokens": 1_000_000, "maxIterations": 2}}));
    let mut h = Harness::new(&cfg)
        .llm([call_with_usage("native", None), Turn::Message(json!({"role": "assistant", "content": "None."}))])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "None.");
    let first_sent = out.first_body.len() as u64;
    let received = match call_with_usage("native", None) {
        Turn::Raw(_, b) => b.len() as u64,
        _ => unreachable!(),
    };
    // Turn 2 says its own usage (10 + 5): only turn 1 is estimated.
    let (prompt, completion) =
        (summary_number(&out.summary, "input_tokens"), summary_number(&out.summary, "output_tokens"));
    assert_eq!(prompt, first_sent.div_ceil(4) + 10, "{}", out.summary);
    assert_eq!(completion, received.div_ceil(4) + 5, "{}", out.summary);
    assert!(!out.tokens_unread, "estimated: the tokens histogram records the request");
    // Without a budget nothing is estimated: the usage says what the provider said, and the tokens
    // histogram leaves the request out (its count is not known), rather than record too few.
    let cfg = pets(json!({"mode": "native", "llm": {"maxIterations": 2}}));
    let h = Harness::new(&cfg).llm([call_with_usage("native", None), Turn::Message(json!({"content": "None."}))]);
    let out = h.tool_json(PETS, "[]").run(&user("Pets?"));
    assert!(out.summary.contains("input_tokens=10 output_tokens=5 total_tokens=15"), "{}", out.summary);
    assert!(out.tokens_unread);
    let h = Harness::new(&cfg).llm([call_with_usage("native", Some(r#"{"prompt_tokens":3,"completion_tokens":2}"#))]);
    let out = h.llm([Turn::Message(json!({"content": "None."}))]).tool_json(PETS, "[]").run(&user("Pets?"));
    assert!(!out.tokens_unread, "every reply said its usage: {}", out.summary);
}
