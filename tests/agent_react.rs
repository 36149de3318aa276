//! The ReAct loop end to end in the native harness: the shared acceptance scenarios (both ReAct
//! syntaxes), Higress's unit-test cases, and every failure path.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Failure;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";
const STORE: &str = "outbound|8080||store.svc";

fn pets(auth: Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", auth)], json!({}))
}

fn pets_with(extra: Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

#[test]
fn v01_single_get_with_query_key() {
    for (syntax, call, fin) in SYNTAXES {
        let mut h = Harness::new(&pets(json!({"apiKey": {"in": "query", "name": "apikey", "value": "PS-list-5521"}})))
            .llm([call("List pets.", "listPets", json!({"limit": 3})), fin("Rex, Whiskers and Bubbles.")])
            .tool_json(PETS, r#"[{"id": 1, "name": "Rex"}, {"id": 2, "name": "Whiskers"}]"#);
        let out = h.run(&user("Show me the first three pets in the store."));
        assert_eq!(out.reply.status, 200, "{syntax}");
        assert_eq!(out.answer(), "Rex, Whiskers and Bubbles.", "{syntax}");
        assert_eq!(out.finish_reason(), "stop");
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(out.tool_calls[0].path, "/v1/pets?limit=3&apikey=PS-list-5521");
        assert_eq!(out.tool_calls[0].authority, "petstore.swagger.io");
        assert_eq!(out.llm_requests.len(), 2);
        // The tool's body reaches the model byte for byte.
        assert_eq!(out.last_message(2), r#"Observation: [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Whiskers"}]"#);
    }
}

#[test]
fn v02_two_dependent_calls_with_header_key() {
    for (syntax, call, fin) in SYNTAXES {
        let cfg = config(
            &[(
                "store.svc",
                "swagger-petstore-v3.yaml",
                json!({"apiKey": {"in": "header", "name": "api_key", "value": "STORE-k3y-77"}}),
            )],
            json!({}),
        );
        let mut h = Harness::new(&cfg)
            .llm([
                call("Find puppies.", "findPetsByTags", json!({"tags": ["puppy"]})),
                call("Order Biscuit.", "placeOrder", json!({"petId": 12, "quantity": 1, "status": "placed"})),
                fin("I ordered Biscuit (pet 12) for you: order 501, status placed."),
            ])
            .tool(STORE, |c| {
                if c.method == "GET" {
                    ToolReply::Http(200, r#"[{"id": 12, "name": "Biscuit"}, {"id": 15, "name": "Pepper"}]"#.into())
                } else {
                    ToolReply::Http(200, r#"{"id": 501, "petId": 12, "status": "placed"}"#.into())
                }
            });
        let out = h.run(&user("Order one pet tagged puppy for me, whichever the store lists first."));
        assert_eq!(out.answer(), "I ordered Biscuit (pet 12) for you: order 501, status placed.", "{syntax}");
        golden("v02-tool-requests.txt", &out.tool_transcript());
        assert!(out.last_message(3).contains(r#""id": 501"#));
    }
}

#[test]
fn v03_path_param_then_created_with_empty_body() {
    for (_, call, fin) in SYNTAXES {
        let mut h = Harness::new(&pets(json!({"headers": {"Authorization": "Bearer pets-admin-token-1"}})))
            .llm([
                call("Pet 7?", "showPetById", json!({"petId": "7"})),
                call("Create Mochi.", "createPets", json!({"id": 8, "name": "Mochi", "tag": "cat"})),
                fin("Done."),
            ])
            .tool(PETS, |c| {
                if c.method == "GET" {
                    ToolReply::Http(200, r#"{"id": 7, "tag": "cat"}"#.into())
                } else {
                    ToolReply::Http(201, String::new())
                }
            });
        let out = h.run(&user("Add Mochi like pet 7."));
        assert_eq!(out.answer(), "Done.");
        assert_eq!(out.tool_calls[0].path, "/v1/pets/7");
        assert_eq!(out.tool_calls[1].path, "/v1/pets");
        assert_eq!(out.tool_calls[1].body.as_deref(), Some(br#"{"id":8,"name":"Mochi","tag":"cat"}"#.as_slice()));
        for c in &out.tool_calls {
            assert!(c.headers.contains(&("authorization".into(), "Bearer pets-admin-token-1".into())));
        }
        assert_eq!(out.last_message(3), "Observation: HTTP 201: 'createPets' succeeded with an empty body.");
    }
}

#[test]
fn v04_tool_500_reaches_the_model_and_the_answer_streams() {
    for (_, call, fin) in SYNTAXES {
        let cfg = config(&[("repos.svc", "oai-link-example.yaml", json!({"domain": "repos.local"}))], json!({}));
        let mut h = Harness::new(&cfg)
            .llm([
                call("Fetch it.", "getRepository", json!({"username": "jdoe", "slug": "api-agent"})),
                fin("It failed with HTTP 500."),
            ])
            .tool("outbound|8080||repos.svc", |_| {
                ToolReply::Http(500, r#"{"error": {"message": "database unavailable"}}"#.into())
            });
        let mut req = user("Show me jdoe/api-agent.");
        req["stream"] = json!(true);
        let out = h.run(&req);
        assert_eq!(out.tool_calls[0].path, "/2.0/repositories/jdoe/api-agent");
        assert_eq!(
            out.last_message(2),
            r#"Observation: HTTP 500: 'getRepository' failed: {"error": {"message": "database unavailable"}}"#
        );
        assert_eq!(out.reply.content_type, "text/event-stream");
        let events = sse_events(&out.body_text());
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
        let content: String = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str::<Value>(e).unwrap())
            .filter_map(|v| v["choices"][0]["delta"]["content"].as_str().map(str::to_string))
            .collect();
        assert_eq!(content, "It failed with HTTP 500.");
        assert_eq!(out.llm_requests[0]["stream"], json!(false), "the LLM is never asked to stream");
    }
}

#[test]
fn v05_malformed_input_is_never_executed_and_the_model_recovers() {
    let bad = [
        "Thought: Look up order 3.\nAction: getOrderById\nAction Input: {'orderId': 3}",
        "Thought: Look up order 3.\nAction:\n```json\n{\"action\": \"getOrderById\", \"action_input\": {'orderId': 3}}\n```",
    ];
    for (bad, (_, call, fin)) in bad.into_iter().zip(SYNTAXES) {
        let cfg = config(&[("store.svc", "swagger-petstore-v3.yaml", json!({}))], json!({}));
        let mut h = Harness::new(&cfg)
            .llm([text(bad), call("Again.", "getOrderById", json!({"orderId": 3})), fin("Order 3 is approved.")])
            .tool_json(STORE, r#"{"id": 3, "status": "approved"}"#);
        let out = h.run(&user("What is the status of order 3?"));
        assert_eq!(out.answer(), "Order 3 is approved.");
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(out.tool_calls[0].path, "/api/v3/store/order/3");
        let told = out.last_message(2);
        assert!(told.starts_with("Observation: Invalid format:") && told.contains("not valid JSON"), "{told}");
    }
}

#[test]
fn v06_max_iterations_stops_the_loop_with_an_explanation() {
    for (_, call, _) in SYNTAXES {
        let cfg = config(
            &[(
                "museum.svc",
                "redocly-museum.yaml",
                json!({"headers": {"Authorization": "Basic dmlzaXRvcjpvcDNuLXNlc2FtZQ=="}}),
            )],
            json!({"llm": {"maxIterations": 2}}),
        );
        let args = json!({"startDate": "2023-09-11", "limit": 1});
        let mut h = Harness::new(&cfg)
            .llm([
                call("Check.", "getMuseumHours", args.clone()),
                call("Again.", "getMuseumHours", args.clone()),
                call("Again.", "getMuseumHours", args),
            ])
            .tool_json("outbound|8080||museum.svc", r#"[{"date": "2023-09-11", "timeOpen": "09:00"}]"#);
        let out = h.run(&user("Keep checking the museum hours."));
        assert_eq!(out.tool_calls.len(), 2, "never a third tool call");
        assert_eq!(out.llm_requests.len(), 3);
        assert!(out.last_message(3).contains("maximum number of tool calls"));
        assert_eq!(out.finish_reason(), "length");
        assert!(out.answer().contains("limit of 2 tool calls"), "{}", out.answer());
        assert_eq!(out.tool_calls[0].path, "/_mock/docs/openapi/museum-api/museum-hours?startDate=2023-09-11&limit=1");
    }
}

#[test]
fn max_iterations_then_a_final_answer_is_a_normal_stop() {
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"llm": {"maxIterations": 1}}));
    let mut h = Harness::new(&cfg)
        .llm([classic_call("a", "listPets", json!({})), classic_final("Two pets.")])
        .tool_json(PETS, "[]");
    let out = h.run(&user("How many pets?"));
    assert_eq!((out.answer().as_str(), out.finish_reason().as_str()), ("Two pets.", "stop"));
    assert_eq!(out.tool_calls.len(), 1);
}

#[test]
fn v07_history_and_system_message_reach_the_model() {
    let cfg = config(&[("repos.svc", "oai-link-example.yaml", json!({"domain": "repos.local"}))], json!({}));
    let mut h = Harness::new(&cfg).llm([classic_final("gateway has 2 open pull requests.")]);
    let req = json!({"model": "m", "messages": [
        {"role": "system", "content": "You are a terse release manager."},
        {"role": "user", "content": "Which repositories does alice own?"},
        {"role": "assistant", "content": "alice owns gateway and docs."},
        {"role": "user", "content": "How many open pull requests does the first one have?"}]});
    let out = h.run(&req);
    let msgs = out.llm_requests[0]["messages"].as_array().unwrap();
    assert!(msgs[0]["content"]
        .as_str()
        .unwrap()
        .starts_with("You are a terse release manager.\n\nRespond to the human"));
    assert_eq!(msgs[1], json!({"role": "user", "content": "Which repositories does alice own?"}));
    assert_eq!(msgs[2], json!({"role": "assistant", "content": "alice owns gateway and docs."}));
    assert_eq!(
        msgs[3],
        json!({"role": "user", "content": "Question: How many open pull requests does the first one have?"})
    );
}

#[test]
fn v08_chinese_question_tools_and_multiline_answer() {
    for (_, call, fin) in SYNTAXES {
        let cfg = config(
            &[(
                "amap.svc",
                "higress-amap-cn.yaml",
                json!({"apiKey": {"in": "query", "name": "key", "value": "AMAP-v1s1ble"}}),
            )],
            json!({"promptTemplate": {"language": "CH"}}),
        );
        let answer = "天安门广场位于北京市东城区。\n坐标：116.397455,39.909187（经度,纬度）";
        let mut h = Harness::new(&cfg)
            .llm([
                call("需要查询坐标。", "get_location_coordinate", json!({"keywords": "天安门广场", "region": "北京"})),
                fin(answer),
            ])
            .tool_json(
                "outbound|8080||amap.svc",
                r#"{"pois": [{"name": "天安门广场", "location": "116.397455,39.909187"}]}"#,
            );
        let out = h.run(&user("北京天安门广场的经纬度是多少？"));
        assert_eq!(out.answer(), answer);
        assert_eq!(
            out.tool_calls[0].path,
            "/v5/place/text?keywords=%E5%A4%A9%E5%AE%89%E9%97%A8%E5%B9%BF%E5%9C%BA&region=%E5%8C%97%E4%BA%AC&key=AMAP-v1s1ble"
        );
        let system = out.llm_requests[0]["messages"][0]["content"].as_str().unwrap().to_string();
        assert!(system.contains("根据POI名称，获得POI的经纬度坐标") && system.contains("输入要回答的问题"));
    }
}

#[test]
fn higress_l1_bare_blob_with_string_input_and_classic_final() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([
            text(r#"{"action": "showPetById", "action_input": "{\"petId\": \"北京\"}"}"#),
            text("Final Answer: 今天北京天气晴朗"),
        ])
        .tool_json(PETS, r#"{"id": 1}"#);
    let out = h.run(&user("今天天气怎么样？"));
    assert_eq!(out.answer(), "今天北京天气晴朗");
    assert_eq!(out.tool_calls[0].path, "/v1/pets/%E5%8C%97%E4%BA%AC");
}

#[test]
fn plain_string_input_fills_a_single_parameter() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([text("Action: showPetById\nAction Input: 42"), classic_final("Pet 42 is Rex.")])
        .tool_json(PETS, r#"{"id": 42, "name": "Rex"}"#);
    let out = h.run(&user("Who is pet 42?"));
    assert_eq!(out.tool_calls[0].path, "/v1/pets/42");
    assert_eq!(out.answer(), "Pet 42 is Rex.");
}

#[test]
fn unknown_tool_and_bad_arguments_are_observations() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([
            classic_call("x", "unknownTool", json!({"param": "value"})),
            classic_call("y", "createPets", json!({"name": "Mochi"})),
            classic_call("z", "listPets", json!({"limit": "many"})),
            classic_final("I cannot."),
        ])
        .tool_json(PETS, "[]");
    let out = h.run(&user("调用一个工具"));
    assert!(out.tool_calls.is_empty());
    assert!(
        out.last_message(2).contains("Unknown tool 'unknownTool'")
            && out.last_message(2).contains("listPets, createPets, showPetById")
    );
    assert!(out.last_message(3).contains("Invalid arguments for 'createPets': missing required argument(s) 'id'"));
    assert!(out.last_message(4).contains("'limit' must be of type integer"));
    assert_eq!(out.answer(), "I cannot.");
}

#[test]
fn tool_failures_are_observations() {
    for (failure, expected) in [
        (Failure::Timeout, "Observation: The call to 'listPets' timed out."),
        (
            Failure::NotSent("unknown cluster".into()),
            "Observation: The call to 'listPets' could not be sent: unknown cluster.",
        ),
        (Failure::Broken("reset".into()), "Observation: The call to 'listPets' failed: reset."),
    ] {
        let f = failure.clone();
        let mut h = Harness::new(&pets(json!({})))
            .llm([classic_call("x", "listPets", json!({})), classic_final("Sorry.")])
            .tool(PETS, move |_| ToolReply::Fail(f.clone()));
        let out = h.run(&user("List pets"));
        assert_eq!(out.last_message(2), expected);
        assert_eq!(out.answer(), "Sorry.");
    }
}

#[test]
fn large_tool_bodies_are_truncated() {
    let big = format!("[{}]", vec!["\"x\""; 5000].join(","));
    let mut h = Harness::new(&config(
        &[("pets.svc", "oai-petstore.yaml", json!({}))],
        json!({"llm": {"maxObservationBytes": 100}}),
    ))
    .llm([classic_call("x", "listPets", json!({})), classic_final("Many.")])
    .tool_json(PETS, &big);
    let out = h.run(&user("List pets"));
    let obs = out.last_message(2);
    assert!(obs.len() < 200 && obs.contains("truncated, 20001 bytes in all"), "{obs}");
}

#[test]
fn llm_requests_are_rewritten_as_documented() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([classic_call("x", "listPets", json!({})), classic_final("ok")])
        .tool_json(PETS, "[]");
    let req = json!({"model": "client-model", "temperature": 0.2, "top_p": 0.9, "user": "u1", "stop": "END",
        "stream": true, "stream_options": {"include_usage": true}, "x-vendor": {"a": 1},
        "messages": [{"role": "user", "content": "List pets"}]});
    let out = h.run(&req);
    let first = &out.llm_requests[0];
    assert_eq!(first["model"], "client-model");
    assert_eq!(
        (first["temperature"].clone(), first["top_p"].clone(), first["user"].clone()),
        (json!(0.2), json!(0.9), json!("u1"))
    );
    assert_eq!(first["stream"], json!(false));
    assert_eq!(first["stop"], json!(["END", "Observation:", "\nQuestion:"]));
    assert_eq!(first["max_tokens"], json!(1000));
    assert_eq!(first["x-vendor"], json!({"a": 1}));
    assert!(first.get("stream_options").is_none());
    let second = &out.llm_requests[1];
    assert_eq!(second["model"], "callout-model", "later turns use llm.model");
    let call = &out.llm_calls[0];
    assert_eq!(
        (call.method, call.path.as_str(), call.authority.as_str()),
        ("POST", "/v1/chat/completions", "llm.example.com")
    );
    assert!(call.headers.contains(&("authorization".into(), "Bearer sk-llm".into())));
    assert_eq!(call.timeout_ms, 50_000);
    let msgs = second["messages"].as_array().unwrap();
    assert_eq!(
        msgs[msgs.len() - 2],
        json!({"role": "assistant", "content": "Thought: x\nAction: listPets\nAction Input: {}"})
    );
}

#[test]
fn usage_is_summed_and_the_reply_is_a_complete_completion() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([
            classic_call("a", "listPets", json!({})),
            classic_call("b", "listPets", json!({})),
            classic_final("Done."),
        ])
        .tool_json(PETS, "[]");
    let out = h.run(&user("List pets twice"));
    let v = out.json();
    assert_eq!(v["usage"], json!({"prompt_tokens": 30, "completion_tokens": 15, "total_tokens": 45}));
    assert_eq!(v["id"], "chatcmpl-test1");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["created"], 1_700_000_000);
    assert_eq!(v["model"], "mock-llm");
    assert_eq!(v["choices"][0]["message"], json!({"role": "assistant", "content": "Done.", "refusal": null}));
    assert_eq!(out.reply.content_type, "application/json");
}

#[test]
fn stream_with_usage_chunk() {
    let mut h = Harness::new(&pets(json!({}))).llm([classic_final("Hi \"there\"\nline 2")]);
    let mut req = user("Say hi");
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let out = h.run(&req);
    let events = sse_events(&out.body_text());
    assert_eq!(events.len(), 5);
    let usage: Value = serde_json::from_str(&events[3]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 15);
    let finish: Value = serde_json::from_str(&events[2]).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
}

fn error_of(out: &common::Outcome) -> Value {
    out.json()["error"].clone()
}

#[test]
fn bad_client_bodies_get_400() {
    for body in [
        &br#"{"model": "qwen-turbo", "messages": [{"role": "user", "content": "test"}"#[..],
        br#"{"model": "m", "messages": []}"#,
        br#"{"model": "m", "messages": [{"role": "user", "content": ""}]}"#,
        b"not json at all",
    ] {
        let mut h = Harness::new(&pets(json!({})));
        let out = h.run_body(body);
        assert_eq!(out.reply.status, 400);
        assert_eq!(error_of(&out)["type"], "invalid_request_error");
        assert!(out.llm_requests.is_empty());
    }
}

#[test]
fn a_rejected_streaming_request_gets_a_json_error() {
    // No stream has started: the status is real, and OpenAI clients read the error from JSON.
    let mut h = Harness::new(&pets(json!({})));
    let out = h.run(&json!({"model": "m", "stream": true, "n": 2, "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!((out.reply.status, out.reply.content_type), (400, "application/json"));
    assert!(error_of(&out)["message"].as_str().unwrap().contains("'n' must be 1"));
}

#[test]
fn llm_failures_end_with_an_openai_error() {
    let cases: Vec<(Vec<Turn>, u16, &str)> = vec![
        (vec![Turn::Raw(200, r#"{"id": "chatcmpl-123", "choices": [{"index": 0"#.into())], 502, "not JSON"),
        (vec![Turn::Raw(200, r#"{"choices": []}"#.into())], 502, "no choices"),
        (vec![classic_call("a", "listPets", json!({})), Turn::Fail(Failure::Timeout)], 504, "timed out"),
        (vec![classic_call("a", "listPets", json!({})), Turn::Raw(503, "overloaded".into())], 502, "HTTP 503"),
        (
            vec![classic_call("a", "listPets", json!({})), Turn::Fail(Failure::NotSent("no cluster".into()))],
            502,
            "could not be sent",
        ),
    ];
    for (turns, status, says) in cases {
        for stream in [false, true] {
            let mut h =
                Harness::new(&pets_with(json!({"llm": {"maxRetries": 0}}))).llm(turns.clone()).tool_json(PETS, "[]");
            let mut req = user("List pets");
            req["stream"] = json!(stream);
            let out = h.run(&req);
            assert_eq!(out.reply.status, status, "{says}");
            let err = if stream {
                let events = sse_events(&out.body_text());
                assert_eq!(events.len(), 2);
                assert_eq!(events[1], "[DONE]");
                serde_json::from_str::<Value>(&events[0]).unwrap()["error"].clone()
            } else {
                error_of(&out)
            };
            assert!(err["message"].as_str().unwrap().contains(says), "{err}");
            assert_eq!(err["type"], "api_error");
        }
    }
}

#[test]
fn a_first_turn_error_keeps_its_status_and_is_wrapped_unless_it_is_an_openai_error() {
    let openai = r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let cases: Vec<(Turn, u16, &str)> = vec![
        (Turn::Raw(500, "boom".into()), 500, "HTTP 500: boom"),
        (Turn::Raw(504, "upstream request timeout".into()), 504, "HTTP 504: upstream request timeout"),
        (Turn::Raw(502, "<html><body>Bad Gateway</body></html>".into()), 502, "Bad Gateway"),
        (Turn::Raw(503, "".into()), 503, "with no body"),
        (Turn::Raw(401, openai.into()), 401, "Incorrect API key"),
    ];
    for (turn, status, says) in cases {
        for (stream, loop_phase) in [(false, "response"), (true, "response"), (false, "request"), (true, "request")] {
            let cfg = pets_with(json!({"loop": loop_phase, "llm": {"maxRetries": 0}}));
            let mut h = Harness::new(&cfg).llm([turn.clone()]);
            let mut req = user("List pets");
            req["stream"] = json!(stream);
            let out = h.run(&req);
            assert_eq!((out.reply.status, out.reply.content_type), (status, "application/json"), "{says}");
            let err = error_of(&out);
            assert!(err["message"].as_str().unwrap().contains(says), "{err}");
            if status == 401 {
                assert_eq!(out.body_text(), openai, "an OpenAI error passes untouched");
            } else {
                assert_eq!(err["code"], "upstream_error");
            }
        }
    }
}

#[test]
fn the_request_deadline_bounds_the_loop() {
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"llm": {"maxRequestTime": 1000}}));
    let turns: Vec<Turn> = (0..10).map(|_| classic_call("again", "listPets", json!({}))).collect();
    let mut h = Harness::new(&cfg).llm(turns).tool_json(PETS, "[]");
    h.step_ms = 300;
    let out = h.run(&user("List pets forever"));
    assert_eq!(out.reply.status, 504);
    assert!(error_of(&out)["message"].as_str().unwrap().contains("maxRequestTime"));
    // Every call's timeout was cut to what remained of the request's time.
    assert!(out.tool_calls.iter().chain(&out.llm_calls).all(|c| c.timeout_ms <= 1000));
}

#[test]
fn empty_final_answer_is_malformed() {
    let mut h = Harness::new(&pets(json!({}))).llm([text("Final Answer:   "), classic_final("Now with text.")]);
    let out = h.run(&user("Hello"));
    assert!(out.last_message(2).contains("the final answer is empty"));
    assert_eq!(out.answer(), "Now with text.");
}

#[test]
fn client_tools_are_refused_in_react_mode() {
    let mut h = Harness::new(&pets(json!({})));
    let mut req = user("Hello");
    req["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
    let out = h.run(&req);
    assert_eq!(out.reply.status, 400);
    assert!(error_of(&out)["message"].as_str().unwrap().contains("not supported in ReAct mode"));
}

#[test]
fn prompt_golden_files() {
    let en = Harness::new(&pets(json!({})));
    golden("react-prompt-en.txt", &en.cfg.react_prompt);
    let ch = Harness::new(&config(
        &[("amap.svc", "higress-amap-cn.yaml", json!({}))],
        json!({"promptTemplate": {"language": "CH"}}),
    ));
    golden("react-prompt-ch.txt", &ch.cfg.react_prompt);
    let custom = Harness::new(&config(
        &[("pets.svc", "oai-petstore.yaml", json!({}))],
        json!({"promptTemplate": {"language": "EN", "enTemplate": {"question": "the question", "thought2": "done thinking"}}}),
    ));
    assert!(custom
        .cfg
        .react_prompt
        .contains("Question: the question\nThought: consider previous and subsequent steps"));
    assert!(custom.cfg.react_prompt.contains("Thought: done thinking"));
}

/// The `data:` payloads of an SSE body; every event must end with a blank line.
fn sse_events(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "{body}");
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data event: {e}")).to_string())
        .collect()
}
