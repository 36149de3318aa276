//! Hardening in the harness: LLM and tool retries (backoff, Retry-After, deadline), the request-phase
//! loop, the bound on what the filter writes, malformed native replies, timeouts told from resets,
//! compressed tool bodies, and the secrets that logs redact.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use api_agent::agent::Failure;
use api_agent::config::Config;
use common::*;
use serde_json::{json, Value};

const PETS: &str = "outbound|8080||pets.svc";

fn pets(extra: Value) -> String {
    config(&[("pets.svc", "oai-petstore.yaml", json!({}))], extra)
}

fn error_of(out: &Outcome) -> Value {
    out.json()["error"].clone()
}

fn overloaded(status: u16) -> Turn {
    Turn::Raw(status, r#"{"error":{"message":"overloaded"}}"#.into())
}

#[test]
fn a_later_llm_turn_is_retried_after_a_backoff_and_then_answers() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([
            classic_call("a", "listPets", json!({})),
            overloaded(503),
            Turn::Fail(Failure::Timeout),
            text("Final Answer: none"),
        ])
        .tool_json(PETS, "[]");
    let out = h.run(&user("List pets"));
    assert_eq!(out.answer(), "none");
    // Turn 2 was sent three times, under new call ids, with the same body.
    assert_eq!(out.llm_calls.len(), 3);
    let ids: Vec<u32> = out.llm_calls.iter().map(|c| c.id.0).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(out.llm_calls[0].body, out.llm_calls[2].body);
    // Equal jitter: 100..=200 ms, then 200..=400 ms.
    let waits: Vec<u64> = out.wakes.iter().map(|(now, at)| at - now).collect();
    assert_eq!(waits.len(), 2, "{:?}", out.wakes);
    assert!((100..=200).contains(&waits[0]) && (200..=400).contains(&waits[1]), "{waits:?}");
}

#[test]
fn retry_after_is_honoured_and_retries_run_out() {
    let retry_after = || Turn::RawWith(429, vec![("retry-after".into(), "2".into())], "{}".into());
    let mut h = Harness::new(&pets(json!({"llm": {"maxRetries": 2}})))
        .llm([classic_call("a", "listPets", json!({})), retry_after(), retry_after(), retry_after()])
        .tool_json(PETS, "[]");
    let out = h.run(&user("List pets"));
    assert_eq!(out.reply.status, 502);
    assert!(error_of(&out)["message"].as_str().unwrap().contains("HTTP 429"), "{}", out.body_text());
    assert_eq!(out.llm_calls.len(), 3, "one call and two retries");
    // Two seconds after the 429 came (the harness clock moved one step since).
    assert!(out.wakes.iter().all(|(now, at)| (1980..=2000).contains(&(at - now))), "{:?}", out.wakes);
}

#[test]
fn what_is_not_retried() {
    for (turn, says) in [
        (overloaded(400), "HTTP 400"),
        (overloaded(401), "HTTP 401"),
        (Turn::Fail(Failure::NotSent("no cluster".into())), "could not be sent"),
    ] {
        let mut h =
            Harness::new(&pets(json!({}))).llm([classic_call("a", "listPets", json!({})), turn]).tool_json(PETS, "[]");
        let out = h.run(&user("List pets"));
        assert_eq!(out.reply.status, 502, "{says}");
        assert!(error_of(&out)["message"].as_str().unwrap().contains(says), "{}", out.body_text());
        assert_eq!(out.llm_calls.len(), 1, "{says}: not retried");
        assert!(out.wakes.is_empty());
    }
}

