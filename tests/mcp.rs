//! MCP servers as a tool source (`apis[].mcpServer` with a pinned `toolsList`): configuration errors,
//! the session handshake, and replies (JSON, SSE, `isError`, JSON-RPC errors, a lost session), with a
//! scripted server behind the native harness.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::{Call, Failure};
use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;

const MCP: &str = "outbound|9000||mcp.svc";

fn tools_list() -> Value {
    json!({"tools": [
        {"name": "get_forecast", "description": "Forecast for a city.",
         "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
                         "required": ["city"]}},
        {"name": "math.add", "description": "Adds.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
    ]})
}

fn mcp_entry(extra: Value) -> Value {
    let mut server = json!({"serviceName": "mcp.svc", "servicePort": 9000, "path": "/mcp", "toolsList": tools_list(),
                            "headers": {"x-team": "agents"}});
    if let (Value::Object(s), Value::Object(e)) = (&mut server, extra) {
        s.extend(e);
    }
    json!({"mcpServer": server})
}

fn mcp_config(entry: Value, mode: &str) -> String {
    json!({
        "mode": mode,
        "llm": {"serviceName": "llm.svc", "servicePort": 443, "path": "/v1/chat/completions", "maxIterations": 4},
        "apis": [entry],
    })
    .to_string()
}

fn error(cfg: &str) -> String {
    Config::from_slice(cfg.as_bytes()).unwrap_err().to_string()
}

/// What the scripted server saw: (JSON-RPC method, session header, JSON-RPC id).
type Seen = Rc<RefCell<Vec<(String, Option<String>, Value)>>>;

fn header<'a>(call: &'a Call, name: &str) -> Option<&'a str> {
    call.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// A stateful 2025 server: `initialize` opens session `s<n>`; a `tools/call` answers with
/// `result(params)`, or 404 while `lost` says the session is gone; one without a session (the
/// gateway's 2026-07-28 attempt) gets the TypeScript SDK's 400.
fn server(
    seen: Seen,
    lost: Rc<RefCell<u32>>,
    result: impl Fn(&Value) -> (Vec<(String, String)>, String) + 'static,
) -> impl Fn(&Call) -> ToolReply {
    move |call: &Call| {
        let msg: Value = serde_json::from_slice(call.body.as_deref().unwrap()).unwrap();
        let method = msg["method"].as_str().unwrap().to_string();
        let session = header(call, "mcp-session-id").map(str::to_string);
        seen.borrow_mut().push((method.clone(), session.clone(), msg["id"].clone()));
        assert_eq!(header(call, "accept"), Some("application/json, text/event-stream"));
        assert_eq!(header(call, "content-type"), Some("application/json"));
        match method.as_str() {
            "initialize" => {
                let n = seen.borrow().iter().filter(|(m, _, _)| m == "initialize").count();
                let body = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": "2025-06-18",
                                  "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}});
                ToolReply::HttpWith(200, vec![("mcp-session-id".into(), format!("s{n}"))], body.to_string())
            }
            "notifications/initialized" => ToolReply::Http(202, String::new()),
            "tools/call" if session.is_none() => ToolReply::Http(400, NO_SESSION.into()),
            "tools/call" if *lost.borrow() > 0 => {
                *lost.borrow_mut() -= 1;
                ToolReply::Http(404, "session not found".into())
            }
            "tools/call" => {
                let (headers, body) = result(&msg);
                ToolReply::HttpWith(200, headers, body.replace("\"ID\"", &msg["id"].to_string()))
            }
            other => panic!("unexpected method {other}"),
        }
    }
}

const NO_SESSION: &str =
    r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;

fn text_result(text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": "ID", "result": {"content": [{"type": "text", "text": text}], "isError": false}})
        .to_string()
}

fn run_native(
    entry: Value,
    calls: Vec<Turn>,
    result: impl Fn(&Value) -> (Vec<(String, String)>, String) + 'static,
    lost: u32,
) -> (Outcome, Seen) {
    let seen: Seen = Rc::default();
    let mut turns = calls;
    turns.push(Turn::Text("done".into()));
    let mut h = Harness::new(&mcp_config(entry, "native"))
        .llm(turns)
        .tool(MCP, server(Rc::clone(&seen), Rc::new(RefCell::new(lost)), result));
    let out = h.run(&user("Weather?"));
    (out, seen)
}

