//! What small models really emit (seen with SmolLM2 on llama-cpp-python), and what the loop does with
//! it: flattened blobs, extra keys, the same invalid action again and again, runs into an invented next
//! question; and the limit answer never shows the filter's instructions to the model.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use common::*;
use serde_json::json;

const PETS: &str = "outbound|8080||pets.svc";

fn pets(extra: serde_json::Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

#[test]
fn a_flattened_blob_is_called_with_its_keys() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([text(r#"Action: {"action": "listPets", "limit": 3}"#), classic_final("Three.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Three pets?"));
    assert_eq!(out.answer(), "Three.");
    assert_eq!(out.tool_calls[0].path, "/v1/pets?limit=3");
}

#[test]
fn extra_keys_are_dropped_the_call_is_made_and_the_model_is_told() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([
            blob_call("x", "listPets", json!({"limit": 2, "temperature": 20, "condition": "cold"})),
            classic_final("Ok."),
        ])
        .tool_json(PETS, r#"[{"id": 1}]"#);
    let out = h.run(&user("Two pets?"));
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(out.tool_calls[0].path, "/v1/pets?limit=2", "the extra keys were never sent");
    let observation = out.last_message(2);
    assert!(
        observation.contains("'temperature', 'condition' not parameters of 'listPets' and were not sent"),
        "{observation}"
    );
    assert!(observation.contains(r#"[{"id": 1}]"#));
}

#[test]
fn a_dropped_key_never_shadows_a_credential() {
    let cfg = config(
        &[("pets.svc", "oai-petstore.yaml", json!({"apiKey": {"in": "query", "name": "apikey", "value": "K"}}))],
        json!({}),
    );
    let mut h = Harness::new(&cfg)
        .llm([blob_call("x", "listPets", json!({"apikey": "stolen"})), classic_final("Ok.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Pets?"));
    assert_eq!(out.tool_calls[0].path, "/v1/pets?apikey=K");
}

#[test]
fn the_same_invalid_action_twice_ends_with_a_clear_answer() {
    for (syntax, call, _) in SYNTAXES {
        let bad = || call("x", "showPetById", json!({"id": "7"}));
        let mut h = Harness::new(&pets(json!({"llm": {"maxIterations": 10}}))).llm([bad(), bad(), bad(), bad()]);
        let out = h.run(&user("Pet 7?"));
        assert_eq!(out.llm_requests.len(), 2, "{syntax}: stopped after the second identical failure");
        assert_eq!(out.finish_reason(), "length");
        let answer = out.answer();
        // Plain words for the client: the diagnostics written for the model stay in the log (issue 19).
        assert_eq!(answer, "I could not finish: the model twice gave a reply that could not be used.", "{syntax}");
        assert!(out.tool_calls.is_empty());
    }
    for (language, want) in [("EN", "could not be used"), ("CH", "无法使用")] {
        let cfg = pets(json!({"promptTemplate": {"language": language}}));
        let mut h = Harness::new(&cfg).llm([text("Action: {not json"), text("Action: {not json")]);
        let answer = h.run(&user("Pets?")).answer();
        assert!(answer.contains(want), "{answer}");
        for word in ["json", "blob", "format", "Action", "Observation", "Final Answer"] {
            assert!(!answer.contains(word), "the filter's words in the answer: {answer}");
        }
    }
    for (syntax, call, _) in SYNTAXES {
        let bad = || call("x", "showPetById", json!({"id": "7"}));
        let mut h = Harness::new(&pets(json!({"llm": {"maxIterations": 10}}))).llm([bad(), bad(), bad(), bad()]);
        let out = h.run(&user("Pet 7?"));
        assert!(!out.answer().contains("petId"), "{syntax}: no argument diagnostics in the answer");
        assert!(out.tool_calls.is_empty());
    }
    // The same malformed output twice, too.
    let mut h =
        Harness::new(&pets(json!({}))).llm([text("Action:\n```\n{broken\n```"), text("Action:\n```\n{broken\n```")]);
    let out = h.run(&user("Pets?"));
    assert_eq!((out.llm_requests.len(), out.finish_reason().as_str()), (2, "length"));
    // Different failures are corrected as usual.
    let mut h = Harness::new(&pets(json!({}))).llm([
        text("Action:\n```\n{broken\n```"),
        text("Action:\n```\n{also broken\n```"),
        classic_final("Fine."),
    ]);
    assert_eq!(h.run(&user("Pets?")).answer(), "Fine.");
}

#[test]
fn the_limit_answer_never_shows_the_filters_instructions() {
    for (chinese, language) in [(false, "EN"), (true, "CH")] {
        let cfg = pets(json!({"llm": {"maxIterations": 2}, "promptTemplate": {"language": language}}));
        let mut h = Harness::new(&cfg).llm([
            text("Action: {oops"),
            text("Action: {other oops"),
            classic_call("x", "listPets", json!({})),
        ]);
        let out = h.run(&user("Pets?"));
        let answer = out.answer();
        assert_eq!(out.finish_reason(), "length");
        for leak in ["Reply in the format", "Invalid format", "请按上面给出的格式回复", "json blob"] {
            assert!(!answer.contains(leak), "{language}: {answer}");
        }
        assert!(answer.contains(if chinese { "未能完成" } else { "I could not finish" }));
        assert!(!answer.contains("last result") && !answer.contains("最后一次结果"), "no tool ran: {answer}");
    }
}

#[test]
fn a_run_on_into_an_invented_question_is_cut_in_the_answer_and_the_history() {
    let mut h = Harness::new(&pets(json!({}))).llm([text("Pets are great.\nQuestion: What about cats?\nThought: hmm")]);
    let out = h.run(&user("Pets?"));
    assert_eq!(out.answer(), "Pets are great.");
    assert_eq!(out.llm_requests[0]["stop"], json!(["Observation:", "\nQuestion:"]));
}

#[test]
fn the_steps_come_back_when_asked_for_with_no_secret() {
    let cfg = config(
        &[(
            "pets.svc",
            "oai-petstore.yaml",
            json!({"apiKey": {"in": "query", "name": "apikey", "value": "SECRET-KEY"}}),
        )],
        json!({}),
    );
    for stream in [false, true] {
        let mut h = Harness::new(&cfg)
            .llm([
                blob_call("x", "listPets", json!({"limit": 2})),
                blob_call("y", "nope", json!({})),
                classic_final("Two."),
            ])
            .tool(PETS, |c| ToolReply::Http(200, format!("you called {}", c.path)));
        h.steps = true;
        let mut req = user("Two pets?");
        req["stream"] = json!(stream);
        let out = h.run(&req);
        let text = out.body_text();
        assert!(!text.contains("SECRET-KEY"), "{text}");
        let steps = if stream {
            let last = text.split("\n\n").filter(|e| e.starts_with("data: {")).last().unwrap();
            serde_json::from_str::<serde_json::Value>(&last[6..]).unwrap()["api_agent_steps"].clone()
        } else {
            out.json()["api_agent_steps"].clone()
        };
        let kinds: Vec<&str> = steps.as_array().unwrap().iter().map(|s| s["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["llm", "tool", "llm", "tool", "llm"], "{steps}");
        let tool = &steps[1];
        assert_eq!((tool["name"].as_str(), tool["status"].as_u64()), (Some("listPets"), Some(200)));
        assert_eq!(tool["arguments"], r#"{"limit":2}"#);
        assert!(tool["observation"].as_str().unwrap().contains("apikey=[redacted]"), "{tool}");
        assert_eq!(steps[3]["status"], "refused");
        assert_eq!(steps[0]["usage"]["total_tokens"], 15);
    }
    // Not asked: no steps.
    let mut h = Harness::new(&cfg).llm([classic_final("Hi.")]);
    assert!(h.run(&user("Hi")).json().get("api_agent_steps").is_none());
    // returnSteps: always.
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"returnSteps": true}));
    let mut h = Harness::new(&cfg).llm([classic_final("Hi.")]);
    assert_eq!(h.run(&user("Hi")).json()["api_agent_steps"][0]["type"], "llm");
}

#[test]
fn the_context_block_goes_into_the_current_user_message_only() {
    // The time is an input: the harness pins the request's clock at START_MS (1970-01-01 00:16:40 UTC).
    let extra = json!({"context": {"time": true, "timezone": "Asia/Shanghai", "headers": {"consumer": "x-consumer-id"}, "text": "Answer briefly."}});
    for mode in ["react", "native"] {
        let mut e = extra.clone();
        e["mode"] = json!(mode);
        let cfg = pets(e);
        let mut h = Harness::new(&cfg).llm([if mode == "native" {
            Turn::Message(json!({"role": "assistant", "content": "Hi."}))
        } else {
            classic_final("Hi.")
        }]);
        h.context_headers = vec![("consumer".into(), "alice".into())];
        let history = json!([
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": "Earlier question"},
            {"role": "assistant", "content": "Earlier answer"},
            {"role": "user", "content": "Now?"}
        ]);
        let out = h.run(&json!({"model": "m", "messages": history}));
        assert_eq!(out.reply.status, 200, "{mode}: {}", out.body_text());
        let messages = out.llm_requests[0]["messages"].as_array().unwrap();
        let last_user = messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"].as_str().unwrap();
        assert!(last_user.contains("[Context]\nCurrent time: 1970-01-01 08:16 (Asia/Shanghai, UTC+08:00)\nconsumer: alice\nAnswer briefly."), "{mode}: {last_user}");
        let elsewhere: Vec<&serde_json::Value> =
            messages.iter().filter(|m| m["content"].to_string().contains("[Context]")).collect();
        assert_eq!(elsewhere.len(), 1, "{mode}: only the current user message carries it");
    }
}

#[test]
fn context_configuration_errors_name_the_field() {
    use api_agent::config::Config;
    let err =
        |c: serde_json::Value| Config::from_slice(pets(json!({"context": c})).as_bytes()).unwrap_err().to_string();
    assert!(err(json!({"time": true, "timezone": "Mars/Olympus"}))
        .starts_with("context.timezone: 'Mars/Olympus' is not a supported time zone"));
    assert_eq!(
        err(json!({"headers": {"consumer": "bad header"}})),
        "context.headers.consumer: 'bad header' is not a valid header name"
    );
    assert_eq!(err(json!({"clock": true})), "context.clock: unknown key (known keys: time, timezone, text, headers)");
}
