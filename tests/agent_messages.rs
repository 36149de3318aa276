//! Anthropic Messages in the harness: the request translated into the chat-completions conversation
//! and the answer written back (golden, both ways), the event stream (whole and live), client tools,
//! errors in Anthropic's shape, and the malformed bodies refused with a 400 naming the field.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Api;
use api_agent::anthropic::translate;
use common::front::*;
use common::*;
use serde_json::{json, Value};

fn harness(mode: &str, extra: Value, turns: Vec<Turn>) -> Harness {
    front_harness(Api::Messages, mode, extra, turns)
}

/// A Messages body with the required fields around `messages`.
fn ask(question: &str) -> Value {
    json!({"model": "claude-test", "max_tokens": 1024, "messages": [{"role": "user", "content": question}]})
}

fn with(mut body: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    body
}

#[test]
fn translation_of_a_full_request_is_golden() {
    let body = json!({
        "model": "claude-test", "max_tokens": 2048,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Find pet 7."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should look.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": 7}},
                {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {"id": 8}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Rex"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                    "content": [{"type": "text", "text": "no pet 8"}]},
                {"type": "text", "text": "And now?"}]}
        ],
        "tools": [{"name": "lookup", "description": "Find a pet", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "lookup", "disable_parallel_tool_use": true},
        "temperature": 0.2, "top_p": 0.9, "top_k": 40, "stop_sequences": ["END"],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "u-1"}, "service_tier": "auto", "stream": true
    });
    let (chat, echo) = translate(body.to_string().as_bytes()).unwrap();
    let raw = serde_json::to_string_pretty(&Value::Object(chat.raw.clone())).unwrap();
    golden("messages_translation.json", &(raw + "\n"));
    assert!(chat.stream);
    assert_eq!(echo.model, "claude-test");
}

#[test]
fn thinking_budgets_are_reasoning_efforts() {
    for (budget, effort) in [(1024, Some("low")), (4096, Some("medium")), (16384, Some("high"))] {
        let body =
            with(ask("q"), json!({"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": budget}}));
        let (chat, _) = translate(body.to_string().as_bytes()).unwrap();
        assert_eq!(chat.raw.get("reasoning_effort").and_then(Value::as_str), effort, "{budget}");
    }
    for thinking in [json!({"type": "disabled"}), json!({"type": "adaptive"})] {
        let (chat, _) = translate(with(ask("q"), json!({"thinking": thinking})).to_string().as_bytes()).unwrap();
        assert!(chat.raw.get("reasoning_effort").is_none());
    }
}

#[test]
fn the_answer_is_a_golden_message_with_thinking_and_usage_summed() {
    let mut turn = serde_json::from_str::<Value>(&completion(
        json!({"role": "assistant", "content": "Pet 7 is Rex.", "reasoning_content": "The tool said Rex."}),
    ))
    .unwrap();
    turn["model"] = json!("mock-llm");
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), Turn::Raw(200, turn.to_string())];
    let mut h = harness("native", json!({}), turns);
    let out =
        h.run(&with(ask("Who is pet 7?"), json!({"system": "Answer in one line.", "metadata": {"user_id": "u1"}})));
    assert_eq!(out.reply.status, 200, "{}", out.body_text());
    assert_eq!(out.reply.content_type, "application/json");
    let first = &out.llm_requests[0];
    assert!(first["messages"][0]["content"].as_str().unwrap().starts_with("Answer in one line."));
    assert_eq!(first["user"], "u1");
    assert_eq!(first["max_tokens"], 1024);
    assert!(first.get("metadata").is_none() && first.get("system").is_none());
    let pretty = serde_json::to_string_pretty(&out.json()).unwrap();
    golden("messages_answer.json", &(pretty + "\n"));
    let m = out.json();
    assert_eq!((m["usage"]["input_tokens"].as_u64(), m["usage"]["output_tokens"].as_u64()), (Some(20), Some(10)));
}