/// The content of the `tool` message answering the first call of LLM request `n`.
fn tool_message(out: &Outcome, n: usize) -> String {
    let msgs = out.llm_requests[n - 1]["messages"].as_array().unwrap();
    msgs.iter().find(|m| m["role"] == "tool").unwrap()["content"].as_str().unwrap().to_string()
}

#[test]
fn tools_from_a_pinned_tools_list_join_the_catalog() {
    let cfg = Config::from_slice(mcp_config(mcp_entry(json!({})), "native").as_bytes()).unwrap();
    let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["get_forecast", "math_add"]);
    assert!(cfg.native_tools_json.contains("\"name\":\"math_add\""));
    assert!(cfg.warnings.iter().any(|w| w.contains("MCP tool 'math.add' is named 'math_add'")), "{:?}", cfg.warnings);
    let cfg = Config::from_slice(mcp_config(mcp_entry(json!({"tools": ["math.add"]})), "react").as_bytes()).unwrap();
    assert_eq!(cfg.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["math_add"]);
    assert!(cfg.react_prompt.contains("math_add") && !cfg.react_prompt.contains("get_forecast"));
    // The list as JSON text, and as the bare tools array, load the same.
    let text = mcp_entry(json!({"toolsList": tools_list().to_string()}));
    assert_eq!(Config::from_slice(mcp_config(text, "react").as_bytes()).unwrap().tools.len(), 2);
    let bare = mcp_entry(json!({"toolsList": tools_list()["tools"].clone()}));
    assert_eq!(Config::from_slice(mcp_config(bare, "react").as_bytes()).unwrap().tools.len(), 2);
}

#[test]
fn mcp_configuration_mistakes_are_named() {
    let cases = [
        (
            json!({"mcpServer": {"cluster": "c", "path": "/mcp", "toolsList": tools_list()}, "api": "x"}),
            "apis[0].api: not allowed with 'mcpServer' (an entry is an OpenAPI API or an MCP server)",
        ),
        (json!({"mcpServer": {"cluster": "c", "toolsList": tools_list()}}), "apis[0].mcpServer.path: required"),
        (
            json!({"mcpServer": {"cluster": "c", "path": "mcp", "toolsList": tools_list()}}),
            "apis[0].mcpServer.path: must be a path starting with '/', found 'mcp'",
        ),
        (
            json!({"mcpServer": {"path": "/mcp", "toolsList": tools_list()}}),
            "apis[0].mcpServer.serviceName: required (or name the Envoy cluster in 'cluster')",
        ),
        (
            json!({"mcpServer": {"cluster": "c", "path": "/mcp", "toolsList": tools_list(), "tools": ["nope"]}}),
            "apis[0].mcpServer.toolsList: no tool 'nope' in this list (named in 'tools')",
        ),
        (
            json!({"mcpServer": {"cluster": "c", "path": "/mcp", "toolsList": {"tools": [{"name": "a"}]}}}),
            "apis[0].mcpServer.toolsList.tools[0].inputSchema: required (a JSON Schema object)",
        ),
        (
            json!({"mcpServer": {"cluster": "c", "path": "/mcp", "toolsList": {"tools": [{"inputSchema": {}}]}}}),
            "apis[0].mcpServer.toolsList.tools[0].name: required",
        ),
        (
            json!({"mcpServer": {"cluster": "c", "path": "/mcp", "toolsList": {"tools": [
            {"name": "a.b", "inputSchema": {}}, {"name": "a_b", "inputSchema": {}}]}}}),
            "apis[0].mcpServer.toolsList: tools 'a.b' and 'a_b' would both be named 'a_b'",
        ),
        (
            json!({"mcpServer": {"cluster": "c", "path": "/mcp", "toolsList": tools_list(), "retries": 1}}),
            "apis[0].mcpServer.retries: unknown key",
        ),
    ];
    for (entry, expected) in cases {
        let got = error(&mcp_config(entry, "react"));
        assert!(got.starts_with(expected), "expected '{expected}', got '{got}'");
    }
}