#[test]
fn no_retry_runs_past_the_request_deadline() {
    let cfg = pets(json!({"llm": {"maxRequestTime": 2000, "maxRetries": 5}}));
    let turns = [classic_call("a", "listPets", json!({}))].into_iter().chain((0..6).map(|_| overloaded(500)));
    let mut h = Harness::new(&cfg).llm(turns).tool_json(PETS, "[]");
    let out = h.run(&user("List pets"));
    assert_eq!(out.reply.status, 502);
    assert!(out.end_ms <= START_MS + 2000, "ended at +{} ms", out.end_ms - START_MS);
    assert!(out.llm_calls.len() < 6, "stopped retrying before the deadline: {}", out.llm_calls.len());
    assert!(out.wakes.iter().all(|(_, at)| *at < START_MS + 2000));
}

#[test]
fn a_reset_at_the_calls_timeout_is_a_timeout() {
    let cfg = pets(json!({"llm": {"maxRetries": 0, "maxExecutionTime": 1000}}));
    let mut h = Harness::new(&cfg)
        .llm([classic_call("a", "listPets", json!({})), Turn::Fail(Failure::Broken("no response (reset)".into()))])
        .tool_json(PETS, "[]");
    // The harness answers each call one step after it was sent: make that step the call's timeout.
    h.step_ms = 1000;
    let out = h.run(&user("List pets"));
    assert_eq!((out.reply.status, error_of(&out)["code"].as_str()), (504, Some("llm_timeout")), "{}", out.body_text());

    // Well before the timeout, a reset stays a reset.
    let mut h = Harness::new(&cfg)
        .llm([classic_call("a", "listPets", json!({})), Turn::Fail(Failure::Broken("no response (reset)".into()))])
        .tool_json(PETS, "[]");
    let out = h.run(&user("List pets"));
    assert_eq!((out.reply.status, error_of(&out)["code"].as_str()), (502, Some("llm_unavailable")));
}

#[test]
fn the_request_loop_calls_out_for_the_first_turn_and_answers_with_real_statuses() {
    for stream in [false, true] {
        let cfg = pets(json!({"loop": "request"}));
        let mut h = Harness::new(&cfg)
            .llm([overloaded(503), classic_call("a", "listPets", json!({})), text("Final Answer: two")])
            .tool_json(PETS, "[]");
        let mut req = user("List pets");
        req["stream"] = json!(stream);
        let out = h.run(&req);
        assert!(out.first_body.is_empty(), "nothing forwarded: the first turn is a callout too");
        assert_eq!(out.llm_calls.len(), 3, "the first turn was retried");
        assert_eq!(out.llm_requests[0]["model"], "callout-model", "llm.model applies to every callout");
        assert_eq!(out.reply.status, 200);
        if stream {
            assert_eq!(out.reply.content_type, "text/event-stream");
            assert!(out.body_text().ends_with("data: [DONE]\n\n"));
        } else {
            assert_eq!(out.answer(), "two");
        }

        // A late failure is a real status with a plain JSON error, for streaming clients too.
        let mut h = Harness::new(&pets(json!({"loop": "request", "llm": {"maxRetries": 0}})))
            .llm([classic_call("a", "listPets", json!({})), Turn::Fail(Failure::Timeout)])
            .tool_json(PETS, "[]");
        let out = h.run(&req);
        assert_eq!((out.reply.status, out.reply.content_type), (504, "application/json"));
        assert_eq!(error_of(&out)["code"], "llm_timeout");
        assert!(out.json().get("choices").is_none(), "a real status needs no empty choices");
    }
}

#[test]
fn late_errors_in_a_200_body_carry_empty_choices() {
    let mut h = Harness::new(&pets(json!({"llm": {"maxRetries": 0}})))
        .llm([classic_call("a", "listPets", json!({})), Turn::Fail(Failure::Timeout)])
        .tool_json(PETS, "[]");
    let out = h.run(&user("List pets"));
    assert_eq!(out.reply.status, 504);
    assert_eq!(out.json()["choices"], json!([]));
    assert_eq!(error_of(&out)["code"], "llm_timeout");
}

