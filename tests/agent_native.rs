//! Native tool calling in the harness: tools in the request, parallel calls answered in call order,
//! client tools returned, history repaired, limits.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";

fn native(extra: Value) -> String {
    let mut e = json!({"mode": "native"});
    if let (Value::Object(a), Value::Object(b)) = (&mut e, extra) {
        a.extend(b);
    }
    config(&[("pets.svc", "oai-petstore.yaml", json!({"apiKey": {"in": "query", "name": "apikey", "value": "K"}}))], e)
}

fn answer(text: &str) -> Turn {
    Turn::Message(json!({"role": "assistant", "content": text}))
}

/// A tool that answers with the pet id it was asked for, after `/v1/pets/`.
fn echo_pet(c: &api_agent::agent::Call) -> ToolReply {
    let id = c.path.trim_start_matches("/v1/pets/").split('?').next().unwrap_or("");
    ToolReply::Http(200, format!(r#"{{"id": "{id}"}}"#))
}

#[test]
fn single_call_round_trip() {
    let mut h = Harness::new(&native(json!({})))
        .llm([native_calls(&[("call_1", "listPets", json!({"limit": 3}))]), answer("Three pets.")])
        .tool_json(PETS, r#"[{"id": 1}]"#);
    let out = h.run(&user("Show me three pets."));
    assert_eq!(out.answer(), "Three pets.");
    assert_eq!(out.tool_calls[0].path, "/v1/pets?limit=3&apikey=K");
    let first = &out.llm_requests[0];
    let names: Vec<&str> =
        first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["listPets", "createPets", "showPetById"]);
    assert_eq!(first["tools"][0]["type"], "function");
    assert_eq!(first["tools"][0]["function"]["parameters"]["properties"]["limit"]["type"], "integer");
    assert_eq!(first["messages"], json!([{"role": "user", "content": "Show me three pets."}]));
    let msgs = out.llm_requests[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(msgs[2], json!({"role": "tool", "tool_call_id": "call_1", "content": r#"[{"id": 1}]"#}));
    assert_eq!(out.json()["usage"]["total_tokens"], 30);
}

#[test]
fn parallel_calls_run_together_and_answer_in_call_order() {
    let mut h = Harness::new(&native(json!({})))
        .llm([
            native_calls(&[
                ("a", "showPetById", json!({"petId": "1"})),
                ("b", "showPetById", json!({"petId": "2"})),
                ("c", "showPetById", json!({"petId": "3"})),
            ]),
            answer("Pets 1, 2 and 3."),
        ])
        .tool(PETS, echo_pet);
    h.reverse_tools = true;
    let out = h.run(&user("Show pets 1, 2 and 3."));
    assert_eq!(out.max_parallel, 3);
    let paths: Vec<&str> = out.tool_calls.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/v1/pets/3?apikey=K", "/v1/pets/2?apikey=K", "/v1/pets/1?apikey=K"],
        "answered last-sent first"
    );
    let msgs = out.llm_requests[1]["messages"].as_array().unwrap();
    let tail: Vec<(String, String)> = msgs[2..]
        .iter()
        .map(|m| (m["tool_call_id"].as_str().unwrap().into(), m["content"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        tail,
        [
            ("a".into(), r#"{"id": "1"}"#.into()),
            ("b".into(), r#"{"id": "2"}"#.into()),
            ("c".into(), r#"{"id": "3"}"#.into())
        ]
    );
}

#[test]
fn concurrency_is_bounded_and_the_rest_queue() {
    let mut h = Harness::new(&native(json!({"llm": {"maxParallelToolCalls": 2}})))
        .llm([
            native_calls(&[
                ("a", "showPetById", json!({"petId": "1"})),
                ("b", "showPetById", json!({"petId": "2"})),
                ("c", "showPetById", json!({"petId": "3"})),
            ]),
            answer("Done."),
        ])
        .tool(PETS, echo_pet);
    let out = h.run(&user("Show pets 1, 2 and 3."));
    assert_eq!(out.max_parallel, 2);
    assert_eq!(out.tool_calls.len(), 3);
    let contents: Vec<&str> = out.llm_requests[1]["messages"].as_array().unwrap()[2..]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, [r#"{"id": "1"}"#, r#"{"id": "2"}"#, r#"{"id": "3"}"#]);
}

#[test]
fn bad_calls_in_a_turn_do_not_stop_the_good_ones() {
    let bad_json = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "showPetById", "arguments": "{'petId': 3}"}},
        {"id": "y", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"id": "z", "type": "function", "function": {"name": "showPetById", "arguments": r#"{"petId": "9"}"#}}]});
    let mut h = Harness::new(&native(json!({}))).llm([Turn::Message(bad_json), answer("Pet 9.")]).tool(PETS, echo_pet);
    let out = h.run(&user("Show pet 9."));
    assert_eq!(out.tool_calls.len(), 1);
    let msgs = out.llm_requests[1]["messages"].as_array().unwrap();
    assert!(msgs[2]["content"].as_str().unwrap().contains("not valid JSON"));
    assert!(msgs[3]["content"].as_str().unwrap().starts_with("Unknown tool 'nope'"));
    assert_eq!(msgs[4]["content"], r#"{"id": "9"}"#);
}

#[test]
fn client_sampling_fields_are_kept() {
    let mut h = Harness::new(&native(json!({}))).llm([answer("Hi.")]);
    let req = json!({"model": "gpt-x", "temperature": 0.3, "top_p": 0.5, "max_tokens": 77, "stop": ["END"], "user": "u",
        "tool_choice": "auto", "parallel_tool_calls": true, "seed": 7, "x-extra": [1],
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}]});
    let out = h.run(&req);
    let first = &out.llm_requests[0];
    for k in [
        "model",
        "temperature",
        "top_p",
        "max_tokens",
        "stop",
        "user",
        "tool_choice",
        "parallel_tool_calls",
        "seed",
        "x-extra",
    ] {
        assert_eq!(first[k], req[k], "{k}");
    }
    assert_eq!(first["messages"], req["messages"], "content parts and system messages are passed as sent");
}

#[test]
fn client_tools_are_returned_to_the_client() {
    let client_tool = json!({"type": "function", "function": {"name": "get_location", "description": "The user's location", "parameters": {"type": "object", "properties": {}}}});
    for stream in [false, true] {
        let mut h = Harness::new(&native(json!({}))).llm([native_calls(&[("loc1", "get_location", json!({}))])]);
        let mut req = user("Pets near me?");
        req["tools"] = json!([client_tool.clone()]);
        req["stream"] = json!(stream);
        let out = h.run(&req);
        let tools = out.llm_requests[0]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 4);
        let raw = String::from_utf8(out.first_body.clone()).unwrap();
        assert_eq!(raw.matches("\"tools\":").count(), 1, "one `tools` key: {raw}");
        assert_eq!(tools[3], client_tool);
        assert!(out.tool_calls.is_empty());
        if stream {
            let body = out.body_text();
            assert!(body.contains(r#""delta":{"tool_calls":[{"index":0,"id":"loc1","type":"function","function":{"name":"get_location","arguments":"{}"}}]}"#), "{body}");
            assert!(body.contains(r#""finish_reason":"tool_calls""#));
            assert!(body.ends_with("data: [DONE]\n\n"));
        } else {
            let v = out.json();
            assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
            assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_location");
            assert_eq!(v["choices"][0]["message"]["content"], Value::Null);
        }
    }
}

#[test]
fn a_client_tool_named_like_a_gateway_tool_is_refused() {
    let mut h = Harness::new(&native(json!({})));
    let mut req = user("Hi");
    req["tools"] = json!([{"type": "function", "function": {"name": "listPets"}}]);
    let out = h.run(&req);
    assert_eq!(out.reply.status, 400);
    assert!(out.json()["error"]["message"].as_str().unwrap().contains("'listPets' is also a tool of the gateway"));
}

#[test]
fn dangling_tool_calls_in_history_are_answered() {
    let mut h = Harness::new(&native(json!({}))).llm([answer("ok")]);
    let req = json!({"model": "m", "messages": [
        {"role": "user", "content": "pets?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "old", "type": "function", "function": {"name": "listPets", "arguments": "{}"}}]},
        {"role": "user", "content": "never mind, hello"}]});
    let out = h.run(&req);
    let msgs = out.llm_requests[0]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2]["role"], "tool");
    assert_eq!(msgs[2]["tool_call_id"], "old");
    // One of two calls answered: only the other gets the failed result, after the answered one.
    let mut h = Harness::new(&native(json!({}))).llm([answer("ok")]);
    let req = json!({"model": "m", "messages": [
        {"role": "user", "content": "weather in Oslo and Rome?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "w", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "-3"},
        {"role": "user", "content": "and Paris?"}]});
    let out = h.run(&req);
    let msgs = out.llm_requests[0]["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
    assert_eq!(msgs[3]["tool_call_id"], "b");
    assert!(msgs[3]["content"].as_str().unwrap().contains("failed"));
}

#[test]
fn the_limit_forbids_tools_then_explains() {
    let call = || native_calls(&[("a", "listPets", json!({}))]);
    let mut h =
        Harness::new(&native(json!({"llm": {"maxIterations": 2}}))).llm([call(), call(), call()]).tool_json(PETS, "[]");
    let out = h.run(&user("Loop forever"));
    assert_eq!(out.tool_calls.len(), 2);
    let last = &out.llm_requests[2];
    assert_eq!(last["tool_choice"], "none");
    assert!(last["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .contains("maximum number of tool calls"));
    assert_eq!(out.finish_reason(), "length");
    assert!(out.answer().contains("limit of 2"));
}

#[test]
fn missing_call_ids_are_made_up_consistently() {
    let turn = Turn::Message(
        json!({"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "listPets", "arguments": ""}}]}),
    );
    let mut h = Harness::new(&native(json!({}))).llm([turn, answer("ok")]).tool_json(PETS, "[]");
    let out = h.run(&user("List"));
    let msgs = out.llm_requests[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"][0]["id"], "call_1_0");
    assert_eq!(msgs[2]["tool_call_id"], "call_1_0");
}

#[test]
fn openai_limits_on_tools() {
    // 129 operations: too many for native mode, fine for ReAct.
    let mut paths = String::new();
    for i in 0..129 {
        paths.push_str(&format!("  /r{i}:\n    get: {{operationId: op{i}, description: '{}'}}\n", "d".repeat(1100)));
    }
    let spec = format!(
        "openapi: 3.0.0\ninfo: {{title: t, version: '1'}}\nservers: [{{url: 'https://x.example'}}]\npaths:\n{paths}"
    );
    let cfg = |mode: &str| json!({"mode": mode, "llm": {"serviceName": "l", "servicePort": 1, "path": "/p"}, "apis": [{"apiProvider": {"serviceName": "s", "servicePort": 1}, "api": spec}], "tools": {"select": "all"}});
    let e = Config::from_value(&cfg("native")).unwrap_err().to_string();
    assert_eq!(e, "apis: mode 'native' allows at most 128 tools (OpenAI's limit) with tools.select 'all'; these APIs define 129 (tools.select 'auto' offers each request a selection)");
    // With a selection (the default), the same catalog loads: each request gets a few of its tools.
    let mut auto = cfg("native");
    auto.as_object_mut().unwrap().remove("tools");
    assert!(Config::from_value(&auto).unwrap().offer.is_some());
    let react = Config::from_value(&cfg("react")).unwrap();
    let description = react.native_tools[0]["function"]["description"].as_str().unwrap();
    assert_eq!(description.chars().count(), 1024);
    assert!(description.ends_with('…'));
}

#[test]
fn what_self_hosted_servers_need_tool_choice_and_no_null_content() {
    let mut h = Harness::new(&native(json!({})))
        .llm([
            Turn::Message(json!({"role": "assistant", "content": null, "function_call": null,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "listPets", "arguments": "{}"}}]})),
            answer("None."),
        ])
        .tool_json(PETS, "[]");
    let out = h.run(&user("Any pets?"));
    assert_eq!(out.llm_requests[0]["tool_choice"], "auto", "explicit when the filter adds tools");
    let echoed = &out.llm_requests[1]["messages"][1];
    assert_eq!(echoed["role"], "assistant");
    assert_eq!(echoed["content"], "", "not null: llama-cpp-python answers 500 to null");
    assert!(echoed.get("function_call").is_none());
    // The client's own choice is kept.
    let mut h = Harness::new(&native(json!({}))).llm([answer("Hi.")]);
    let mut req = user("Hi");
    req["tool_choice"] = json!("required");
    assert_eq!(h.run(&req).llm_requests[0]["tool_choice"], "required");
}

#[test]
fn a_forced_tool_choice_is_honoured_once_then_auto() {
    let mut h = Harness::new(&native(json!({})))
        .llm([native_calls(&[("c1", "listPets", json!({}))]), answer("Done.")])
        .tool_json(PETS, "[]");
    let mut req = user("Pets?");
    req["tool_choice"] = json!({"type": "function", "function": {"name": "listPets"}});
    let out = h.run(&req);
    assert_eq!(out.llm_requests[0]["tool_choice"]["function"]["name"], "listPets");
    assert_eq!(out.llm_requests[1]["tool_choice"], "auto", "not forced again after the call");
    assert_eq!(out.answer(), "Done.");
}