#[test]
fn tools_of_two_sources_with_one_name_are_refused_naming_both() {
    let second = json!({"mcpServer": {"cluster": "other", "path": "/mcp", "toolsList": {"tools": [
        {"name": "get_forecast", "inputSchema": {"type": "object"}}]}}});
    let cfg = json!({
        "llm": {"cluster": "llm", "path": "/v1/chat/completions"},
        "apis": [mcp_entry(json!({})), second],
    });
    assert_eq!(
        error(&cfg.to_string()),
        "apis[1].mcpServer: duplicate-tool-name: MCP tool 'get_forecast' of apis[1] is already defined by apis[0]"
    );
}

#[test]
fn the_first_call_opens_a_session_that_later_calls_reuse() {
    let calls = vec![
        native_calls(&[("c1", "get_forecast", json!({"city": "Jinan"}))]),
        native_calls(&[("c2", "math_add", json!({"a": 1, "b": 2}))]),
    ];
    let (out, seen) =
        run_native(mcp_entry(json!({})), calls, |m| (vec![], text_result(&format!("ran {}", m["params"]["name"]))), 0);
    let seen = seen.borrow();
    let methods: Vec<(&str, Option<&str>)> = seen.iter().map(|(m, s, _)| (m.as_str(), s.as_deref())).collect();
    assert_eq!(
        methods,
        [
            ("tools/call", None),
            ("initialize", None),
            ("notifications/initialized", Some("s1")),
            ("tools/call", Some("s1")),
            ("tools/call", Some("s1")),
        ]
    );
    // Requests carry distinct JSON-RPC ids; the notification carries none.
    assert!(seen[2].2.is_null());
    assert_ne!(seen[3].2, seen[4].2);
    assert_eq!(tool_message(&out, 2), "ran \"get_forecast\"");
    assert_eq!(out.tool_calls[3].path, "/mcp");
    assert_eq!(header(&out.tool_calls[3], "x-team"), Some("agents"));
    assert_eq!(header(&out.tool_calls[3], "mcp-protocol-version"), Some("2025-06-18"));
    let body: Value = serde_json::from_slice(out.tool_calls[4].body.as_deref().unwrap()).unwrap();
    assert_eq!(body["params"], json!({"name": "math.add", "arguments": {"a": 1, "b": 2}}));
    assert_eq!(out.answer(), "done");
    assert_eq!(out.reply.status, 200);
}

#[test]
fn sse_framed_replies_are_read_past_notifications() {
    let sse = |_: &Value| {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}});
        let result = json!({"jsonrpc": "2.0", "id": 9, "result": {"content": [
            {"type": "text", "text": "Sunny,"}, {"type": "text", "text": "21 °C"}]}});
        let body = format!("event: message\r\ndata: {progress}\r\n\r\nevent: message\ndata: {result}\n\n");
        (vec![("content-type".to_string(), "text/event-stream".to_string())], body)
    };
    let (out, _) = run_native(
        mcp_entry(json!({})),
        vec![native_calls(&[("c1", "get_forecast", json!({"city": "Jinan"}))])],
        sse,
        0,
    );
    assert_eq!(tool_message(&out, 2), "Sunny,\n21 °C");
}

#[test]
fn tool_errors_and_json_rpc_errors_are_told_to_the_model() {
    let is_error = |_: &Value| {
        let r = json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": true, "content": [{"type": "text", "text": "unknown city"}]}});
        (vec![], r.to_string())
    };
    let (out, _) = run_native(
        mcp_entry(json!({})),
        vec![native_calls(&[("c1", "get_forecast", json!({"city": "X"}))])],
        is_error,
        0,
    );
    assert_eq!(tool_message(&out, 2), "'get_forecast' reported an error: unknown city");
    let rpc_error = |_: &Value| {
        let r = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool: get_forecast"}});
        (vec![], r.to_string())
    };
    let (out, _) = run_native(
        mcp_entry(json!({})),
        vec![native_calls(&[("c1", "get_forecast", json!({"city": "X"}))])],
        rpc_error,
        0,
    );
    assert_eq!(tool_message(&out, 2), "'get_forecast' failed: MCP error -32602: Unknown tool: get_forecast");
}

