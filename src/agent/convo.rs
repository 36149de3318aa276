//! One conversation with the LLM, in either mode: the request fields every turn carries, the messages
//! so far, usage and limits. `react.rs` and `native.rs` say what a reply means in each mode.

use super::{native, react, AgentError, Call, CallId, ErrorCode};
use crate::config::{Config, Mode};
use crate::doc::truncate;
use crate::openai::answer::FinishReason;
use crate::openai::{ChatRequest, LlmReply, Usage};
use crate::tools::{self, Tool};
use serde_json::{Map, Value};

#[derive(Debug)]
pub struct Convo {
    pub mode: Mode,
    /// The client's question, for JSON mode's formatting request.
    pub question: String,
    /// Every LLM request's fields but `messages`.
    pub base: Map<String, Value>,
    pub messages: Vec<Value>,
    pub usage: Usage,
    pub model: String,
    /// Turns that asked for tools (or were malformed).
    pub iterations: u32,
    /// The limit was reached and the model was asked for its final answer.
    pub final_ask: bool,
    /// The last tool result (never the filter's own corrections), for the limit answer.
    pub last_observation: String,
    /// The last invalid action, to stop a model that repeats it.
    pub last_invalid: Option<String>,
    /// Native mode: the tool calls of the turn being run, answered in this order.
    pub call_ids: Vec<String>,
    /// Native mode: names of the client's own tools.
    pub client_tools: Vec<String>,
    /// Native mode: the client's tool definitions, sent after the gateway's.
    pub client_tool_specs: Vec<Value>,
    /// ReAct mode: the client's system text (escaped) that goes before the configured prompt.
    pub system_prefix: Option<String>,
}

/// What a reply leads to.
#[derive(Debug)]
pub enum Next {
    Answer {
        content: String,
        finish_reason: FinishReason,
    },
    /// Tool work for this turn, answered in this order.
    Tools(Vec<Work>),
    /// Native mode: the model called the client's own tools; this assistant message goes back to it.
    ClientTools(Value),
}

/// One tool call of a turn: a request to send, or an observation known already (bad arguments,
/// unknown tool, malformed output).
#[derive(Debug)]
pub enum Work {
    /// `retries`: how often the call may be sent again after a retryable failure; `note`: said to the
    /// model before the reply (e.g. arguments that were dropped).
    Call { name: String, call: ToolCall, retries: u32, note: Option<String>, args: String },
    /// Malformed output: what the model is told instead.
    Known(String),
    /// A call of `name` refused before sending (unknown tool, arguments its schema refuses): what the
    /// model is told, and why in a few words.
    Refused { name: String, observation: String, why: String },
    /// A call of a `policy.confirm` tool: it goes back to the client for approval (the arguments, as
    /// JSON text, were checked).
    Confirm { name: String, args: String },
}

/// A tool request before it has a call id.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub cluster: String,
    pub request: tools::Request,
    pub timeout_ms: u64,
    /// An MCP tool's call: where it is in its session handshake (`agent::mcp`).
    pub mcp: Option<Box<super::mcp::Handshake>>,
}

impl ToolCall {
    pub fn into_call(self, id: CallId, timeout_ms: u64) -> Call {
        let mut r = self.request;
        if !r.headers.iter().any(|(k, _)| k == "accept-encoding") {
            // A compressed body could not be read as an observation.
            r.headers.push(("accept-encoding".into(), "identity".into()));
        }
        Call {
            id,
            cluster: self.cluster,
            method: r.method,
            path: r.path,
            authority: r.authority,
            headers: r.headers,
            body: r.body,
            timeout_ms,
            stream: false,
        }
    }
}

/// Client fields no agent turn forwards: the loop owns streaming and the final format.
const DROPPED: [&str; 4] = ["messages", "stream", "stream_options", "response_format"];

