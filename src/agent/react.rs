//! One ReAct conversation: the messages sent to the model, what each reply means, and the limits
//! (iterations, the closing request for a final answer).

use super::{AgentError, Call, CallId};
use crate::config::Config;
use crate::doc::truncate;
use crate::openai::{ChatRequest, LlmReply, Usage};
use crate::openapi::{call, Tool};
use crate::prompt::history::react_messages;
use crate::prompt::react::{parse, Step};
use serde_json::{Map, Value};

/// Client fields that make no sense on a ReAct turn: the loop owns tools, streaming and the format.
const DROPPED_FIELDS: [&str; 11] = [
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "parallel_tool_calls",
    "n",
    "logprobs",
    "top_logprobs",
];
const STOP: &str = "Observation:";
const MAX_STOPS: usize = 4;

#[derive(Debug)]
pub struct Loop {
    /// Every LLM request's fields but `messages`.
    base: Map<String, Value>,
    messages: Vec<Value>,
    usage: Usage,
    model: String,
    iterations: u32,
    /// The tool limit was reached and the model was asked for its final answer.
    final_ask: bool,
    pending_tool: String,
    last_observation: String,
}

/// What a reply leads to.
#[derive(Debug)]
pub enum Next {
    Answer {
        content: String,
        finish_reason: &'static str,
    },
    CallTool(ToolCall),
    /// Nothing to call (bad output, unknown tool, bad arguments): tell the model and ask again.
    Observe(String),
}

/// A tool request, before it has a call id.
#[derive(Debug)]
pub struct ToolCall {
    pub cluster: String,
    pub request: call::ToolRequest,
    pub timeout_ms: u64,
}

impl ToolCall {
    pub fn into_call(self, id: CallId) -> Call {
        let r = self.request;
        Call {
            id,
            cluster: self.cluster,
            method: r.method,
            path: r.path,
            authority: r.authority,
            headers: r.headers,
            body: r.body,
            timeout_ms: self.timeout_ms,
        }
    }
}

impl Loop {
    /// The conversation and the first LLM request's body (sent upstream by the route).
    pub fn start(cfg: &Config, req: ChatRequest) -> Result<(Loop, Vec<u8>), AgentError> {
        if req.raw.get("tools").is_some_and(|t| !t.is_null()) {
            return Err(AgentError::new(400, "unsupported_tools", "client-supplied 'tools' are not supported in ReAct mode; the gateway's tools come from its configuration"));
        }
        let mut base = req.raw.clone();
        for k in DROPPED_FIELDS {
            base.remove(k);
        }
        base.insert("stream".into(), Value::Bool(false));
        base.insert("stop".into(), merged_stop(req.raw.get("stop")));
        if !base.contains_key("max_tokens") && !base.contains_key("max_completion_tokens") {
            base.insert("max_tokens".into(), cfg.llm.max_tokens.into());
        }
        let messages = react_messages(&cfg.react_prompt, &req);
        let model = req.model.clone().unwrap_or_default();
        let l = Loop {
            base,
            messages,
            usage: Usage::default(),
            model,
            iterations: 0,
            final_ask: false,
            pending_tool: String::new(),
            last_observation: String::new(),
        };
        let body = l.body(None);
        Ok((l, body))
    }

    pub fn on_reply(&mut self, cfg: &Config, body: &[u8]) -> Result<Next, AgentError> {
        let reply = LlmReply::parse(body).map_err(|e| AgentError::new(502, "llm_bad_reply", e))?;
        self.usage.add(reply.usage);
        if let Some(m) = reply.model.filter(|m| !m.is_empty()) {
            self.model = m;
        }
        let text = reply.content;
        let kept = text.split("\nObservation:").next().unwrap_or("").trim_end();
        self.messages
            .push(serde_json::json!({"role": "assistant", "content": kept}));
        match parse(&text) {
            Step::Final { answer } if !answer.is_empty() => Ok(Next::Answer {
                content: answer,
                finish_reason: "stop",
            }),
            _ if self.final_ask => Ok(Next::Answer {
                content: self.limit_message(cfg),
                finish_reason: "length",
            }),
            Step::Final { .. } => Ok(self.count(Next::Observe(format!(
                "Invalid format: the final answer is empty. {}",
                cfg.template.format_reminder()
            )))),
            Step::Malformed { why } => Ok(self.count(Next::Observe(format!(
                "Invalid format: {why}. {}",
                cfg.template.format_reminder()
            )))),
            Step::Action { name, input } => {
                let next = self.action(cfg, &name, input);
                Ok(self.count(next))
            }
        }
    }