#[test]
fn images_are_described_and_structured_content_is_json() {
    let mixed = |_: &Value| {
        let r = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [
            {"type": "image", "mimeType": "image/png", "data": "QUJDRA=="},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}],
            "structuredContent": {"temp": 21}}});
        (vec![], r.to_string())
    };
    let (out, _) =
        run_native(mcp_entry(json!({})), vec![native_calls(&[("c1", "get_forecast", json!({"city": "X"}))])], mixed, 0);
    assert_eq!(
        tool_message(&out, 2),
        "[image of type image/png, about 6 bytes, not shown]\n[resource link: file:///a.txt a.txt]\n{\"temp\":21}"
    );
}

#[test]
fn a_lost_session_is_opened_again_once() {
    let calls = vec![native_calls(&[("c1", "get_forecast", json!({"city": "Jinan"}))])];
    let (out, seen) = run_native(mcp_entry(json!({})), calls, |_| (vec![], text_result("ok")), 1);
    let methods: Vec<(String, Option<String>)> = seen.borrow().iter().map(|(m, s, _)| (m.clone(), s.clone())).collect();
    let expected = [
        ("tools/call", None),
        ("initialize", None),
        ("notifications/initialized", Some("s1")),
        ("tools/call", Some("s1")),
        ("initialize", None),
        ("notifications/initialized", Some("s2")),
        ("tools/call", Some("s2")),
    ];
    let expected: Vec<(String, Option<String>)> =
        expected.iter().map(|(m, s)| (m.to_string(), s.map(str::to_string))).collect();
    assert_eq!(methods, expected);
    assert_eq!(tool_message(&out, 2), "ok");
    // A second loss within the same call is the model's to hear about, not a loop.
    let (out, seen) = run_native(
        mcp_entry(json!({})),
        vec![native_calls(&[("c1", "get_forecast", json!({"city": "J"}))])],
        |_| (vec![], text_result("ok")),
        2,
    );
    assert_eq!(seen.borrow().len(), 7);
    assert_eq!(tool_message(&out, 2), "HTTP 404: 'get_forecast' failed: session not found");
}

#[test]
fn arguments_are_checked_against_the_input_schema_before_sending() {
    let calls = vec![native_calls(&[("c1", "get_forecast", json!({"city": "Jinan", "days": 0}))])];
    let (out, seen) = run_native(mcp_entry(json!({})), calls, |_| (vec![], text_result("ok")), 0);
    assert!(seen.borrow().is_empty());
    let msg = tool_message(&out, 2);
    assert!(msg.starts_with("Invalid arguments for 'get_forecast': at /days:"), "{msg}");
}

#[test]
fn a_failed_handshake_is_an_observation() {
    let cfg = mcp_config(mcp_entry(json!({})), "native");
    let mut h = Harness::new(&cfg)
        .llm([native_calls(&[("c1", "get_forecast", json!({"city": "J"}))]), Turn::Text("sorry".into())])
        .tool(MCP, |call: &Call| match rpc_method(call).as_str() {
            "tools/call" => ToolReply::Http(400, NO_SESSION.into()),
            _ => ToolReply::Http(500, "boom".into()),
        });
    let out = h.run(&user("Weather?"));
    assert_eq!(out.tool_calls.len(), 2);
    assert_eq!(
        tool_message(&out, 2),
        "The call to 'get_forecast' failed: no MCP session with its server (HTTP 500: boom)."
    );
    let mut h = Harness::new(&cfg)
        .llm([native_calls(&[("c1", "get_forecast", json!({"city": "J"}))]), Turn::Text("sorry".into())])
        .tool(MCP, |_| ToolReply::Fail(Failure::Broken("reset".into())));
    let out = h.run(&user("Weather?"));
    assert_eq!(tool_message(&out, 2), "The call to 'get_forecast' failed: reset.");
}

