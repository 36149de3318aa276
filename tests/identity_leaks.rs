//! Issue 30's leaks: credentials a tool echoes in another spelling, and exchanged tokens the plugin
//! must not keep or use (`tokenExchange`'s reply read strictly).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::host::memory::Memory;
use common::*;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;

const PETS: &str = "outbound|8080||pets.svc";
const STS: &str = "outbound|9000||sts.svc";

fn exchange() -> Value {
    json!({"serviceName": "sts.svc", "servicePort": 9000, "path": "/oauth2/token", "audience": "pets-api"})
}

fn header<'c>(call: &'c api_agent::agent::Call, name: &str) -> Option<&'c str> {
    call.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// One request listing pets for `alice`, the token service answering `sts_body`, with `cache`.
fn list_pets(sts_body: &str, cache: &Rc<RefCell<Memory>>) -> Outcome {
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({"tokenExchange": exchange()}))], json!({}));
    let body = sts_body.to_string();
    let mut h = Harness::new(&cfg)
        .tool(STS, move |_| ToolReply::Http(200, body.clone()))
        .tool_json(PETS, r#"[{"id": 1}]"#)
        .llm([classic_call("List.", "listPets", json!({"limit": 1})), classic_final("Done.")]);
    h.client_headers = vec![("authorization".into(), "Bearer alice".into())];
    h.memory = Rc::clone(cache);
    h.run(&user("List one pet."))
}

#[test]
fn a_token_with_a_control_character_is_refused_and_never_kept() {
    for token in ["tok\u{1}x", "tok\tx", "tok\u{7f}", "tok x", "tök"] {
        let cache = Rc::new(RefCell::new(Memory::default()));
        let out = list_pets(&json!({"access_token": token, "expires_in": 600}).to_string(), &cache);
        assert_eq!(out.reply.status, 200);
        assert!(out.tool_calls.iter().all(|c| c.cluster != PETS), "{token:?} was used: {:?}", out.tool_calls);
        assert!(out.last_message(2).contains("not authorized to use 'listPets'"), "{}", out.last_message(2));
        assert_eq!(out.exchanges, [(0, "refused")]);
        assert!(cache.borrow().tokens() == 0, "{token:?} was kept");
    }
}

#[test]
fn a_negative_expiry_is_used_once_and_never_kept_a_textual_one_is_the_default() {
    for (expires_in, kept) in [(json!(-1), false), (json!("-60"), false), (json!(30.9), false), (json!("soon"), true)] {
        let cache = Rc::new(RefCell::new(Memory::default()));
        let out = list_pets(&json!({"access_token": "tok-a", "expires_in": expires_in}).to_string(), &cache);
        let pets = out.tool_calls.iter().find(|c| c.cluster == PETS).unwrap();
        assert_eq!(header(pets, "authorization"), Some("Bearer tok-a"));
        assert_eq!(cache.borrow().tokens(), usize::from(kept), "expires_in {expires_in}");
    }
}

/// The token service's token, the client's own bearer (forwarded to weather) and the LLM key, each
/// with characters encoders escape (`/`, `+`, `=`, a space).
const TOKEN: &str = "Qx7/Jv+Wm==";
const BEARER: &str = "Kp3/Hy+Rz";
const LLM_KEY: &str = "sk-Lq4/Tn+Vc b";

/// Every run of two or more letters and digits of each credential: none may be seen anywhere.
fn fragments() -> Vec<&'static str> {
    [TOKEN, BEARER, LLM_KEY]
        .iter()
        .flat_map(|c| c.split(|ch: char| !ch.is_ascii_alphanumeric()))
        .filter(|f| f.len() >= 2 && *f != "sk")
        .collect()
}

/// Each credential as a JSON or HTTP encoder may write it.
fn spellings(c: &str) -> Vec<String> {
    let php = c.replace('/', "\\/");
    let unicode: String = c.chars().map(|ch| format!("\\u{:04X}", u32::from(ch))).collect();
    let mixed: String = c
        .chars()
        .enumerate()
        .map(|(i, ch)| if i % 2 == 0 { format!("\\u{:04x}", u32::from(ch)) } else { ch.to_string() })
        .collect::<String>()
        .replace('/', "\\/");
    let upper = api_agent::openapi::call::encode_query(c);
    let lower: String = upper.clone().replace("%2F", "%2f").replace("%2B", "%2b").replace("%3D", "%3d");
    let form = c.replace(' ', "+").replace('/', "%2F");
    vec![php, unicode, mixed, upper, lower, form]
}

