//! Calls the client approved (`approval`): run by callout before the first LLM turn, their results
//! in place of the approvals; and the turn's calls of `policy.confirm` tools, returned to the client
//! to approve. A child of `machine` so that it changes the state as the other transitions do.

use super::{Machine, State, Step};
use crate::agent::tools::approval::{self, Approved};
use crate::agent::tools::work::{Batch, Work};
use crate::agent::turn::convo::Convo;
use crate::agent::turn::format::Target;
use crate::openai::answer::FinishReason;
use crate::openai::ChatRequest;

/// The client's request while the calls it approved run.
#[derive(Debug)]
pub struct ApprovedRequest {
    req: ChatRequest,
    json: Option<Target>,
    /// The `tool` messages that get the results, in call order.
    messages: Vec<usize>,
}

impl Machine {
    /// Approved calls run first, by callout; the turns then run as in `loop: request`.
    pub(super) fn run_approved(
        &mut self,
        req: ChatRequest,
        json: Option<Target>,
        approved: &[Approved],
        now_ms: u64,
    ) -> Step {
        let messages: Vec<usize> = approved.iter().map(|a| a.message).collect();
        let work = approval::work(&self.cfg, approved);
        self.tools().count(&work);
        let batch = Box::new(Batch::new(work, self.cfg.llm.max_parallel_tool_calls));
        self.on_approved_done(Box::new(ApprovedRequest { req, json, messages }), batch, now_ms)
    }

    /// Sends what the approved calls may start now; once all are answered, their results replace the
    /// approvals in the conversation and the first LLM turn goes out.
    pub(super) fn on_approved_done(&mut self, mut a: Box<ApprovedRequest>, mut b: Box<Batch>, now_ms: u64) -> Step {
        let commands = self.tools().dispatch(&mut b, now_ms);
        if !b.is_complete() {
            return (State::AwaitApproved(a, b), commands);
        }
        for (i, observation) in a.messages.into_iter().zip(b.into_observations()) {
            approval::set_content(&mut a.req, i, &observation);
        }
        self.begin(a.req, a.json, true, now_ms)
    }

    /// The turn's calls of `policy.confirm` tools go back to the client; the turn's other calls are not
    /// run (the model asks again once the client answers).
    pub(super) fn ask_approval(&mut self, c: &Convo, work: &[Work]) -> Step {
        let calls = approval::calls_for_client(work, &c.call_ids, &self.meta.id, c.iterations);
        log::info!("#{} {} call(s) returned to the client for approval", self.meta.id, calls.len());
        // Strings only: serialising them cannot fail.
        let calls = serde_json::to_value(calls).unwrap_or_default();
        self.finish(c, "", FinishReason::ToolCalls, Some(&calls))
    }
}