#[test]
fn react_mode_calls_mcp_tools_too() {
    let seen: Seen = Rc::default();
    let mut h = Harness::new(&mcp_config(mcp_entry(json!({})), "react"))
        .llm([classic_call("add", "math_add", json!({"a": 2, "b": 3})), classic_final("5")])
        .tool(MCP, server(Rc::clone(&seen), Rc::default(), |_| (vec![], text_result("5"))));
    let out = h.run(&user("2+3?"));
    assert_eq!(out.answer(), "5");
    assert!(out.last_message(2).contains("Observation: 5"), "{}", out.last_message(2));
    assert_eq!(seen.borrow().len(), 4);
}

mod shared_sessions {
    use super::*;
    use api_agent::agent::{Agent, Command, Event, Lesson};
    use api_agent::agent::{McpPeer, McpSessions};

    /// The MCP sessions the commands teach the instance (the last lesson), and the other commands.
    fn taught(cmds: Vec<Command>) -> (Option<McpSessions>, Vec<Command>) {
        let (mut learnt, mut rest) = (None, Vec::new());
        for c in cmds {
            match c {
                Command::Learn(Lesson::McpSessions(s)) => learnt = Some(s),
                other => rest.push(other),
            }
        }
        (learnt, rest)
    }

    fn sessions(api: usize, id: &str) -> McpSessions {
        let mut known = McpSessions::new();
        known.insert(api, McpPeer::Session { version: "2025-06-18", id: Some(id.to_string()) });
        known
    }

    fn agent(sessions: McpSessions) -> (Agent, Call) {
        let cfg = Rc::new(Config::from_slice(mcp_config(mcp_entry(json!({})), "native").as_bytes()).unwrap());
        let mut meta = request_meta("req7", START_MS, 1);
        meta.memory.mcp = sessions;
        let mut a = Agent::new(cfg, meta);
        let first = a.handle(Event::ClientRequest { body: user("Weather?").to_string().as_bytes() }, START_MS);
        assert!(matches!(first.as_slice(), [Command::Forward { .. }]), "{first:?}");
        let Turn::Message(m) = native_calls(&[("c1", "get_forecast", json!({"city": "J"}))]) else { unreachable!() };
        let cmds = a
            .handle(Event::UpstreamReply { status: 200, body: completion(m).as_bytes(), headers_sent: true }, START_MS);
        let (learnt, cmds) = taught(cmds);
        assert_eq!(learnt, None, "the known session is used: nothing new to keep");
        let [Command::Dispatch(call)] = cmds.as_slice() else { panic!("{cmds:?}") };
        let call = call.clone();
        (a, call)
    }

    fn rpc_of(call: &Call) -> Value {
        serde_json::from_slice(call.body.as_deref().unwrap()).unwrap()
    }

    #[test]
    fn a_known_session_is_used_without_a_handshake() {
        let (_agent, call) = agent(sessions(0, "shared"));
        let msg = rpc_of(&call);
        assert_eq!(msg["method"], "tools/call");
        assert_eq!(header(&call, "mcp-session-id"), Some("shared"));
        // Ids carry the request's id: requests that share a session never share an id.
        assert_eq!(msg["id"], format!("req7-{}", call.id.0));
    }

    #[test]
    fn a_gone_session_is_forgotten_and_the_new_one_kept() {
        let (mut a, call) = agent(sessions(0, "old"));
        let cmds = a.handle(Event::CallReply { id: call.id, status: 404, headers: &[], body: b"" }, START_MS + 5);
        let (learnt, cmds) = taught(cmds);
        let [Command::Dispatch(init)] = cmds.as_slice() else { panic!("{cmds:?}") };
        assert_eq!(rpc_of(init)["method"], "initialize");
        assert_eq!(header(init, "mcp-session-id"), None);
        let mut legacy = McpSessions::new();
        legacy.insert(0, McpPeer::Legacy);
        assert_eq!(learnt, Some(legacy), "the gone session is forgotten, the server's revision kept");
        let headers = [("mcp-session-id".to_string(), "new".to_string())];
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18"}}).to_string();
        let cmds = a.handle(
            Event::CallReply { id: init.id, status: 200, headers: &headers, body: ok.as_bytes() },
            START_MS + 9,
        );
        let (learnt, cmds) = taught(cmds);
        let [Command::Dispatch(note)] = cmds.as_slice() else { panic!("{cmds:?}") };
        assert_eq!(rpc_of(note)["method"], "notifications/initialized");
        assert_eq!(header(note, "mcp-session-id"), Some("new"));
        assert_eq!(learnt, Some(sessions(0, "new")), "the new session is kept");
    }
}