#[test]
fn react_mode_answers_a_string_question() {
    let turns = vec![classic_call("Look it up.", "showPetById", json!({"petId": "7"})), classic_final("Pet 7 is Rex.")];
    let out = harness("react", json!({}), turns).run(&ask("Who is pet 7?"));
    let m = out.json();
    assert_eq!(m["id"], "msg_test1");
    assert_eq!(m["type"], "message");
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["content"], json!([{"type": "text", "text": "Pet 7 is Rex."}]));
    assert_eq!(m["stop_reason"], "end_turn");
    assert_eq!(m["stop_sequence"], Value::Null);
}

#[test]
fn client_tools_round_trip_as_tool_use_and_tool_result() {
    let tool =
        json!({"name": "get_time", "description": "The time", "input_schema": {"type": "object", "properties": {}}});
    let turns = vec![native_calls(&[("call_9", "get_time", json!({"tz": "UTC"}))])];
    let out = harness("native", json!({}), turns).run(&with(ask("What time is it?"), json!({"tools": [tool]})));
    let m = out.json();
    assert_eq!(m["stop_reason"], "tool_use", "{m}");
    assert_eq!(m["content"], json!([{"type": "tool_use", "id": "call_9", "name": "get_time", "input": {"tz": "UTC"}}]));
    let sent = &out.llm_requests[0]["tools"];
    let names: Vec<&str> = sent.as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"get_time") && names.contains(&"showPetById"), "{names:?}");
    // The client runs the tool and sends the whole conversation back.
    let body = json!({"model": "m", "max_tokens": 100, "tools": [tool], "messages": [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": m["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_9", "content": "12:00"}]}]});
    let out = harness("native", json!({}), vec![answer("It is noon.")]).run(&body);
    let msgs = &out.llm_requests[0]["messages"];
    let n = msgs.as_array().unwrap().len();
    assert_eq!(msgs[n - 2]["tool_calls"][0]["id"], "call_9");
    assert_eq!(msgs[n - 2]["tool_calls"][0]["function"]["arguments"], r#"{"tz":"UTC"}"#);
    assert_eq!(msgs[n - 1], json!({"role": "tool", "tool_call_id": "call_9", "content": "12:00"}));
    assert_eq!(out.json()["content"][0]["text"], "It is noon.");
}

#[test]
fn the_iteration_limit_is_max_tokens() {
    let call = || native_calls(&[("a", "showPetById", json!({"petId": "7"}))]);
    let out = harness("native", json!({"llm": {"maxIterations": 2}}), vec![call(), call(), call()]).run(&ask("Loop?"));
    assert_eq!(out.json()["stop_reason"], "max_tokens");
}

const EVENT_ORDER: [&str; 7] = [
    "message_start",
    "ping",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
];

#[test]
fn a_stream_follows_the_messages_event_grammar_golden() {
    let turn = completion(json!({"role": "assistant", "content": "Rex.", "reasoning_content": "Hm."}));
    let out = harness("native", json!({}), vec![Turn::Raw(200, turn)]).run(&with(ask("Who?"), json!({"stream": true})));
    assert_eq!(out.reply.content_type, "text/event-stream");
    golden("messages_stream.txt", &String::from_utf8(out.reply.body.clone()).unwrap());
    let ev = events(&out.reply.body);
    let mut kinds = types(&ev);
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(ev[3]["delta"], json!({"type": "thinking_delta", "thinking": "Hm."}));
    assert_eq!(ev[4]["delta"], json!({"type": "signature_delta", "signature": ""}));
    assert_eq!(ev[7]["delta"], json!({"type": "text_delta", "text": "Rex."}));
    let delta = &ev[9];
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"], json!({"input_tokens": 10, "output_tokens": 5}));
}

#[test]
fn a_streamed_client_tool_call_is_a_tool_use_block_with_input_json() {
    let tool = json!({"name": "get_time", "input_schema": {"type": "object"}});
    let turns = vec![native_calls(&[("call_9", "get_time", json!({"tz": "UTC"}))])];
    let out = harness("native", json!({}), turns).run(&with(ask("Time?"), json!({"tools": [tool], "stream": true})));
    let ev = events(&out.reply.body);
    let start = ev.iter().find(|e| e["type"] == "content_block_start").unwrap();
    assert_eq!(start["content_block"], json!({"type": "tool_use", "id": "call_9", "name": "get_time", "input": {}}));
    let delta = ev.iter().find(|e| e["type"] == "content_block_delta").unwrap();
    assert_eq!(delta["delta"], json!({"type": "input_json_delta", "partial_json": r#"{"tz":"UTC"}"#}));
    assert_eq!(ev.iter().find(|e| e["type"] == "message_delta").unwrap()["delta"]["stop_reason"], "tool_use");
}

#[test]
fn a_live_stream_relays_text_in_messages_events() {
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), answer("Rex is a good dog.")];
    let mut h = harness("native", json!({}), turns);
    h.live = true;
    let out = h.run(&with(ask("Who is pet 7?"), json!({"stream": true})));
    assert_eq!(out.opened, Some(200));
    let ev = events(&live_and_end(&out));
    let mut kinds = types(&ev);
    kinds.dedup();
    assert_eq!(kinds, EVENT_ORDER);
    let text: String = ev.iter().filter_map(|e| e["delta"]["text"].as_str()).collect();
    assert_eq!(text, "Rex is a good dog.");
    let live = events(&out.sent.iter().flat_map(|(_, b)| b.clone()).collect::<Vec<u8>>());
    assert!(live.iter().any(|e| e["delta"]["type"] == "text_delta"), "text went out before the end");
}

#[test]
fn a_late_failure_is_an_error_event() {
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), Turn::Raw(500, "{}".into())];
    let mut h = harness("native", json!({"llm": {"maxRetries": 0}}), turns);
    h.live = true;
    let out = h.run(&with(ask("Who is pet 7?"), json!({"stream": true})));
    let ev = events(&live_and_end(&out));
    assert_eq!(ev[0]["type"], "message_start");
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["error"]["type"], "api_error");
    assert!(last["error"]["message"].as_str().unwrap().contains("500"), "{last}");
}

#[test]
fn errors_are_in_anthropics_shape() {
    // The gateway's own: a malformed body.
    let out = harness("native", json!({}), vec![]).run(&json!({"max_tokens": 5}));
    assert_eq!(out.reply.status, 400);
    assert_eq!(
        out.json(),
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "'messages' is required"}})
    );
    // The provider's, to the first turn: its status and message, Anthropic's error type.
    for (status, kind) in
        [(429, "rate_limit_error"), (401, "authentication_error"), (503, "overloaded_error"), (500, "api_error")]
    {
        let body = json!({"error": {"message": "slow down", "type": "x"}}).to_string();
        let mut h =
            harness("native", json!({"loop": "request", "llm": {"maxRetries": 0}}), vec![Turn::Raw(status, body)]);
        let out = h.run(&ask("Who?"));
        assert_eq!(out.reply.status, status, "{}", out.body_text());
        let e = out.json();
        assert_eq!((e["type"].as_str(), e["error"]["type"].as_str()), (Some("error"), Some(kind)), "{e}");
        assert!(e["error"]["message"].as_str().unwrap().contains("slow down"), "{e}");
    }
    // A failure of the loop after the first turn, before anything was sent.
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), Turn::Raw(500, "{}".into())];
    let out = harness("native", json!({"loop": "request", "llm": {"maxRetries": 0}}), turns).run(&ask("Who?"));
    assert!(out.reply.status >= 500, "{}", out.body_text());
    assert_eq!(out.json()["type"], "error");
    assert_eq!(out.json()["error"]["type"], "api_error");
}

