//! Native tool-calling mode: the tools go in the request's `tools`, the model answers with
//! `tool_calls`, every call of a turn runs (concurrently), and each result goes back as a `tool` message.
//! The client's own tools are returned to the client when the model calls them. The client's messages
//! go as sent, a tool call left without its result answered as failed (`native_messages`).

use super::convo::{Convo, Next};
use super::offer;
use crate::agent::error::{AgentError, ErrorCode};
use crate::agent::tools::work::{tool_work, Work};
use crate::config::Config;
use crate::openai::answer::FinishReason;
use crate::openai::message::{to_value, AgentMessage, ChatMessage, ClientCall, OutMessage, ToolChoice};
use crate::openai::{text_calls, ChatRequest, LlmReply, ToolCall};
use serde_json::{Map, Value};

/// The chat request's `tool_choice` field (the client's own is kept until a call is answered).
const TOOL_CHOICE: &str = "tool_choice";

/// The client's choice forces a call (a named function, or `required`).
fn is_forced(choice: &Value) -> bool {
    choice.is_object() || choice == "required"
}

pub fn start(c: &mut Convo, cfg: &Config, req: &ChatRequest) -> Result<(), AgentError> {
    // The request body writes the gateway's tools and the client's under one `tools` key.
    c.base.remove("tools");
    // Some servers (llama.cpp) drop the tools unless the choice is explicit.
    c.base.entry(TOOL_CHOICE).or_insert_with(|| ToolChoice::Auto.into());
    if let Some(client) = req.raw.get("tools").filter(|t| !t.is_null()) {
        let Value::Array(list) = client else {
            return Err(AgentError::new(400, ErrorCode::InvalidTools, "'tools' must be an array").at("tools"));
        };
        for (i, t) in list.iter().enumerate() {
            let bad = |why: String| {
                AgentError::new(400, ErrorCode::InvalidTools, why).at(format!("tools[{i}].function.name"))
            };
            let name = t
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("tools[{i}] has no function.name")))?;
            crate::openai::fields::check_tool_name(name).map_err(|why| bad(format!("tools[{i}]: {why}")))?;
            if cfg.tools.get(name).is_some() {
                return Err(AgentError::new(
                    400,
                    ErrorCode::ToolNameClash,
                    format!("tools[{i}]: '{name}' is also a tool of the gateway; rename the client's tool"),
                )
                .at(format!("tools[{i}].function.name")));
            }
            c.client_tools.push(name.to_string());
            c.client_tool_specs.push(t.clone());
        }
    }
    c.messages = native_messages(req).into_iter().map(OutMessage::Kept).collect();
    Ok(())
}

pub fn on_reply(c: &mut Convo, cfg: &Config, mut reply: LlmReply) -> Next {
    let mut structured = None;
    // A call written as text opens with `<tool_call>` or `[TOOL_CALLS]`: text with neither `<` nor
    // `[` holds none.
    let written = |text: &str| text.bytes().any(|b| b == b'<' || b == b'[');
    if reply.tool_calls.is_empty() && written(&reply.content) {
        if let Some(read) = text_calls::read(&reply.content) {
            match read {
                Ok(calls) => structured = Some(as_structured(&mut reply, calls)),
                Err(why) => {
                    // Meant as a call, but unreadable: the model is told why, as for an empty reply.
                    c.iterations += 1;
                    c.call_ids.clear();
                    let fix = format!("{why}. Call a tool with the tool-calling interface, or answer in plain text.");
                    return Next::Tools(vec![Work::Known(fix)]);
                }
            }
        }
    }
    if reply.tool_calls.is_empty() && !reply.content.trim().is_empty() {
        return Next::Answer { content: reply.content, finish_reason: FinishReason::Stop };
    }
    if c.final_ask {
        return c.limit_answer(cfg);
    }
    if reply.tool_calls.is_empty() {
        // Neither an answer nor a call: malformed output, asked again as ReAct mode does. Never an
        // empty answer.
        c.iterations += 1;
        c.call_ids.clear();
        return Next::Tools(vec![Work::Known(cfg.template.empty_reply_reminder().to_string())]);
    }
    // The message as a tree only now that it goes back into the conversation.
    let mut message = structured.unwrap_or_else(|| reply.message_value());
    // Providers that omit call ids still need them matched by the tool messages.
    let ids: Vec<String> = reply
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, tc)| if tc.id.is_empty() { format!("call_{}_{i}", c.iterations + 1) } else { tc.id.clone() })
        .collect();
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for (call, id) in calls.iter_mut().zip(&ids) {
            call["id"] = Value::String(id.clone());
        }
    }
    if reply.tool_calls.iter().any(|tc| c.client_tools.contains(&tc.name)) {
        return client_calls(c, message);
    }
    c.messages.push(OutMessage::Kept(echoed(message)));
    c.call_ids = ids;
    let reply_calls: Vec<(String, String)> =
        reply.tool_calls.iter().map(|tc| (tc.name.clone(), tc.arguments.clone())).collect();
    let work: Vec<Work> = reply
        .tool_calls
        .into_iter()
        .map(|tc| match parse_arguments(&tc.arguments) {
            Ok(args) if c.plain_calls(cfg) => tool_work(cfg, &tc.name, args),
            Ok(args) => offer::work(c, cfg, &tc.name, args),
            Err(why) => Work::Refused {
                name: tc.name.clone(),
                observation: format!("Invalid arguments for '{}': {why}", tc.name),
                why: format!("invalid arguments for '{}'", crate::doc::truncate(&tc.name, 64)),
            },
        })
        .collect();
    // A turn whose every call is refused, the same as the turn before: the model will not recover.
    let refused: Vec<&str> =
        work.iter().filter_map(|w| if let Work::Refused { why, .. } = w { Some(why.as_str()) } else { None }).collect();
    let (key, why) = if refused.len() == work.len() {
        let calls: Vec<String> = reply_calls.iter().map(|(n, a)| format!("{n}:{a}")).collect();
        (Some(calls.join("|")), refused.join("; "))
    } else {
        (None, String::new())
    };
    if let Some(stop) = c.repeated_invalid(cfg, key, &why) {
        return stop;
    }
    c.iterations += 1;
    Next::Tools(work)
}