fn echoing_config(extra: Value) -> String {
    let mut llm = json!({"apiKey": LLM_KEY, "maxObservationBytes": 4096});
    if let Some(Value::Object(more)) = extra.get("llm") {
        llm.as_object_mut().unwrap().extend(more.clone());
    }
    config(
        &[
            ("pets.svc", "oai-petstore.yaml", json!({"tokenExchange": exchange()})),
            ("weather.svc", "weather.yaml", json!({"forwardHeaders": ["authorization"]})),
        ],
        json!({"mode": "native", "returnSteps": true, "tracing": {"content": true}, "llm": llm}),
    )
}

/// A run where pets echoes `pets_reply(token)`, weather echoes the client's bearer and the LLM key in every spelling.
fn run_echoes(cfg: &str, pets_reply: impl Fn(&str) -> String + 'static) -> Outcome {
    let sts = json!({"access_token": TOKEN, "expires_in": 600}).to_string();
    let mut h = Harness::new(cfg)
        .tool(STS, move |_| ToolReply::Http(200, sts.clone()))
        .tool(PETS, move |c| {
            ToolReply::Http(200, pets_reply(header(c, "authorization").unwrap_or("-").trim_start_matches("Bearer ")))
        })
        .tool("outbound|8080||weather.svc", |c| {
            let bearer = header(c, "authorization").unwrap_or("-").trim_start_matches("Bearer ").to_string();
            let all: Vec<String> = [bearer.as_str(), LLM_KEY].iter().flat_map(|c| spellings(c)).collect();
            ToolReply::Http(200, json!({"echo": all.join(" ")}).to_string())
        })
        .llm([
            native_calls(&[
                ("a", "listPets", json!({"limit": 1})),
                ("b", "get_weather_now", json!({"location": "Jinan"})),
            ]),
            text("Done."),
        ]);
    h.spans = true;
    h.client_headers = vec![("authorization".into(), format!("Bearer {BEARER}"))];
    h.run(&user("Pets and weather?"))
}

fn assert_nothing_seen(out: &Outcome) {
    assert_eq!(out.reply.status, 200, "{}", out.body_text());
    let model: Vec<String> = out.llm_requests.iter().map(Value::to_string).collect();
    let spans = out.spans.join("\n");
    for (what, text) in [("the model", model.join("\n")), ("the answer and steps", out.body_text()), ("a span", spans)]
    {
        assert!(text.contains("[redacted]"), "{what}: nothing masked: {text}");
        for f in fragments() {
            assert!(!text.contains(f), "{f} reached {what}: {text}");
        }
    }
}

#[test]
fn every_spelling_of_every_credential_a_tool_echoes_is_masked() {
    // Pets echoes as plain text (one layer of each encoding), weather inside a JSON string (two).
    let out =
        run_echoes(&echoing_config(json!({})), |token| format!("echo: {} raw {token}", spellings(token).join(" ")));
    assert_nothing_seen(&out);
}

#[test]
fn a_spelled_credential_cut_by_the_observation_limit_is_masked_whole() {
    for spelling in 0..spellings(TOKEN).len() {
        let cfg = echoing_config(json!({"llm": {"maxObservationBytes": 64}}));
        let out = run_echoes(&cfg, move |token| format!("{}{} and more", "x".repeat(60), spellings(token)[spelling]));
        assert_nothing_seen(&out);
    }
}

/// A run of the weather API only, which carries no identity (no `forwardHeaders`, no
/// `tokenExchange`): the tool echoes `echoed` in every spelling.
fn run_without_identity(echoed: &'static [&'static str], client: Option<&str>) -> Outcome {
    let cfg = config(
        &[("weather.svc", "weather.yaml", json!({}))],
        json!({"mode": "native", "returnSteps": true, "tracing": {"content": true},
               "llm": {"apiKey": LLM_KEY, "maxObservationBytes": 4096}}),
    );
    let mut h = Harness::new(&cfg)
        .tool("outbound|8080||weather.svc", move |_| {
            let all: Vec<String> = echoed.iter().flat_map(|c| spellings(c)).collect();
            ToolReply::Http(200, json!({"echo": all.join(" ")}).to_string())
        })
        .llm([native_calls(&[("b", "get_weather_now", json!({"location": "Jinan"}))]), text("Done.")]);
    h.spans = true;
    h.client_headers = client.map(|c| vec![("authorization".into(), c.to_string())]).unwrap_or_default();
    h.run(&user("Weather?"))
}

#[test]
fn a_configured_secret_is_masked_when_no_api_carries_an_identity() {
    // Nothing of the client's to mask: the agent keeps no identity, the configured secrets still go.
    assert_nothing_seen(&run_without_identity(&[LLM_KEY], None));
}

#[test]
fn a_client_credential_is_masked_though_no_api_forwards_it() {
    // The client's headers are the host's input: whatever it handed over is masked, configured or not.
    assert_nothing_seen(&run_without_identity(&[LLM_KEY, BEARER], Some(&format!("Bearer {BEARER}"))));
}
