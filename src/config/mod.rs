//! The plugin configuration: Higress `ai-agent` keys plus ours, parsed and validated once at plugin
//! start into typed structs. Every error names the field path.

mod apis;
pub mod call_policy;
mod error;
mod fields;
mod header_params;
mod identity;
mod policy;
mod refresh;
mod rules;
mod selection;
mod service;

use crate::doc;
use crate::prompt::react::{Template, WordChoices};
use crate::schema::Schema;
use crate::tools::Catalog;
use apis::parse_apis;
use fields::Fields;
use serde_json::Value;
use service::{check_header_text, parse_upstream};

pub use crate::upstream::{Api, ApiKey, Identity, TokenExchange, Upstream};
pub use error::ConfigError;
pub use identity::Passthrough;
pub use refresh::McpSource;
pub use rules::{sort_secrets, Matcher, Plugin, RequestKeys, Rule, CONSUMER_HEADER};
pub use selection::{native_tool, Offer, Selection, DEFAULT_MAX_PROMPT_BYTES, DEFAULT_THRESHOLD};
pub use service::is_token_byte;

pub const DEFAULT_MAX_ITERATIONS: u32 = 15;
pub const DEFAULT_TIMEOUT_MS: u64 = 50_000;
pub const DEFAULT_MAX_TOKENS: u64 = 1000;
pub const DEFAULT_MAX_REQUEST_TIME_MS: u64 = 300_000;
pub const DEFAULT_MAX_OBSERVATION_BYTES: usize = 8 * 1024;
pub const DEFAULT_MAX_PARALLEL_TOOL_CALLS: usize = 8;
pub const DEFAULT_JSON_RETRIES: u32 = 3;
pub const DEFAULT_LLM_RETRIES: u32 = 2;
/// Below Envoy's default `per_connection_buffer_limit_bytes` (1 MiB): a body the filter writes past the
/// listener's limit makes Envoy reset the stream inside the write, which can take the process down.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 768 * 1024;
/// OpenAI's limits on function tools.
pub const MAX_NATIVE_TOOLS: usize = 128;
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The plugin configuration's text (JSON, or YAML) as one value.
fn parse_text(bytes: &[u8]) -> Result<Value, ConfigError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| ConfigError::new("", format!("configuration is not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Err(ConfigError::new("", "configuration is empty"));
    }
    doc::parse(text).map_err(|e| ConfigError::new("", format!("configuration {e}")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    React,
    Native,
}

/// Where the loop runs. `Response`: the route's upstream answers the first turn and the loop runs while
/// the client's response is held (status 200 is out before the answer is known). `Request`: the
/// client's request is held, every turn is a callout, and the answer is a local reply with its real
/// status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopPhase {
    Request,
    Response,
}

#[derive(Debug, Clone)]
pub struct Llm {
    pub upstream: Upstream,
    pub path: String,
    pub model: Option<String>,
    pub api_key: Option<String>,
    pub max_iterations: u32,
    /// The most tokens (the sum of every turn's `total_tokens`) one request may spend (`maxTotalTokens`).
    pub max_total_tokens: Option<u64>,
    pub max_tokens: u64,
    pub max_request_time_ms: u64,
    pub max_observation_bytes: usize,
    pub max_parallel_tool_calls: usize,
    /// Retries of an LLM call that failed with 429, 5xx, a reset or a timeout.
    pub max_retries: u32,
}

/// FastGPT's current-turn context: rendered into the current user message only, so that the prefix of
/// every request (system prompt, earlier turns) stays the same across turns and requests.
#[derive(Debug, Clone)]
pub struct Context {
    /// The current time in `zone`.
    pub time: Option<crate::tz::Zone>,
    /// (label, lower-case request header name).
    pub headers: Vec<(String, String)>,
    pub text: Option<String>,
}

#[derive(Debug, Clone)]
pub struct JsonResp {
    /// Compiled once, here; every answer is checked against it.
    pub schema: Schema,
    pub max_retry: u32,
    pub use_response_format: bool,
    /// No schema was given: any JSON object (sent as `response_format: json_object`).
    pub json_object: bool,
}

/// The forms of the request's summary on a host with dynamic metadata (`summary.metadata`,
/// `summary.filterState`): each is Envoy work per request, so only what operators read is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryForms {
    /// Dynamic metadata `api_agent` (access logs, rate limits): on unless turned off.
    pub metadata: bool,
    /// Filter state `wasm.api_agent.<field>` (one Envoy call per field): off unless asked for.
    pub filter_state: bool,
}