/// The answer as the client would receive it, and what the agent made of it.
fn run_answer(cfg: &str, answer: &str, stream: bool) -> Outcome {
    let mut h = Harness::new(cfg).llm([text(&format!("Final Answer: {answer}"))]);
    let mut req = user("Say a lot");
    req["stream"] = json!(stream);
    h.run(&req)
}

#[test]
fn an_answer_over_the_limit_is_response_too_large() {
    let cfg = pets(json!({}));
    let limit = Config::from_slice(cfg.as_bytes()).unwrap().max_response_bytes;
    assert_eq!(limit, 768 * 1024);
    // 2 MiB of text; 300 KiB of U+0001, which JSON escaping grows six-fold.
    for (answer, stream) in
        [("x".repeat(2 << 20), false), ("\u{1}".repeat(300 << 10), false), ("\u{1}".repeat(300 << 10), true)]
    {
        let out = run_answer(&cfg, &answer, stream);
        assert_eq!(out.reply.status, 502);
        assert!(out.reply.body.len() < 4096, "the error itself is small: {}", out.reply.body.len());
        let text = out.body_text();
        assert!(text.contains("response_too_large") && text.contains("maxResponseBytes"), "{text}");
    }
    // Just under the limit passes; raising the limit lets more through.
    let fits = "y".repeat(limit - 400);
    assert_eq!(run_answer(&cfg, &fits, false).reply.status, 200);
    let raised = pets(json!({"maxResponseBytes": 4 << 20}));
    assert_eq!(run_answer(&raised, &"x".repeat(2 << 20), false).reply.status, 200);
}

#[test]
fn a_native_stream_whose_sse_framing_crosses_the_limit_is_refused() {
    // Content that fits as one JSON string but not once framed as SSE chunks with escaping.
    let cfg =
        config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"mode": "native", "maxResponseBytes": 65536}));
    let content = "\"".repeat(32_500);
    let mut h = Harness::new(&cfg).llm([Turn::Message(json!({"role": "assistant", "content": content}))]);
    let mut req = user("Quote me");
    req["stream"] = json!(true);
    let out = h.run(&req);
    assert_eq!(out.reply.status, 502, "{}", &out.body_text()[..200.min(out.reply.body.len())]);
    let mut h = Harness::new(&cfg).llm([Turn::Message(json!({"role": "assistant", "content": content}))]);
    assert_eq!(h.run(&user("Quote me")).reply.status, 200, "the plain answer fits");
}

#[test]
fn a_rewritten_request_over_the_limit_is_a_413() {
    // In both loops, and live (every turn a streamed callout): the first request is never sent.
    for (loop_, live) in [("response", false), ("request", false), ("response", true), ("request", true)] {
        let cfg = pets(json!({"maxResponseBytes": 8192, "loop": loop_}));
        let mut h = Harness::new(&cfg).llm([classic_final("Fits?")]);
        h.live = live;
        let out = h.run(&user(&"q".repeat(9000)));
        assert_eq!(out.reply.status, 413, "loop {loop_}, live {live}: {}", out.body_text());
        let err = error_of(&out);
        assert_eq!(err["code"], "request_too_large", "loop {loop_}, live {live}");
        // A 4xx is the client's request at fault: OpenAI's type for it.
        assert_eq!(err["type"], "invalid_request_error", "loop {loop_}, live {live}");
        assert!(out.llm_requests.is_empty(), "loop {loop_}, live {live}: sent anyway");
    }
}

#[test]
fn a_native_reply_with_no_content_and_no_calls_is_asked_again() {
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({}))], json!({"mode": "native"}));
    let empty = || Turn::Message(json!({"role": "assistant", "content": null}));
    let mut h = Harness::new(&cfg).llm([empty(), Turn::Message(json!({"role": "assistant", "content": "Two pets."}))]);
    let out = h.run(&user("How many pets?"));
    assert_eq!(out.answer(), "Two pets.");
    let second = &out.llm_requests[1]["messages"];
    let last = second.as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(last["content"].as_str().unwrap().contains("Your reply was empty"));

    // A model that only ever replies with nothing ends at the limit with a non-empty answer.
    let mut h = Harness::new(&cfg).llm((0..10).map(|_| empty()));
    let out = h.run(&user("How many pets?"));
    assert_eq!((out.reply.status, out.finish_reason().as_str()), (200, "length"));
    assert!(!out.answer().trim().is_empty());
}

