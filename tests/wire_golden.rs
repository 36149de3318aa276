//! The wire's bytes, whole (issue 32, item 4: the wire typed with its output unchanged): every shape
//! the filter writes to a client (chat completions and the Responses API, objects and streams, whole
//! and live, client tool calls, reasoning, late failures), what it sends the model (a ReAct history, a
//! native history with a dangling call, a Responses request with every part kind), and the LLM's
//! stream assembled into one completion, compared byte for byte with tests/golden/wire_*.txt.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Api;
use api_agent::openai::sse::ChunkStream;
use common::front::*;
use common::*;
use serde_json::{json, Value};

/// Each section as `== name`, then its bytes.
fn sections(parts: &[(&str, Vec<u8>)]) -> String {
    parts.iter().map(|(name, bytes)| format!("== {name}\n{}\n", String::from_utf8_lossy(bytes))).collect()
}

/// All the client sees: what went out live, then the reply's body.
fn all(out: &Outcome) -> Vec<u8> {
    live_and_end(out)
}

fn call_tool() -> Turn {
    native_calls(&[("c", "showPetById", json!({"petId": "7"}))])
}

fn thinking_answer(text: &str) -> Turn {
    let mut turn: Value =
        serde_json::from_str(&completion(json!({"role": "assistant", "content": text, "reasoning_content": "Hm."})))
            .unwrap();
    turn["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": 2});
    Turn::Raw(200, turn.to_string())
}

fn client_tool() -> Value {
    json!({"type": "function", "name": "get_time", "description": "now", "parameters": {"type": "object", "properties": {}}})
}

fn client_calls() -> Turn {
    Turn::Message(json!({"role": "assistant", "content": "Let me see.", "reasoning_content": "Time?", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        {"id": "call_10", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"UTC\"}"}}]}))
}

fn run(api: Api, extra: Value, turns: Vec<Turn>, live: bool, body: &Value) -> Outcome {
    let mut h = front_harness(api, "native", extra, turns);
    h.live = live;
    h.run(body)
}

#[test]
fn responses_answers_are_golden() {
    let ask = |stream: bool| {
        json!({"model": "m", "instructions": "Be brief.", "input": "Who is pet 7?", "metadata": {"k": "v"},
            "store": false, "temperature": 0.5, "max_output_tokens": 99, "stream": stream,
            "text": {"format": {"type": "text"}}, "reasoning": {"effort": "low"}})
    };
    let ask_tools = |stream: bool| {
        json!({"model": "m", "input": "What time?", "tools": [client_tool()], "tool_choice": "required",
            "parallel_tool_calls": true, "stream": stream})
    };
    let steps = json!({"llm": {"maxRetries": 0}});
    let limit = json!({"llm": {"maxIterations": 1}});
    let parts = [
        (
            "object",
            all(&run(Api::Responses, json!({}), vec![call_tool(), thinking_answer("Rex.")], false, &ask(false))),
        ),
        ("stream", all(&run(Api::Responses, json!({}), vec![call_tool(), thinking_answer("Rex.")], false, &ask(true)))),
        (
            "live stream",
            all(&run(Api::Responses, json!({}), vec![call_tool(), thinking_answer("Rex is good.")], true, &ask(true))),
        ),
        ("client calls object", all(&run(Api::Responses, json!({}), vec![client_calls()], false, &ask_tools(false)))),
        ("client calls stream", all(&run(Api::Responses, json!({}), vec![client_calls()], false, &ask_tools(true)))),
        (
            "client calls live",
            all(&run(Api::Responses, json!({}), vec![call_tool(), client_calls()], true, &ask_tools(true))),
        ),
        ("incomplete", all(&run(Api::Responses, limit.clone(), vec![call_tool(), call_tool()], false, &ask(false)))),
        (
            "failed object",
            all(&run(
                Api::Responses,
                steps.clone(),
                vec![call_tool(), Turn::Raw(500, "{}".into())],
                false,
                &ask(false),
            )),
        ),
        (
            "failed live",
            all(&run(Api::Responses, steps, vec![call_tool(), Turn::Raw(500, "{}".into())], true, &ask(true))),
        ),
    ];
    golden("wire_responses.txt", &sections(&parts));
}