impl Default for SummaryForms {
    fn default() -> Self {
        SummaryForms { metadata: true, filter_state: false }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub loop_phase: LoopPhase,
    /// The largest body the filter writes (the answer, the rewritten first request), measured as sent.
    pub max_response_bytes: usize,
    pub llm: Llm,
    pub apis: Vec<Api>,
    pub tools: Catalog,
    pub template: Template,
    /// The ReAct system prompt with every tool, rendered once.
    pub react_prompt: String,
    /// The same prompt as JSON string contents (escaped, no quotes), spliced into every request body.
    pub react_prompt_json: String,
    /// The OpenAI `tools` array for native mode, rendered once.
    pub native_tools: Vec<Value>,
    /// `tools`: how a large catalog is offered.
    pub selection: Selection,
    /// A catalog too large to offer whole (`tools`): each request is offered a selection, and
    /// `react_prompt` / `native_tools` hold only what every request carries (pinned tools and
    /// `find_tools`). `None`: every tool on every request.
    pub offer: Option<Offer>,
    /// The same array as JSON text, spliced into every request body.
    pub native_tools_json: String,
    pub json_resp: Option<JsonResp>,
    /// The rules on every tool call and the data-flow guard (top-level `policy`). `None`: nothing
    /// configured, so a request never enters the rules' code (`turn/rules.rs`, `tools/approval.rs`).
    pub call_policy: Option<call_policy::CallPolicy>,
    /// Tools that run only after the client approved the call (`apis[].policy.confirm`).
    pub confirm: Vec<String>,
    /// The MCP servers, to rebuild the catalog from a new `tools/list` (`with_mcp_tools`); those
    /// without a pinned `toolsList` are listed by the host.
    pub mcp: Vec<McpSource>,
    /// Current-turn context added to the user's message.
    pub context: Option<Context>,
    /// Every answer carries the agent's steps (`api_agent_steps`), as if each client asked.
    pub return_steps: bool,
    /// The final turn's reasoning goes to the client (`reasoning.return`, default true).
    pub return_reasoning: bool,
    /// `reasoning.templateOpens`: the LLM server's chat template opens a think block itself
    /// (DeepSeek-R1, QwQ): a streamed turn's text is thinking until `</think>`.
    pub template_opens: bool,
    /// `responses.path`: requests whose path ends with it speak the Responses API (unset:
    /// `/responses`).
    pub responses_path: Option<String>,
    /// `messages.path`: requests whose path ends with it speak Anthropic Messages (unset: `/v1/messages`).
    pub messages_path: Option<String>,
    /// Things accepted but worth an operator's attention (ignored keys, skipped operations); logged once.
    pub warnings: Vec<String>,
    /// The client's request headers that APIs forward or exchange, lower case, each once.
    pub identity_headers: Vec<String>,
    /// What becomes of the requests the agent does not take.
    pub passthrough: Passthrough,
    /// The run's spans where the host makes them (`tracing`).
    pub tracing: Tracing,
    /// `summary`: the forms of the request's summary the dynamic module sets (Proxy-Wasm has only
    /// filter state and always sets it).
    pub summary: SummaryForms,
    /// Every configured secret (`secrets()`), found once at load.
    secrets: Vec<String>,
}

/// `tracing`: how the run's spans look (the dynamic module makes them through Envoy's tracer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracing {
    /// `agentName`: `gen_ai.agent.name`, and the run span's name (`invoke_agent <name>`).
    pub agent_name: String,
    /// `content`: tool arguments and results go into spans (masked, cut to `maxObservationBytes`).
    pub content: bool,
}

impl Default for Tracing {
    fn default() -> Self {
        Tracing { agent_name: "api-agent".into(), content: false }
    }
}

impl Config {
    /// Parses the plugin configuration (JSON, or YAML text).
    pub fn from_slice(bytes: &[u8]) -> Result<Config, ConfigError> {
        Config::from_value(&parse_text(bytes)?)
    }

