//! One conversation with the LLM, in either mode: the request fields every turn carries, the messages
//! so far, usage and limits. `react.rs` and `native.rs` say what a reply means in each mode, and
//! `llm.rs` which of them reads a turn.

use super::format::Target;
use super::offered::Offered;
use crate::agent::error::{AgentError, ErrorCode};
use crate::agent::protocol::RequestMeta;
use crate::agent::tools::rule_view::CallRules;
use crate::agent::tools::work::Work;
use crate::config::{Config, Mode};
use crate::doc::truncate;
use crate::openai::answer::FinishReason;
use crate::openai::message::OutMessage;
use crate::openai::{ChatRequest, LlmReply, Usage};
use serde_json::{Map, Value};

#[derive(Debug)]
pub struct Convo {
    pub mode: Mode,
    /// LLM replies read (the first can pass the provider's error through).
    pub replies: u32,
    /// JSON mode's target, until the final answer needs it.
    pub json: Option<Target>,
    /// The client's question, for JSON mode's formatting request.
    pub question: String,
    /// Every LLM request's fields but `messages`.
    pub base: Map<String, Value>,
    pub messages: Vec<OutMessage>,
    pub usage: Usage,
    /// Bytes of the last LLM request sent: a reply without usage is estimated from them.
    pub sent: usize,
    /// A turn's usage was estimated (`Convo::counted`).
    pub usage_estimated: bool,
    /// A turn's reply did not say its usage and nothing estimated it (no budget): `usage` undercounts.
    pub usage_unread: bool,
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
    /// The last reply's reasoning (the model's thinking), for the answer and the steps.
    pub reasoning: Option<String>,
    /// A large catalog's tools for this request (`offer`); `None`: the configuration's, all of them.
    pub offered: Option<Box<Offered>>,
    /// The operator's call rules for this request (`policy`); `None` without rules.
    pub rules: Option<Box<CallRules>>,
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

impl Next {
    /// The turn's finish reason, as its span says it.
    pub fn finish_reason(&self) -> &'static str {
        match self {
            Next::Answer { finish_reason, .. } => finish_reason.as_str(),
            Next::Tools(_) | Next::ClientTools(_) => "tool_calls",
        }
    }
}

/// Client fields no agent turn forwards: the loop owns streaming and the final format.
const DROPPED: [&str; 4] = ["messages", "stream", "stream_options", "response_format"];

impl Convo {
    /// The conversation before its mode adds the messages: the request's fields every turn carries.
    pub fn new(cfg: &Config, req: &ChatRequest) -> Convo {
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
        Convo {
            mode: cfg.mode,
            replies: 0,
            json: None,
            question: req.question().to_string(),
            base,
            messages: Vec::new(),
            usage: Usage::default(),
            sent: 0,
            usage_estimated: false,
            usage_unread: false,
            model: req.model.clone().unwrap_or_default(),
            iterations: 0,
            final_ask: false,
            last_observation: String::new(),
            last_invalid: None,
            call_ids: Vec::new(),
            client_tools: Vec::new(),
            client_tool_specs: Vec::new(),
            system_prefix: None,
            reasoning: None,
            offered: None,
            rules: None,
        }
    }

    /// The model a callout turn asks for: `llm.model`, else the client's (never the one a reply
    /// named).
    pub fn requested_model<'a>(&'a self, cfg: &'a Config) -> &'a str {
        cfg.llm.model.as_deref().unwrap_or_else(|| self.client_model())
    }

    /// The model the client asked for (the route forwards the first turn with it).
    pub fn client_model(&self) -> &str {
        self.base.get("model").and_then(Value::as_str).unwrap_or("")
    }

    /// The context block (`context`), in the client's question.
    pub fn add_context(&mut self, cfg: &Config, meta: &RequestMeta) {
        if let Some(block) = context_block(cfg, meta) {
            add_to_question(&mut self.messages, cfg.mode, &block);
        }
    }

    /// An LLM reply, its usage (`counted`) and model counted.
    pub fn read(&mut self, body: &[u8], budget: bool) -> Result<LlmReply, AgentError> {
        let reply = self.counted(body, budget)?;
        self.reasoning = reply.reasoning.as_ref().map(|r| r.text.clone());
        if let Some(m) = reply.model.clone().filter(|m| !m.is_empty()) {
            self.model = m;
        }
        Ok(reply)
    }

    /// A call is the tool's work as it is (`tool_work`): no `find_tools` offer and no rules to check
    /// (`offer::work` otherwise), so a plain request never enters `offer.rs`.
    pub fn plain_calls(&self, cfg: &Config) -> bool {
        cfg.offer.is_none() && self.rules.is_none()
    }

    /// An LLM reply with its usage counted. With a token budget, the counts a reply did not say are
    /// estimated from the bytes sent and received: a budget is never silently off.
    pub fn counted(&mut self, body: &[u8], budget: bool) -> Result<LlmReply, AgentError> {
        let reply = LlmReply::parse(body).map_err(|e| AgentError::new(502, ErrorCode::LlmBadReply, e))?;
        let mut turn = reply.usage;
        if budget && reply.unread.any() {
            turn.estimate(reply.unread, self.sent, body.len());
            self.usage_estimated = true;
        } else if reply.unread.any() {
            self.usage_unread = true;
        }
        self.usage.add(turn);
        Ok(reply)
    }