#[test]
fn chat_answers_are_golden() {
    let ask = |stream: bool, usage: bool| {
        let mut b = json!({"model": "m", "messages": [{"role": "user", "content": "Who is pet 7?"}], "stream": stream});
        if usage {
            b["stream_options"] = json!({"include_usage": true});
        }
        b
    };
    let ask_tools = |stream: bool| {
        json!({"model": "m", "messages": [{"role": "user", "content": "What time?"}], "stream": stream,
            "stream_options": {"include_usage": true},
            "tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]})
    };
    let fail = json!({"llm": {"maxRetries": 0}});
    let parts = [
        (
            "object",
            all(&run(
                Api::ChatCompletions,
                json!({}),
                vec![call_tool(), thinking_answer("Rex.")],
                false,
                &ask(false, false),
            )),
        ),
        (
            "stream",
            all(&run(
                Api::ChatCompletions,
                json!({}),
                vec![call_tool(), thinking_answer("Rex.")],
                false,
                &ask(true, true),
            )),
        ),
        (
            "live stream",
            all(&run(
                Api::ChatCompletions,
                json!({}),
                vec![call_tool(), thinking_answer("Rex is good.")],
                true,
                &ask(true, false),
            )),
        ),
        (
            "client calls object",
            all(&run(Api::ChatCompletions, json!({}), vec![client_calls()], false, &ask_tools(false))),
        ),
        (
            "client calls stream",
            all(&run(Api::ChatCompletions, json!({}), vec![client_calls()], false, &ask_tools(true))),
        ),
        (
            "client calls live",
            all(&run(Api::ChatCompletions, json!({}), vec![call_tool(), client_calls()], true, &ask_tools(true))),
        ),
        (
            "late error object",
            all(&run(
                Api::ChatCompletions,
                fail.clone(),
                vec![call_tool(), Turn::Raw(500, "{}".into())],
                false,
                &ask(false, false),
            )),
        ),
        (
            "late error live",
            all(&run(
                Api::ChatCompletions,
                fail,
                vec![call_tool(), Turn::Raw(500, "{}".into())],
                true,
                &ask(true, false),
            )),
        ),
    ];
    golden("wire_chat.txt", &sections(&parts));
}

/// What the model is sent, as the harness read it back (keys in the order they were written).
fn sent(out: &Outcome) -> Vec<u8> {
    out.llm_requests.iter().map(|r| format!("{r}\n")).collect::<String>().into_bytes()
}

#[test]
fn model_requests_are_golden() {
    let history = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Which pets?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "list", "arguments": "{\"u\":\"alice\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "list", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "[\"Rex\"]"},
        {"role": "assistant", "content": "Rex."},
        {"role": "user", "content": [{"type": "text", "text": "And pet 7?"}, {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}]});
    let react = {
        let mut h = front_harness(Api::ChatCompletions, "react", json!({}), vec![classic_final("Rex.")]);
        h.run(&history)
    };
    let native = run(Api::ChatCompletions, json!({}), vec![answer("Rex.")], false, &history);
    let responses = json!({"model": "m", "input": [
        {"role": "developer", "content": "Be terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "See"},
            {"type": "input_image", "image_url": "https://x/a.png", "detail": "high"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,AA==", "filename": "a.pdf"},
            {"type": "input_file", "file_data": "data:text/plain;base64,AA=="}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A"}, {"type": "refusal", "refusal": "B"}]},
        {"type": "function_call", "call_id": "k1", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "k1", "output": "12:00"},
        {"role": "user", "content": "Now pet 7?"}],
        "tools": [client_tool()], "tool_choice": {"type": "function", "name": "get_time"},
        "text": {"format": {"type": "json_object"}, "verbosity": "low"}});
    let translated = run(Api::Responses, json!({}), vec![answer("{}")], false, &responses);
    let parts = [("react", sent(&react)), ("native", sent(&native)), ("responses", sent(&translated))];
    golden("wire_requests.txt", &sections(&parts));
}

#[test]
fn an_llm_stream_assembles_into_a_golden_completion() {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"model": "up-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut sse = chunk(json!({"role": "assistant", "content": "", "reasoning_content": "Th"}), Value::Null);
    sse += &chunk(json!({"reasoning_content": "ink."}), Value::Null);
    sse += &chunk(
        json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\""}}]}),
        Value::Null,
    );
    sse += &chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}, {"index": 1, "id": "b", "function": {"name": "g"}}]}),
        Value::Null,
    );
    sse += &chunk(json!({}), json!("tool_calls"));
    sse += "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n";
    let mut s = ChunkStream::new();
    s.feed(sse.as_bytes());
    let calls = s.completion().unwrap();
    let mut s = ChunkStream::new();
    s.feed(chunk(json!({"reasoning": {"content": "R"}, "content": "Hi"}), json!("stop")).as_bytes());
    let text = s.completion().unwrap();
    let mut s = ChunkStream::new();
    s.feed(b"data: {\"error\": {\"message\": \"overloaded\", \"code\": 529}}\n\n");
    let error = s.completion().unwrap();
    let parts = [("calls", calls), ("text", text), ("error", error)];
    golden("wire_llm_stream.txt", &sections(&parts));
}
