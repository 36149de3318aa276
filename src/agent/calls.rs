//! The agent's callouts in flight: their ids, when each was sent and times out, when a failed one may
//! go again, and the request's deadline that bounds them all.

use super::error::{AgentError, ErrorCode};
use super::protocol::{CallId, Failure};
use super::retry::{Backoff, Wait};
use crate::doc::truncate;
use crate::vec_map::VecMap;

/// A reset this close to a call's timeout (or in its second half) is taken as the timeout.
const TIMEOUT_SLACK_MS: u64 = 50;

#[derive(Debug)]
pub struct Calls {
    next_id: u32,
    /// When each call in flight times out, to tell a timeout from a reset.
    expiry: VecMap<CallId, u64>,
    /// When each call in flight was sent, for its duration.
    sent: VecMap<CallId, u64>,
    backoff: Backoff,
    /// `llm.maxRequestTime`, and when it is over for this request.
    max_request_ms: u64,
    deadline: u64,
}

impl Calls {
    pub fn new(seed: u64, arrived_ms: u64, max_request_ms: u64) -> Calls {
        Calls {
            next_id: 0,
            expiry: VecMap::new(),
            sent: VecMap::new(),
            backoff: Backoff::new(seed),
            max_request_ms,
            deadline: arrived_ms.saturating_add(max_request_ms),
        }
    }

    pub fn mint(&mut self) -> CallId {
        self.next_id += 1;
        CallId(self.next_id)
    }

    /// A call's timeout, cut so that it ends by the request's deadline.
    pub fn bounded(&self, timeout_ms: u64, now_ms: u64) -> u64 {
        timeout_ms.min(self.deadline.saturating_sub(now_ms)).max(1)
    }

    /// Call `id` went out at `now_ms`; its time counts from `since` (an MCP call's first step).
    pub fn went_out(&mut self, id: CallId, now_ms: u64, timeout_ms: u64, since: u64) {
        self.expiry.insert(id, now_ms + timeout_ms);
        self.sent.insert(id, since);
    }

    /// Call `id` is over: when it was sent.
    pub fn forget(&mut self, id: CallId) -> Option<u64> {
        self.expiry.remove(&id);
        self.sent.remove(&id)
    }

    /// Call `id` was answered: the milliseconds it took.
    pub fn answered(&mut self, id: CallId, now_ms: u64) -> Option<u64> {
        self.forget(id).map(|sent| now_ms.saturating_sub(sent))
    }

    /// Call `id` failed: how, and the milliseconds it took. A reset that came when the call's own
    /// timeout was due is the timeout (Envoy reports a timeout after response headers as a reset).
    pub fn failed(&mut self, id: CallId, failure: &Failure, now_ms: u64) -> (Failure, Option<u64>) {
        let expiry = self.expiry.get(&id).copied();
        let sent = self.forget(id);
        let near_timeout = |e: u64| {
            // Envoy starts a callout's timer from its event loop's cached time, which lags the time the
            // call was made by what ran before it in that loop iteration (seen: a 400 ms timeout
            // firing at 357 ms by our clock, and earlier on a loaded machine). A reset in the second
            // half of the timeout is taken as the timeout.
            let timeout = sent.map_or(0, |s| e.saturating_sub(s));
            now_ms + TIMEOUT_SLACK_MS.max(timeout / 2) >= e
        };
        let failure = match failure {
            Failure::Broken(_) if expiry.is_some_and(near_timeout) => Failure::Timeout,
            other => other.clone(),
        };
        (failure, sent.map(|s| now_ms.saturating_sub(s)))
    }

    /// When retry number `attempt + 1` of a failed call is due, if it can run before the deadline.
    pub fn retry_due(&mut self, now_ms: u64, attempt: u32, wait: Wait) -> Option<u64> {
        self.backoff.due(now_ms, attempt, wait, self.deadline)
    }

    pub fn deadline_error(&self, now_ms: u64) -> Option<AgentError> {
        (now_ms >= self.deadline).then(|| {
            AgentError::new(
                504,
                ErrorCode::RequestTimeout,
                format!("the request took longer than llm.maxRequestTime ({} ms)", self.max_request_ms),
            )
        })
    }
}

/// A short excerpt of a reply's body for a warning (the logger redacts secrets).
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    truncate(text.trim(), 200).replace(['\n', '\r'], " ")
}
