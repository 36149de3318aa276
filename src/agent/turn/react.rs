//! ReAct mode: the tools are described in the system prompt, the model writes `Action:` text, and
//! observations come back as user messages.

use super::convo::{Convo, Next};
use super::offer;
use crate::agent::error::{AgentError, ErrorCode};
use crate::agent::tools::work::{tool_work, Work};
use crate::config::Config;
use crate::doc::{find_str, json_string_contents};
use crate::openai::answer::FinishReason;
use crate::openai::message::{AgentMessage, OutMessage};
use crate::openai::{ChatRequest, LlmReply};
use crate::prompt::history::react_messages;
use crate::prompt::react::{parse, Step};
use serde_json::Value;

/// Fields that make no sense on a ReAct turn: the tools are in the prompt.
const DROPPED: [&str; 7] =
    ["tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "logprobs", "top_logprobs"];
const STOP: &str = "Observation:";
/// A model that runs on past its answer starts inventing the next question.
const STOP_QUESTION: &str = "\nQuestion:";
const MAX_STOPS: usize = 4;

pub fn start(c: &mut Convo, req: &ChatRequest) -> Result<(), AgentError> {
    if req.raw.get("tools").is_some_and(|t| !t.is_null()) {
        return Err(AgentError::new(
            400,
            ErrorCode::UnsupportedTools,
            "client-supplied 'tools' are not supported in ReAct mode; the gateway's tools come from its configuration",
        ));
    }
    for k in DROPPED {
        c.base.remove(k);
    }
    c.base.remove("n");
    c.base.insert("stop".into(), merged_stop(req.raw.get("stop")));
    let (client_system, messages) = react_messages(req);
    c.system_prefix = Some(client_system.map(|t| json_string_contents(&format!("{t}\n\n"))).unwrap_or_default());
    c.messages = messages.into_iter().map(OutMessage::Kept).collect();
    Ok(())
}

pub fn on_reply(c: &mut Convo, cfg: &Config, reply: LlmReply) -> Next {
    let text = reply.content;
    let kept = find_str(&text, "\nObservation:").map_or(&text[..], |i| &text[..i]);
    let kept = find_str(kept, "\nQuestion:").map_or(kept, |i| &kept[..i]).trim_end();
    c.messages.push(AgentMessage::Assistant { content: kept.to_string() }.into());
    let malformed = |why: &str| {
        let work = Work::Known(format!("Invalid format: {why}. {}", cfg.template.format_reminder()));
        (Next::Tools(vec![work]), Some(format!("malformed:{kept}")), format!("the reply is not in the format: {why}"))
    };
    let (next, invalid, why) = match parse(&text) {
        Step::Final { answer } if !answer.is_empty() => {
            return Next::Answer { content: answer, finish_reason: FinishReason::Stop }
        }
        _ if c.final_ask => return c.limit_answer(cfg),
        Step::Final { .. } => malformed("the final answer is empty"),
        Step::Malformed { why } => malformed(&why),
        Step::Action { name, input } => {
            let key = format!("action:{name}:{input}");
            let work = match c.plain_calls(cfg) {
                true => tool_work(cfg, &name, input),
                false => offer::work(c, cfg, &name, input),
            };
            match work {
                Work::Refused { name, observation, why } => {
                    (Next::Tools(vec![Work::Refused { name, observation, why: why.clone() }]), Some(key), why)
                }
                work => (Next::Tools(vec![work]), None, String::new()),
            }
        }
    };
    if let Some(stop) = c.repeated_invalid(cfg, invalid, &why) {
        return stop;
    }
    c.iterations += 1;
    next
}

pub fn observe(c: &mut Convo, cfg: &Config, observations: Vec<String>, limit: bool) {
    let mut content = format!("Observation: {}", observations.join("\n"));
    if limit {
        content.push_str("\n\n");
        content.push_str(cfg.template.final_request());
    }
    c.messages.push(AgentMessage::User { content }.into());
}

/// The client's stop sequences (they apply to every turn), `Observation:` and `\nQuestion:`: at most
/// four, OpenAI's limit.
fn merged_stop(client: Option<&Value>) -> Value {
    let mut stops: Vec<Value> = match client {
        Some(Value::String(s)) => vec![Value::String(s.clone())],
        Some(Value::Array(a)) => a.iter().filter(|v| v.is_string()).cloned().collect(),
        _ => Vec::new(),
    };
    stops.retain(|s| s.as_str() != Some(STOP) && s.as_str() != Some(STOP_QUESTION));
    stops.truncate(MAX_STOPS - 2);
    stops.push(Value::String(STOP.into()));
    stops.push(Value::String(STOP_QUESTION.into()));
    Value::Array(stops)
}
