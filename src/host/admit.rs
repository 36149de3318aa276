//! Admission: whether a request is the agent's, which configuration applies (Higress's rules by route,
//! host, cluster and consumer), and the per-request inputs the agent gets instead of a clock or a
//! random source.

use super::port::{set_header, Attr, Headers, Port};
use crate::agent::{Api, ClientHeaders, RequestMeta};
use crate::config::{Config, Passthrough, Plugin, RequestKeys, CONSUMER_HEADER};
use std::rc::Rc;

/// Why the agent does not take a request (`passthrough` decides what becomes of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotTaken {
    /// Not a POST.
    Method,
    /// A body that does not say it is JSON.
    ContentType,
    /// No body.
    Empty,
    /// A path that is none of chat completions, the Responses API and Anthropic Messages.
    Path,
}

impl NotTaken {
    /// The status and message of a refusal (`passthrough: refuse`).
    pub fn refusal(self) -> (u16, &'static str) {
        match self {
            NotTaken::Method => (405, "this route serves the agent only: POST a chat completions or Responses request"),
            NotTaken::ContentType => (415, "this route serves the agent only: the request body must be JSON"),
            NotTaken::Empty => (400, "this route serves the agent only: the request has no body"),
            NotTaken::Path => {
                (404, "this route serves the agent only: POST to .../chat/completions, the Responses path or the Messages path")
            }
        }
    }
}

/// Whether this request may be one the agent takes: a JSON POST with a body. `Ok`: its path, without
/// the query, for `api_of` once the configuration is known.
pub fn candidate(port: &impl Port, end_of_stream: bool) -> Result<String, NotTaken> {
    let method = port.header(Headers::Request, ":method").unwrap_or_default();
    if method != "POST" {
        return Err(NotTaken::Method);
    }
    let content_type = port.header(Headers::Request, "content-type").unwrap_or_default();
    if !(content_type.is_empty() || mentions_json(&content_type)) {
        return Err(NotTaken::ContentType);
    }
    if end_of_stream {
        return Err(NotTaken::Empty);
    }
    let mut path = port.header(Headers::Request, ":path").unwrap_or_default();
    if let Some(query) = path.find('?') {
        path.truncate(query);
    }
    Ok(path)
}

/// The API a path speaks, if the agent takes it: chat completions, the Responses API at
/// `responses.path` (a path ending in `/responses` by default), or Anthropic Messages at
/// `messages.path` (`/v1/messages` by default).
pub fn api_of(path: &str, cfg: &Config) -> Option<Api> {
    if path.ends_with("/chat/completions") {
        Some(Api::ChatCompletions)
    } else if path.ends_with(cfg.responses_path.as_deref().unwrap_or("/responses")) {
        Some(Api::Responses)
    } else if path.ends_with(cfg.messages_path.as_deref().unwrap_or("/v1/messages")) {
        Some(Api::Messages)
    } else {
        None
    }
}

/// The headers of a request that goes to the route's upstream (the agent's first turn, or a request
/// it does not take): the client's identity is for its tools' APIs, never for the LLM, and the
/// consumer's credentials are for the gateway, never for the provider.
pub fn for_the_llm(port: &impl Port, rid: &str, cfg: &Config) {
    for name in &cfg.identity_headers {
        set_header(port, rid, Headers::Request, name, None);
    }
    if let Some(key) = &cfg.llm.api_key {
        set_header(port, rid, Headers::Request, "authorization", Some(&format!("Bearer {key}")));
    }
}

/// A request on the filter's route that the agent does not take: passed on with `for_the_llm`'s
/// headers, or refused (`passthrough: refuse`). `true`: refused (answered).
pub fn pass_on(port: &impl Port, cfg: &Config, why: NotTaken) -> bool {
    if cfg.passthrough == Passthrough::Refuse {
        let (status, message) = why.refusal();
        log::info!("a request the agent does not take was refused ({why:?}): {status}");
        let body = crate::openai::answer::error(message, "invalid_request_error", "not_an_agent_request").to_string();
        port.local_reply(status, &[("content-type", crate::openai::answer::JSON)], body.as_bytes());
        return true;
    }
    log::debug!("a request the agent does not take ({why:?}) is passed on without the client's identity");
    for_the_llm(port, "-", cfg);
    false
}

/// Whether a content type names JSON, in any case (without a lower-cased copy).
pub fn mentions_json(content_type: &str) -> bool {
    content_type.as_bytes().windows(4).any(|w| w.eq_ignore_ascii_case(b"json"))
}

/// The configuration for this request: the global one, or the first rule that matches; with its
/// place in the plugin (`Plugin::configs`).
pub fn select<'p>(port: &impl Port, plugin: &'p Plugin) -> Option<(usize, &'p Rc<Config>)> {
    if plugin.rules.is_empty() {
        return plugin.global.as_ref().map(|g| (0, g));
    }
    let attr = |needed: bool, a| if needed { port.attribute(a).unwrap_or_default() } else { String::new() };
    let route = attr(plugin.needs_route(), Attr::RouteName);
    let cluster = attr(plugin.needs_cluster(), Attr::ClusterName);
    let host = port.header(Headers::Request, ":authority").unwrap_or_default();
    let consumer = if plugin.needs_consumer() {
        port.header(Headers::Request, CONSUMER_HEADER).unwrap_or_default()
    } else {
        String::new()
    };
    plugin.select(RequestKeys { route: &route, host: &host, cluster: &cluster, consumer: &consumer })
}

/// The request headers `context.headers` names, with their labels.
fn context_headers(port: &impl Port, cfg: &Config) -> Vec<(String, String)> {
    let Some(ctx) = &cfg.context else {
        return Vec::new();
    };
    ctx.headers
        .iter()
        .filter_map(|(label, name)| port.header(Headers::Request, name).map(|v| (label.clone(), v)))
        .collect()
}