    fn count(&mut self, next: Next) -> Next {
        self.iterations += 1;
        next
    }

    fn action(&mut self, cfg: &Config, name: &str, input: Value) -> Next {
        let Some(tool) = cfg.tools.get(name) else {
            let names: Vec<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
            return Next::Observe(format!(
                "Unknown tool '{}'. Valid \"action\" values are \"Final Answer\" or one of: {}.",
                truncate(name, 100),
                names.join(", ")
            ));
        };
        let api = &cfg.apis[tool.api];
        match arguments(tool, input).and_then(|args| call::build(tool, api, &args)) {
            Ok(request) => {
                self.pending_tool = tool.name.clone();
                Next::CallTool(ToolCall {
                    cluster: api.upstream.cluster.clone(),
                    request,
                    timeout_ms: api.upstream.timeout_ms,
                })
            }
            Err(why) => Next::Observe(format!(
                "Invalid arguments for '{}': {why}. Its parameters: {}",
                tool.name, tool.schema
            )),
        }
    }

    /// Appends the observation and returns the next LLM request's body.
    pub fn observe(&mut self, cfg: &Config, observation: String) -> Vec<u8> {
        let mut content = format!("Observation: {observation}");
        if self.iterations >= cfg.llm.max_iterations && !self.final_ask {
            self.final_ask = true;
            content.push_str("\n\n");
            content.push_str(cfg.template.final_request());
        }
        self.last_observation = observation;
        self.messages
            .push(serde_json::json!({"role": "user", "content": content}));
        self.body(cfg.llm.model.as_deref())
    }

    fn body(&self, model: Option<&str>) -> Vec<u8> {
        let mut m = self.base.clone();
        if let Some(model) = model {
            m.insert("model".into(), Value::String(model.to_string()));
        }
        m.insert("messages".into(), Value::Array(self.messages.clone()));
        serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
    }

    fn limit_message(&self, cfg: &Config) -> String {
        let max = cfg.llm.max_iterations;
        let last = truncate(&self.last_observation, 500);
        if cfg.template.chinese {
            format!(
                "未能完成：在得到最终答案之前已达到 {max} 次工具调用的上限。最后一次结果：{last}"
            )
        } else {
            format!("I could not finish: the limit of {max} tool calls was reached before a final answer. The last result was: {last}")
        }
    }

    pub fn pending_tool(&self) -> &str {
        &self.pending_tool
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn usage(&self) -> Usage {
        self.usage
    }
}

/// The model's `action_input` as an arguments object. A plain string is accepted for a tool with a
/// single parameter, as ReAct models often write `"action_input": "Beijing"`.
fn arguments(tool: &Tool, input: Value) -> Result<Value, String> {
    match input {
        Value::Object(_) => Ok(input),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) => {
            let props = tool.schema.get("properties").and_then(Value::as_object);
            match props.map(|p| p.keys().collect::<Vec<_>>()).as_deref() {
                Some([only]) => Ok(serde_json::json!({ only.as_str(): s })),
                Some([]) | None if s.trim().is_empty() => Ok(Value::Object(Map::new())),
                _ => Err("\"action_input\" must be a JSON object of the tool's arguments".into()),
            }
        }
        other => Err(format!(
            "\"action_input\" must be a JSON object, not {}",
            crate::doc::type_name(&other)
        )),
    }
}

/// The client's stop sequences (they apply to every turn) and `Observation:`, at most four.
fn merged_stop(client: Option<&Value>) -> Value {
    let mut stops: Vec<Value> = match client {
        Some(Value::String(s)) => vec![Value::String(s.clone())],
        Some(Value::Array(a)) => a.iter().filter(|v| v.is_string()).cloned().collect(),
        _ => Vec::new(),
    };
    stops.retain(|s| s.as_str() != Some(STOP));
    stops.truncate(MAX_STOPS - 1);
    stops.push(Value::String(STOP.into()));
    Value::Array(stops)
}

/// The observation for a tool's reply: a 2xx body verbatim (truncated), else the status and body.
pub fn tool_observation(cfg: &Config, tool: &str, status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = truncate(text.trim(), cfg.llm.max_observation_bytes);
    match (status, text.is_empty()) {
        (200..=299, false) => text.into_owned(),
        (200..=299, true) => format!("HTTP {status}: '{tool}' succeeded with an empty body."),
        (_, true) => format!("HTTP {status}: '{tool}' failed with an empty body."),
        (_, false) => format!("HTTP {status}: '{tool}' failed: {text}"),
    }
}