#[test]
fn policy_applies_to_mcp_tools() {
    let mut entry = mcp_entry(json!({}));
    entry["policy"] = json!({"deny": ["math.add"], "confirm": ["get_forecast"]});
    let cfg = Config::from_slice(mcp_config(entry.clone(), "native").as_bytes()).unwrap();
    assert_eq!(cfg.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["get_forecast"]);
    assert_eq!(cfg.confirm, ["get_forecast"]);
    // A confirm tool's call goes back to the client, never to the server.
    let seen: Seen = Rc::default();
    let mut h = Harness::new(&mcp_config(entry, "native"))
        .llm([native_calls(&[("c1", "get_forecast", json!({"city": "J"}))])])
        .tool(MCP, server(Rc::clone(&seen), Rc::default(), |_| (vec![], text_result("ok"))));
    let out = h.run(&user("Weather?"));
    assert_eq!(out.finish_reason(), "tool_calls");
    assert!(seen.borrow().is_empty());
    // Every MCP call is a POST: a read-only policy leaves none.
    let mut ro = mcp_entry(json!({}));
    ro["policy"] = json!({"methods": ["GET"]});
    assert_eq!(error(&mcp_config(ro, "react")), "apis[0].policy: leaves no tool of this API");
}

#[test]
fn a_400_that_names_the_session_also_reopens_it() {
    let seen: Seen = Rc::default();
    let lost = Rc::new(RefCell::new(1u32));
    let inner = server(Rc::clone(&seen), Rc::default(), |_| (vec![], text_result("ok")));
    // The TypeScript SDK's answer to an unknown session id.
    let ts_sdk = move |call: &Call| match header(call, "mcp-session-id") {
        Some(_) if *lost.borrow() > 0 && rpc_method(call) == "tools/call" => {
            *lost.borrow_mut() -= 1;
            let e = json!({"jsonrpc": "2.0", "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}});
            ToolReply::Http(400, e.to_string())
        }
        _ => inner(call),
    };
    let mut h = Harness::new(&mcp_config(mcp_entry(json!({})), "native"))
        .llm([native_calls(&[("c1", "get_forecast", json!({"city": "J"}))]), Turn::Text("done".into())])
        .tool(MCP, ts_sdk);
    let out = h.run(&user("Weather?"));
    assert_eq!(tool_message(&out, 2), "ok");
    assert_eq!(seen.borrow().iter().filter(|(m, _, _)| m == "initialize").count(), 2);
    // A 400 about something else is the model's to hear.
    let bad = |_: &Value| (vec![], String::new());
    let mut h = Harness::new(&mcp_config(mcp_entry(json!({})), "native"))
        .llm([native_calls(&[("c1", "get_forecast", json!({"city": "J"}))]), Turn::Text("done".into())])
        .tool(MCP, move |call: &Call| match rpc_method(call).as_str() {
            "tools/call" => ToolReply::Http(400, "bad city".into()),
            _ => server(Rc::default(), Rc::default(), bad)(call),
        });
    let out = h.run(&user("Weather?"));
    assert_eq!(tool_message(&out, 2), "HTTP 400: 'get_forecast' failed: bad city");
}

fn rpc_method(call: &Call) -> String {
    let msg: Value = serde_json::from_slice(call.body.as_deref().unwrap()).unwrap();
    msg["method"].as_str().unwrap().to_string()
}

#[test]
fn a_new_tools_list_rebuilds_the_catalog_in_configuration_order() {
    let openapi =
        json!({"apiProvider": {"cluster": "pets", "domain": "pets.svc"}, "api": spec_text("oai-petstore.yaml")});
    let mut entry = mcp_entry(json!({}));
    entry["policy"] = json!({"confirm": ["get_forecast"]});
    let cfg =
        json!({"mode": "native", "llm": {"cluster": "llm", "path": "/v1/chat/completions"}, "apis": [entry, openapi]});
    let cfg = Config::from_slice(cfg.to_string().as_bytes()).unwrap();
    let names = |c: &Config| c.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&cfg), ["get_forecast", "math_add", "listPets", "createPets", "showPetById"]);
    let list = json!({"tools": [
        {"name": "get_forecast", "inputSchema": {"type": "object"}},
        {"name": "get_alerts", "description": "Weather alerts.", "inputSchema": {"type": "object"}},
    ]});
    let next = cfg.with_mcp_tools(0, &list).unwrap();
    assert_eq!(names(&next), ["get_forecast", "get_alerts", "listPets", "createPets", "showPetById"]);
    assert!(next.native_tools_json.contains("get_alerts") && !next.native_tools_json.contains("math_add"));
    assert!(next.react_prompt.contains("get_alerts"));
    assert_eq!(next.confirm, ["get_forecast"]);
    // The configuration it came from is untouched: the host swaps in the new one, or keeps the old.
    assert!(cfg.native_tools_json.contains("math_add"));
    let clash =
        json!({"tools": [{"name": "get_forecast", "inputSchema": {}}, {"name": "listPets", "inputSchema": {}}]});
    assert_eq!(
        cfg.with_mcp_tools(0, &clash).unwrap_err().to_string(),
        "apis[1]: OpenAPI duplicate-tool-name: tool 'listPets' is already defined by apis[0]"
    );
    let no_confirmed = json!({"tools": [{"name": "other", "inputSchema": {}}]});
    assert_eq!(
        cfg.with_mcp_tools(0, &no_confirmed).unwrap_err().to_string(),
        "apis[0].policy.confirm[0]: no operation 'get_forecast' in this API"
    );
    assert!(cfg.with_mcp_tools(1, &list).is_err(), "apis[1] is not an MCP server");
}

