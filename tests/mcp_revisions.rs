//! MCP revisions (docs/mcp.md): the gateway tries 2026-07-28 first and falls back to the 2025
//! handshake when a server answers as a 2025 server does, on the tool-call path and in discovery;
//! a listing's refresh follows the server's `ttlMs`, bounded and jittered.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Call;
use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;

const MCP: &str = "outbound|9000||mcp.svc";

fn config(mode: &str) -> String {
    let list = json!({"tools": [
        {"name": "math.add", "description": "Adds.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
        {"name": "météo", "description": "Weather.", "inputSchema": {"type": "object"}},
    ]});
    let server = json!({"serviceName": "mcp.svc", "servicePort": 9000, "path": "/mcp", "toolsList": list});
    json!({"mode": mode, "llm": {"serviceName": "llm.svc", "servicePort": 443, "path": "/v1/chat/completions"},
           "apis": [{"mcpServer": server}]})
    .to_string()
}

fn header<'a>(call: &'a Call, name: &str) -> Option<&'a str> {
    call.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn rpc(call: &Call) -> Value {
    serde_json::from_slice(call.body.as_deref().unwrap()).unwrap()
}

fn error(status: u16, id: &Value, code: i64, message: &str, data: Value) -> ToolReply {
    let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}});
    ToolReply::Http(status, e.to_string())
}

/// A server that speaks only 2026-07-28, as its specification has it: every request carries the
/// version in `_meta` and in `MCP-Protocol-Version`, `Mcp-Method` (and `Mcp-Name` for a call)
/// mirroring the body, else 400 with a modern error; no session. `seen`: each request's method.
fn modern_only(seen: Rc<RefCell<Vec<String>>>) -> impl Fn(&Call) -> ToolReply {
    move |call: &Call| {
        let msg = rpc(call);
        let method = msg["method"].as_str().unwrap().to_string();
        seen.borrow_mut().push(method.clone());
        let meta = &msg["params"]["_meta"];
        let version = meta["io.modelcontextprotocol/protocolVersion"].as_str();
        if version != Some("2026-07-28") {
            let data = json!({"supported": ["2026-07-28"], "requested": version});
            return error(400, &msg["id"], -32022, "Unsupported protocol version", data);
        }
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "api-agent");
        assert_eq!(header(call, "mcp-session-id"), None);
        let name = msg["params"]["name"].as_str().map(api_agent::tools::mcp::header_value);
        if header(call, "mcp-protocol-version") != version
            || header(call, "mcp-method") != Some(method.as_str())
            || header(call, "mcp-name").map(str::to_string) != name
        {
            return error(400, &msg["id"], -32020, "Header mismatch", Value::Null);
        }
        let result = json!({"resultType": "complete", "content": [{"type": "text", "text": format!("ran {}", msg["params"]["name"])}]});
        ToolReply::Http(200, json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string())
    }
}

fn harness(server: impl Fn(&Call) -> ToolReply + 'static, calls: &[(&str, &str, Value)]) -> Harness {
    Harness::new(&config("native")).llm([native_calls(calls), text("done")]).tool(MCP, server)
}

