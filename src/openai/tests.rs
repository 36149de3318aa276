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
        assert!(e.contains(why), "{e}");
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
    let r = LlmReply::parse(br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":9}}"#).unwrap();
    assert_eq!(r.usage.total_tokens, u64::MAX);
}

#[test]
fn llm_replies_are_read_as_leniently_as_a_tree_would_be() {
    // A field of another type reads as absent; a later duplicate wins; escaped keys are keys.
    let r = LlmReply::parse(
        br#"{"model":7,"choices":[{"message":{"content":["x"],"content":"hi","tool_calls":{"a":1},"\u0072easoning":{"text":"t"}}}],
            "usage":{"prompt_tokens":1.5,"completion_tokens":-2,"total_tokens":"9","completion_tokens_details":{"reasoning_tokens":4}}}"#,
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
