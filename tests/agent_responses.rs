//! The Responses API in the harness: the request translated into the chat-completions conversation
//! (golden), the answer as a `response` object or event stream (whole and live), the refusals.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Api;
use api_agent::openai::responses::{translate, RequestError};
use common::front::*;
use common::*;
use serde_json::{json, Value};

fn harness(mode: &str, extra: Value, turns: Vec<Turn>) -> Harness {
    front_harness(Api::Responses, mode, extra, turns)
}

#[test]
fn translation_of_a_full_request_is_golden() {
    let body = json!({
        "model": "gpt-test", "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Find pet 7."},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"id\":7}"},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{\"id\":8}"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call_output", "call_id": "c1", "output": "Rex"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "Tom"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And now?"},
                {"type": "input_image", "image_url": "https://example.com/a.png"}]}
        ],
        "tools": [{"type": "function", "name": "lookup", "description": "Find a pet", "parameters": {"type": "object"}, "strict": true}],
        "tool_choice": {"type": "function", "name": "lookup"},
        "max_output_tokens": 300, "temperature": 0.2, "top_p": 0.9,
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "json_schema", "name": "pet", "schema": {"type": "object"}, "strict": true}},
        "metadata": {"k": "v"}, "user": "u1", "store": false, "include": ["reasoning.encrypted_content"],
        "parallel_tool_calls": false, "seed": 3, "stream": true
    });
    let (chat, echo) = translate(body.to_string().as_bytes()).unwrap();
    let raw = serde_json::to_string_pretty(&Value::Object(chat.raw.clone())).unwrap();
    golden("responses_translation.json", &(raw + "\n"));
    assert!(chat.stream);
    assert_eq!(echo.model, "gpt-test");
    assert_eq!(echo.fields["metadata"], json!({"k": "v"}));
    assert_eq!(echo.fields["instructions"], "Be brief.");
}

