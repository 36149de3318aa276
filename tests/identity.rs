//! Tools called on behalf of the client (issue 21): `forwardHeaders`, `tokenExchange` (RFC 8693), the
//! configuration's errors, the exchange as the agent makes it, and the instance's token cache.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Failure;
use api_agent::config::Config;
use api_agent::host::memory::Memory;
use api_agent::host::tokens::TokenCache;
use common::*;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const PETS: &str = "outbound|8080||pets.svc";
const WEATHER: &str = "outbound|8080||weather.svc";
const STS: &str = "outbound|9000||sts.svc";
const SECRET: &str = "sts-s3cret/+";

fn exchange() -> Value {
    json!({"serviceName": "sts.svc", "servicePort": 9000, "path": "/oauth2/token", "audience": "pets-api",
           "scope": "pets:read", "clientId": "api-agent", "clientSecret": SECRET})
}

/// Pets with a token exchange, weather forwarding `x-user`.
fn two_apis() -> String {
    two_apis_in("react")
}

fn two_apis_in(mode: &str) -> String {
    config(
        &[
            ("pets.svc", "oai-petstore.yaml", json!({"tokenExchange": exchange(), "maxRetries": 2})),
            ("weather.svc", "weather.yaml", json!({"forwardHeaders": ["x-user", "x-tenant"]})),
        ],
        json!({"returnSteps": true, "mode": mode}),
    )
}

fn header<'c>(call: &'c api_agent::agent::Call, name: &str) -> Option<&'c str> {
    call.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// A token service that issues `tok-<subject>` (checking the RFC 8693 form and the Basic credentials),
