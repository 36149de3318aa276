//! Discovery (`tools::mcp::discovery`): the revision negotiated per server, and the next listing due
//! when the list stops being fresh.

use super::*;
use api_agent::tools::mcp::discovery::{Discovery, Outcome, MAX_REFRESH_MS, MIN_REFRESH_MS};
use api_agent::tools::mcp::Revision;
use api_agent::tools::Request;

fn api() -> api_agent::config::Api {
    Config::from_slice(config("react").as_bytes()).unwrap().apis[0].clone()
}

fn sent(o: Outcome) -> Request {
    match o {
        Outcome::Send(r) => r,
        other => panic!("{other:?}"),
    }
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(r.body.as_deref().unwrap()).unwrap()
}

fn head<'a>(r: &'a Request, name: &str) -> Option<&'a str> {
    r.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn page(tools: Value, more: Value) -> Vec<u8> {
    let mut result = json!({"resultType": "complete", "tools": tools});
    result.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
    json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string().into_bytes()
}

const NO_SESSION: &[u8] =
    br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;

#[test]
fn a_modern_server_is_listed_without_a_handshake_and_again_when_its_list_is_stale() {
    let api = api();
    let mut d = Discovery::new(0, "/mcp", 300_000, 1000);
    let first = d.start(&api, 1000).unwrap();
    let msg = body(&first);
    assert_eq!(msg["method"], "tools/list");
    assert_eq!(msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(
        (head(&first, "mcp-protocol-version"), head(&first, "mcp-method")),
        (Some("2026-07-28"), Some("tools/list"))
    );
    assert_eq!(head(&first, "mcp-session-id"), None);
    assert!(d.start(&api, 1001).is_none(), "one listing at a time");
    let p1 = page(json!([{"name": "a"}]), json!({"nextCursor": "p2", "ttlMs": 60_000, "cacheScope": "public"}));
    let second = sent(d.on_reply(&api, 200, &[], &p1, 1010, 0));
    assert_eq!(body(&second)["params"]["cursor"], "p2");
    assert_ne!(body(&first)["id"], body(&second)["id"]);
    // The list is as fresh as its least fresh page, and private if one page is.
    let p2 = page(json!([{"name": "b"}]), json!({"ttlMs": 30_000, "cacheScope": "private"}));
    let listed = d.on_reply(&api, 200, &[], &p2, 2000, 0);
    let expected = json!({"tools": [{"name": "a"}, {"name": "b"}], "ttlMs": 30_000, "cacheScope": "private"});
    assert_eq!(listed, Outcome::Listed(expected));
    assert_eq!((d.next_at, d.revision()), (32_000, Some(Revision::Modern)));
    let again = d.start(&api, 32_000).unwrap();
    assert_eq!(head(&again, "mcp-protocol-version"), Some("2026-07-28"));
}

/// The wait until the next listing after a one-page list with `more`, given `random`.
fn refresh_after(more: Value, random: u64) -> u64 {
    let api = api();
    let mut d = Discovery::new(0, "/mcp", 300_000, 0);
    d.start(&api, 0).unwrap();
    assert!(matches!(d.on_reply(&api, 200, &[], &page(json!([]), more), 0, random), Outcome::Listed(_)));
    d.next_at
}

#[test]
fn the_refresh_follows_ttl_ms_within_bounds_less_a_jitter() {
    assert_eq!(refresh_after(json!({"ttlMs": 45_000}), 0), 45_000);
    assert_eq!(refresh_after(json!({"ttlMs": 0}), 0), MIN_REFRESH_MS, "0 is stale at once: bounded below");
    assert_eq!(refresh_after(json!({"ttlMs": -5}), 0), MIN_REFRESH_MS, "a negative TTL counts as 0");
    assert_eq!(refresh_after(json!({"ttlMs": 86_400_000u64}), 0), MAX_REFRESH_MS);
    assert_eq!(refresh_after(json!({}), 0), 300_000, "no TTL: the interval");
    // The jitter takes up to a tenth off, as the host's random number says.
    let waits: Vec<u64> =
        [1, 2, 4_500, 4_501, u64::MAX].iter().map(|r| refresh_after(json!({"ttlMs": 45_000}), *r)).collect();
    assert_eq!(waits, [44_999, 44_998, 40_500, 45_000, 45_000 - u64::MAX % 4_501]);
}

#[test]
fn a_2025_server_is_listed_in_a_session_and_its_revision_is_asked_first_next_time() {
    let api = api();
    let mut d = Discovery::new(0, "/mcp", 60_000, 0);
    d.start(&api, 0).unwrap();
    let init = sent(d.on_reply(&api, 400, &[], NO_SESSION, 10, 0));
    assert_eq!((body(&init)["method"].as_str(), head(&init, "mcp-session-id")), (Some("initialize"), None));
    let agreed = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-03-26"}}).to_string();
    let headers = [("mcp-session-id".to_string(), "d1".to_string())];
    let note = sent(d.on_reply(&api, 200, &headers, agreed.as_bytes(), 20, 0));
    assert_eq!(
        (body(&note)["method"].as_str(), head(&note, "mcp-session-id")),
        (Some("notifications/initialized"), Some("d1"))
    );
    let list = sent(d.on_reply(&api, 202, &[], b"", 30, 0));
    assert_eq!((body(&list)["method"].as_str(), head(&list, "mcp-session-id")), (Some("tools/list"), Some("d1")));
    assert_eq!((head(&list, "mcp-protocol-version"), head(&list, "mcp-method")), (Some("2025-03-26"), None));
    assert!(body(&list)["params"].get("_meta").is_none());
    let legacy_page = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "a"}]}}).to_string();
    assert_eq!(
        d.on_reply(&api, 200, &[], legacy_page.as_bytes(), 40, 0),
        Outcome::Listed(json!({"tools": [{"name": "a"}]}))
    );
    assert_eq!((d.next_at, d.revision()), (60_040, Some(Revision::Legacy("2025-03-26"))));
    let next = d.start(&api, 60_040).unwrap();
    assert_eq!(body(&next)["method"], "initialize", "the handshake at once");
    // A server the gateway cannot speak with fails the listing, naming both sides' versions.
    let too_old = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2024-11-05"}}).to_string();
    assert_eq!(
        d.on_reply(&api, 200, &[], too_old.as_bytes(), 60_050, 0),
        Outcome::Failed(
            "the server answered MCP 2024-11-05; the gateway speaks 2025-11-25, 2025-06-18, 2025-03-26".into()
        )
    );
    assert_eq!(d.revision(), None, "a failure asks for the revision again");
}