    /// Leaves out a parameter the server refused (`max_tokens` becomes `max_completion_tokens`, as
    /// OpenAI's reasoning models want it); false when the request did not carry it.
    pub fn step_down(&mut self, param: &str) -> bool {
        let Some(value) = self.base.remove(param) else {
            return false;
        };
        if param == "max_tokens" {
            self.base.entry("max_completion_tokens").or_insert(value);
        }
        true
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

    /// The limit is reached with this turn's observations: the model is asked for its final answer
    /// (once).
    pub fn ask_final(&mut self, cfg: &Config) -> bool {
        let limit = self.iterations >= cfg.llm.max_iterations && !self.final_ask;
        if limit {
            self.final_ask = true;
        }
        limit
    }

    /// The request body, written directly: the configured prompt and tools were serialized once at
    /// configuration time and are copied in, not escaped again for every request and turn.
    pub fn body(&self, cfg: &Config, model: Option<&str>) -> Vec<u8> {
        let (prompt_json, tools_json) = match &self.offered {
            Some(o) => (&o.prompt_json, &o.tools_json),
            None => (&cfg.react_prompt_json, &cfg.native_tools_json),
        };
        let prompt = self.system_prefix.as_ref().map_or(0, |p| p.len() + prompt_json.len());
        let mut out = Vec::with_capacity(1024 + prompt + tools_json.len() * usize::from(self.mode == Mode::Native));
        out.push(b'{');
        for (k, v) in &self.base {
            if !(k == "model" && model.is_some()) {
                pair(&mut out, k, v);
            }
        }
        if let Some(m) = model {
            pair(&mut out, "model", m);
        }
        out.extend_from_slice(b"\"messages\":[");
        if let Some(prefix) = &self.system_prefix {
            out.extend_from_slice(b"{\"role\":\"system\",\"content\":\"");
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(prompt_json.as_bytes());
            out.extend_from_slice(b"\"},");
        }
        for m in &self.messages {
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, m);
            out.push(b',');
        }
        if out.last() == Some(&b',') {
            out.pop();
        }
        out.push(b']');
        if self.mode == Mode::Native {
            out.extend_from_slice(b",\"tools\":");
            self.tools(tools_json, &mut out);
        }
        out.push(b'}');
        out
    }

    /// The gateway's tools, then the client's.
    fn tools(&self, gateway: &str, out: &mut Vec<u8>) {
        let gateway = gateway.as_bytes();
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
        let zh = format!("在得到最终答案之前已达到 {max} 次工具调用的上限");
        self.unfinished(cfg, &zh, &format!("the limit of {max} tool calls was reached before a final answer"))
    }

    /// The answer when the request's token budget is spent and the model still wants tools: as at the
    /// iteration limit, the last tool result.
    pub fn budget_answer(&self, cfg: &Config, budget: u64) -> Next {
        let zh = format!("在得到最终答案之前已用完 {budget} 个令牌的预算");
        self.unfinished(cfg, &zh, &format!("the budget of {budget} tokens was spent before a final answer"))
    }

    /// "I could not finish: `why`", in the prompt's language, with the last tool result if any.
    fn unfinished(&self, cfg: &Config, why_zh: &str, why_en: &str) -> Next {
        let last = truncate(self.last_observation.trim(), 500);
        let content = match (cfg.template.chinese, last.is_empty()) {
            (true, false) => format!("未能完成：{why_zh}。最后一次结果：{last}"),
            (true, true) => format!("未能完成：{why_zh}。"),
            (false, false) => format!("I could not finish: {why_en}. The last result was: {last}"),
            (false, true) => format!("I could not finish: {why_en}."),
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
        // The client gets plain words; why the replies were unusable (the filter's own diagnostics,
        // written for the model) goes to the log only.
        log::info!("the model gave the same unusable reply twice ({}); the request ends", truncate(why, 300));
        let content = if cfg.template.chinese {
            "未能完成：模型连续两次给出了无法使用的回复。".to_string()
        } else {
            "I could not finish: the model twice gave a reply that could not be used.".to_string()
        };
        Some(Next::Answer { content, finish_reason: FinishReason::Length })
    }
}

/// The context block (`context`): the time, the named request headers, the operator's note.
fn context_block(cfg: &Config, meta: &RequestMeta) -> Option<String> {
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
fn add_to_question(messages: &mut [OutMessage], mode: Mode, block: &str) {
    let is_question = |m: &Value| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && (mode == Mode::Native
                || m.get("content").and_then(Value::as_str).is_some_and(|t| t.starts_with("Question: ")))
    };
    // The client's messages only: the agent has written none yet.
    let question = messages.iter_mut().rev().find_map(|m| match m {
        OutMessage::Kept(v) if is_question(v) => Some(v),
        _ => None,
    });
    let Some(m) = question else {
        return;
    };
    match m.get_mut("content") {
        Some(Value::String(text)) => text.push_str(block),
        Some(Value::Array(parts)) => parts.push(serde_json::json!({"type": "text", "text": block.trim_start()})),
        _ => m["content"] = Value::String(block.trim_start().to_string()),
    }
}

fn write<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Writing a Value or a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
}

fn pair<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, key: &str, v: &T) {
    write(out, key);
    out.push(b':');
    write(out, v);
    out.push(b',');
}
