//! The plugin configuration: Higress `ai-agent` keys plus ours, parsed and validated once at plugin
//! start into typed structs. Every error names the field path.

mod fields;
mod policy;
mod refresh;
mod rules;

use crate::doc;
use crate::openapi;
use crate::prompt::react::{Template, WordChoices};
use crate::schema::Schema;
use crate::tools::mcp::ListError;
use crate::tools::{Catalog, Tool};
use fields::Fields;
use serde_json::Value;
use std::fmt;

pub use crate::upstream::{Api, ApiKey, Upstream};
pub use refresh::McpSource;
pub use rules::{sort_secrets, Matcher, Plugin, RequestKeys, Rule, CONSUMER_HEADER};

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: &str, message: impl Into<String>) -> Self {
        ConfigError { path: path.to_string(), message: message.into() }
    }

    /// The same error inside the object at `prefix` (`_rules_[1]` + `llm.path`).
    pub fn under(self, prefix: &str) -> Self {
        let path = if self.path.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", self.path) };
        ConfigError { path, message: self.message }
    }
}

/// The plugin configuration's text (JSON, or YAML) as one value.
fn parse_text(bytes: &[u8]) -> Result<Value, ConfigError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| ConfigError::new("", format!("configuration is not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Err(ConfigError::new("", "configuration is empty"));
    }
    doc::parse(text).map_err(|e| ConfigError::new("", format!("configuration {e}")))
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<ListError> for ConfigError {
    fn from(e: ListError) -> Self {
        ConfigError { path: e.path, message: e.message }
    }
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
    /// The same array as JSON text, spliced into every request body.
    pub native_tools_json: String,
    pub json_resp: Option<JsonResp>,
    /// Tools that run only after the client approved the call (`apis[].policy.confirm`).
    pub confirm: Vec<String>,
    /// The MCP servers, to rebuild the catalog from a new `tools/list` (`with_mcp_tools`); those
    /// without a pinned `toolsList` are listed by the host.
    pub mcp: Vec<McpSource>,
    /// Current-turn context added to the user's message.
    pub context: Option<Context>,
    /// Every answer carries the agent's steps (`api_agent_steps`), as if each client asked.
    pub return_steps: bool,
    /// Things accepted but worth an operator's attention (ignored keys, skipped operations); logged once.
    pub warnings: Vec<String>,
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
        let context = parse_context(&mut root)?;
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
        if mode == Mode::Native && tools.len() > MAX_NATIVE_TOOLS {
            return Err(ConfigError::new(
                "apis",
                format!(
                    "mode 'native' allows at most {MAX_NATIVE_TOOLS} tools (OpenAI's limit); these APIs define {}",
                    tools.len()
                ),
            ));
        }
        let react_prompt = template.render(&tools);
        let native_tools = native_tools(&tools);
        let react_prompt_json = doc::json_string_contents(&react_prompt);
        let native_tools_json = Value::Array(native_tools.clone()).to_string();
        Ok(Config {
            mode,
            loop_phase,
            max_response_bytes,
            llm,
            apis,
            tools,
            template,
            react_prompt,
            react_prompt_json,
            native_tools,
            native_tools_json,
            json_resp,
            confirm,
            mcp,
            context,
            return_steps,
            warnings,
        })
    }
}

impl Config {
    /// Every configured secret, as written and as it appears percent-encoded in a query string, for
    /// redaction from logs: `llm.apiKey`, `apiKey` values and static header values.
    pub fn secrets(&self) -> Vec<String> {
        let mut raw: Vec<&str> = self.llm.api_key.iter().map(String::as_str).collect();
        for api in &self.apis {
            match &api.api_key {
                Some(ApiKey::Header { value, .. } | ApiKey::Query { value, .. }) => raw.push(value),
                None => {}
            }
            raw.extend(api.headers.iter().map(|(_, v)| v.as_str()));
        }
        let mut out: Vec<String> = Vec::new();
        for s in raw.into_iter().filter(|s| !s.trim().is_empty()) {
            for form in [s.to_string(), crate::openapi::call::encode_query(s)] {
                if !out.contains(&form) {
                    out.push(form);
                }
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out
    }
}

/// `{"type": "function", "function": {name, description, parameters}}` per tool; descriptions longer
/// than OpenAI accepts are cut (names already fit: see `openapi::tool_name`).
fn native_tools(tools: &Catalog) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let description: String = if t.description.chars().count() > MAX_DESCRIPTION_CHARS {
                t.description.chars().take(MAX_DESCRIPTION_CHARS - 1).chain(std::iter::once('…')).collect()
            } else {
                t.description.clone()
            };
            serde_json::json!({"type": "function", "function": {"name": t.name, "description": description, "parameters": t.schema}})
        })
        .collect()
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
    })
}