    pub fn from_value(value: &Value) -> Result<Config, ConfigError> {
        let mut root = Fields::new("", value)?;
        let mode = match root.opt_str("mode")?.as_deref() {
            None | Some("react") => Mode::React,
            Some("native") => Mode::Native,
            Some(other) => return Err(root.err("mode", format!("must be 'react' or 'native', found '{other}'"))),
        };
        let loop_phase = match root.opt_str("loop")?.as_deref() {
            None | Some("response") => LoopPhase::Response,
            Some("request") => LoopPhase::Request,
            Some(other) => return Err(root.err("loop", format!("must be 'request' or 'response', found '{other}'"))),
        };
        let max_response_bytes =
            root.opt_uint("maxResponseBytes", 4096, 1 << 30)?.map_or(DEFAULT_MAX_RESPONSE_BYTES, |n| n as usize);
        let llm = parse_llm(root.opt_object("llm")?.ok_or_else(|| root.err("llm", "required"))?)?;
        let mut warnings = Vec::new();
        let mut confirm = Vec::new();
        let mut mcp = Vec::new();
        let (apis, tools) = parse_apis(&mut root, &mut warnings, &mut confirm, &mut mcp)?;
        let template = parse_template(&mut root, &mut warnings)?;
        let json_resp = parse_json_resp(&mut root)?;
        let return_steps = root.opt_bool("returnSteps")?.unwrap_or(false);
        let (return_reasoning, template_opens) = match root.opt_object("reasoning")? {
            Some(mut r) => {
                let on = r.opt_bool("return")?.unwrap_or(true);
                let opens = r.opt_bool("templateOpens")?.unwrap_or(false);
                r.deny_unknown()?;
                (on, opens)
            }
            None => (true, false),
        };
        let tracing = parse_tracing(&mut root)?;
        let summary = match root.opt_object("summary")? {
            Some(mut s) => {
                let forms = SummaryForms {
                    metadata: s.opt_bool("metadata")?.unwrap_or(true),
                    filter_state: s.opt_bool("filterState")?.unwrap_or(false),
                };
                s.deny_unknown()?;
                forms
            }
            None => SummaryForms::default(),
        };
        let context = parse_context(&mut root)?;
        let call_policy = call_policy::parse(&mut root)?;
        let responses_path = parse_front_path(&mut root, "responses")?;
        let messages_path = parse_front_path(&mut root, "messages")?;
        let selection = selection::parse_selection(&mut root)?;
        let passthrough = identity::parse_passthrough(&mut root)?;
        if root.get("returnResponseTemplate").is_some() {
            warnings.push(
                "returnResponseTemplate is a legacy Higress key and is ignored: answers are always OpenAI chat.completion objects"
                    .into(),
            );
        }
        for key in root.unknown_keys() {
            if !key.starts_with('_') {
                warnings.push(format!("unknown top-level key '{key}' ignored"));
            }
        }
        let identity_headers = Config::collect_identity_headers(&apis);
        let mut config = Config {
            mode,
            loop_phase,
            max_response_bytes,
            llm,
            apis,
            tools,
            template,
            react_prompt: String::new(),
            react_prompt_json: String::new(),
            native_tools: Vec::new(),
            native_tools_json: String::new(),
            selection,
            offer: None,
            json_resp,
            confirm,
            call_policy,
            mcp,
            context,
            return_steps,
            return_reasoning,
            template_opens,
            responses_path,
            messages_path,
            warnings,
            identity_headers,
            passthrough,
            tracing,
            summary,
            secrets: Vec::new(),
        };
        config.secrets = config.find_secrets();
        config.render_tools("apis")?;
        Ok(config)
    }
}

fn parse_tracing(root: &mut Fields<'_>) -> Result<Tracing, ConfigError> {
    let Some(mut t) = root.opt_object("tracing")? else {
        return Ok(Tracing::default());
    };
    let mut tracing = Tracing::default();
    if let Some(name) = t.opt_str("agentName")? {
        let printable = name.chars().all(|c| c.is_ascii_graphic() || c == ' ');
        if name.trim().is_empty() || name.len() > 64 || !printable {
            return Err(t.err("agentName", "must be 1-64 printable ASCII characters"));
        }
        tracing.agent_name = name;
    }
    tracing.content = t.opt_bool("content")?.unwrap_or(false);
    t.deny_unknown()?;
    Ok(tracing)
}

