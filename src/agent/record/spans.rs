//! The run's spans, for a host that can make real ones (the dynamic module, through Envoy's tracer):
//! one `invoke_agent` span for the run, under it one `chat` span per LLM turn (its retries and a
//! stepped-down parameter included) and one `execute_tool` span per tool call (its MCP handshake and
//! retries included), with OpenTelemetry GenAI attributes. The agent only notes what a host should
//! do, in order (`SpanNote`); the host drains the notes before it runs the commands of the same
//! event, so that a call goes out with its span's context. With spans off nothing is recorded.
//!
//! No prompt, answer or tool content is noted unless `tracing.content` is on (tool arguments and
//! results, cut to `maxObservationBytes`, configured secrets masked); never a credential.

use super::report::{Outcome, Report};
use crate::agent::protocol::CallId;
use crate::doc::truncate;
use crate::openai::Usage;
use crate::redact::redact;
use crate::vec_map::VecMap;

/// The most of a model name a span carries, in bytes.
pub const MODEL_NAME_BYTES: usize = 128;

/// A model name as spans carry it: the client and the LLM choose it, so it is cut to
/// `MODEL_NAME_BYTES` (on a character boundary) and each control character is read as `?`.
/// Allocates only for a name it changes.
pub fn model_name(model: &str) -> std::borrow::Cow<'_, str> {
    let mut end = model.len().min(MODEL_NAME_BYTES);
    while !model.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &model[..end];
    if !kept.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(kept);
    }
    std::borrow::Cow::Owned(kept.chars().map(|c| if c.is_control() { '?' } else { c }).collect())
}

/// A span of this run, as the agent names it; the host maps it to its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpanKey(pub u32);

/// What the host does with its spans, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanNote {
    /// Start `span` under `parent` (none: the stream's active span).
    Open {
        span: SpanKey,
        parent: Option<SpanKey>,
        operation: String,
    },
    Tag {
        span: SpanKey,
        key: &'static str,
        value: String,
    },
    /// Call `call` goes out with `span`'s trace context (W3C `traceparent`) in place of the client's.
    Carry {
        span: SpanKey,
        call: CallId,
    },
    Close {
        span: SpanKey,
    },
}

/// The run's open spans and the notes not yet drained.
#[derive(Debug, Default)]
pub struct Spans {
    /// `None`: spans are off (the host cannot make them, or the stream is not traced).
    notes: Option<Vec<SpanNote>>,
    /// `tracing.content`: tool arguments and results are noted, masked with `secrets`.
    content: Option<(usize, Vec<String>)>,
    next: u32,
    agent: Option<SpanKey>,
    /// The LLM turn in flight, and its retries so far.
    chat: Option<(SpanKey, u32)>,
    turns: u32,
    /// Tool calls by the id they are first sent under (kept by their retries and MCP steps).
    tools: VecMap<CallId, SpanKey>,
    /// The model's ids of the current turn's tool calls, in call order (native mode).
    call_ids: Vec<String>,
}

impl Spans {
    /// `content`: the byte limit and the secrets to mask, when content is noted.
    pub fn new(on: bool, content: Option<(usize, Vec<String>)>) -> Spans {
        Spans { notes: on.then(Vec::new), content: content.filter(|_| on), ..Spans::default() }
    }

    pub fn is_on(&self) -> bool {
        self.notes.is_some()
    }