impl Convo {
    /// The conversation and the first LLM request's body (sent upstream by the route).
    pub fn start(cfg: &Config, req: ChatRequest, meta: &super::RequestMeta) -> Result<(Convo, Vec<u8>), AgentError> {
        // Copy what is kept rather than clone everything and drop: `messages` is most of a request.
        let mut base: Map<String, Value> = req
            .raw
            .iter()
            .filter(|(k, _)| !DROPPED.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        base.insert("stream".into(), Value::Bool(false));
        if !base.contains_key("max_tokens") && !base.contains_key("max_completion_tokens") {
            base.insert("max_tokens".into(), cfg.llm.max_tokens.into());
        }
        let mut c = Convo {
            mode: cfg.mode,
            question: req.question().to_string(),
            base,
            messages: Vec::new(),
            usage: Usage::default(),
            model: req.model.clone().unwrap_or_default(),
            iterations: 0,
            final_ask: false,
            last_observation: String::new(),
            last_invalid: None,
            call_ids: Vec::new(),
            client_tools: Vec::new(),
            client_tool_specs: Vec::new(),
            system_prefix: None,
        };
        match cfg.mode {
            Mode::React => react::start(&mut c, &req)?,
            Mode::Native => native::start(&mut c, cfg, &req)?,
        }
        if let Some(block) = context_block(cfg, meta) {
            add_to_question(&mut c.messages, cfg.mode, &block);
        }
        let body = c.body(cfg, None);
        Ok((c, body))
    }

    pub fn on_reply(&mut self, cfg: &Config, body: &[u8]) -> Result<Next, AgentError> {
        let reply = LlmReply::parse(body).map_err(|e| AgentError::new(502, ErrorCode::LlmBadReply, e))?;
        self.usage.add(reply.usage);
        if let Some(m) = reply.model.clone().filter(|m| !m.is_empty()) {
            self.model = m;
        }
        Ok(match self.mode {
            Mode::React => react::on_reply(self, cfg, reply),
            Mode::Native => native::on_reply(self, cfg, reply),
        })
    }

    /// Every later turn is asked for as a stream (live streaming), with its usage.
    pub fn stream_turns(&mut self) {
        self.base.insert("stream".into(), Value::Bool(true));
        self.base.insert("stream_options".into(), serde_json::json!({"include_usage": true}));
    }

    /// The first request as a callout (`loop: request`): the same body as the forwarded one, but with
    /// `llm.model` when it is set, as every later callout has.
    pub fn first_callout_body(&self, cfg: &Config, forwarded: Vec<u8>) -> Vec<u8> {
        match cfg.llm.model.as_deref() {
            Some(model) => self.body(cfg, Some(model)),
            None => forwarded,
        }
    }

    /// Appends this turn's observations (in call order) and returns the next LLM request's body.
    pub fn observe(&mut self, cfg: &Config, observations: Vec<String>) -> Vec<u8> {
        let limit = self.iterations >= cfg.llm.max_iterations && !self.final_ask;
        if limit {
            self.final_ask = true;
        }
        match self.mode {
            Mode::React => react::observe(self, cfg, observations, limit),
            Mode::Native => native::observe(self, cfg, observations, limit),
        }
        self.body(cfg, cfg.llm.model.as_deref())
    }

    /// The request body, written directly: the configured prompt and tools were serialized once at
    /// configuration time and are copied in, not escaped again for every request and turn.
    pub fn body(&self, cfg: &Config, model: Option<&str>) -> Vec<u8> {
        let prompt = self.system_prefix.as_ref().map_or(0, |p| p.len() + cfg.react_prompt_json.len());
        let mut out =
            Vec::with_capacity(1024 + prompt + cfg.native_tools_json.len() * usize::from(self.mode == Mode::Native));
        out.push(b'{');
        for (k, v) in &self.base {
            if !(k == "model" && model.is_some()) {
                pair(&mut out, k, v);
            }
        }
        if let Some(m) = model {
            pair(&mut out, "model", &Value::String(m.to_string()));
        }
        out.extend_from_slice(b"\"messages\":[");
        if let Some(prefix) = &self.system_prefix {
            out.extend_from_slice(b"{\"role\":\"system\",\"content\":\"");
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(cfg.react_prompt_json.as_bytes());
            out.extend_from_slice(b"\"},");
        }
        for m in &self.messages {
            write(&mut out, m);
            out.push(b',');
        }
        if out.last() == Some(&b',') {
            out.pop();
        }
        out.push(b']');
        if self.mode == Mode::Native {
            out.extend_from_slice(b",\"tools\":");
            self.tools(cfg, &mut out);
        }
        out.push(b'}');
        out
    }

    /// The gateway's tools, then the client's.
    fn tools(&self, cfg: &Config, out: &mut Vec<u8>) {
        let gateway = cfg.native_tools_json.as_bytes();
        if self.client_tool_specs.is_empty() {
            out.extend_from_slice(gateway);
            return;
        }
        out.extend_from_slice(&gateway[..gateway.len() - 1]);
        for t in &self.client_tool_specs {
            out.push(b',');
            write(out, t);
        }
        out.push(b']');
    }

    /// The answer when the model still wants tools after the limit: the last tool result, never the
    /// filter's instructions to the model.
    pub fn limit_answer(&self, cfg: &Config) -> Next {
        let max = cfg.llm.max_iterations;
        let last = truncate(self.last_observation.trim(), 500);
        let content = match (cfg.template.chinese, last.is_empty()) {
            (true, false) => format!("未能完成：在得到最终答案之前已达到 {max} 次工具调用的上限。最后一次结果：{last}"),
            (true, true) => format!("未能完成：在得到最终答案之前已达到 {max} 次工具调用的上限。"),
            (false, false) => format!("I could not finish: the limit of {max} tool calls was reached before a final answer. The last result was: {last}"),
            (false, true) => format!("I could not finish: the limit of {max} tool calls was reached before a final answer."),
        };
        Next::Answer { content, finish_reason: FinishReason::Length }
    }

    /// A model that repeats the same invalid action (`key`) will not stop doing so: the second time,
    /// the request ends with an answer that says why. `None`: go on.
    pub fn repeated_invalid(&mut self, cfg: &Config, key: Option<String>, why: &str) -> Option<Next> {
        let Some(key) = key else {
            self.last_invalid = None;
            return None;
        };
        if self.last_invalid.as_deref() != Some(key.as_str()) {
            self.last_invalid = Some(key);
            return None;
        }
        let why = truncate(why, 300);
        let content = if cfg.template.chinese {
            format!("未能完成：模型两次给出了同一个无效的动作（{why}）。")
        } else {
            format!("I could not finish: the model gave the same invalid action twice ({why}).")
        };
        Some(Next::Answer { content, finish_reason: FinishReason::Length })
    }
}

/// The context block (`context`): the time, the named request headers, the operator's note.
fn context_block(cfg: &Config, meta: &super::RequestMeta) -> Option<String> {
    let ctx = cfg.context.as_ref()?;
    let mut lines: Vec<String> = Vec::new();
    if let Some(zone) = &ctx.time {
        lines.push(format!("Current time: {}", zone.format(i64::try_from(meta.now_ms / 1000).unwrap_or(i64::MAX))));
    }
    for (label, value) in &meta.context_headers {
        lines.push(format!("{label}: {}", truncate(value.trim(), 200).replace(['\r', '\n'], " ")));
    }
    if let Some(text) = &ctx.text {
        lines.push(text.clone());
    }
    (!lines.is_empty()).then(|| format!("\n\n[Context]\n{}", lines.join("\n")))
}

/// The block goes into the current user message only (never the system prompt or earlier turns), so
/// that the prefix of every request stays the same for provider prompt caches.
fn add_to_question(messages: &mut [Value], mode: Mode, block: &str) {
    let is_question = |m: &Value| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && (mode == Mode::Native
                || m.get("content").and_then(Value::as_str).is_some_and(|t| t.starts_with("Question: ")))
    };
    let Some(m) = messages.iter_mut().rev().find(|m| is_question(m)) else {
        return;
    };
    match m.get_mut("content") {
        Some(Value::String(text)) => text.push_str(block),
        Some(Value::Array(parts)) => parts.push(serde_json::json!({"type": "text", "text": block.trim_start()})),
        _ => m["content"] = Value::String(block.trim_start().to_string()),
    }
}

