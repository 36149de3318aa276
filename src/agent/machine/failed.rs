//! A failed LLM call (of a turn, or of JSON mode's formatting): sent again after a backoff while
//! retries and time are left, else the end. A child of `machine` so that it changes the state as the
//! other transitions do.

use super::{Machine, State, Step};
use crate::agent::calls;
use crate::agent::error::{AgentError, ErrorCode};
use crate::agent::protocol::{CallId, Command, Failure};
use crate::agent::record::Seen;
use crate::agent::turn::llm;

impl Machine {
    /// A failed LLM call: sent again after a backoff while retries and time are left, else the end.
    pub(super) fn on_llm_failed(&mut self, mut state: State, id: CallId, failure: &Failure, now_ms: u64) -> Step {
        let (failure, _) = self.calls.failed(id, failure, now_ms);
        log::warn!("#{} LLM call {} {failure}", self.meta.id, id.0);
        // A turn whose text the client already has cannot be asked again.
        let (relayed, _) = self.response.end_turn(id);
        let wait = calls::failure_wait(&failure).filter(|_| !relayed);
        let retried = match &mut state {
            State::AwaitLlm(r, _) | State::AwaitFormat(r, ..) => self.retry_llm(r, wait, now_ms),
            _ => false,
        };
        if retried {
            return (state, Vec::new());
        }
        let (status, code) =
            if failure == Failure::Timeout { (504, ErrorCode::LlmTimeout) } else { (502, ErrorCode::LlmUnavailable) };
        self.fail(AgentError::new(status, code, format!("the LLM call {failure}")))
    }

    /// The backoff of the LLM call is over: the same request goes out again under a new id. An early
    /// wake-up leaves the retry waiting (it is asked for again by `WakeAt`).
    pub(super) fn resend_llm(&mut self, mut state: State, now_ms: u64) -> Step {
        let call = match &mut state {
            State::AwaitLlm(r, _) | State::AwaitFormat(r, ..) => llm::resend(&self.cfg, &mut self.calls, r, now_ms),
            _ => None,
        };
        let Some(call) = call else {
            return (state, Vec::new());
        };
        if call.stream {
            self.response.start_turn(call.id);
        }
        self.record.note(Seen::Resent(call.id));
        (state, vec![Command::Dispatch(call)])
    }
}

/// The LLM call a state waits for.
pub(super) fn llm_call_of(state: &State) -> Option<CallId> {
    match state {
        State::AwaitLlm(r, _) | State::AwaitFormat(r, ..) => Some(r.call.id),
        _ => None,
    }
}