    /// The notes since the last call, for the host to carry out now.
    pub fn take(&mut self) -> Vec<SpanNote> {
        self.notes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn note(&mut self, note: SpanNote) {
        if let Some(notes) = &mut self.notes {
            notes.push(note);
        }
    }

    fn open(&mut self, parent: Option<SpanKey>, operation: String, kind: &'static str) -> SpanKey {
        self.next += 1;
        let span = SpanKey(self.next);
        self.note(SpanNote::Open { span, parent, operation });
        self.tag(span, "gen_ai.operation.name", kind);
        span
    }

    /// A tag; `value` is formatted only when spans are on (nothing per request otherwise).
    pub fn tag(&mut self, span: SpanKey, key: &'static str, value: impl std::fmt::Display) {
        if self.is_on() {
            self.note(SpanNote::Tag { span, key, value: value.to_string() });
        }
    }

    /// A credential learnt during the run (an exchanged token): masked in content from now on.
    pub fn mask(&mut self, secret: &str) {
        if let Some((_, secrets)) = &mut self.content {
            if !secret.is_empty() && !secrets.iter().any(|s| s == secret) {
                secrets.push(secret.to_string());
                crate::config::sort_secrets(secrets);
            }
        }
    }

    /// The run starts: its span, named after the agent.
    pub fn start(&mut self, agent: &str) {
        if !self.is_on() || self.agent.is_some() {
            return;
        }
        let span = self.open(None, format!("invoke_agent {agent}"), "invoke_agent");
        self.tag(span, "gen_ai.agent.name", agent);
        self.agent = Some(span);
    }

    /// An LLM turn is asked for with `model`; a turn still open (a parameter stepped down) goes on.
    pub fn chat(&mut self, model: &str) {
        if !self.is_on() || self.chat.is_some() {
            return;
        }
        self.turns += 1;
        let model = model_name(model);
        let span = self.open(self.agent, format!("chat {model}"), "chat");
        self.tag(span, "gen_ai.request.model", model);
        self.tag(span, "api_agent.turn", self.turns);
        self.chat = Some((span, 0));
    }

    /// A tag on the turn in flight.
    pub fn chat_tag(&mut self, key: &'static str, value: impl std::fmt::Display) {
        if let Some((span, _)) = self.chat {
            self.tag(span, key, value);
        }
    }

    /// The turn in flight was read: the model that answered, and the turn's own tokens.
    pub fn chat_read(&mut self, model: &str, turn: Usage) {
        if self.chat.is_none() {
            return;
        }
        self.chat_tag("gen_ai.response.model", model_name(model));
        self.chat_tag("gen_ai.usage.input_tokens", turn.prompt_tokens);
        self.chat_tag("gen_ai.usage.output_tokens", turn.completion_tokens);
    }

    /// The turn in flight goes out again (a retry).
    pub fn chat_retried(&mut self) {
        if let Some((_, retries)) = &mut self.chat {
            *retries += 1;
        }
    }

    /// The turn in flight goes out as `call`.
    pub fn chat_call(&mut self, call: CallId) {
        if let Some((span, _)) = self.chat {
            self.note(SpanNote::Carry { span, call });
        }
    }

    /// The turn in flight is over.
    pub fn chat_end(&mut self) {
        if let Some((span, retries)) = self.chat.take() {
            if retries > 0 {
                self.tag(span, "api_agent.retries", retries);
            }
            self.note(SpanNote::Close { span });
        }
    }

    /// A call that belongs to the run rather than to a turn or a tool (a token exchange).
    pub fn run_call(&mut self, call: CallId) {
        if let Some(span) = self.agent {
            self.note(SpanNote::Carry { span, call });
        }
    }

    /// The model's ids of the next tool calls, in call order (none: they have no ids).
    pub fn turn_calls(&mut self, ids: &[String]) {
        if self.is_on() {
            self.call_ids = ids.to_vec();
        }
    }

    /// Tool call `id` of `name` (`index`: its place in the turn) goes out, the first time or again.
    pub fn tool(&mut self, id: CallId, name: &str, index: Option<usize>) {
        if !self.is_on() {
            return;
        }
        let span = self.tool_span(id, name, index);
        self.note(SpanNote::Carry { span, call: id });
    }

    fn tool_span(&mut self, id: CallId, name: &str, index: Option<usize>) -> SpanKey {
        if let Some(span) = self.tools.get(&id) {
            return *span;
        }
        let span = self.open(self.agent, format!("execute_tool {name}"), "execute_tool");
        self.tag(span, "gen_ai.tool.name", name);
        self.tag(span, "gen_ai.tool.type", "function");
        let call_id = index.and_then(|i| self.call_ids.get(i)).filter(|c| !c.is_empty()).cloned();
        if let Some(call_id) = call_id {
            self.tag(span, "gen_ai.tool.call.id", call_id);
        }
        self.tools.insert(id, span);
        span
    }

    /// A tag on tool call `id`'s span.
    pub fn tool_tag(&mut self, id: CallId, key: &'static str, value: impl std::fmt::Display) {
        if let Some(span) = self.tools.get(&id).copied() {
            self.tag(span, key, value);
        }
    }

    /// Tool call `id` of `name` is over (`error`: how it failed, if it did; a call that never went
    /// out gets its span now); with `tracing.content`, what it was asked and what the model is told.
    pub fn tool_end(&mut self, id: CallId, name: &str, index: Option<usize>, error: Option<&str>, io: (&str, &str)) {
        if !self.is_on() {
            return;
        }
        let span = self.tool_span(id, name, index);
        self.tools.remove(&id);
        self.end_tool_span(span, error, io.0, io.1);
    }

    /// A call of `name` that never went out (refused or not authorized): its span, opened and ended.
    pub fn tool_refused(&mut self, name: &str, error: &str, arguments: &str, result: &str) {
        if !self.is_on() {
            return;
        }
        let span = self.open(self.agent, format!("execute_tool {name}"), "execute_tool");
        self.tag(span, "gen_ai.tool.name", name);
        self.end_tool_span(span, Some(error), arguments, result);
    }

    fn end_tool_span(&mut self, span: SpanKey, error: Option<&str>, arguments: &str, result: &str) {
        if let Some(error) = error {
            self.tag(span, "error.type", error);
        }
        if let Some((limit, secrets)) = &self.content {
            // Masked before it is cut: a cut secret would no longer match.
            let mask = |s: &str| truncate(&redact(s, secrets), *limit).into_owned();
            let (arguments, result) = (mask(arguments), mask(result));
            self.tag(span, "gen_ai.tool.call.arguments", arguments);
            self.tag(span, "gen_ai.tool.call.result", result);
        }
        self.note(SpanNote::Close { span });
    }

    /// The run is over: every span still open ends, the run's with `tags` (how it ended).
    pub fn end(&mut self, error: Option<&str>, tags: Vec<(&'static str, String)>) {
        if !self.is_on() {
            return;
        }
        if let Some((span, _)) = self.chat {
            if let Some(error) = error {
                self.tag(span, "error.type", error);
            }
        }
        self.chat_end();
        let tools: Vec<SpanKey> = std::mem::take(&mut self.tools).into_iter().map(|(_, span)| span).collect();
        for span in tools {
            self.tag(span, "error.type", "cancelled");
            self.note(SpanNote::Close { span });
        }
        if let Some(span) = self.agent.take() {
            for (key, value) in tags {
                self.tag(span, key, value);
            }
            if let Some(error) = error {
                self.tag(span, "error.type", error);
            }
            self.note(SpanNote::Close { span });
        }
    }

    /// The run is over (`r`: what it did): every span still open ends; the run's says how, in the
    /// report's words. Once: later calls find nothing open.
    pub fn end_run(&mut self, r: &Report) {
        if !self.is_on() {
            return;
        }
        let error = match r.outcome {
            Outcome::Answered | Outcome::IterationLimit | Outcome::Budget => None,
            Outcome::Cancelled => Some("cancelled"),
            _ => r.code.or(Some(r.outcome.as_str())),
        };
        let tags = vec![
            ("api_agent.outcome", r.summary_outcome()),
            ("gen_ai.response.model", model_name(&r.model).into_owned()),
            ("gen_ai.usage.input_tokens", r.tokens.prompt_tokens.to_string()),
            ("gen_ai.usage.output_tokens", r.tokens.completion_tokens.to_string()),
            ("api_agent.turns", r.llm_turns.to_string()),
            ("api_agent.tool_calls", r.tools.len().to_string()),
        ];
        self.end(error, tags);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_name_is_cut_on_a_character_and_its_control_characters_read_as_question_marks() {
        let long = format!("m\u{1}\u{7f}x\n{}", "é".repeat(30_000));
        let name = model_name(&long);
        assert!(name.len() <= MODEL_NAME_BYTES && name.starts_with("m??x?éé"), "{name}");
        assert!(matches!(model_name("gpt-4o"), std::borrow::Cow::Borrowed("gpt-4o")));
    }

    fn keys(notes: &[SpanNote]) -> Vec<String> {
        notes
            .iter()
            .map(|n| match n {
                SpanNote::Open { span, parent, operation } => {
                    format!("open {} {:?} {operation}", span.0, parent.map(|p| p.0))
                }
                SpanNote::Tag { span, key, value } => format!("tag {} {key}={value}", span.0),
                SpanNote::Carry { span, call } => format!("carry {} {}", span.0, call.0),
                SpanNote::Close { span } => format!("close {}", span.0),
            })
            .collect()
    }

    #[test]
    fn off_records_nothing() {
        let mut s = Spans::new(false, Some((10, Vec::new())));
        s.start("a");
        s.chat("m");
        s.chat_call(CallId(1));
        s.tool(CallId(2), "t", Some(0));
        s.end(Some("x"), vec![("k", "v".into())]);
        assert!(s.take().is_empty());
    }

    #[test]
    fn a_run_nests_its_turns_and_tools() {
        let mut s = Spans::new(true, None);
        s.start("weather");
        s.chat("m1");
        s.chat_call(CallId(1));
        s.chat_retried();
        s.chat_call(CallId(2));
        s.chat_end();
        s.turn_calls(&["call_0".into(), "call_1".into()]);
        s.tool(CallId(3), "get", Some(1));
        s.tool(CallId(3), "get", Some(1));
        s.tool_end(CallId(3), "get", Some(1), Some("500"), ("{}", "boom"));
        s.end(None, vec![("api_agent.outcome", "answer".into())]);
        let got = keys(&s.take());
        let want = [
            "open 1 None invoke_agent weather",
            "tag 1 gen_ai.operation.name=invoke_agent",
            "tag 1 gen_ai.agent.name=weather",
            "open 2 Some(1) chat m1",
            "tag 2 gen_ai.operation.name=chat",
            "tag 2 gen_ai.request.model=m1",
            "tag 2 api_agent.turn=1",
            "carry 2 1",
            "carry 2 2",
            "tag 2 api_agent.retries=1",
            "close 2",
            "open 3 Some(1) execute_tool get",
            "tag 3 gen_ai.operation.name=execute_tool",
            "tag 3 gen_ai.tool.name=get",
            "tag 3 gen_ai.tool.type=function",
            "tag 3 gen_ai.tool.call.id=call_1",
            "carry 3 3",
            "carry 3 3",
            "tag 3 error.type=500",
            "close 3",
            "tag 1 api_agent.outcome=answer",
            "close 1",
        ];
        assert_eq!(got, want);
        assert!(s.take().is_empty(), "drained");
    }

    #[test]
    fn content_is_masked_and_cut_and_an_unfinished_run_closes_everything() {
        let mut s = Spans::new(true, Some((20, vec!["s3cret".into()])));
        s.start("a");
        s.chat("m");
        s.tool_refused("nope", "refused", r#"{"k":"s3cret"}"#, "unknown tool, and more text");
        s.tool(CallId(9), "t", None);
        s.tool_end(CallId(7), "denied", None, Some("not_authorized"), ("", "no"));
        s.end(Some("cancelled"), Vec::new());
        let got = keys(&s.take());
        assert!(got.contains(&"tag 3 gen_ai.tool.call.arguments={\"k\":\"[redacted]\"}".to_string()), "{got:?}");
        assert!(
            got.iter().any(|l| l.starts_with("tag 3 gen_ai.tool.call.result=unknown tool, and mo…[truncated")),
            "{got:?}"
        );
        assert!(!got.iter().any(|l| l.contains("s3cret")), "{got:?}");
        let closes: Vec<&String> = got.iter().filter(|l| l.starts_with("close")).collect();
        assert_eq!(closes, ["close 3", "close 5", "close 2", "close 4", "close 1"]);
        assert!(got.contains(&"tag 5 error.type=not_authorized".to_string()), "{got:?}");
        assert!(
            got.contains(&"tag 2 error.type=cancelled".to_string())
                && got.contains(&"tag 1 error.type=cancelled".to_string())
        );
        assert!(got.contains(&"tag 4 error.type=cancelled".to_string()), "{got:?}");
    }
}