/// Calls the model wrote as text become the turn's calls, as a tool-call parser would have made them:
/// the text around them is not an answer, and the turn goes back in the conversation as calls (the
/// message returned).
fn as_structured(reply: &mut LlmReply, calls: Vec<ToolCall>) -> Value {
    let listed: Vec<ClientCall> = calls.iter().map(ClientCall::from).collect();
    let listed = to_value(&listed);
    let mut message = reply.message_value();
    if let Value::Object(m) = &mut message {
        m.insert("content".into(), Value::String(String::new()));
        m.insert("tool_calls".into(), listed);
    }
    reply.content.clear();
    reply.tool_calls = calls;
    message
}

/// The assistant message with only the client's calls: the gateway does not run tools in a turn
/// that also asks the client for its own (the model asks again once the client answers).
fn client_calls(c: &Convo, mut message: Value) -> Next {
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        let before = calls.len();
        calls.retain(|tc| {
            tc.pointer("/function/name").and_then(Value::as_str).is_some_and(|n| c.client_tools.iter().any(|t| t == n))
        });
        if calls.len() < before {
            log::info!(
                "a turn mixed client and gateway tool calls; {} gateway call(s) left for the next turn",
                before - calls.len()
            );
        }
    }
    Next::ClientTools(message)
}

/// The model's tool-call message as it goes back in the conversation: `content: null` becomes `""` and
/// the legacy `function_call` is dropped, which every server accepts (llama-cpp-python answers 500 to
/// a null content).
fn echoed(mut message: Value) -> Value {
    if let Value::Object(m) = &mut message {
        m.remove("function_call");
        if m.get("content").is_none_or(Value::is_null) {
            m.insert("content".into(), Value::String(String::new()));
        }
    }
    message
}

fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(text)
        .map_err(|e| format!("the arguments are not valid JSON ({e}): {}", crate::doc::truncate(text, 200)))
}

pub fn observe(c: &mut Convo, cfg: &Config, observations: Vec<String>, limit: bool) {
    if c.call_ids.is_empty() {
        // No call to answer: a correction of an empty reply, as the user.
        c.messages.push(AgentMessage::User { content: observations.join("\n") }.into());
    }
    let answered_calls = !c.call_ids.is_empty();
    for (id, content) in c.call_ids.drain(..).zip(observations) {
        c.messages.push(AgentMessage::Tool { tool_call_id: id, content }.into());
    }
    // A forced choice (a named function, or "required") is honoured once: kept, it would make the model
    // call a tool on every turn until the limit (OpenAI's Agents SDK resets it the same way).
    let forced = c.base.get(TOOL_CHOICE).is_some_and(is_forced);
    if answered_calls && forced {
        c.base.insert(TOOL_CHOICE.into(), ToolChoice::Auto.into());
    }
    if limit {
        c.base.insert(TOOL_CHOICE.into(), ToolChoice::None.into());
        c.messages.push(AgentMessage::User { content: cfg.template.native_final_request().to_string() }.into());
    }
}

/// The client's messages as sent, with one repair: an assistant's tool call that has no `tool` answer
/// gets a synthetic failed result, so that the provider accepts the conversation.
fn native_messages(req: &ChatRequest) -> Vec<Value> {
    let raw = req.raw.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut out = Vec::with_capacity(raw.len());
    let mut unanswered: Vec<String> = Vec::new();
    for m in raw {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            unanswered.retain(|u| u != id);
        } else {
            answer_dangling(&mut out, &mut unanswered);
        }
        out.push(m.clone());
        if role == "assistant" {
            unanswered = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls.iter().filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string)).collect()
                })
                .unwrap_or_default();
        }
    }
    answer_dangling(&mut out, &mut unanswered);
    out
}

fn answer_dangling(out: &mut Vec<Value>, unanswered: &mut Vec<String>) {
    for id in unanswered.drain(..) {
        let content = "The tool call failed: no result was provided for it.".to_string();
        out.push(to_value(&ChatMessage::Tool { tool_call_id: id, content }));
    }
}