#[test]
fn refusals_say_why() {
    let cases = [
        (json!({"input": "hi", "previous_response_id": "resp_1"}), "previous_response_id"),
        (json!({"input": "hi", "store": true}), "keeps no state"),
        (json!({"input": "hi", "conversation": "conv_1"}), "send the whole conversation"),
        (json!({"input": [{"type": "item_reference", "id": "msg_1"}]}), "item_reference"),
        (json!({"input": "hi", "tools": [{"type": "web_search"}]}), "'web_search'"),
        (json!({"input": "hi", "tools": [{"type": "file_search", "vector_store_ids": []}]}), "'file_search'"),
        (json!({"input": 3}), "the request body"),
        (json!({"model": "m"}), "'input' is required"),
        (json!({"input": [{"type": "computer_call"}]}), "input[0]: items of type 'computer_call'"),
        (json!({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}), "'input_audio'"),
        (json!({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x"}}}), "text.format.schema"),
        (json!({"input": "hi", "max_output_tokens": 0}), "max_output_tokens"),
        (json!({"input": "hi", "stream": "yes"}), "'stream'"),
    ];
    for (body, says) in cases {
        let err = translate(body.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains(says), "{body}: {err}");
    }
    let err = translate(br#"{"input": "hi", "tools": [{"type": "code_interpreter"}]}"#).unwrap_err();
    assert_eq!(err, RequestError::HostedTool("code_interpreter".into()));
    for body in [json!({"input": "hi", "store": true}), json!({"input": "hi", "tools": [{"type": "web_search"}]})] {
        let out = harness("react", json!({}), vec![]).run(&body);
        assert_eq!(out.reply.status, 400, "{}", out.body_text());
        assert_eq!(out.json()["error"]["type"], "invalid_request_error");
        assert!(out.llm_requests.is_empty());
    }
    let out = harness("react", json!({}), vec![]).run(&json!({"input": "hi", "previous_response_id": "r"}));
    assert_eq!(out.json()["error"]["code"], "stateful_request");
}

#[test]
fn string_input_with_instructions_in_react_mode() {
    let turns = vec![classic_call("Look it up.", "showPetById", json!({"petId": "7"})), classic_final("Pet 7 is Rex.")];
    let mut h = harness("react", json!({}), turns);
    let out = h.run(&json!({"model": "client-model", "input": "Who is pet 7?", "instructions": "Answer in one line.",
        "metadata": {"k": "v"}, "user": "u1"}));
    assert_eq!(out.reply.status, 200, "{}", out.body_text());
    let first = &out.llm_requests[0];
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("Answer in one line."), "{system}");
    assert!(system.contains("showPetById"), "the filter's prompt follows the instructions");
    assert!(first["messages"][1]["content"].as_str().unwrap().contains("Who is pet 7?"));
    assert!(first.get("metadata").is_none() && first.get("user").is_none() && first.get("input").is_none());
    let r = out.json();
    assert_eq!(r["id"], "resp_test1");
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output_text"], "Pet 7 is Rex.");
    assert_eq!(r["output"].as_array().unwrap().len(), 1);
    assert_eq!(r["output"][0]["type"], "message");
    assert_eq!(
        r["output"][0]["content"][0],
        json!({"type": "output_text", "text": "Pet 7 is Rex.", "annotations": [], "logprobs": []})
    );
    assert_eq!(r["usage"]["input_tokens"], 20);
    assert_eq!(r["usage"]["output_tokens"], 10);
    assert_eq!(r["usage"]["total_tokens"], 30);
    assert_eq!(r["metadata"], json!({"k": "v"}));
    assert_eq!(r["instructions"], "Answer in one line.");
}

#[test]
fn client_function_tools_round_trip_in_native_mode() {
    let tool = json!({"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}});
    let turns = vec![native_calls(&[("call_9", "get_time", json!({}))])];
    let mut h = harness("native", json!({}), turns);
    let out = h.run(&json!({"model": "m", "input": "What time is it?", "tools": [tool], "tool_choice": "auto"}));
    let r = out.json();
    assert_eq!(r["status"], "completed");
    let call = &r["output"][0];
    assert_eq!(
        (call["type"].as_str(), call["call_id"].as_str(), call["name"].as_str()),
        (Some("function_call"), Some("call_9"), Some("get_time"))
    );
    assert_eq!(call["arguments"], "{}");
    let names: Vec<&str> = out.llm_requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"get_time") && names.contains(&"showPetById"));
    // The client runs it and sends the whole conversation back.
    let mut h = harness("native", json!({}), vec![answer("It is noon.")]);
    let out = h.run(&json!({"model": "m", "tools": [tool], "input": [
        {"role": "user", "content": "What time is it?"},
        {"type": "function_call", "call_id": "call_9", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "12:00"}]}));
    let msgs = &out.llm_requests[0]["messages"];
    assert_eq!(msgs[1]["tool_calls"][0]["id"], "call_9");
    assert_eq!(msgs[2], json!({"role": "tool", "tool_call_id": "call_9", "content": "12:00"}));
    assert_eq!(out.json()["output_text"], "It is noon.");
}

#[test]
fn text_format_json_schema_is_json_mode() {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let turns = vec![answer("The pet is Rex."), answer(r#"{"name": "Rex"}"#)];
    let mut h = harness("native", json!({}), turns);
    let out = h.run(&json!({"input": "Name of pet 7?", "text": {"format": {"type": "json_schema", "name": "pet", "schema": schema}}}));
    let r = out.json();
    assert_eq!(r["output_text"], r#"{"name":"Rex"}"#, "{r}");
    assert_eq!(r["text"]["format"]["name"], "pet");
    assert!(out.llm_requests[0].get("response_format").is_none(), "not on the tool-using turn");
}

#[test]
fn reasoning_item_precedes_the_message_and_reasoning_tokens_are_summed() {
    let mut turn = serde_json::from_str::<Value>(&completion(
        json!({"role": "assistant", "content": "Rex.", "reasoning_content": "Pet 7..."}),
    ))
    .unwrap();
    turn["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": 4});
    let mut h = harness("native", json!({}), vec![Turn::Raw(200, turn.to_string())]);
    let out = h.run(&json!({"input": "Who?", "reasoning": {"effort": "high"}}));
    assert_eq!(out.llm_requests[0]["reasoning_effort"], "high");
    let r = out.json();
    assert_eq!(r["output"][0]["type"], "reasoning");
    assert_eq!(r["output"][0]["content"][0]["text"], "Pet 7...");
    assert_eq!(r["output"][1]["type"], "message");
    assert_eq!(r["usage"]["output_tokens_details"]["reasoning_tokens"], 4);
}

#[test]
fn the_iteration_limit_is_incomplete() {
    let call = || native_calls(&[("a", "showPetById", json!({"petId": "7"}))]);
    let turns = vec![call(), call(), call()];
    let out = harness("native", json!({"llm": {"maxIterations": 2}}), turns).run(&json!({"input": "Loop?"}));
    let r = out.json();
    assert_eq!(r["status"], "incomplete", "{r}");
    assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
}

const EVENT_ORDER: [&str; 9] = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
];

#[test]
fn a_stream_follows_the_responses_event_grammar() {
    let mut h = harness("native", json!({}), vec![answer("Rex.")]);
    let out = h.run(&json!({"input": "Who?", "stream": true}));
    assert_eq!(out.reply.content_type, "text/event-stream");
    let ev = events(&out.reply.body);
    assert_eq!(types(&ev), EVENT_ORDER);
    let seq: Vec<u64> = ev.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(seq, (0..9).collect::<Vec<u64>>());
    let done = &ev[8]["response"];
    assert_eq!(done["output_text"], "Rex.");
    assert_eq!(done["output"][0], ev[7]["item"], "the final object holds the items the stream sent");
    assert_eq!(ev[0]["response"]["id"], done["id"]);
}

#[test]
fn a_live_stream_relays_text_in_responses_events() {
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), answer("Rex is a good dog.")];
    let mut h = harness("native", json!({}), turns);
    h.live = true;
    let out = h.run(&json!({"input": "Who is pet 7?", "stream": true}));
    assert_eq!(out.opened, Some(200));
    let mut all: Vec<u8> = out.sent.iter().flat_map(|(_, b)| b.clone()).collect();
    all.extend_from_slice(&out.reply.body);
    let ev = events(&all);
    let mut kinds = types(&ev);
    kinds.dedup();
    assert_eq!(kinds, EVENT_ORDER);
    let text: String = ev.iter().filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "Rex is a good dog.");
    let live_deltas = events(&out.sent.iter().flat_map(|(_, b)| b.clone()).collect::<Vec<u8>>());
    assert!(live_deltas.iter().any(|e| e["type"] == "response.output_text.delta"), "text went out before the end");
    let seq: Vec<u64> = ev.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(seq, (0..ev.len() as u64).collect::<Vec<u64>>());
}

#[test]
fn a_late_failure_is_a_failed_response() {
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), Turn::Raw(500, "{}".into())];
    let mut h = harness("native", json!({"llm": {"maxRetries": 0}}), turns);
    h.live = true;
    let out = h.run(&json!({"input": "Who is pet 7?", "stream": true}));
    let mut all: Vec<u8> = out.sent.iter().flat_map(|(_, b)| b.clone()).collect();
    all.extend_from_slice(&out.reply.body);
    let ev = events(&all);
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(last["response"]["error"]["code"], "llm_error");
}