#[test]
fn tools_ask_for_identity_and_a_compressed_body_is_described() {
    let mut h = Harness::new(&pets(json!({})))
        .llm([classic_call("a", "listPets", json!({})), text("Final Answer: ok")])
        .tool(PETS, |_| {
            ToolReply::HttpWith(200, vec![("content-encoding".into(), "gzip".into())], "\u{1f}\u{8b}\u{8}junk".into())
        });
    let out = h.run(&user("List pets"));
    assert!(out.tool_calls[0].headers.contains(&("accept-encoding".into(), "identity".into())));
    let observation = out.last_message(2);
    assert!(observation.contains("compressed body (content-encoding: gzip"), "{observation}");
    assert!(!observation.contains("junk"));
}

#[test]
fn reads_are_retried_only_when_the_api_opts_in() {
    let flaky = |cfg: &str| {
        let calls = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = calls.clone();
        let h = Harness::new(cfg).llm([classic_call("a", "listPets", json!({})), text("Final Answer: ok")]).tool(
            PETS,
            move |_| {
                seen.set(seen.get() + 1);
                if seen.get() == 1 {
                    ToolReply::Http(503, "busy".into())
                } else {
                    ToolReply::Http(200, "[\"rex\"]".into())
                }
            },
        );
        (h, calls)
    };
    let (mut h, calls) = flaky(&config(&[("pets.svc", "oai-petstore.yaml", json!({"maxRetries": 1}))], json!({})));
    let out = h.run(&user("List pets"));
    assert_eq!(calls.get(), 2);
    assert_eq!(out.last_message(2), "Observation: [\"rex\"]");
    let (mut h, calls) = flaky(&pets(json!({})));
    let out = h.run(&user("List pets"));
    assert_eq!(calls.get(), 1, "not retried by default");
    assert!(out.last_message(2).contains("HTTP 503"));
}

#[test]
fn writes_are_never_retried() {
    let cfg = config(&[("pets.svc", "oai-petstore.yaml", json!({"maxRetries": 3}))], json!({}));
    let mut h = Harness::new(&cfg)
        .llm([classic_call("a", "createPets", json!({"id": 1, "name": "Rex"})), text("Final Answer: ok")])
        .tool(PETS, |_| ToolReply::Http(503, "busy".into()));
    let out = h.run(&user("Add Rex"));
    assert_eq!(out.tool_calls.len(), 1);
    assert!(out.last_message(2).contains("HTTP 503"));
}

#[test]
fn every_secret_is_listed_for_redaction_with_its_query_form() {
    let provider =
        json!({"apiKey": {"in": "query", "name": "key", "value": "q&k 1"}, "headers": {"X-Static": "static-v"}});
    let cfg = Config::from_slice(config(&[("pets.svc", "oai-petstore.yaml", provider)], json!({})).as_bytes()).unwrap();
    let secrets = cfg.secrets();
    for s in ["sk-llm", "q&k 1", "q%26k%201", "static-v"] {
        assert!(secrets.iter().any(|x| x == s), "{s} missing from {secrets:?}");
    }
    let line = "GET /v1/pets?key=q%26k%201 authorization: Bearer sk-llm";
    assert_eq!(
        api_agent::redact::redact(line, secrets),
        "GET /v1/pets?key=[redacted] authorization: Bearer [redacted]"
    );
    let header = json!({"apiKey": {"in": "header", "name": "X-K", "value": "hdr-key"}});
    let cfg = Config::from_slice(config(&[("pets.svc", "oai-petstore.yaml", header)], json!({})).as_bytes()).unwrap();
    assert!(cfg.secrets().contains(&"hdr-key".to_string()));
}