fn write(out: &mut Vec<u8>, v: &Value) {
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
}

fn pair(out: &mut Vec<u8>, key: &str, v: &Value) {
    write(out, &Value::String(key.to_string()));
    out.push(b':');
    write(out, v);
    out.push(b',');
}

/// The request for `name` called with `input`, or what to tell the model instead.
pub fn tool_work(cfg: &Config, name: &str, input: Value) -> Work {
    let work = call_work(cfg, name, input);
    match work {
        Work::Call { name, args, .. } if cfg.confirm.contains(&name) => Work::Confirm { name, args },
        other => other,
    }
}

/// The request for a call the client approved.
pub fn approved_work(cfg: &Config, name: &str, input: Value) -> Work {
    call_work(cfg, name, input)
}

fn call_work(cfg: &Config, name: &str, input: Value) -> Work {
    let Some(tool) = cfg.tools.get(name) else {
        let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
        let observation = format!("Unknown tool '{}'. The tools are: {}.", truncate(name, 100), names.join(", "));
        return Work::Refused { name: name.to_string(), why: observation.clone(), observation };
    };
    let api = &cfg.apis[tool.api];
    let (args, note) = match arguments(tool, input) {
        Ok(args) => drop_unknown(tool, args),
        Err(why) => return refused(tool, why),
    };
    match tool.request(api, &args) {
        Ok(request) => Work::Call {
            name: tool.name.clone(),
            retries: tool.retries(api),
            call: ToolCall {
                cluster: api.upstream.cluster.clone(),
                request,
                timeout_ms: api.upstream.timeout_ms,
                mcp: super::mcp::Handshake::for_tool(tool),
            },
            note,
            args: args.to_string(),
        },
        Err(why) => refused(tool, note.map_or_else(|| why.clone(), |n| format!("{why} ({n})"))),
    }
}

