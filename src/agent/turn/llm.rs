//! An LLM turn in either mode: the conversation's first request, the callout that carries a turn
//! and its retries, what a reply means (`react.rs`, `native.rs`), and the next request once the
//! turn's tools are answered.

use super::convo::{Convo, Next};
use super::{native, offer, react, rules};
use crate::agent::calls::Calls;
use crate::agent::calls::{Retry, Wait};
use crate::agent::error::{AgentError, ErrorCode};
use crate::agent::protocol::{Call, RequestMeta};
use crate::config::{Config, Mode};
use crate::doc::truncate;
use crate::openai::{answer, ChatRequest};

/// The conversation and the first LLM request's body (sent upstream by the route).
pub fn start(cfg: &Config, req: ChatRequest, meta: &RequestMeta) -> Result<(Convo, Vec<u8>), AgentError> {
    let mut c = Convo::new(cfg, &req);
    match cfg.mode {
        Mode::React => react::start(&mut c, &req)?,
        Mode::Native => native::start(&mut c, cfg, &req)?,
    }
    // Without call rules nothing of them is entered (`Config::call_policy`, `Convo::rules`).
    if cfg.call_policy.is_some() {
        rules::start(&mut c, cfg, meta, &req);
    }
    // A catalog offered whole needs no choosing (`Config::offer`).
    if cfg.offer.is_some() {
        offer::offer(&mut c, cfg, &req);
    }
    if c.rules.is_some() {
        rules::offer(&mut c, cfg);
    }
    c.add_context(cfg, meta);
    let body = c.body(cfg, None);
    Ok((c, body))
}

/// What an LLM reply leads to.
pub fn read(c: &mut Convo, cfg: &Config, body: &[u8]) -> Result<Next, AgentError> {
    let reply = c.read(body, cfg.llm.max_total_tokens.is_some())?;
    Ok(match c.mode {
        Mode::React => react::on_reply(c, cfg, reply),
        Mode::Native => native::on_reply(c, cfg, reply),
    })
}

/// Appends this turn's observations (in call order) and returns the next LLM request's body.
pub fn observe(c: &mut Convo, cfg: &Config, observations: Vec<String>) -> Vec<u8> {
    if c.rules.is_some() {
        rules::observed(c, &observations);
    }
    let limit = c.ask_final(cfg);
    match c.mode {
        Mode::React => react::observe(c, cfg, observations, limit),
        Mode::Native => native::observe(c, cfg, observations, limit),
    }
    c.body(cfg, cfg.llm.model.as_deref())
}

/// An LLM callout carrying `body`, kept as it was sent so that it can go again.
pub fn call(cfg: &Config, calls: &mut Calls, body: Vec<u8>, now_ms: u64) -> Retry {
    let llm = &cfg.llm;
    let mut headers = vec![
        ("content-type".to_string(), answer::JSON.to_string()),
        // A compressed reply could not be read.
        ("accept-encoding".to_string(), "identity".to_string()),
    ];
    if let Some(key) = &llm.api_key {
        headers.push(("authorization".into(), format!("Bearer {key}")));
    }
    let call = Call {
        id: calls.mint(),
        cluster: llm.upstream.cluster.clone(),
        method: "POST",
        path: llm.path.clone(),
        authority: llm.upstream.authority_or_service(),
        headers,
        body: Some(body.into()),
        timeout_ms: calls.bounded(llm.upstream.timeout_ms, now_ms),
        stream: false,
    };
    calls.went_out(call.id, now_ms, call.timeout_ms, now_ms);
    Retry { call, attempt: 0, due: None }
}

/// Schedules `r` (of request `#request`) to be sent again, if `wait` says it may be retried and a
/// retry is left that ends before the deadline.
pub fn retry(cfg: &Config, calls: &mut Calls, r: &mut Retry, wait: Option<Wait>, now_ms: u64, request: &str) -> bool {
    let Some(wait) = wait.filter(|_| r.attempt < cfg.llm.max_retries) else {
        return false;
    };
    let Some(due) = calls.retry_due(now_ms, r.attempt, wait) else {
        return false;
    };
    r.attempt += 1;
    r.due = Some(due);
    let (id, why, max) = (r.call.id.0, wait.why(), cfg.llm.max_retries);
    log::info!("#{request} LLM call {id} {why}; retry {} of {max} in {} ms", r.attempt, due - now_ms);
    true
}

/// The call `r` again under a new id, once its backoff is over.
pub fn resend(cfg: &Config, calls: &mut Calls, r: &mut Retry, now_ms: u64) -> Option<Call> {
    if r.due.is_none_or(|d| d > now_ms) {
        return None;
    }
    r.due = None;
    r.call.id = calls.mint();
    r.call.timeout_ms = calls.bounded(cfg.llm.upstream.timeout_ms, now_ms);
    calls.went_out(r.call.id, now_ms, r.call.timeout_ms, now_ms);
    Some(r.call.clone())
}

/// The first turn's body within maxResponseBytes: the buffer the route forwards it through, and the
/// same bound when it goes by callout (`loop: request`, live, approved calls).
pub fn forwardable(cfg: &Config, body: Vec<u8>) -> Result<Vec<u8>, AgentError> {
    if body.len() <= cfg.max_response_bytes {
        return Ok(body);
    }
    let (len, max) = (body.len(), cfg.max_response_bytes);
    let why = format!("the rewritten request is {len} bytes, more than maxResponseBytes ({max})");
    Err(AgentError::new(413, ErrorCode::RequestTooLarge, why))
}

/// A non-2xx LLM reply ends the request; the provider's status and body say why.
pub fn status_error(status: u16, body: &[u8]) -> Option<AgentError> {
    (!(200..300).contains(&status)).then(|| {
        let text = String::from_utf8_lossy(body);
        AgentError::new(502, ErrorCode::LlmError, format!("the LLM answered HTTP {status}: {}", truncate(&text, 300)))
    })
}

/// Parameters a server may refuse (OpenAI's reasoning models refuse all four), stepped down one at a
/// time: the turn goes again without it.
pub const STEP_DOWN: [&str; 4] = ["stop", "max_tokens", "temperature", "top_p"];

/// The parameter a 400 reply refuses as unsupported, if it is one that can be left out: named by
/// the error's `param`, or quoted in its message next to "unsupported" / "not supported".
pub fn refused_param(status: u16, body: &[u8]) -> Option<&'static str> {
    if status != 400 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let err = v.get("error")?;
    let message = err.get("message").and_then(serde_json::Value::as_str).unwrap_or("").to_ascii_lowercase();
    let unsupported = message.contains("unsupported") || message.contains("not supported");
    if let Some(p) = err.get("param").and_then(serde_json::Value::as_str) {
        if unsupported
            || err.get("code").and_then(serde_json::Value::as_str).is_some_and(|c| c.starts_with("unsupported"))
        {
            return STEP_DOWN.into_iter().find(|s| *s == p);
        }
    }
    if !unsupported {
        return None;
    }
    STEP_DOWN.into_iter().find(|p| message.contains(&format!("'{p}'")) || message.contains(&format!("`{p}`")))
}

/// A streamed turn's head says its body is SSE (read as it comes).
pub fn is_event_stream(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(k, v)| k == "content-type" && v.to_ascii_lowercase().starts_with(answer::SSE))
}