/// `cluster`, or Higress's `outbound|<servicePort>||<serviceName>`; `domain`; `maxExecutionTime`.
fn parse_upstream(f: &mut Fields<'_>) -> Result<Upstream, ConfigError> {
    let cluster = f.opt_nonempty("cluster")?;
    let service = f.opt_nonempty("serviceName")?;
    let port = f.opt_uint("servicePort", 1, 65535)?;
    let cluster = match (cluster, &service, port) {
        (Some(c), _, _) => c,
        (None, Some(name), Some(port)) => format!("outbound|{port}||{name}"),
        (None, None, _) => return Err(f.err("serviceName", "required (or name the Envoy cluster in 'cluster')")),
        (None, Some(_), None) => return Err(f.err("servicePort", "required (or name the Envoy cluster in 'cluster')")),
    };
    let authority = f.opt_nonempty("domain")?;
    if let Some(a) = &authority {
        if a.contains(['/', ' ', '\r', '\n']) {
            return Err(f.err("domain", format!("must be a host name (with an optional port), found '{a}'")));
        }
    }
    let timeout_ms = f.opt_uint("maxExecutionTime", 1, 24 * 3_600_000)?.unwrap_or(DEFAULT_TIMEOUT_MS);
    Ok(Upstream { cluster, authority, service, timeout_ms })
}

fn parse_apis(
    root: &mut Fields<'_>,
    warnings: &mut Vec<String>,
    confirm: &mut Vec<String>,
    mcp: &mut Vec<McpSource>,
) -> Result<(Vec<Api>, Catalog), ConfigError> {
    let list = match root.required("apis")? {
        Value::Array(list) if !list.is_empty() => list,
        Value::Array(_) => return Err(root.err("apis", "must list at least one API")),
        other => return Err(root.err("apis", format!("must be a list, found {}", doc::type_name(other)))),
    };
    let mut apis = Vec::with_capacity(list.len());
    let mut catalog = Catalog::default();
    for (i, entry) in list.iter().enumerate() {
        let mut f = Fields::new(format!("apis[{i}]"), entry)?;
        let api_path = f.path().to_string();
        let Entry { api, mut tools, warnings: more, source, server } = match f.get("mcpServer") {
            Some(_) => parse_mcp(&mut f, i)?,
            None => parse_openapi(&mut f, i)?,
        };
        let policy = f.opt_object("policy")?.map(policy::Policy::parse).transpose()?;
        f.deny_unknown()?;
        let listed = server.as_ref().is_none_or(|s| s.pinned);
        if let Some(server) = server {
            mcp.push(McpSource { policy: policy.clone(), ..server });
        }
        // A server to be listed has no tools yet: its policy applies once it has.
        if let Some(policy) = policy.filter(|_| listed) {
            let (kept, needs_approval) = policy.apply(tools)?;
            tools = kept;
            confirm.extend(needs_approval);
        }
        if api.upstream.authority.is_none() && api.upstream.service.is_none() {
            let no_host = |t: &&Tool| t.openapi().is_some_and(|op| op.server.host.is_none());
            if let Some(tool) = tools.iter().find(no_host) {
                return Err(ConfigError::new(
                    &format!("{api_path}.apiProvider.domain"),
                    format!("required: the server URL of tool '{}' has no host", tool.name),
                ));
            }
        }
        warnings.extend(more);
        catalog.extend(tools).map_err(|e| ConfigError::new(&source, e))?;
        apis.push(api);
    }
    Ok((apis, catalog))
}

/// One `apis[]` entry's service, tools, warnings, and the field its tools come from (for errors).
struct Entry {
    api: Api,
    tools: Vec<Tool>,
    warnings: Vec<String>,
    source: String,
    server: Option<McpSource>,
}

/// Where a service is and the credentials its calls carry.
type Service = (Upstream, Option<ApiKey>, Vec<(String, String)>);

/// `apiProvider` + `api`: an OpenAPI document's operations.
fn parse_openapi(f: &mut Fields<'_>, i: usize) -> Result<Entry, ConfigError> {
    let mut provider = f.opt_object("apiProvider")?.ok_or_else(|| f.err("apiProvider", "required (or 'mcpServer')"))?;
    let (upstream, api_key, headers) = parse_service(&mut provider)?;
    let max_retries = provider.opt_uint("maxRetries", 0, 10)?.unwrap_or(0) as u32;
    provider.deny_unknown()?;
    let spec_text = match f.required("api")? {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        Value::String(_) => return Err(f.err("api", "must not be empty")),
        // An already-parsed document (the YAML config held the spec as a map) is accepted too.
        other @ Value::Object(_) => other.to_string(),
        other => {
            return Err(f.err("api", format!("must be an OpenAPI document as text, found {}", doc::type_name(other))))
        }
    };
    let api_path = f.child_path("api");
    let loaded = openapi::load(&spec_text, i).map_err(|e| ConfigError::new(&api_path, e.to_string()))?;
    let tools = loaded.tools.into_iter().map(Tool::from_openapi).collect();
    let warnings = loaded.warnings.into_iter().map(|w| format!("{api_path}: {w}")).collect();
    Ok(Entry { api: Api { upstream, api_key, headers, max_retries }, tools, warnings, source: api_path, server: None })
}