#[test]
fn a_server_without_a_pinned_list_is_listed_by_the_host() {
    let mut entry = json!({"mcpServer": {"cluster": "mcp", "path": "/mcp", "tools": ["get_forecast"]},
                           "policy": {"confirm": ["get_forecast"]}});
    let cfg = Config::from_slice(mcp_config(entry.clone(), "native").as_bytes()).unwrap();
    assert!(cfg.tools.is_empty(), "no tool until the server is listed");
    let listed: Vec<(usize, &str)> = cfg.listed_servers().map(|s| (s.api, s.path.as_str())).collect();
    assert_eq!(listed, [(0, "/mcp")]);
    // Its allow-list and policy apply to the list when it comes.
    let next = cfg.with_mcp_tools(0, &tools_list()).unwrap();
    assert_eq!(next.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["get_forecast"]);
    assert_eq!(next.confirm, ["get_forecast"]);
    // A pinned list is not listed again.
    entry["mcpServer"]["toolsList"] = tools_list();
    let pinned = Config::from_slice(mcp_config(entry, "native").as_bytes()).unwrap();
    assert_eq!(pinned.listed_servers().count(), 0);
    assert_eq!(pinned.tools.len(), 1);
}

#[test]
fn a_plugin_swaps_one_configuration() {
    use api_agent::config::Plugin;
    let rule = json!({"_match_route_": ["r"], "llm": {"cluster": "llm", "path": "/p"},
                      "apis": [{"mcpServer": {"cluster": "mcp", "path": "/mcp"}}]});
    let text = json!({"llm": {"cluster": "llm", "path": "/p"}, "apis": [mcp_entry(json!({}))], "_rules_": [rule]});
    let plugin = Plugin::from_slice(text.to_string().as_bytes()).unwrap();
    let configs: Vec<_> = plugin.configs().cloned().collect();
    assert_eq!((configs[0].tools.len(), configs[1].tools.len()), (2, 0));
    let listed = Rc::new(configs[1].with_mcp_tools(0, &tools_list()).unwrap());
    let swapped = plugin.with_config(1, Rc::clone(&listed));
    let after: Vec<_> = swapped.configs().cloned().collect();
    assert!(Rc::ptr_eq(&after[0], &configs[0]), "the other configuration is the same one");
    assert!(Rc::ptr_eq(&after[1], &listed));
    assert_eq!(plugin.configs().nth(1).unwrap().tools.len(), 0, "the old plugin is untouched");
}