impl Config {
    /// The client's request headers that APIs forward or exchange (`forwardHeaders`,
    /// `tokenExchange.subjectHeader`), lower case, each once: found at load (`identity_headers`).
    fn collect_identity_headers(apis: &[Api]) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for identity in apis.iter().map(|a| &a.identity) {
            let subject = identity.token_exchange.as_ref().map(|x| &x.subject_header);
            for name in identity.forward_headers.iter().chain(subject) {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names
    }

    /// Every configured secret, as written and as it appears percent-encoded in a query string, longest
    /// first: `llm.apiKey`, `apiKey` values and static header values. Masked in logs, and in what tools
    /// return before the model, the steps or a span sees it.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    fn find_secrets(&self) -> Vec<String> {
        let mut raw: Vec<&str> = self.llm.api_key.iter().map(String::as_str).collect();
        for api in &self.apis {
            match &api.api_key {
                Some(ApiKey::Header { value, .. } | ApiKey::Query { value, .. }) => raw.push(value),
                None => {}
            }
            raw.extend(api.headers.iter().map(|(_, v)| v.as_str()));
            let exchange = api.identity.token_exchange.as_ref();
            raw.extend(exchange.and_then(|x| x.client.as_ref()).map(|(_, secret)| secret.as_str()));
        }
        let mut out: Vec<String> = Vec::new();
        for s in raw.into_iter().filter(|s| !s.trim().is_empty()) {
            out.extend([s.to_string(), crate::openapi::call::encode_query(s)]);
        }
        // Longest first, so a secret that contains another is replaced whole.
        sort_secrets(&mut out);
        out
    }
}

fn parse_llm(mut f: Fields<'_>) -> Result<Llm, ConfigError> {
    let upstream = parse_upstream(&mut f)?;
    let path = f.req_str("path")?;
    if !path.starts_with('/') {
        return Err(f.err("path", format!("must start with '/', found '{path}'")));
    }
    let model = f.opt_nonempty("model")?;
    let api_key = f.opt_nonempty("apiKey")?;
    if let Some(key) = &api_key {
        check_header_text(&f, "apiKey", key)?;
    }
    let max_iterations = match f.opt_uint("maxIterations", 0, 1000)? {
        None | Some(0) => DEFAULT_MAX_ITERATIONS,
        Some(n) => n as u32,
    };
    let max_tokens = match (f.opt_uint("maxTokens", 1, 10_000_000)?, f.opt_uint("maxToken", 1, 10_000_000)?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    let max_request_time_ms = f.opt_uint("maxRequestTime", 1, 24 * 3_600_000)?.unwrap_or(DEFAULT_MAX_REQUEST_TIME_MS);
    let max_observation_bytes =
        f.opt_uint("maxObservationBytes", 64, 1 << 24)?.map_or(DEFAULT_MAX_OBSERVATION_BYTES, |n| n as usize);
    let max_parallel_tool_calls =
        f.opt_uint("maxParallelToolCalls", 1, 128)?.map_or(DEFAULT_MAX_PARALLEL_TOOL_CALLS, |n| n as usize);
    let max_retries = f.opt_uint("maxRetries", 0, 10)?.map_or(DEFAULT_LLM_RETRIES, |n| n as u32);
    let max_total_tokens = f.opt_uint("maxTotalTokens", 1, 1_000_000_000)?;
    f.deny_unknown()?;
    Ok(Llm {
        upstream,
        path,
        model,
        api_key,
        max_iterations,
        max_tokens,
        max_request_time_ms,
        max_observation_bytes,
        max_parallel_tool_calls,
        max_retries,
        max_total_tokens,
    })
}

fn parse_template(root: &mut Fields<'_>, warnings: &mut Vec<String>) -> Result<Template, ConfigError> {
    let Some(mut f) = root.opt_object("promptTemplate")? else {
        return Ok(Template::english());
    };
    let language = f.opt_str("language")?;
    let chinese = match language.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("EN") | Some("") => false,
        Some("CH") | Some("ZH") | Some("CN") => true,
        Some(other) => {
            // As Higress does: any other language is English.
            warnings.push(format!("promptTemplate.language '{other}' is not 'EN' or 'CH'; English is used"));
            false
        }
    };
    let en = f.opt_object("enTemplate")?.map(parse_template_words).transpose()?;
    let ch = f.opt_object("chTemplate")?.map(parse_template_words).transpose()?;
    f.deny_unknown()?;
    let mut t = if chinese { Template::chinese() } else { Template::english() };
    if let Some(words) = if chinese { ch } else { en } {
        t.apply_words(words);
    }
    Ok(t)
}