#[test]
fn an_early_wake_up_keeps_the_retry_waiting() {
    use api_agent::agent::{Agent, Command, Event};
    let cfg =
        std::rc::Rc::new(api_agent::config::Config::from_slice(pets(json!({"loop": "request"})).as_bytes()).unwrap());
    let meta = request_meta("w", 1000, 3);
    let mut agent = Agent::new(cfg, meta);
    let cmds = agent.handle(Event::ClientRequest { body: user("Pets?").to_string().as_bytes() }, 1000);
    let Some(Command::Dispatch(call)) = cmds.first() else { panic!("{cmds:?}") };
    let cmds = agent.handle(Event::CallReply { id: call.id, status: 503, headers: &[], body: b"busy" }, 1010);
    let Some(Command::WakeAt(at)) = cmds.last() else { panic!("{cmds:?}") };
    let early = agent.handle(Event::Wake, at - 1);
    assert_eq!(early, vec![Command::WakeAt(*at)], "still waiting, and asking again");
    let on_time = agent.handle(Event::Wake, *at);
    assert!(matches!(on_time.first(), Some(Command::Dispatch(_))), "{on_time:?}");
}

/// The agent keeps no clock: the report ends at the time of the event that ended the request, and
/// the stream's end (`Event::Closed`) with the status the agent sent changes nothing.
#[test]
fn the_report_ends_at_the_event_that_ended_the_request() {
    use api_agent::agent::{Agent, Event};
    let cfg = std::rc::Rc::new(Config::from_slice(pets(json!({})).as_bytes()).unwrap());
    let mut agent = Agent::new(cfg, request_meta("d", 1000, 3));
    assert!(agent.handle(Event::ClientRequest { body: b"not json" }, 1234).len() == 1);
    assert_eq!((agent.report().status, agent.report().ended_ms), (400, 1234));
    assert!(agent.handle(Event::Closed { host_status: Some(400) }, 5000).is_empty());
    assert_eq!(agent.report().ended_ms, 1234);
}

#[test]
fn the_report_carries_the_status_envoy_itself_sent() {
    use api_agent::agent::{Agent, Event, Outcome};
    let cfg = std::rc::Rc::new(Config::from_slice(pets(json!({})).as_bytes()).unwrap());
    let meta = |id: &str| request_meta(id, 1000, 3);
    let body = user("Pets?").to_string();
    // Still waiting for the LLM when Envoy answered 502 on its own: that is what the client got.
    let mut agent = Agent::new(std::rc::Rc::clone(&cfg), meta("a"));
    agent.handle(Event::ClientRequest { body: body.as_bytes() }, 1000);
    agent.handle(Event::Closed { host_status: Some(502) }, 1100);
    let r = agent.report();
    assert_eq!((r.outcome, r.status, r.code, r.ended_ms), (Outcome::LlmError, 502, Some("host_reply"), 1100));
    // A 2xx while the agent still runs is its own stream the client left; no status at all, the same.
    for status in [200, 0] {
        let mut agent = Agent::new(std::rc::Rc::clone(&cfg), meta("b"));
        agent.handle(Event::ClientRequest { body: body.as_bytes() }, 1000);
        agent.handle(Event::Closed { host_status: Some(status) }, 1100);
        assert_eq!((agent.report().outcome, agent.report().status), (Outcome::Cancelled, 0));
    }
    // An answer the agent finished with its own status is left alone when Envoy agrees.
    let mut agent = Agent::new(cfg, meta("c"));
    agent.handle(Event::ClientRequest { body: b"not json" }, 1000);
    agent.handle(Event::Closed { host_status: Some(400) }, 1100);
    assert_eq!((agent.report().outcome, agent.report().code), (Outcome::ClientError, Some("invalid_request")));
}