/// The request headers `policy.headers` names, for the call rules (none read without rules).
fn policy_headers(port: &impl Port, cfg: &Config) -> Vec<(String, String)> {
    let Some(p) = &cfg.call_policy else {
        return Vec::new();
    };
    p.headers.iter().filter_map(|n| port.header(Headers::Request, n).map(|v| (n.clone(), v))).collect()
}

/// The client's headers that the configuration's APIs forward or exchange (`forwardHeaders`,
/// `tokenExchange.subjectHeader`): read once here, the agent's input; the names the request lacks are
/// absent.
pub fn client_headers(port: &impl Port, cfg: &Config) -> ClientHeaders {
    let mut out: Vec<(String, String)> = Vec::new();
    for name in &cfg.identity_headers {
        if let Some(value) = port.header(Headers::Request, name) {
            out.push((name.clone(), value));
        }
    }
    ClientHeaders(out)
}

/// What the host knows of a new request: its clock, a number that tells it from the host's other
/// streams, and whether it can stream live (`RequestMeta::live`).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub now_ns: u64,
    pub seq: u64,
    pub live: bool,
}

/// The agent's inputs for this request.
pub fn meta(port: &impl Port, cfg: &Config, arrival: Arrival, api: Api) -> RequestMeta {
    let now_ms = arrival.now_ns / 1_000_000;
    RequestMeta {
        id: format!("{now_ms:x}{:04x}", arrival.seq & 0xffff),
        now_ms,
        unix_s: now_ms / 1000,
        seed: arrival.now_ns ^ (arrival.seq << 32),
        steps: port
            .header(Headers::Request, "x-api-agent-steps")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        context_headers: context_headers(port, cfg),
        policy_headers: policy_headers(port, cfg),
        client_headers: client_headers(port, cfg),
        live: arrival.live,
        trace: trace_context(port),
        api,
        // The instance's memory is recalled by the caller (`StreamRun::start`).
        memory: Default::default(),
    }
}

/// The trace headers callouts carry, as the client (or Envoy's tracer) set them on the request: each
/// family read only when its first header is there, so a request without trace context costs four
/// header reads.
const TRACE_FAMILIES: [(&str, &[&str]); 4] = [
    ("traceparent", &["tracestate"]),
    ("x-request-id", &[]),
    ("b3", &[]),
    ("x-b3-traceid", &["x-b3-spanid", "x-b3-parentspanid", "x-b3-sampled", "x-b3-flags"]),
];

/// The request's trace context: only what is there (none is invented).
fn trace_context(port: &impl Port) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (first, rest) in TRACE_FAMILIES {
        let Some(v) = port.header(Headers::Request, first) else { continue };
        out.push((first.to_string(), v));
        for name in rest {
            if let Some(v) = port.header(Headers::Request, name) {
                out.push((name.to_string(), v));
            }
        }
    }
    out
}

/// Every tool source of the configuration is an MCP server not listed yet: a 503 the client can retry.
pub fn not_ready(port: &impl Port) {
    log::warn!("a request came before any MCP server's tools were listed: 503");
    let message = "the gateway's tools are not ready yet (their MCP servers are being listed); try again shortly";
    let body = crate::openai::answer::error(message, "api_error", "tools_not_ready").to_string();
    let headers = [("content-type", crate::openai::answer::JSON), ("retry-after", "1")];
    port.local_reply(503, &headers, body.as_bytes());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cfg(extra: &str) -> Config {
        let spec = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /w:\n    get: {operationId: w}\n";
        let text = format!(
            r#"{{"llm": {{"serviceName": "l", "servicePort": 1, "path": "/v1/chat/completions"}}, {extra}
              "apis": [{{"apiProvider": {{"serviceName": "a", "servicePort": 2}}, "api": {}}}]}}"#,
            serde_json::to_string(spec).unwrap()
        );
        Config::from_slice(text.as_bytes()).unwrap()
    }

    #[test]
    fn the_path_says_which_api_the_request_speaks() {
        let default = cfg("");
        assert_eq!(api_of("/v1/chat/completions", &default), Some(Api::ChatCompletions));
        assert_eq!(api_of("/v1/responses", &default), Some(Api::Responses));
        assert_eq!(api_of("/openai/v1/responses", &default), Some(Api::Responses));
        assert_eq!(api_of("/v1/responses/resp_1/cancel", &default), None);
        assert_eq!(api_of("/v1/embeddings", &default), None);
        let custom = cfg(r#""responses": {"path": "/agent/respond"},"#);
        assert_eq!(api_of("/agent/respond", &custom), Some(Api::Responses));
        assert_eq!(api_of("/v1/responses", &custom), None);
        assert_eq!(api_of("/v1/chat/completions", &custom), Some(Api::ChatCompletions));
        assert_eq!(api_of("/v1/messages", &default), Some(Api::Messages));
        assert_eq!(api_of("/anthropic/v1/messages", &default), Some(Api::Messages));
        assert_eq!(api_of("/v1/messages/count_tokens", &default), None);
        assert_eq!(api_of("/v1/threads/t/messages", &default), None);
        let custom = cfg(r#""messages": {"path": "/agent/messages"},"#);
        assert_eq!(api_of("/agent/messages", &custom), Some(Api::Messages));
        assert_eq!(api_of("/v1/messages", &custom), None);
    }

    #[test]
    fn json_is_found_in_any_case() {
        for ct in ["application/json", "Application/JSON; charset=utf-8", "application/vnd.api+Json"] {
            assert!(mentions_json(ct), "{ct}");
        }
        for ct in ["text/plain", "jso", "", "application/js on"] {
            assert!(!mentions_json(ct), "{ct}");
        }
    }
}
