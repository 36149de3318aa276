//! JSON mode: after the loop's final answer, one more LLM call (retried on failure) turns it into JSON
//! that is valid against the schema: the client's `response_format`, else `jsonResp.jsonSchema`.

use crate::agent::error::{AgentError, ErrorCode};
use crate::config::Config;
use crate::openai::message::{AgentMessage, OutMessage};
use crate::openai::{ChatRequest, LlmReply};
use crate::prompt::json_format::{extract, request_messages, retry_message};
use crate::schema::{describe, Schema};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// What a request's answer must be.
#[derive(Debug)]
pub struct Target {
    schema: Schema,
    /// Sent on the formatting call, for providers that enforce it.
    response_format: Option<Value>,
    max_retry: u32,
}

impl Target {
    /// The client's `response_format` wins over the configuration; `Err` is a 400.
    pub fn for_request(cfg: &Config, req: &ChatRequest) -> Result<Option<Target>, AgentError> {
        let bad = |m: String| AgentError::new(400, ErrorCode::InvalidResponseFormat, m);
        let max_retry = cfg.json_resp.as_ref().map_or(crate::config::DEFAULT_JSON_RETRIES, |j| j.max_retry);
        let Some(rf) = req.raw.get("response_format").filter(|v| !v.is_null()) else {
            return Ok(Self::configured(cfg));
        };
        let schema = match rf.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let raw = rf
                    .pointer("/json_schema/schema")
                    .ok_or_else(|| bad("response_format.json_schema.schema is required".into()))?;
                Schema::compile(raw)
                    .map_err(|e| bad(format!("response_format.json_schema.schema: invalid JSON Schema: {e}")))?
            }
            Some("json_object") => Schema::compile(&json!({"type": "object"})).map_err(bad)?,
            Some("text") => return Ok(Self::configured(cfg)),
            other => {
                return Err(bad(format!(
                    "response_format.type must be 'text', 'json_object' or 'json_schema', found {other:?}"
                )))
            }
        };
        Ok(Some(Target { schema, response_format: Some(rf.clone()), max_retry }))
    }

    /// `jsonResp`, when enabled.
    fn configured(cfg: &Config) -> Option<Target> {
        cfg.json_resp.as_ref().map(|j| Target {
            schema: j.schema.clone(),
            response_format: j.use_response_format.then(|| match j.json_object {
                true => crate::openai::message::ResponseFormat::JsonObject.into(),
                false => crate::openai::message::ResponseFormat::answer(j.schema.root()).into(),
            }),
            max_retry: j.max_retry,
        })
    }
}

/// The formatting exchange: its messages so far and the tries left.
#[derive(Debug)]
pub struct Format {
    target: Target,
    messages: Vec<OutMessage>,
    tries: u32,
    last_problem: String,
    /// The conversation's fields every formatting call carries too: all the client sent that the
    /// filter does not own (`seed`, `user`, sampling, reasoning controls, a provider's own keys), and
    /// `max_completion_tokens` where the server refused `max_tokens`.
    carried: Map<String, Value>,
}

/// Fields the filter owns on a formatting call: it writes them itself (`model`, `messages`,
/// `stream`, `max_tokens`, `response_format`), or they belong to the loop's turns (tools, ReAct's
/// merged `stop`, streaming options) and would change or cut the JSON reply.
const OWNED: [&str; 13] = [
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "functions",
    "function_call",
    "stop",
    // One formatted answer is read.
    "n",
];

/// A formatting request, its keys in this order.
#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [OutMessage],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a Value>,
    #[serde(flatten)]
    carried: &'a Map<String, Value>,
}

pub enum Outcome {
    Json(String),
    Retry(Vec<u8>),
}

impl Format {
    pub fn start(target: Target, question: &str, answer: &str) -> Format {
        let messages =
            request_messages(question, answer, target.schema.root()).into_iter().map(OutMessage::Kept).collect();
        Format { target, messages, tries: 0, last_problem: String::new(), carried: Map::new() }
    }

    /// Fields of the conversation's requests that the formatting calls carry as well.
    pub fn carry(&mut self, base: &Map<String, Value>) {
        for (key, v) in base.iter().filter(|(k, _)| !OWNED.contains(&k.as_str())) {
            self.carried.insert(key.clone(), v.clone());
        }
    }

    /// The next formatting request's body, asking for `model`.
    pub fn body(&self, cfg: &Config, model: &str) -> Vec<u8> {
        let request = Request {
            model,
            messages: &self.messages,
            stream: false,
            max_tokens: (!self.carried.contains_key("max_completion_tokens")).then_some(cfg.llm.max_tokens),
            response_format: self.target.response_format.as_ref(),
            carried: &self.carried,
        };
        // Strings, numbers and JSON values: serialising them cannot fail.
        serde_json::to_vec(&request).unwrap_or_default()
    }

    pub fn has_response_format(&self) -> bool {
        self.target.response_format.is_some()
    }

    /// A server that does not support the response_format sent (llama.cpp answers 500 to
    /// json_schema) gets the call again with a simpler one, then without it: the new type's name.
    pub fn refused(&mut self, status: u16) -> Option<&'static str> {
        ((400..600).contains(&status) && status != 429).then(|| self.weaker_response_format()).flatten()
    }

    /// Steps the `response_format` down after a server refused it: `json_schema` → `json_object` →
    /// none. Returns the new type's name, or `None` when there is nothing left to drop.
    fn weaker_response_format(&mut self) -> Option<&'static str> {
        let kind = self.target.response_format.as_ref()?.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "json_schema" {
            self.target.response_format = Some(crate::openai::message::ResponseFormat::JsonObject.into());
            Some("json_object")
        } else {
            self.target.response_format = None;
            Some("none")
        }
    }

    /// Reads a reply: valid JSON text, the next request's body, or the final mismatch error.
    pub fn on_reply(&mut self, cfg: &Config, model: &str, reply: LlmReply) -> Result<Outcome, AgentError> {
        self.tries += 1;
        let problem = match extract(&reply.content) {
            Ok(v) => match self.target.schema.validate(&v) {
                Ok(()) => return Ok(Outcome::Json(v.to_string())),
                Err(errors) => describe(&errors, 10),
            },
            Err(e) => e,
        };
        self.last_problem = problem;
        if self.tries > self.target.max_retry {
            return Err(AgentError::new(
                502,
                ErrorCode::JsonSchemaMismatch,
                format!(
                    "the answer did not match the JSON Schema after {} tries; last problem: {}",
                    self.tries, self.last_problem
                ),
            ));
        }
        self.messages.push(AgentMessage::Assistant { content: reply.content }.into());
        self.messages.push(OutMessage::Kept(retry_message(&self.last_problem)));
        Ok(Outcome::Retry(self.body(cfg, model)))
    }
}
