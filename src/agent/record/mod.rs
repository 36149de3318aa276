//! What the request did, for those who watch it: the `report` (metrics, the request's log line and
//! `summary`), the `steps` transcript, and the `spans`.

pub mod report;
pub mod spans;
pub mod steps;

use crate::agent::error::ErrorCode;
use crate::agent::protocol::{CallId, RequestMeta};
use crate::config::Config;
use crate::openai::Usage;
use crate::tools::search::FIND_TOOLS;
use report::{Outcome, Report, ToolClass, ToolRecord, UNKNOWN_TOOL};
use spans::Spans;
use steps::{Steps, ToolStatus};

/// What a transition of the loop did, as those who watch the request see it. The transitions say
/// what happened and hand it to `Record::note`, the one place that turns it into report, steps and
/// span calls; they keep no bookkeeping of their own.
pub enum Seen<'a> {
    /// The client's request arrived: the run's span starts.
    Started { agent: &'a str },
    /// An LLM turn went out: forwarded through the route (`call: None`), or by callout.
    TurnSent { model: &'a str, call: Option<CallId> },
    /// A turn's callout went out again, under a new id, after its backoff.
    Resent(CallId),
    /// A turn's callout waits to be sent again.
    Retried,
    /// The LLM refused a parameter: the turn goes again without it.
    SteppedDown(&'a str),
    /// A turn's callout answered, after `ms`.
    Timed(u64),
    /// An LLM turn's reply, with its HTTP status.
    Replied(u16),
    /// The reply was read: the request's tokens so far (`total`, and `before` the reply), its model
    /// and reasoning; `ms` is its callout's time (none for the route's first turn).
    /// `unread`: a reply of the run did not say its usage, so `total` undercounts.
    Read { total: Usage, before: Usage, unread: bool, model: &'a str, reasoning: Option<&'a str>, ms: Option<u64> },
    /// Call rules decided the turn's calls: tool, rule, decision.
    Decided(Vec<(String, String, &'static str)>),
    /// The turn's span ends, with its finish reason if the reply said one.
    TurnEnded(Option<&'static str>),
    /// The turn's tool calls are dispatched, under the model's ids (native mode).
    Calls(&'a [String]),
    /// JSON mode's formatting call is tried again.
    JsonRetried,
    /// The client got the answer; `length`: it was cut by the token limit; `budget`: the token
    /// budget ended the loop.
    Answered { length: bool, budget: bool },
    /// The request failed with this status and code.
    Failed(u16, ErrorCode),
    /// Tool work the model's output made no call of (a malformed turn, told how to fix it).
    Malformed,
    /// A call refused before it was sent (`known`: `name` is a configured tool's, not only the
    /// model's, so spans and metrics may carry it).
    ToolRefused { name: &'a str, known: bool, observation: &'a str },
    /// The tool search answered `query` without a call.
    ToolsFound { query: &'a str, observation: &'a str },
    /// A tool call went out (`index`: its place among the turn's calls).
    ToolSent { id: CallId, name: &'a str, index: Option<usize> },
    /// A tool call answered, failed or was denied: its class, HTTP status and time.
    ToolAnswered { id: CallId, name: String, class: ToolClass, status: Option<u16>, ms: u64 },
    /// The step of a tool call just answered (its time is the last `ToolAnswered`'s).
    ToolStep { name: &'a str, arguments: &'a str, status: ToolStatus, observation: &'a str },
    /// A tool call is over: what the model is told (`error`: how the call failed).
    ToolEnded { id: CallId, name: &'a str, index: Option<usize>, error: Option<&'a str>, io: (&'a str, &'a str) },
    /// A token exchange for an API went out.
    ExchangeSent(CallId),
    /// The token service granted `token` for API `api`: masked from here on.
    Exchanged { api: usize, token: &'a str },
    /// What else became of API `api`'s token: `cached`, `failed`, `refused`, `dropped`.
    Exchange(usize, &'static str),
    /// The request is done (its open spans end); `ended_at`: it ended with the event at this time.
    Done { ended_at: Option<u64> },
}

/// What the request did: the report (metrics, the log line, the summary), the steps the client may
/// ask for, and the spans.
pub struct Record {
    pub report: Report,
    /// `None` unless the client or the configuration asks for them: nothing of `steps.rs` runs.
    pub steps: Option<Steps>,
    /// `None` until the host makes spans (`Agent::trace`): a request without them never enters
    /// `spans.rs`.
    pub spans: Option<Spans>,
    /// The limit of a step's text (`llm.maxObservationBytes`).
    limit: usize,
}

impl Record {
    /// Steps are kept if the client or the configuration asks for them; spans once the host makes
    /// them (`Agent::trace`).
    pub fn new(cfg: &Config, meta: &RequestMeta) -> Record {
        let want_steps = meta.steps || cfg.return_steps;
        let steps = want_steps.then(|| Steps::new(cfg.secrets().to_vec()));
        let report = Report::new(cfg.mode, meta.now_ms);
        Record { report, steps, spans: None, limit: cfg.llm.max_observation_bytes }
    }

    /// Records what a transition did. Inlined: at each call the matches fold to their one arm, so one
    /// place to read costs the .wasm nothing over calls written at every site.
    #[inline(always)]
    pub fn note(&mut self, seen: Seen<'_>) {
        if let Some(spans) = &mut self.spans {
            span(spans, &seen);
        }
        let (report, mut steps) = (&mut self.report, self.steps.as_mut());
        match seen {
            Seen::Retried => report.llm_retries += 1,
            Seen::Timed(ms) => report.llm_ms.push(ms),
            Seen::Replied(_) => report.llm_turns += 1,
            Seen::Read { total, before, unread, model, reasoning, ms } => {
                report.tokens = total;
                report.tokens_unread = unread;
                model.clone_into(&mut report.model);
                if let Some(steps) = steps {
                    steps.llm(ms, steps::delta(total, before), reasoning, self.limit);
                }
            }
            Seen::Decided(decisions) => {
                for (tool, rule, decision) in decisions {
                    if let Some(steps) = steps.as_deref_mut() {
                        steps.policy(&tool, &rule, decision);
                    }
                    report.policy.push((rule, decision));
                }
            }
            Seen::JsonRetried => report.json_retries += 1,
            Seen::Answered { length, budget } => {
                report.answered(length);
                if budget {
                    report.outcome = Outcome::Budget;
                }
            }
            Seen::Failed(status, code) => report.failed(status, code),
            Seen::Malformed => report.malformed += 1,
            Seen::ToolRefused { name, known, observation } => {
                if let Some(steps) = steps {
                    steps.tool(name, "", ToolStatus::Ended(ToolClass::Refused), observation, 0);
                }
                // The model's names never become metric names.
                let name = (if known { name } else { UNKNOWN_TOOL }).to_string();
                report.tools.push(ToolRecord { name, class: ToolClass::Refused, status: None, ms: 0 });
            }
            Seen::ToolsFound { query, observation } => {
                if let Some(steps) = steps {
                    let args = serde_json::json!({ "query": query }).to_string();
                    steps.tool(FIND_TOOLS, &args, ToolStatus::Ended(ToolClass::Ok2xx), observation, 0);
                }
            }
            Seen::ToolAnswered { name, class, status, ms, .. } => {
                report.tools.push(ToolRecord { name, class, status, ms });
            }
            Seen::ToolStep { name, arguments, status, observation } => {
                if let Some(steps) = steps {
                    let ms = report.tools.last().map_or(0, |t| t.ms);
                    steps.tool(name, arguments, status, observation, ms);
                }
            }
            Seen::Exchanged { api, .. } => report.exchanges.push((api, "exchanged")),
            Seen::Exchange(api, outcome) => report.exchanges.push((api, outcome)),
            Seen::Done { ended_at } => {
                if let Some(now_ms) = ended_at {
                    report.ended(now_ms);
                }
                // After `ended`: the run's span carries the report's end.
                if let Some(spans) = &mut self.spans {
                    spans.end_run(report);
                }
            }
            Seen::Started { .. }
            | Seen::TurnSent { .. }
            | Seen::Resent(_)
            | Seen::SteppedDown(_)
            | Seen::TurnEnded(_)
            | Seen::Calls(_)
            | Seen::ToolSent { .. }
            | Seen::ToolEnded { .. }
            | Seen::ExchangeSent(_) => {}
        }
    }
}

/// What a transition did, as the run's spans record it (spans on only); `Done` is `Record::note`'s, after
/// the report's end.
#[inline(always)]
fn span(spans: &mut Spans, seen: &Seen<'_>) {
    match seen {
        Seen::Started { agent } => spans.start(agent),
        Seen::TurnSent { model, call } => {
            spans.chat(model);
            if let Some(id) = call {
                spans.chat_call(*id);
            }
        }
        Seen::Resent(id) => spans.chat_call(*id),
        Seen::Retried => spans.chat_retried(),
        Seen::SteppedDown(param) => spans.chat_tag("api_agent.stepped_down", *param),
        Seen::Replied(status) => spans.chat_tag("http.response.status_code", *status),
        Seen::Read { total, before, model, .. } => spans.chat_read(model, steps::delta(*total, *before)),
        Seen::Decided(decisions) => {
            for (_, rule, decision) in decisions {
                spans.chat_tag("api_agent.policy.rule", rule);
                spans.chat_tag("api_agent.policy.decision", *decision);
            }
        }
        Seen::TurnEnded(reason) => {
            if let Some(reason) = reason {
                spans.chat_tag("gen_ai.response.finish_reasons", *reason);
            }
            spans.chat_end();
        }
        Seen::Calls(ids) => spans.turn_calls(ids),
        Seen::ToolRefused { name, known, observation } => {
            // The model's names never become span or metric names.
            let name = if *known { name } else { UNKNOWN_TOOL };
            spans.tool_refused(name, ToolClass::Refused.as_str(), "", observation);
        }
        Seen::ToolSent { id, name, index } => spans.tool(*id, name, *index),
        Seen::ToolAnswered { id, status: Some(status), .. } => {
            spans.tool_tag(*id, "http.response.status_code", *status)
        }
        Seen::ToolEnded { id, name, index, error, io } => spans.tool_end(*id, name, *index, *error, *io),
        Seen::ExchangeSent(id) => spans.run_call(*id),
        Seen::Exchanged { token, .. } => spans.mask(token),
        Seen::Timed(_)
        | Seen::JsonRetried
        | Seen::Answered { .. }
        | Seen::Failed(..)
        | Seen::Malformed
        | Seen::ToolsFound { .. }
        | Seen::ToolAnswered { .. }
        | Seen::ToolStep { .. }
        | Seen::Exchange(..)
        | Seen::Done { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;
    use spans::SpanNote;

    /// A token exchanged during the run is masked in span content from then on, even where a tool's
    /// reply reached the record unmasked (the tool phase masks it first; this is the second layer).
    #[test]
    fn an_exchanged_token_is_masked_in_the_spans_content() {
        let spans = Spans::new(true, Some((1000, Vec::new())));
        let mut record = Record { report: Report::new(Mode::Native, 0), steps: None, spans: Some(spans), limit: 1000 };
        let tool = |id| Seen::ToolSent { id: CallId(id), name: "get", index: None };
        let ended = |id| Seen::ToolEnded {
            id: CallId(id),
            name: "get",
            index: None,
            error: None,
            io: (r#"{"q":"x"}"#, "echo: Bearer tok-EXCHANGED-42"),
        };
        record.note(tool(1));
        record.note(ended(1));
        record.note(Seen::Exchanged { api: 0, token: "tok-EXCHANGED-42" });
        record.note(tool(2));
        record.note(ended(2));
        let results: Vec<String> = record
            .spans
            .as_mut()
            .map(Spans::take)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|n| match n {
                SpanNote::Tag { key: "gen_ai.tool.call.result", value, .. } => Some(value),
                _ => None,
            })
            .collect();
        // Before the exchange the token was no secret of this run; after it, it is.
        assert_eq!(results, ["echo: Bearer tok-EXCHANGED-42", "echo: Bearer [redacted]"]);
    }
}