fn tool_messages(out: &Outcome) -> Vec<String> {
    let msgs = out.llm_requests[1]["messages"].as_array().unwrap();
    msgs.iter().filter(|m| m["role"] == "tool").map(|m| m["content"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_server_that_speaks_only_2026_07_28_serves_tools_without_a_handshake() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let calls = [("c1", "math_add", json!({"a": 1, "b": 2})), ("c2", "m_t_o", json!({}))];
    let mut h = harness(modern_only(Rc::clone(&seen)), &calls);
    let out = h.run(&user("Add"));
    assert_eq!(tool_messages(&out), ["ran \"math.add\"", "ran \"météo\""]);
    assert_eq!(*seen.borrow(), ["tools/call", "tools/call"], "no initialize");
    let weather = out.tool_calls.iter().find(|c| rpc(c)["params"]["name"] == "météo").unwrap();
    assert_eq!(header(weather, "mcp-name"), Some("=?base64?bcOpdMOpbw==?="), "a non-ASCII name is encoded");
    // The next request of the configuration knows the server's revision: still no handshake.
    let mut h = h.llm([native_calls(&calls[..1]), text("done")]);
    let out = h.run(&user("Again"));
    assert_eq!(tool_messages(&out), ["ran \"math.add\""]);
    assert_eq!(seen.borrow().len(), 3);
}

/// A 2025 server (the TypeScript SDK's answers): a request without a session is a 400 that is not a
/// modern error; `initialize` agrees on `version`.
/// Each request's method and session.
type Seen = Rc<RefCell<Vec<(String, Option<String>)>>>;

fn legacy(seen: Seen, version: &'static str) -> impl Fn(&Call) -> ToolReply {
    move |call: &Call| {
        let msg = rpc(call);
        let method = msg["method"].as_str().unwrap().to_string();
        let session = header(call, "mcp-session-id").map(str::to_string);
        seen.borrow_mut().push((method.clone(), session.clone()));
        match method.as_str() {
            "initialize" => {
                assert_eq!(msg["params"]["protocolVersion"], "2025-06-18");
                let result = json!({"protocolVersion": version, "capabilities": {"tools": {}}});
                let body = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string();
                ToolReply::HttpWith(200, vec![("mcp-session-id".into(), "s1".into())], body)
            }
            _ if session.is_none() => {
                error(400, &Value::Null, -32000, "Bad Request: No valid session ID provided", Value::Null)
            }
            "notifications/initialized" => ToolReply::Http(202, String::new()),
            _ => {
                assert_eq!(header(call, "mcp-protocol-version"), Some(version), "the agreed revision");
                assert!(msg["params"].get("_meta").is_none() && header(call, "mcp-method").is_none());
                let result = json!({"content": [{"type": "text", "text": "ok"}]});
                ToolReply::Http(200, json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string())
            }
        }
    }
}

#[test]
fn a_2025_server_gets_the_handshake_after_one_refused_attempt_and_keeps_its_revision() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let calls = [("c1", "math_add", json!({"a": 1, "b": 2}))];
    let mut h = harness(legacy(Rc::clone(&seen), "2025-03-26"), &calls);
    assert_eq!(tool_messages(&h.run(&user("Add"))), ["ok"]);
    let s1 = Some("s1".to_string());
    let methods = |from: usize| seen.borrow()[from..].to_vec();
    let expected = [
        ("tools/call", None),
        ("initialize", None),
        ("notifications/initialized", s1.clone()),
        ("tools/call", s1.clone()),
    ];
    assert_eq!(methods(0), expected.map(|(m, s)| (m.to_string(), s)));
    // The next request uses the session: no second attempt in 2026-07-28.
    let mut h = h.llm([native_calls(&calls), text("done")]);
    assert_eq!(tool_messages(&h.run(&user("Again"))), ["ok"]);
    assert_eq!(methods(4), [("tools/call".to_string(), s1)]);
}

#[test]
fn a_modern_error_is_the_tools_not_a_reason_to_fall_back() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&seen);
    let server = move |call: &Call| {
        log.borrow_mut().push(rpc(call)["method"].as_str().unwrap().to_string());
        error(
            400,
            &rpc(call)["id"],
            -32021,
            "Missing required client capability",
            json!({"requiredCapabilities": {"elicitation": {}}}),
        )
    };
    let out = harness(server, &[("c1", "math_add", json!({}))]).run(&user("Add"));
    assert_eq!(*seen.borrow(), ["tools/call"]);
    assert!(tool_messages(&out)[0].contains("-32021"), "{:?}", tool_messages(&out));
}

#[test]
fn a_session_server_that_now_speaks_only_2026_07_28_gets_the_call_again_in_it() {
    use api_agent::agent::{Agent, Command, Event, Lesson, McpPeer, McpSessions};
    let cfg = Rc::new(Config::from_slice(config("native").as_bytes()).unwrap());
    let mut meta = request_meta("req1", START_MS, 1);
    meta.memory.mcp.insert(0, McpPeer::Session { version: "2025-06-18", id: Some("old".into()) });
    let mut a = Agent::new(cfg, meta);
    a.handle(Event::ClientRequest { body: user("Add").to_string().as_bytes() }, START_MS);
    let Turn::Message(m) = native_calls(&[("c1", "math_add", json!({"a": 1}))]) else { unreachable!() };
    let cmds =
        a.handle(Event::UpstreamReply { status: 200, body: completion(m).as_bytes(), headers_sent: true }, START_MS);
    let [Command::Dispatch(call)] = cmds.as_slice() else { panic!("{cmds:?}") };
    assert_eq!(
        (header(call, "mcp-session-id"), header(call, "mcp-protocol-version")),
        (Some("old"), Some("2025-06-18"))
    );
    let refused = json!({"jsonrpc": "2.0", "id": rpc(call)["id"], "error": {"code": -32022, "message": "Unsupported protocol version",
                         "data": {"supported": ["2026-07-28"], "requested": "2025-06-18"}}});
    let cmds = a.handle(
        Event::CallReply { id: call.id, status: 400, headers: &[], body: refused.to_string().as_bytes() },
        START_MS + 5,
    );
    let mut modern = McpSessions::new();
    modern.insert(0, McpPeer::Modern);
    assert!(cmds.contains(&Command::Learn(Lesson::McpSessions(modern))), "{cmds:?}");
    let again = cmds.iter().find_map(|c| if let Command::Dispatch(c) = c { Some(c) } else { None }).unwrap();
    assert_eq!((header(again, "mcp-session-id"), header(again, "mcp-protocol-version")), (None, Some("2026-07-28")));
    assert_eq!(rpc(again)["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
}

#[test]
fn a_result_that_asks_for_input_is_told_to_the_model() {
    let server = |call: &Call| {
        let result = json!({"resultType": "input_required", "inputRequests": {"e1": {"method": "elicitation/create"}}});
        ToolReply::Http(200, json!({"jsonrpc": "2.0", "id": rpc(call)["id"], "result": result}).to_string())
    };
    let out = harness(server, &[("c1", "math_add", json!({}))]).run(&user("Add"));
    assert_eq!(
        tool_messages(&out),
        ["'math_add' asked for input the gateway cannot give (sampling, elicitation or roots)."]
    );
}

#[path = "mcp_revisions/listing.rs"]
mod listing;