#[test]
fn chat_completions_are_unchanged_beside_it() {
    let mut h = harness("native", json!({}), vec![answer("Rex.")]);
    h.api = Api::ChatCompletions;
    let out = h.run(&user("Who?"));
    assert_eq!(out.json()["object"], "chat.completion");
    assert_eq!(out.answer(), "Rex.");
}

#[test]
fn a_late_failure_after_the_status_went_out_is_a_failed_response_object() {
    // `loop: response` on Proxy-Wasm: the first turn came through the route and its 200 is out.
    let turns = vec![native_calls(&[("c", "showPetById", json!({"petId": "7"}))]), Turn::Raw(500, "{}".into())];
    let mut h = harness("native", json!({"llm": {"maxRetries": 0}}), turns);
    let out = h.run(&json!({"input": "Who is pet 7?"}));
    let r = out.json();
    assert_eq!((r["object"].as_str(), r["status"].as_str()), (Some("response"), Some("failed")), "{r}");
    assert_eq!(r["error"]["code"], "llm_error");
    assert_eq!(r["output"], json!([]));
}

#[test]
fn responses_path_is_validated_at_load() {
    let ok = front_path_is_validated("responses", "/agent/respond");
    assert_eq!(ok.responses_path.as_deref(), Some("/agent/respond"));
}