#[test]
fn messages_path_is_validated_at_load() {
    let ok = front_path_is_validated("messages", "/agent/messages");
    assert_eq!(ok.messages_path.as_deref(), Some("/agent/messages"));
}

/// A malformed body is a 400 in Anthropic's shape whose message names the field, before anything
/// reaches the model.
#[test]
fn malformed_bodies_are_400s_naming_the_field() {
    let long_name = "t".repeat(10_000);
    let q = json!({"role": "user", "content": "q"});
    let call =
        |id: &str| json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "f", "input": {}}]});
    let result =
        |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "x"}]});
    let tool = |t: Value| json!({"tools": [t]});
    let cases = [
        (json!({"model": 5}), "'model' must be a string"),
        (json!({"model": ""}), "'model' must not be empty"),
        (json!({"model": "m".repeat(100_000)}), "at most 256"),
        (json!({"model": "claude\n4"}), "control characters"),
        (json!({"max_tokens": null}), "'max_tokens' is required"),
        (json!({"max_tokens": "9"}), "'max_tokens' must be a non-negative integer"),
        (json!({"max_tokens": -1}), "'max_tokens' must be a non-negative integer"),
        (json!({"max_tokens": 0}), "'max_tokens' must be at least 1"),
        (json!({"temperature": "hot"}), "'temperature' must be a number"),
        (json!({"top_p": [1]}), "'top_p' must be a number"),
        (json!({"top_k": 1.5}), "'top_k' must be a non-negative integer"),
        (json!({"stop_sequences": "END"}), "'stop_sequences' must be an array of strings"),
        (json!({"stop_sequences": [5]}), "'stop_sequences' must be an array of strings"),
        (json!({"stream": "yes"}), "'stream' must be true or false"),
        (json!({"metadata": 5}), "'metadata' must be an object"),
        (json!({"metadata": {"user_id": 5}}), "metadata: 'user_id' must be a string"),
        (json!({"metadata": {"team": "qa"}}), "metadata: unknown field 'team'"),
        (json!({"service_tier": 1}), "'service_tier' must be a string"),
        (json!({"system": 5}), "'system' must be a string or text blocks"),
        (json!({"system": [{"type": "image"}]}), "system[0]: blocks of type 'image' are not supported here"),
        (json!({"system": [{"type": "text"}]}), "system[0]: 'text' is required"),
        (json!({"messages": 5}), "'messages' must be an array"),
        (json!({"messages": []}), "'messages' must hold at least one message"),
        (json!({"messages": ["hi"]}), "messages[0]: a message must be an object, not string"),
        (json!({"messages": [{"role": "user"}]}), "messages[0]: 'content' is required"),
        (json!({"messages": [{"role": "system", "content": "x"}]}), "messages[0]: unknown role 'system'"),
        (json!({"messages": [{"role": "user", "content": 5}]}), "messages[0]"),
        (json!({"messages": [{"role": "user", "content": "q", "name": "x"}]}), "messages[0]: unknown field 'name'"),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}),
            "messages[0].content[0]: blocks of type 'audio' are not supported",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"text": "q"}]}]}),
            "messages[0].content[0]: 'type' is required",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}),
            "messages[0].content[0]: 'text' must be a string, not integer",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]}),
            "messages[0].content[0]: source: image sources of type 'file' are not supported",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]}]}),
            "messages[0].content[0]: source: 'media_type' is required",
        ),
        (
            json!({"messages": [q, {"role": "assistant", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}]}),
            "messages[1]: content[0]: an assistant message holds",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}]}),
            "messages[0]: content[0]: a user message holds",
        ),
        (
            json!({"messages": [q, result("nope")]}),
            "messages[1]: content[0]: 'tool_use_id' 'nope' matches no earlier unanswered tool_use",
        ),
        (json!({"messages": [q, call("c1"), result("c2")]}), "matches no earlier unanswered tool_use"),
        (json!({"messages": [q, call("c1")]}), "messages[1]: the tool_use 'c1' has no tool_result"),
        (json!({"messages": [q, call("c1"), q]}), "messages[2]: the tool_use 'c1' has no tool_result in this message"),
        (
            json!({"messages": [q, call("c1"), result("c1"), result("c1")]}),
            "messages[3]: content[0]: 'tool_use_id' 'c1' matches no",
        ),
        (
            json!({"messages": [q, {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": long_name, "input": {}}]}, result("c")]}),
            "messages[1]: content[0]: the tool name",
        ),
        (
            json!({"messages": [q, {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": "{}"}]}, result("c")]}),
            "messages[1]: content[0]: 'input' must be an object",
        ),
        (
            json!({"messages": [q, call("c"), {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}]}]}),
            "a chat tool message holds text only",
        ),
        (json!({"messages": [{"role": "assistant", "content": "hello"}]}), "needs a user message with text"),
        (json!({"tools": 5}), "'tools' must be an array"),
        (tool(json!(5)), "tools[0]: a tool must be an object"),
        (tool(json!({"name": "f"})), "tools[0]: 'input_schema' is required"),
        (tool(json!({"input_schema": {}})), "tools[0]: 'name' is required"),
        (tool(json!({"name": "a b", "input_schema": {}})), "tools[0]: the tool name 'a b'"),
        (tool(json!({"name": long_name, "input_schema": {}})), "tools[0]: the tool name"),
        (tool(json!({"name": "f", "input_schema": "{}"})), "tools[0]: 'input_schema' must be an object"),
        (tool(json!({"name": "f", "description": 1, "input_schema": {}})), "tools[0]: 'description' must be a string"),
        (
            tool(json!({"type": "web_search_20250305", "name": "web_search"})),
            "tools[0]: tools of type 'web_search_20250305' are not supported",
        ),
        (json!({"tool_choice": "auto"}), "'tool_choice' must be an object"),
        (json!({"tool_choice": {"type": "sometimes"}}), "tool_choice: 'type' must be 'auto', 'any', 'tool' or 'none'"),
        (json!({"tool_choice": {"type": "tool"}}), "tool_choice: 'name' is required"),
        (json!({"thinking": 5}), "'thinking' must be an object"),
        (json!({"thinking": {"type": "enabled"}}), "'thinking.budget_tokens' must be an integer"),
        (json!({"thinking": {"type": "enabled", "budget_tokens": 100}}), "must be an integer of at least 1024"),
        (json!({"thinking": {"type": "enabled", "budget_tokens": 4096}}), "less than 'max_tokens'"),
        (json!({"thinking": {"type": "on"}}), "thinking: 'type' must be 'enabled', 'disabled' or 'adaptive'"),
        (json!({"container": "c1"}), "'container' is not supported"),
        (json!({"mcp_servers": [{"type": "url", "url": "https://mcp"}]}), "'mcp_servers' is not supported"),
    ];
    assert!(cases.len() >= 40);
    for (extra, says) in cases {
        let body = with(ask("q"), extra.clone());
        let out = harness("native", json!({}), vec![answer("no")]).run(&body);
        let shown: String = extra.to_string().chars().take(200).collect();
        assert_eq!(out.reply.status, 400, "{shown}: {}", out.body_text());
        let e = out.json();
        assert_eq!(
            (e["type"].as_str(), e["error"]["type"].as_str()),
            (Some("error"), Some("invalid_request_error")),
            "{shown}: {e}"
        );
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{shown}: {message}");
        assert!(out.llm_requests.is_empty(), "{shown}");
    }
    for bad in [&b"{"[..], b"[1]", b"null"] {
        let out = harness("native", json!({}), vec![]).run_body(bad);
        assert_eq!(out.reply.status, 400);
        assert_eq!(out.json()["error"]["type"], "invalid_request_error");
    }
    // What is well formed still passes: nulls, a known call answered, string tool results.
    let ok = with(
        ask("q"),
        json!({"messages": [q, call("c1"), result("c1")], "temperature": null, "system": null,
        "tools": [{"type": "custom", "name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"}}),
    );
    assert!(translate(ok.to_string().as_bytes()).is_ok());
}

#[test]
fn chat_completions_are_unchanged_beside_it() {
    let mut h = harness("native", json!({}), vec![answer("Rex.")]);
    h.api = Api::ChatCompletions;
    let out = h.run(&user("Who?"));
    assert_eq!(out.json()["object"], "chat.completion");
    assert_eq!(out.answer(), "Rex.");
}
