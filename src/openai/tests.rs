use super::answer::*;
use super::*;
use serde_json::json;

#[test]
fn request_keeps_unknown_fields_and_reads_flags() {
    let r = ChatRequest::parse(br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"x-vendor":1}"#).unwrap();
    assert!(r.stream && r.include_usage);
    assert_eq!(r.raw["x-vendor"], json!(1));
    assert_eq!(r.question(), "hi");
}

#[test]
fn bad_requests_say_why() {
    for (body, why) in [
        (&b"{\"model\": \"m\", \"messages\": [{\"role\": \"user\""[..], "not valid JSON"),
        (b"[1]", "must be a JSON object"),
        (b"{\"messages\": []}", "must not be empty"),
        (b"{\"model\": \"m\"}", "'messages' is required"),
        (b"{\"messages\": [{\"role\": \"user\", \"content\": \"\"}]}", "needs a user message"),
        (b"{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "unknown role"),
        (
            b"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": \"yes\"}",
            "'stream' must be true or false",
        ),
        (b"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 2}", "'n' must be 1"),
    ] {
        let e = ChatRequest::parse(body).unwrap_err();
        assert!(e.why.contains(why), "{e}");
    }
}

#[test]
fn content_parts_are_flattened() {
    let r = ChatRequest::parse(br#"{"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]}]}"#).unwrap();
    assert_eq!(r.question(), "what is this?\n[image: https://x/cat.png]");
}

#[test]
fn llm_reply_parsing() {
    let r = LlmReply::parse(br#"{"model":"q","choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#).unwrap();
    assert_eq!(r.content, "hi");
    assert_eq!(r.usage, Usage { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, reasoning_tokens: 0 });
    assert!(LlmReply::parse(br#"{"choices":[]}"#).unwrap_err().contains("no choices"));
    assert!(LlmReply::parse(br#"{"error":{"message":"quota"}}"#).unwrap_err().contains("quota"));
    assert!(LlmReply::parse(br#"{"id": "chatcmpl-123", "choices": [{"index": 0"#).unwrap_err().contains("not JSON"));
}

#[test]
fn sse_framing() {
    let a = Answer {
        id: "chatcmpl-1",
        created: 7,
        model: "m",
        content: "a \"b\"\nc",
        finish_reason: FinishReason::Stop,
        usage: Usage::default(),
        tool_calls: None,
        steps: None,
        reasoning: None,
    };
    let text = String::from_utf8(chunks(&a, true)).unwrap();
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.len(), 5);
    assert_eq!(events[4], "data: [DONE]");
    for e in &events[..4] {
        let v: Value = serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(v["object"], "chat.completion.chunk");
    }
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert!(events[1].contains(r#""content":"a \"b\"\nc""#));
    assert!(events[3].contains(r#""choices":[]"#));
}

#[test]
fn usage_sums_saturate() {
    let mut u = Usage { prompt_tokens: u64::MAX, completion_tokens: 1, total_tokens: u64::MAX, reasoning_tokens: 0 };
    u.add(Usage { prompt_tokens: 5, completion_tokens: 1, total_tokens: 5, reasoning_tokens: 0 });
    assert_eq!(u, Usage { prompt_tokens: u64::MAX, completion_tokens: 2, total_tokens: u64::MAX, reasoning_tokens: 0 });
    // A reply's count is at most u32::MAX: sums of them stay exact in any JSON reader.
    let r = LlmReply::parse(br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":9}}"#).unwrap();
    let max = u64::from(u32::MAX);
    assert_eq!((r.usage.prompt_tokens, r.usage.total_tokens), (max, max + 9));
}

#[test]
fn usage_counts_are_read_in_any_number_spelling() {
    let read = |usage: &str| {
        let r =
            LlmReply::parse(format!(r#"{{"choices":[{{"message":{{"content":"x"}}}}],"usage":{usage}}}"#).as_bytes());
        let r = r.unwrap();
        (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens, r.unread)
    };
    let known = Unread::default();
    let both = Unread { prompt: true, completion: true };
    let max = u64::from(u32::MAX);
    for (usage, expected) in [
        (r#"{"prompt_tokens":"12","completion_tokens":" 3 ","total_tokens":"15"}"#, (12, 3, 15, known)),
        (r#"{"prompt_tokens":12.9,"completion_tokens":"3.99","total_tokens":1.5e1}"#, (12, 3, 15, known)),
        // A total below its parts is their sum.
        (r#"{"prompt_tokens":12,"completion_tokens":3,"total_tokens":2}"#, (12, 3, 15, known)),
        (r#"{"prompt_tokens":12,"completion_tokens":3,"total_tokens":40}"#, (12, 3, 40, known)),
        (
            r#"{"prompt_tokens":1e30,"completion_tokens":18446744073709551616,"total_tokens":"1e300"}"#,
            (max, max, 2 * max, known),
        ),
        (r#"{"total_tokens":"15"}"#, (0, 0, 15, known)),
        (r#"{"prompt_tokens":12}"#, (12, 0, 12, Unread { prompt: false, completion: true })),
        (r#"{"prompt_tokens":-12,"completion_tokens":-3.5,"total_tokens":-15}"#, (0, 0, 0, both)),
        (r#"{"prompt_tokens":"x","completion_tokens":"NaN","total_tokens":"inf"}"#, (0, 0, 0, both)),
        (r#"{"prompt_tokens":null,"completion_tokens":[1],"total_tokens":{}}"#, (0, 0, 0, both)),
        ("null", (0, 0, 0, both)),
        ("\"15\"", (0, 0, 0, both)),
    ] {
        assert_eq!(read(usage), expected, "{usage}");
    }
    let mut u = Usage { prompt_tokens: 0, completion_tokens: 5, total_tokens: 5, reasoning_tokens: 0 };
    u.estimate(Unread { prompt: true, completion: false }, 9, 100);
    assert_eq!((u.prompt_tokens, u.completion_tokens, u.total_tokens), (3, 5, 8));
}

#[test]
fn llm_replies_are_read_as_leniently_as_a_tree_would_be() {
    // A field of another type reads as absent; a later duplicate wins; escaped keys are keys.
    let r = LlmReply::parse(
        br#"{"model":7,"choices":[{"message":{"content":["x"],"content":"hi","tool_calls":{"a":1},"\u0072easoning":{"text":"t"}}}],
            "usage":{"prompt_tokens":true,"completion_tokens":-2,"total_tokens":[9],"completion_tokens_details":{"reasoning_tokens":4}}}"#,
    )
    .unwrap();
    assert_eq!((r.content.as_str(), r.model, r.tool_calls.len()), ("hi", None, 0));
    assert_eq!(r.reasoning.map(|x| x.text).as_deref(), Some("t"));
    assert_eq!(r.usage, Usage { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, reasoning_tokens: 4 });
    // A message that is not an object has no content; `usage: null` counts nothing.
    let r = LlmReply::parse(br#"{"choices":[{"message":"hi"}],"usage":null}"#).unwrap();
    assert_eq!((r.content.as_str(), r.message.as_str(), r.usage), ("", "\"hi\"", Usage::default()));
    assert!(LlmReply::parse(br#"{"choices":[{"message":{"content":5}}]}"#).unwrap_err().contains("'content' must be"));
    assert!(LlmReply::parse(br#"{"error":"down"}"#).unwrap_err().contains("\"down\""));
    // The message is kept as the provider wrote it, for native mode's conversation.
    let r = LlmReply::parse(br#"{"choices":[{"message":{"role":"assistant","content":null,"x":1}}]}"#).unwrap();
    assert_eq!(r.message_value(), json!({"role": "assistant", "content": null, "x": 1}));
}

#[test]
fn finish_reasons_have_one_wire_name() {
    for r in [FinishReason::Stop, FinishReason::Length, FinishReason::ToolCalls] {
        assert_eq!(serde_json::to_value(r).unwrap(), json!(r.as_str()));
    }
}