/// A field of the wrong JSON type (or out of shape) is a 400 in OpenAI's shape whose `param` names it,
/// before anything reaches the model: for Responses bodies and for chat completions alike.
#[test]
fn wrongly_typed_fields_are_400s_naming_the_field() {
    let long_name = "t".repeat(10_000);
    let call = |id: &str| json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"});
    let output = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "x"});
    let responses = [
        (json!({"input": "hi", "text": 5}), "text"),
        (json!({"input": "hi", "text": {"verbosity": 3}}), "text.verbosity"),
        (json!({"input": "hi", "text": {"format": 5}}), "text.format.type"),
        (json!({"input": "hi", "metadata": 5}), "metadata"),
        (json!({"input": "hi", "metadata": {"k": 5}}), "metadata"),
        (json!({"input": "hi", "user": {}}), "user"),
        (json!({"input": "hi", "temperature": "hot"}), "temperature"),
        (json!({"input": "hi", "top_p": [1]}), "top_p"),
        (json!({"input": "hi", "model": 5}), "model"),
        (json!({"input": "hi", "model": {"id": "gpt"}}), "model"),
        (json!({"input": "hi", "model": ""}), "model"),
        (json!({"input": "hi", "model": "m".repeat(100_000)}), "model"),
        (json!({"input": "hi", "model": "gpt\n4"}), "model"),
        (json!({"input": "hi", "parallel_tool_calls": "yes"}), "parallel_tool_calls"),
        (json!({"input": "hi", "store": "no"}), "store"),
        (json!({"input": "hi", "background": "yes"}), "background"),
        (json!({"input": "hi", "include": "all"}), "include"),
        (json!({"input": "hi", "include": [5]}), "include"),
        (json!({"input": "hi", "truncation": 1}), "truncation"),
        (json!({"input": "hi", "stream_options": true}), "stream_options"),
        (json!({"input": "hi", "top_logprobs": "2"}), "top_logprobs"),
        (json!({"input": "hi", "max_tool_calls": -1}), "max_tool_calls"),
        (json!({"input": "hi", "service_tier": 1}), "service_tier"),
        (json!({"input": "hi", "safety_identifier": 1}), "safety_identifier"),
        (json!({"input": "hi", "prompt_cache_key": {}}), "prompt_cache_key"),
        (json!({"input": "hi", "instructions": 5}), "instructions"),
        (json!({"input": "hi", "reasoning": {"effort": 1}}), "reasoning.effort"),
        (json!({"input": "hi", "max_output_tokens": "9"}), "max_output_tokens"),
        (json!({"input": "hi", "tools": 5}), "tools"),
        (json!({"input": "hi", "tools": [5]}), "tools[0]"),
        (json!({"input": "hi", "tools": [{"type": "function", "name": long_name}]}), "tools[0].name"),
        (json!({"input": "hi", "tools": [{"type": "function", "name": "a b"}]}), "tools[0].name"),
        (
            json!({"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": "{}"}]}),
            "tools[0].parameters",
        ),
        (
            json!({"input": "hi", "tools": [{"type": "function", "name": "f", "description": 1}]}),
            "tools[0].description",
        ),
        (json!({"input": "hi", "tools": [{"type": "function", "name": "f", "strict": "yes"}]}), "tools[0].strict"),
        (json!({"input": "hi", "tool_choice": 5}), "tool_choice"),
        (json!({"input": 42}), "input"),
        (json!({"input": ["hi"]}), "input[0]"),
        (json!({"input": [{"role": "user", "content": 5}]}), "input[0].content"),
        (json!({"input": [{"role": "user", "content": "q"}, output("nope")]}), "input[1].call_id"),
        (json!({"input": [{"role": "user", "content": "q"}, call("c1"), output("c2")]}), "input[2].call_id"),
        (json!({"input": [{"role": "user", "content": "q"}, call("c1")]}), "input[1].call_id"),
        (
            json!({"input": [{"role": "user", "content": "q"}, call("c1"), output("c1"), output("c1")]}),
            "input[3].call_id",
        ),
        (
            json!({"input": [{"role": "user", "content": "q"}, {"type": "function_call", "call_id": "c", "name": long_name, "arguments": "{}"}, output("c")]}),
            "input[1].name",
        ),
    ];
    for (body, param) in responses {
        let out = harness("native", json!({}), vec![answer("no")]).run(&body);
        let shown: String = body.to_string().chars().take(200).collect();
        assert_eq!(out.reply.status, 400, "{shown}: {}", out.body_text());
        let err = &out.json()["error"];
        assert_eq!(err["type"], "invalid_request_error", "{shown}: {err}");
        assert_eq!(err["param"], param, "{shown}: {err}");
        assert!(out.llm_requests.is_empty(), "{shown}");
    }
    let chat = [
        (json!({"model": 5}), "model"),
        (json!({"model": {"id": "m"}}), "model"),
        (json!({"model": ""}), "model"),
        (json!({"model": "m".repeat(100_000)}), "model"),
        (json!({"temperature": "hot"}), "temperature"),
        (json!({"top_p": "1"}), "top_p"),
        (json!({"max_tokens": "9"}), "max_tokens"),
        (json!({"max_completion_tokens": -1}), "max_completion_tokens"),
        (json!({"user": {}}), "user"),
        (json!({"seed": "3"}), "seed"),
        (json!({"stop": 5}), "stop"),
        (json!({"stream_options": 5}), "stream_options"),
        (json!({"metadata": []}), "metadata"),
        (json!({"parallel_tool_calls": 1}), "parallel_tool_calls"),
        (json!({"presence_penalty": "0"}), "presence_penalty"),
        (json!({"frequency_penalty": {}}), "frequency_penalty"),
        (json!({"n": 2}), "n"),
        (json!({"stream": "yes"}), "stream"),
        (json!({"messages": 5}), "messages"),
        (json!({"messages": [{"role": "robot", "content": "x"}]}), "messages[0].role"),
        (json!({"tools": [{"type": "function", "function": {"name": long_name}}]}), "tools[0].function.name"),
    ];
    for (extra, param) in chat {
        let mut body = user("Who?");
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra.clone()) {
            b.extend(e);
        }
        let mut h = harness("native", json!({}), vec![answer("no")]);
        h.api = Api::ChatCompletions;
        let out = h.run(&body);
        let shown: String = extra.to_string().chars().take(200).collect();
        assert_eq!(out.reply.status, 400, "{shown}: {}", out.body_text());
        let err = &out.json()["error"];
        assert_eq!(
            (err["type"].as_str(), err["param"].as_str()),
            (Some("invalid_request_error"), Some(param)),
            "{shown}: {err}"
        );
    }
    // What is well typed still passes: nulls, numbers in range, a known call answered.
    let ok = json!({"input": [{"role": "user", "content": "q"}, call("c1"), output("c1")], "model": "gpt-4o",
        "temperature": 0.5, "top_p": null, "metadata": {"k": "v"}, "user": "u", "text": {"verbosity": "low"},
        "include": ["reasoning.encrypted_content"], "store": false, "truncation": "auto", "max_tool_calls": 3});
    assert!(translate(ok.to_string().as_bytes()).is_ok());
}