#[test]
fn modern_errors_are_failures_and_other_versions_are_chosen_from() {
    let api = api();
    let reply = |status: u16, error: Value| {
        let mut d = Discovery::new(0, "/mcp", 60_000, 0);
        d.start(&api, 0).unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 1, "error": error}).to_string();
        d.on_reply(&api, status, &[], body.as_bytes(), 0, 0)
    };
    let versions =
        |v: Value| json!({"code": -32022, "message": "Unsupported protocol version", "data": {"supported": v}});
    assert_eq!(body(&sent(reply(400, versions(json!(["2025-06-18"])))))["method"], "initialize");
    assert_eq!(
        reply(400, versions(json!(["2027-01-01"]))),
        Outcome::Failed(
            "the server speaks MCP 2027-01-01; the gateway speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26"
                .into()
        )
    );
    let mismatch = reply(400, json!({"code": -32020, "message": "Header mismatch"}));
    assert_eq!(
        mismatch,
        Outcome::Failed(
            "HTTP 400: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32020,\"message\":\"Header mismatch\"}}"
                .into()
        )
    );
    let no_tools = reply(404, json!({"code": -32601, "message": "Method not found"}));
    assert!(matches!(no_tools, Outcome::Failed(_)), "a modern server without tools: {no_tools:?}");
    assert_eq!(
        reply(500, json!({"code": -32603, "message": "down"})),
        Outcome::Failed(
            "HTTP 500: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"down\"}}".into()
        )
    );
}

#[test]
fn failures_back_off_up_to_the_interval() {
    let api = api();
    let mut d = Discovery::new(0, "/mcp", 5000, 0);
    let mut now = 0;
    let mut waits = Vec::new();
    for _ in 0..5 {
        d.start(&api, now).unwrap();
        assert_eq!(d.on_reply(&api, 500, &[], b"down", now, 0), Outcome::Failed("HTTP 500: down".into()));
        waits.push(d.next_at - now);
        now = d.next_at;
    }
    assert_eq!(waits, [1000, 2000, 4000, 5000, 5000]);
    d.start(&api, now).unwrap();
    assert_eq!(d.on_failure("reset", now), Outcome::Failed("reset".into()));
    // A JSON-RPC error in a 2025 session's list is a failure too.
    let mut d = Discovery::new(0, "/mcp", 5000, 0);
    d.start(&api, 0).unwrap();
    sent(d.on_reply(&api, 400, &[], NO_SESSION, 0, 0));
    let agreed = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18"}}).to_string();
    sent(d.on_reply(&api, 200, &[], agreed.as_bytes(), 0, 0));
    sent(d.on_reply(&api, 202, &[], b"", 0, 0));
    let e = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}});
    assert_eq!(
        d.on_reply(&api, 200, &[], e.to_string().as_bytes(), 0, 0),
        Outcome::Failed("MCP error -32601: Method not found".into())
    );
}