fn refused(tool: &Tool, why: String) -> Work {
    Work::Refused {
        name: tool.name.clone(),
        observation: format!("Invalid arguments for '{}': {why}. Its parameters: {}", tool.name, tool.schema),
        why: format!("invalid arguments for '{}': {why}", tool.name),
    }
}

/// Keys the tool does not take are dropped, never sent (small models copy extra keys from examples);
/// the note tells the model which. Credentials are added after this, so no key can shadow one.
fn drop_unknown(tool: &Tool, mut args: Value) -> (Value, Option<String>) {
    let Some(props) = tool.schema.get("properties").and_then(Value::as_object) else {
        return (args, None);
    };
    let Value::Object(map) = &mut args else {
        return (args, None);
    };
    let unknown: Vec<String> = map.keys().filter(|k| !props.contains_key(*k)).cloned().collect();
    if unknown.is_empty() {
        return (args, None);
    }
    for k in &unknown {
        map.remove(k);
    }
    let names: Vec<String> = unknown.iter().map(|k| format!("'{}'", truncate(k, 60))).collect();
    let note = format!("{} not parameters of '{}' and were not sent", names.join(", "), tool.name);
    (args, Some(note))
}

/// The model's input as an arguments object. A plain string is accepted for a tool with a single
/// parameter, as ReAct models often write `"action_input": "Beijing"`.
fn arguments(tool: &Tool, input: Value) -> Result<Value, String> {
    match input {
        Value::Object(_) => Ok(input),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) => {
            let props = tool.schema.get("properties").and_then(Value::as_object);
            match props.map(|p| p.keys().collect::<Vec<_>>()).as_deref() {
                Some([only]) => Ok(serde_json::json!({ only.as_str(): s })),
                Some([]) | None if s.trim().is_empty() => Ok(Value::Object(Map::new())),
                _ => Err("the input must be a JSON object of the tool's arguments".into()),
            }
        }
        other => Err(format!("the input must be a JSON object, not {}", crate::doc::type_name(&other))),
    }
}

/// The observation for a tool's reply, as the tool's binding reads it (a name no tool has, which
/// cannot happen for a call that was sent, is read as plain HTTP).
pub fn tool_observation(cfg: &Config, tool: &str, status: u16, headers: &[(String, String)], body: &[u8]) -> String {
    let max = cfg.llm.max_observation_bytes;
    match cfg.tools.get(tool) {
        Some(t) => t.observation(max, status, headers, body),
        None => tools::http_observation(tool, max, status, headers, body),
    }
}