/// Higress's template words (each optional): `question`, `thought1`, `actionInput`, `observation`,
/// `thought2`, `finalAnswer`, `begin`.
fn parse_template_words(mut f: Fields<'_>) -> Result<WordChoices, ConfigError> {
    let words = [
        f.opt_nonempty("question")?,
        f.opt_nonempty("thought1")?,
        f.opt_nonempty("actionInput")?,
        f.opt_nonempty("observation")?,
        f.opt_nonempty("thought2")?,
        f.opt_nonempty("finalAnswer")?,
        f.opt_nonempty("begin")?,
    ];
    f.deny_unknown()?;
    Ok(words)
}

fn parse_context(root: &mut Fields<'_>) -> Result<Option<Context>, ConfigError> {
    let Some(mut f) = root.opt_object("context")? else {
        return Ok(None);
    };
    let time = f.opt_bool("time")?.unwrap_or(false);
    let zone = match f.opt_nonempty("timezone")? {
        Some(name) => crate::tz::Zone::parse(&name).map_err(|e| f.err("timezone", e))?,
        None => crate::tz::Zone::utc(),
    };
    let text = f.opt_nonempty("text")?;
    let mut headers = Vec::new();
    if let Some(h) = f.opt_object("headers")? {
        let path = h.path().to_string();
        if let Some(Value::Object(map)) = f.get("headers") {
            for (label, header) in map {
                let p = format!("{path}.{label}");
                let Value::String(name) = header else {
                    return Err(ConfigError::new(
                        &p,
                        format!("must be a header name, found {}", doc::type_name(header)),
                    ));
                };
                if name.is_empty() || !name.bytes().all(is_token_byte) {
                    return Err(ConfigError::new(&p, format!("'{name}' is not a valid header name")));
                }
                if label.trim().is_empty() || label.contains(['\r', '\n']) {
                    return Err(ConfigError::new(&p, "the label must be a non-empty single line"));
                }
                headers.push((label.clone(), name.to_ascii_lowercase()));
            }
        }
    }
    f.deny_unknown()?;
    if !time && headers.is_empty() && text.is_none() {
        return Ok(None);
    }
    Ok(Some(Context { time: time.then_some(zone), headers, text }))
}

fn parse_json_resp(root: &mut Fields<'_>) -> Result<Option<JsonResp>, ConfigError> {
    let Some(mut f) = root.opt_object("jsonResp")? else {
        return Ok(None);
    };
    let enable = f.opt_bool("enable")?.unwrap_or(false);
    let schema = match f.get("jsonSchema") {
        None => None,
        Some(Value::String(s)) => {
            Some(doc::parse(s).map_err(|e| f.err("jsonSchema", format!("the schema text is {e}")))?)
        }
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(other) => {
            return Err(f.err(
                "jsonSchema",
                format!("must be an object or a JSON/YAML string, found {}", doc::type_name(other)),
            ))
        }
    };
    let max_retry = f.opt_uint("maxRetry", 0, 10)?.map_or(DEFAULT_JSON_RETRIES, |n| n as u32);
    let use_response_format = f.opt_bool("useResponseFormat")?.unwrap_or(false);
    f.deny_unknown()?;
    if !enable {
        return Ok(None);
    }
    // Without a schema (as Higress allows), the answer must be a JSON object: OpenAI's `json_object`.
    let json_object = schema.is_none();
    let schema = schema.unwrap_or_else(|| serde_json::json!({"type": "object"}));
    if !schema.is_object() {
        return Err(ConfigError::new("jsonResp.jsonSchema", "must be a JSON Schema object"));
    }
    let schema = Schema::compile(&schema)
        .map_err(|e| ConfigError::new("jsonResp.jsonSchema", format!("invalid JSON Schema: {e}")))?;
    Ok(Some(JsonResp { schema, max_retry, use_response_format, json_object }))
}

/// `responses: {path}` or `messages: {path}`: where that API is served (a path suffix starting with `/`).
fn parse_front_path(root: &mut Fields<'_>, key: &'static str) -> Result<Option<String>, ConfigError> {
    let Some(mut r) = root.opt_object(key)? else {
        return Ok(None);
    };
    let path = r.opt_str("path")?;
    if let Some(p) = path.as_deref().filter(|p| !p.starts_with('/') || p.len() < 2) {
        return Err(r.err("path", format!("must be a path starting with '/', found '{p}'")));
    }
    r.deny_unknown()?;
    Ok(path)
}