/// counting its calls.
fn sts(count: Rc<Cell<u32>>) -> impl Fn(&api_agent::agent::Call) -> ToolReply {
    move |c| {
        count.set(count.get() + 1);
        assert_eq!(c.method, "POST");
        assert_eq!(c.path, "/oauth2/token");
        assert_eq!(header(c, "content-type"), Some("application/x-www-form-urlencoded"));
        // base64("api-agent:sts-s3cret%2F%2B")
        assert_eq!(header(c, "authorization"), Some("Basic YXBpLWFnZW50OnN0cy1zM2NyZXQlMkYlMkI="));
        let form = String::from_utf8(c.body.as_deref().unwrap().to_vec()).unwrap();
        let fields: Vec<(&str, &str)> = form.split('&').filter_map(|kv| kv.split_once('=')).collect();
        let get = |k: &str| fields.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        assert_eq!(get("grant_type"), Some("urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange"));
        assert_eq!(get("subject_token_type"), Some("urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token"));
        assert_eq!((get("audience"), get("scope")), (Some("pets-api"), Some("pets%3Aread")));
        match get("subject_token").unwrap() {
            "bad" => ToolReply::Http(400, r#"{"error":"invalid_grant","error_description":"bad"}"#.into()),
            subject => ToolReply::Http(200, format!(r#"{{"access_token":"tok-{subject}","expires_in":600}}"#)),
        }
    }
}

fn harness(user: &str, count: &Rc<Cell<u32>>) -> Harness {
    harness_in("react", user, count)
}

fn harness_in(mode: &str, user: &str, count: &Rc<Cell<u32>>) -> Harness {
    let mut h = Harness::new(&two_apis_in(mode))
        .tool(STS, sts(Rc::clone(count)))
        .tool_json(PETS, r#"[{"id": 1, "name": "Rex"}]"#)
        .tool_json(WEATHER, r#"{"temp": 21}"#);
    h.client_headers = vec![("authorization".into(), format!("Bearer {user}")), ("x-user".into(), user.into())];
    h
}

fn both_calls() -> Vec<Turn> {
    vec![
        native_calls(&[("a", "listPets", json!({"limit": 1})), ("b", "get_weather_now", json!({"location": "Jinan"}))]),
        text("Rex; 21 °C."),
    ]
}

#[test]
fn the_right_token_reaches_the_right_api_only() {
    let count = Rc::new(Cell::new(0));
    let mut h = harness_in("native", "alice", &count).llm(both_calls());
    let out = h.run(&user("Pets and weather?"));
    assert_eq!(out.reply.status, 200, "{}", out.body_text());
    let pets: Vec<_> = out.tool_calls.iter().filter(|c| c.cluster == PETS).collect();
    assert_eq!(pets.len(), 1, "{:#?} {}", out.tool_calls, out.body_text());
    let weather: Vec<_> = out.tool_calls.iter().filter(|c| c.cluster == WEATHER).collect();
    assert_eq!(header(pets[0], "authorization"), Some("Bearer tok-alice"));
    assert_eq!(header(pets[0], "x-user"), None, "not forwarded to pets");
    assert_eq!(header(weather[0], "x-user"), Some("alice"));
    assert_eq!(header(weather[0], "authorization"), None, "no token to weather");
    assert_eq!(header(weather[0], "x-tenant"), None, "a header the client did not send is absent");
    assert_eq!(count.get(), 1);
    // Never to the LLM, never in the answer's steps.
    for text in out.llm_requests.iter().map(Value::to_string).chain([out.body_text()]) {
        for secret in ["tok-alice", "Bearer alice", SECRET] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    for call in &out.llm_calls {
        assert!(call.headers.iter().all(|(_, v)| !v.contains("alice")), "{:?}", call.headers);
    }
}

#[test]
fn the_cache_saves_the_second_exchange_and_keeps_users_apart() {
    let count = Rc::new(Cell::new(0));
    let cache = Rc::new(RefCell::new(Memory::default()));
    for (user, exchanges) in [("alice", 1), ("alice", 1), ("bob", 2), ("alice", 2), ("bob", 2)] {
        let mut h =
            harness(user, &count).llm([classic_call("List.", "listPets", json!({"limit": 1})), classic_final("Rex.")]);
        h.memory = Rc::clone(&cache);
        let out = h.run(&user_q());
        assert_eq!(out.reply.status, 200);
        let pets = out.tool_calls.iter().find(|c| c.cluster == PETS).unwrap();
        assert_eq!(header(pets, "authorization"), Some(format!("Bearer tok-{user}").as_str()));
        assert_eq!(count.get(), exchanges, "token service calls after {user}'s request");
    }
    assert_eq!(cache.borrow().tokens(), 2);
}

fn user_q() -> Value {
    user("List one pet.")
}

#[test]
fn a_refused_exchange_is_an_observation_and_the_api_is_not_called() {
    for who in [Some("bad"), None] {
        let count = Rc::new(Cell::new(0));
        let mut h = harness("bad", &count)
            .llm([classic_call("List.", "listPets", json!({"limit": 1})), classic_final("Not allowed.")]);
        if who.is_none() {
            h.client_headers.retain(|(k, _)| k != "authorization");
        }
        h.steps = true;
        let out = h.run(&user_q());
        assert_eq!(out.reply.status, 200);
        assert!(out.tool_calls.iter().all(|c| c.cluster != PETS), "pets called: {:?}", out.tool_calls);
        // Its own class in the steps and the metrics: not a call the schema refused.
        let tool = out.json()["api_agent_steps"].as_array().unwrap().iter().find(|s| s["type"] == "tool").cloned();
        assert_eq!(tool.unwrap()["status"], "unauthorized");
        assert!(out.last_message(2).contains("not authorized to use 'listPets'"), "{}", out.last_message(2));
        assert_eq!(count.get(), u32::from(who.is_some()));
        let want: &[(usize, &str)] = if who.is_some() { &[(0, "refused")] } else { &[] };
        assert_eq!(out.exchanges, want, "no subject header: no exchange to count");
    }
}

#[test]
fn a_failing_token_service_is_retried_then_reported() {
    let tries = Rc::new(Cell::new(0));
    let t = Rc::clone(&tries);
    let mut h = Harness::new(&two_apis())
        .llm([classic_call("List.", "listPets", json!({"limit": 1})), classic_final("Down.")])
        .tool(STS, move |_| {
            t.set(t.get() + 1);
            if t.get() == 1 {
                ToolReply::Http(503, "busy".into())
            } else {
                ToolReply::Fail(Failure::Timeout)
            }
        })
        .tool_json(PETS, "[]");
    h.client_headers = vec![("authorization".into(), "Bearer carol".into())];
    let out = h.run(&user_q());
    assert_eq!(tries.get(), 3, "1 + maxRetries");
    assert!(out.tool_calls.iter().all(|c| c.cluster != PETS));
    assert_eq!(out.exchanges, [(0, "failed")]);
    assert!(out.last_message(2).contains("not authorized"));
    // A retry that succeeds: the call goes on with the token.
    let tries = Rc::new(Cell::new(0));
    let t = Rc::clone(&tries);
    let mut h = Harness::new(&two_apis())
        .llm([classic_call("List.", "listPets", json!({"limit": 1})), classic_final("Rex.")])
        .tool(STS, move |_| {
            t.set(t.get() + 1);
            match t.get() {
                1 => ToolReply::Http(500, "oops".into()),
                _ => ToolReply::Http(200, r#"{"access_token":"tok-dave"}"#.into()),
            }
        })
        .tool_json(PETS, "[]");
    h.client_headers = vec![("authorization".into(), "Bearer dave".into())];
    let out = h.run(&user_q());
    let pets = out.tool_calls.iter().find(|c| c.cluster == PETS).unwrap();
    assert_eq!(header(pets, "authorization"), Some("Bearer tok-dave"));
    assert_eq!(out.exchanges, [(0, "exchanged")], "a retried exchange counts once");
}

#[test]
fn one_exchange_serves_every_call_of_the_request() {
    let count = Rc::new(Cell::new(0));
    let mut h = harness("erin", &count).llm([
        classic_call("One.", "listPets", json!({"limit": 1})),
        classic_call("Two.", "listPets", json!({"limit": 2})),
        classic_final("Done."),
    ]);
    let out = h.run(&user_q());
    let pets: Vec<_> = out.tool_calls.iter().filter(|c| c.cluster == PETS).collect();
    assert_eq!(pets.len(), 2);
    assert!(pets.iter().all(|c| header(c, "authorization") == Some("Bearer tok-erin")));
    assert_eq!(count.get(), 1);
}

mod cache {
    use super::*;

    fn key(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn tokens_expire() {
        let mut c = TokenCache::default();
        c.put(key(1), "t1".into(), 1_000);
        assert_eq!(c.get(&key(1), 999).as_deref(), Some("t1"));
        assert_eq!(c.get(&key(1), 1_000), None);
        assert!(c.is_empty(), "an expired token is dropped");
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut c = TokenCache::new(3);
        for n in 1..=3 {
            c.put(key(n), format!("t{n}"), u64::MAX);
        }
        assert!(c.get(&key(1), 0).is_some());
        c.put(key(4), "t4".into(), u64::MAX);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&key(2), 0), None, "2 was the least recently used");
        assert!(c.get(&key(1), 0).is_some() && c.get(&key(3), 0).is_some() && c.get(&key(4), 0).is_some());
        let mut full = TokenCache::default();
        for n in 0..2000u32 {
            let mut k = [0u8; 32];
            k[..4].copy_from_slice(&n.to_be_bytes());
            full.put(k, n.to_string(), u64::MAX);
        }
        assert_eq!(full.len(), api_agent::host::tokens::CAPACITY);
    }

    #[test]
    fn keys_tell_subjects_audiences_and_scopes_apart() {
        let cfg = Config::from_slice(two_apis().as_bytes()).unwrap();
        let x = cfg.apis[0].identity.token_exchange.clone().unwrap();
        let mut other = x.clone();
        other.audience = Some("other".into());
        let mut scoped = x.clone();
        scoped.scope = Some("pets:write".into());
        // Another token service (or another client at it), same audience and scope: never its token.
        let mut service = x.clone();
        service.upstream.cluster = "outbound|9000||other-sts.svc".into();
        let mut path = x.clone();
        path.path = "/other/token".into();
        let mut client = x.clone();
        client.client = Some(("other-client".into(), "s".into()));
        let keys = [
            x.cache_key("alice"),
            x.cache_key("bob"),
            other.cache_key("alice"),
            scoped.cache_key("alice"),
            service.cache_key("alice"),
            path.cache_key("alice"),
            client.cache_key("alice"),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(x.cache_key("alice"), x.cache_key("alice"));
        // Parts cannot run into each other: ("ab", "c") is not ("a", "bc").
        let mut a = x.clone();
        (a.audience, a.scope) = (Some("c".into()), None);
        let mut b = x.clone();
        (b.audience, b.scope) = (Some("bc".into()), None);
        assert_ne!(a.cache_key("ab"), b.cache_key("a"));
    }

    #[test]
    fn the_subject_is_the_header_without_bearer() {
        let cfg = Config::from_slice(two_apis().as_bytes()).unwrap();
        let x = cfg.apis[0].identity.token_exchange.clone().unwrap();
        let h = |v: &str| vec![("authorization".to_string(), v.to_string())];
        assert_eq!(x.subject(&h("Bearer abc")), Some("abc"));
        assert_eq!(x.subject(&h("bearer  abc")), Some("abc"));
        assert_eq!(x.subject(&h("abc")), Some("abc"));
        assert_eq!(x.subject(&h("Bearer ")), None);
        assert_eq!(x.subject(&[]), None);
    }
}

mod config_errors {
    use super::*;

    fn with(provider: Value) -> String {
        config(&[("pets.svc", "oai-petstore.yaml", provider)], json!({}))
    }

    fn error(text: &str) -> String {
        Config::from_slice(text.as_bytes()).map(|_| ()).unwrap_err().to_string()
    }

    fn mcp(server: Value) -> String {
        let mut s = json!({"serviceName": "mcp.svc", "servicePort": 8000, "path": "/mcp",
                           "toolsList": [{"name": "echo", "inputSchema": {"type": "object"}}]});
        s.as_object_mut().unwrap().extend(server.as_object().unwrap().clone());
        let mut cfg: Value = serde_json::from_str(&with(json!({}))).unwrap();
        cfg["apis"] = json!([{"mcpServer": s}]);
        cfg.to_string()
    }

    #[test]
    fn every_bad_input_names_its_field() {
        let cases = [
            (json!({"forwardHeaders": "x-user"}), "apis[0].apiProvider.forwardHeaders: must be a list"),
            (json!({"forwardHeaders": ["x user"]}), "apis[0].apiProvider.forwardHeaders[0]: 'x user' is not a valid"),
            (json!({"forwardHeaders": [":path"]}), "forwardHeaders[0]: ':path' is not a valid header name"),
            (json!({"forwardHeaders": ["Content-Length"]}), "forwardHeaders[0]: 'content-length' is set by the call"),
            (json!({"forwardHeaders": ["x-a", "X-A"]}), "forwardHeaders[1]: 'x-a' is listed twice"),
            (
                json!({"forwardHeaders": ["x-key"], "headers": {"X-Key": "k"}}),
                "apis[0].apiProvider.forwardHeaders[0]: 'x-key' is also set by 'apis[0].apiProvider.headers.x-key'",
            ),
            (
                json!({"forwardHeaders": ["authorization"], "apiKey": {"in": "header", "name": "k", "value": "v"}}),
                "forwardHeaders[0]: 'authorization' is also set by 'apis[0].apiProvider.apiKey'",
            ),
            (
                json!({"forwardHeaders": ["authorization"], "tokenExchange": exchange()}),
                "forwardHeaders[0]: 'authorization' is also set by 'apis[0].apiProvider.tokenExchange'",
            ),
            (
                json!({"headers": {"Authorization": "Basic x"}, "tokenExchange": exchange()}),
                "apis[0].apiProvider.tokenExchange: sets 'authorization' (the exchanged token), which \
                 'apis[0].apiProvider.headers.authorization' sets too",
            ),
        ];
        for (provider, expected) in cases {
            let e = error(&with(provider.clone()));
            assert!(e.contains(expected), "{provider}: {e}");
        }
    }

    #[test]
    fn token_exchange_keys_are_checked() {
        let bad = |change: Value| {
            let mut x = exchange();
            for (k, v) in change.as_object().unwrap() {
                if v.is_null() {
                    x.as_object_mut().unwrap().remove(k);
                } else {
                    x[k] = v.clone();
                }
            }
            error(&with(json!({"tokenExchange": x})))
        };
        let p = "apis[0].apiProvider.tokenExchange";
        assert_eq!(bad(json!({"path": null})), format!("{p}.path: required"));
        assert!(bad(json!({"path": "token"})).starts_with(&format!("{p}.path: must be a path")));
        assert!(bad(json!({"serviceName": null})).starts_with(&format!("{p}.serviceName: required")));
        assert!(bad(json!({"audience": null, "scope": null})).starts_with(&format!("{p}.audience: required")));
        assert!(bad(json!({"clientSecret": null})).starts_with(&format!("{p}.clientSecret: required with")));
        assert!(bad(json!({"clientId": null})).starts_with(&format!("{p}.clientId: required with")));
        assert!(bad(json!({"subjectHeader": "a b"})).starts_with(&format!("{p}.subjectHeader: 'a b' is not")));
        assert!(bad(json!({"audiance": "x"})).starts_with(&format!("{p}.audiance")));
        // The secret is in no error.
        assert!(!bad(json!({"subjectHeader": "a b"})).contains(SECRET));
        assert!(Config::from_slice(with(json!({"tokenExchange": exchange()})).as_bytes()).is_ok());
    }

    #[test]
    fn an_mcp_server_gets_a_token_exchanged_never_the_clients() {
        let e = error(&mcp(json!({"forwardHeaders": ["authorization"]})));
        assert!(e.starts_with("apis[0].mcpServer.forwardHeaders[0]: an MCP server must not get the client's own token"));
        assert!(e.contains("use 'tokenExchange'"), "{e}");
        let cfg =
            Config::from_slice(mcp(json!({"tokenExchange": exchange(), "forwardHeaders": ["x-user"]})).as_bytes())
                .unwrap();
        assert!(cfg.apis[0].identity.token_exchange.is_some());
        assert_eq!(cfg.identity_headers, ["x-user", "authorization"]);
    }

    #[test]
    fn the_client_secret_is_a_configured_secret() {
        let cfg = Config::from_slice(with(json!({"tokenExchange": exchange()})).as_bytes()).unwrap();
        assert!(cfg.secrets().contains(&SECRET.to_string()));
        let shown = format!("{:?}", cfg.apis[0]);
        assert!(!shown.contains(SECRET), "{shown}");
    }
}

/// A token service that issues a new token on every exchange (`tok-<n>`), counting them.
fn minting(count: Rc<Cell<u32>>) -> impl Fn(&api_agent::agent::Call) -> ToolReply {
    move |_| {
        count.set(count.get() + 1);
        ToolReply::Http(200, format!(r#"{{"access_token":"tok-{}","expires_in":600}}"#, count.get()))
    }
}

#[test]
fn a_token_the_api_refuses_is_dropped_and_exchanged_again_once() {
    // The API has revoked the first token: it answers 401 to it, 200 to any other.
    let pets = |c: &api_agent::agent::Call| match header(c, "authorization") {
        Some("Bearer tok-1") => ToolReply::Http(401, r#"{"error":"invalid_token"}"#.into()),
        _ => ToolReply::Http(200, r#"[{"id": 1}]"#.into()),
    };
    let count = Rc::new(Cell::new(0));
    let cache = Rc::new(RefCell::new(Memory::default()));
    let turns = || {
        [
            classic_call("One.", "listPets", json!({"limit": 1})),
            classic_call("Again.", "listPets", json!({"limit": 1})),
            classic_final("Done."),
        ]
    };
    let mut h = Harness::new(&two_apis()).tool(STS, minting(Rc::clone(&count))).tool(PETS, pets).llm(turns());
    h.client_headers = vec![("authorization".into(), "Bearer alice".into())];
    h.memory = Rc::clone(&cache);
    let out = h.run(&user_q());
    let used: Vec<_> =
        out.tool_calls.iter().filter(|c| c.cluster == PETS).map(|c| header(c, "authorization")).collect();
    assert_eq!(used, [Some("Bearer tok-1"), Some("Bearer tok-2")], "the refused token is exchanged again");
    assert_eq!(count.get(), 2);
    assert_eq!(out.exchanges, [(0, "exchanged"), (0, "dropped"), (0, "exchanged")], "api_agent_token_exchanges");
    // The next request gets the good token from the cache, not the refused one.
    let mut h = Harness::new(&two_apis()).tool(STS, minting(Rc::clone(&count))).tool(PETS, pets).llm(turns());
    h.client_headers = vec![("authorization".into(), "Bearer alice".into())];
    h.memory = Rc::clone(&cache);
    let out = h.run(&user_q());
    assert!(out
        .tool_calls
        .iter()
        .filter(|c| c.cluster == PETS)
        .all(|c| header(c, "authorization") == Some("Bearer tok-2")));
    assert_eq!(count.get(), 2, "no exchange: the cache had tok-2");
    assert_eq!(out.exchanges, [(0, "cached")], "counted once, for the first call that used it");
}

#[test]
fn an_api_that_keeps_refusing_costs_one_more_exchange_not_one_per_call() {
    let count = Rc::new(Cell::new(0));
    let turns = [
        classic_call("One.", "listPets", json!({"limit": 1})),
        classic_call("Two.", "listPets", json!({"limit": 2})),
        classic_call("Three.", "listPets", json!({"limit": 3})),
        classic_final("Done."),
    ];
    let mut h = Harness::new(&two_apis())
        .tool(STS, minting(Rc::clone(&count)))
        .tool(PETS, |_| ToolReply::Http(401, r#"{"error":"invalid_token"}"#.into()))
        .llm(turns);
    h.client_headers = vec![("authorization".into(), "Bearer alice".into())];
    let out = h.run(&user_q());
    assert_eq!(out.tool_calls.iter().filter(|c| c.cluster == PETS).count(), 3);
    assert_eq!(count.get(), 2, "one exchange, one more after the first 401, none after that");
}

#[test]
fn credentials_a_tool_echoes_never_reach_the_model() {
    // An API that echoes its request (as httpbin's /anything does): the exchanged token, the client's
    // own header, the LLM's key; weather echoes the forwarded `x-user`, which is not a credential.
    let echo = |c: &api_agent::agent::Call| {
        let auth = header(c, "authorization").unwrap_or("-").to_string();
        ToolReply::Http(
            200,
            format!(r#"{{"you sent": "{auth}", "client": "Bearer alice", "also": "alice", "llm": "sk-llm"}}"#),
        )
    };
    let count = Rc::new(Cell::new(0));
    let mut h = Harness::new(&two_apis_in("native"))
        .tool(STS, sts(Rc::clone(&count)))
        .tool(PETS, echo)
        .tool(WEATHER, |c| ToolReply::Http(200, format!(r#"{{"for": "{}"}}"#, header(c, "x-user").unwrap_or("-"))))
        .llm(both_calls());
    h.client_headers = vec![("authorization".into(), "Bearer alice".into()), ("x-user".into(), "carol".into())];
    let out = h.run(&user("Pets and weather?"));
    let seen = out.llm_requests[1].to_string();
    assert!(seen.contains(r#"you sent\": \"Bearer [redacted]"#), "{seen}");
    for secret in ["tok-alice", "Bearer alice", "\\\"alice\\\"", "sk-llm"] {
        assert!(!seen.contains(secret), "{secret} reached the model: {seen}");
    }
    assert!(seen.contains("carol"), "a forwarded identity that is not a credential stays: {seen}");
    let steps = out.body_text();
    assert!(!steps.contains("tok-alice") && !steps.contains("sk-llm"), "{steps}");
}

#[test]
fn a_credential_cut_by_the_observation_limit_is_masked_whole() {
    // The reply is cut to maxObservationBytes (64) in the middle of the echoed token: masked after the
    // cut, its first part would still reach the model.
    let cfg = config(
        &[("pets.svc", "oai-petstore.yaml", json!({"tokenExchange": exchange()}))],
        json!({"mode": "native", "llm": {"maxObservationBytes": 64}}),
    );
    let count = Rc::new(Cell::new(0));
    let mut h = Harness::new(&cfg)
        .tool(STS, sts(Rc::clone(&count)))
        .tool(PETS, |c| {
            let token = header(c, "authorization").unwrap_or("-").trim_start_matches("Bearer ").to_string();
            ToolReply::Http(200, format!("{}{token} and more", "x".repeat(50)))
        })
        .llm([native_calls(&[("a", "listPets", json!({"limit": 1}))]), text("Done.")]);
    h.client_headers = vec![("authorization".into(), "Bearer alice-with-a-rather-long-subject".into())];
    let out = h.run(&user("Pets?"));
    let seen = out.llm_requests[1].to_string();
    assert!(seen.contains("[redacted]") || seen.contains("[red"), "{seen}");
    assert!(!seen.contains("tok-al"), "a cut token reached the model: {seen}");
}

#[test]
fn the_model_cannot_fill_in_a_forwarded_header() {
    // An operation that declares the forwarded header as a parameter: the model's value never goes
    // out, whether or not the client sent one.
    let spec = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\nservers: [{url: 'http://users.local'}]\npaths:\n  /me:\n    get:\n      operationId: whoAmI\n      parameters:\n        - {name: x-user, in: header, required: false, schema: {type: string}}\n";
    let cfg = json!({
        "mode": "native",
        "llm": {"serviceName": "llm.svc", "servicePort": 443, "path": "/v1/chat/completions", "model": "m"},
        "apis": [{"apiProvider": {"serviceName": "users.svc", "servicePort": 8080, "forwardHeaders": ["x-user"]},
                  "api": spec}],
    })
    .to_string();
    for client in [Some("carol"), None] {
        let mut h = Harness::new(&cfg)
            .tool_json("outbound|8080||users.svc", r#"{"ok": true}"#)
            .llm([native_calls(&[("a", "whoAmI", json!({"x-user": "admin"}))]), text("Done.")]);
        h.client_headers = client.map(|c| vec![("x-user".to_string(), c.to_string())]).unwrap_or_default();
        let out = h.run(&user("Who am I?"));
        let sent: Vec<&str> =
            out.tool_calls[0].headers.iter().filter(|(k, _)| k == "x-user").map(|(_, v)| v.as_str()).collect();
        assert_eq!(sent, client.into_iter().collect::<Vec<_>>(), "the model's 'admin' went out");
    }
}

#[test]
fn a_lower_case_bearer_token_echoed_by_a_tool_is_masked_and_a_huge_expiry_is_bounded() {
    let count = Rc::new(Cell::new(0));
    let mut h = Harness::new(&two_apis_in("native"))
        .tool(STS, |_| ToolReply::Http(200, r#"{"access_token":"tok-z","expires_in":18446744073709551615}"#.into()))
        .tool(PETS, |_| ToolReply::Http(200, r#"{"echo": "alice-secret-token"}"#.into()))
        .tool(WEATHER, move |_| {
            count.set(count.get() + 1);
            ToolReply::Http(200, "{}".into())
        })
        .llm([native_calls(&[("a", "listPets", json!({"limit": 1}))]), text("Done.")]);
    h.client_headers = vec![("authorization".into(), "bearer alice-secret-token".into())];
    let out = h.run(&user("Pets?"));
    assert_eq!(out.reply.status, 200);
    let seen = out.llm_requests[1].to_string();
    assert!(!seen.contains("alice-secret-token"), "{seen}");
}
