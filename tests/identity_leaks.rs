//! Issue 30's leaks: credentials a tool echoes in another spelling, and exchanged tokens the plugin
//! must not keep or use (`tokenExchange`'s reply read strictly).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::host::tokens::TokenCache;
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
fn list_pets(sts_body: &str, cache: &Rc<RefCell<TokenCache>>) -> Outcome {
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({"tokenExchange": exchange()}))], json!({}));
    let body = sts_body.to_string();
    let mut h = Harness::new(&cfg)
        .tool(STS, move |_| ToolReply::Http(200, body.clone()))
        .tool_json(PETS, r#"[{"id": 1}]"#)
        .llm([classic_call("List.", "listPets", json!({"limit": 1})), classic_final("Done.")]);
    h.client_headers = vec![("authorization".into(), "Bearer alice".into())];
    h.token_cache = Rc::clone(cache);
    h.run(&user("List one pet."))
}

#[test]
fn a_token_with_a_control_character_is_refused_and_never_kept() {
    for token in ["tok\u{1}x", "tok\tx", "tok\u{7f}", "tok x", "tök"] {
        let cache = Rc::new(RefCell::new(TokenCache::default()));
        let out = list_pets(&json!({"access_token": token, "expires_in": 600}).to_string(), &cache);
        assert_eq!(out.reply.status, 200);
        assert!(out.tool_calls.iter().all(|c| c.cluster != PETS), "{token:?} was used: {:?}", out.tool_calls);
        assert!(out.last_message(2).contains("not authorized to use 'listPets'"), "{}", out.last_message(2));
        assert_eq!(out.exchanges, [(0, "refused")]);
        assert!(cache.borrow().is_empty(), "{token:?} was kept");
    }
}

#[test]
fn a_negative_expiry_is_used_once_and_never_kept_a_textual_one_is_the_default() {
    for (expires_in, kept) in [(json!(-1), false), (json!("-60"), false), (json!(30.9), false), (json!("soon"), true)] {
        let cache = Rc::new(RefCell::new(TokenCache::default()));
        let out = list_pets(&json!({"access_token": "tok-a", "expires_in": expires_in}).to_string(), &cache);
        let pets = out.tool_calls.iter().find(|c| c.cluster == PETS).unwrap();
        assert_eq!(header(pets, "authorization"), Some("Bearer tok-a"));
        assert_eq!(cache.borrow().len(), usize::from(kept), "expires_in {expires_in}");
    }
}