/// `mcpServer`: the tools of an MCP server, from its pinned `toolsList`.
fn parse_mcp(f: &mut Fields<'_>, i: usize) -> Result<Entry, ConfigError> {
    for key in ["apiProvider", "api"] {
        if f.get(key).is_some() {
            return Err(f.err(key, "not allowed with 'mcpServer' (an entry is an OpenAPI API or an MCP server)"));
        }
    }
    let mut server = f.opt_object("mcpServer")?.ok_or_else(|| f.err("mcpServer", "must be an object"))?;
    let (upstream, api_key, headers) = parse_service(&mut server)?;
    let path = server.req_str("path")?;
    if !path.starts_with('/') || path.contains(['\r', '\n', ' ']) {
        return Err(server.err("path", format!("must be a path starting with '/', found '{path}'")));
    }
    let allow = mcp_allow(&mut server)?;
    let list_path = server.child_path("toolsList");
    let list = server.get("toolsList");
    server.deny_unknown()?;
    let api = Api { upstream, api_key, headers, max_retries: 0 };
    let pinned = list.is_some();
    let server = McpSource { api: i, path, allow, policy: None, field: list_path, pinned };
    let Some(list) = list else {
        // Listed by the host (discovery); the tools join the catalog then.
        return Ok(Entry {
            api,
            tools: Vec::new(),
            warnings: Vec::new(),
            source: f.child_path("mcpServer"),
            server: Some(server),
        });
    };
    let loaded = crate::tools::mcp::load(list, &server.allow, &server.path, i, &server.field)?;
    let warnings = loaded.warnings.into_iter().map(|w| format!("{}: {w}", server.field)).collect();
    Ok(Entry { api, tools: loaded.tools, warnings, source: f.child_path("mcpServer"), server: Some(server) })
}

/// `mcpServer.tools`: the server's tools the model may see (all when absent).
fn mcp_allow(server: &mut Fields<'_>) -> Result<Vec<String>, ConfigError> {
    let Some(v) = server.get("tools") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(server.err("tools", format!("must be a list of tool names, found {}", doc::type_name(v))));
    };
    items
        .iter()
        .enumerate()
        .map(|(j, item)| match item.as_str().map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(server.err(&format!("tools[{j}]"), "must be a non-empty string")),
        })
        .collect()
}

/// The keys every service has: where (`cluster` or `serviceName`/`servicePort`, `domain`,
/// `maxExecutionTime`) and with which credentials (`apiKey`, `headers`).
fn parse_service(f: &mut Fields<'_>) -> Result<Service, ConfigError> {
    let upstream = parse_upstream(f)?;
    let api_key = parse_api_key(f)?;
    let headers = parse_headers(f)?;
    Ok((upstream, api_key, headers))
}

fn parse_api_key(provider: &mut Fields<'_>) -> Result<Option<ApiKey>, ConfigError> {
    let Some(mut f) = provider.opt_object("apiKey")? else {
        return Ok(None);
    };
    let location = f.opt_str("in")?;
    let name = f.opt_nonempty("name")?;
    let value = f.opt_str("value")?;
    let key = match location.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("none") | Some("") => None,
        Some(place @ ("header" | "query")) => {
            let name = name.ok_or_else(|| f.err("name", "required"))?;
            // Without a value the key would be sent empty, and the API would answer 401 to every call.
            let value = value.ok_or_else(|| f.err("value", "required"))?;
            if value.trim().is_empty() {
                return Err(f.err("value", "must not be empty"));
            }
            if place == "header" && !name.bytes().all(is_token_byte) {
                return Err(f.err("name", format!("'{name}' is not a valid header name")));
            }
            check_header_text(&f, "name", &name)?;
            check_header_text(&f, "value", &value)?;
            Some(if place == "header" { ApiKey::Header { name, value } } else { ApiKey::Query { name, value } })
        }
        Some(other) => return Err(f.err("in", format!("must be 'header', 'query' or 'none', found '{other}'"))),
    };
    f.deny_unknown()?;
    Ok(key)
}

fn parse_headers(provider: &mut Fields<'_>) -> Result<Vec<(String, String)>, ConfigError> {
    let Some(f) = provider.opt_object("headers")? else {
        return Ok(Vec::new());
    };
    let path = f.path().to_string();
    let Some(Value::Object(map)) = provider.get("headers") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        let p = format!("{path}.{name}");
        let Value::String(value) = value else {
            return Err(ConfigError::new(&p, format!("must be a string, found {}", doc::type_name(value))));
        };
        if name.is_empty() || name.starts_with(':') || !name.bytes().all(is_token_byte) {
            return Err(ConfigError::new(&p, "not a valid header name"));
        }
        if value.contains(['\r', '\n', '\0']) {
            return Err(ConfigError::new(&p, "header value must not contain CR, LF or NUL"));
        }
        out.push((name.to_ascii_lowercase(), value.clone()));
    }
    Ok(out)
}

fn check_header_text(f: &Fields<'_>, key: &str, text: &str) -> Result<(), ConfigError> {
    if text.contains(['\r', '\n', '\0']) {
        return Err(f.err(key, "must not contain CR, LF or NUL"));
    }
    Ok(())
}

/// RFC 9110 `tchar`.
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
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
