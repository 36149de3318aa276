//! JSON mode's transitions: the formatting call after the loop's answer, its retries, a weaker
//! `response_format` when the server refuses one, and the answer once the JSON is valid. A child of
//! `machine` so that it changes the state as the other transitions do.

use super::{Machine, State, Step};
use crate::agent::calls::{self, Retry};
use crate::agent::protocol::Command;
use crate::agent::record::Seen;
use crate::agent::turn::convo::Convo;
use crate::agent::turn::format::{self, Format};
use crate::agent::turn::llm;
use crate::openai::answer::FinishReason;

impl Machine {
    /// The formatting call's reply: a retry, a weaker response_format, another try, or the answer.
    pub(super) fn on_format(
        &mut self,
        mut r: Retry,
        (mut c, mut f, reason): (Convo, Box<Format>, FinishReason),
        (status, headers, body): (u16, &[(String, String)], &[u8]),
        now_ms: u64,
    ) -> Step {
        let ms = self.llm_answered(r.call.id, status, body, now_ms);
        // A refused response_format is stepped down at once, not sent again as it was.
        let wait = calls::status_wait(status, headers).filter(|_| !f.has_response_format() || status == 429);
        if self.retry_llm(&mut r, wait, now_ms) {
            return (State::AwaitFormat(r, c, f, reason), Vec::new());
        }
        self.record.note(Seen::Replied(status));
        if let Some(weaker) = f.refused(status) {
            self.record.note(Seen::TurnEnded(None));
            log::info!(
                "#{} the formatting call was refused (HTTP {status}); trying response_format {weaker}",
                self.meta.id
            );
            let body = f.body(&self.cfg, c.requested_model(&self.cfg));
            return self.format_call(c, f, reason, body, now_ms);
        }
        if let Some(e) = llm::status_error(status, body) {
            return self.fail(e);
        }
        let before = c.usage;
        let budget = self.cfg.llm.max_total_tokens.is_some();
        let model = c.requested_model(&self.cfg).to_string();
        let outcome = c.counted(body, budget).and_then(|reply| f.on_reply(&self.cfg, &model, reply));
        self.llm_read(&c, before, ms);
        self.record.note(Seen::TurnEnded(None));
        match outcome {
            Ok(format::Outcome::Json(text)) => self.finish(&c, &text, reason, None),
            Ok(format::Outcome::Retry(body)) => {
                self.record.note(Seen::JsonRetried);
                if let Some(e) = self.calls.deadline_error(now_ms) {
                    return self.fail(e);
                }
                self.format_call(c, f, reason, body, now_ms)
            }
            Err(e) => self.fail(e),
        }
    }

    /// A formatting request of JSON mode.
    pub(super) fn format_call(
        &mut self,
        mut c: Convo,
        f: Box<Format>,
        reason: FinishReason,
        body: Vec<u8>,
        now_ms: u64,
    ) -> Step {
        c.sent = body.len();
        let mut r = llm::call(&self.cfg, &mut self.calls, body, now_ms);
        r.call.headers.extend_from_slice(&self.meta.trace);
        self.record.note(Seen::TurnSent { model: c.requested_model(&self.cfg), call: Some(r.call.id) });
        let call = r.call.clone();
        (State::AwaitFormat(r, c, f, reason), vec![Command::Dispatch(call)])
    }
}
