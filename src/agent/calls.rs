//! The agent's callouts in flight: their ids, when each was sent and times out, when a failed one may
//! go again, and the request's deadline that bounds them all.
//!
//! When a failed call is sent again (`Retry`, `Wait`, `Backoff`): which failures are worth a retry
//! (429, 5xx, a reset, a timeout), and after how long (exponential backoff with jitter, or the
//! server's `Retry-After` in seconds), never past the request's deadline. The jitter comes from a seed
//! given to the agent, not from a random source, so tests pin it.

use super::error::{AgentError, ErrorCode};
use super::protocol::{Call, CallId, Failure};
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

/// First backoff; doubled for every further attempt, up to `MAX_BACKOFF_MS`.
pub const BASE_BACKOFF_MS: u64 = 200;
pub const MAX_BACKOFF_MS: u64 = 10_000;
/// A `Retry-After` longer than this is not waited for.
pub const MAX_RETRY_AFTER_MS: u64 = 60_000;

/// The LLM call in flight, kept so that it can be sent again.
#[derive(Debug, Clone)]
pub struct Retry {
    pub call: Call,
    /// Retries sent so far.
    pub attempt: u32,
    /// When the next send is due, while waiting.
    pub due: Option<u64>,
}

/// A failure that may be retried, and what the server asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Status { status: u16, retry_after_ms: Option<u64> },
    Timeout,
    Reset,
}

impl Wait {
    pub fn why(&self) -> String {
        match self {
            Wait::Status { status, .. } => format!("answered HTTP {status}"),
            Wait::Timeout => "timed out".into(),
            Wait::Reset => "failed (reset)".into(),
        }
    }
}

/// 429 and 5xx may be retried; `Retry-After` (seconds) is honoured.
pub fn status_wait(status: u16, headers: &[(String, String)]) -> Option<Wait> {
    if status != 429 && !(500..600).contains(&status) {
        return None;
    }
    let retry_after_ms = headers
        .iter()
        .find(|(k, _)| k == "retry-after")
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        .map(|s| s.saturating_mul(1000));
    Some(Wait::Status { status, retry_after_ms })
}

/// Timeouts and resets may be retried; a call the host refused to send will be refused again.
pub fn failure_wait(f: &Failure) -> Option<Wait> {
    match f {
        Failure::Timeout => Some(Wait::Timeout),
        Failure::Broken(_) => Some(Wait::Reset),
        Failure::NotSent(_) => None,
    }
}

/// Exponential backoff with "equal jitter": half the step fixed, half random.
#[derive(Debug, Clone)]
pub struct Backoff {
    state: u64,
}

impl Backoff {
    pub fn new(seed: u64) -> Backoff {
        // xorshift must not start at zero.
        Backoff { state: seed ^ 0x9E37_79B9_7F4A_7C15 | 1 }
    }

    fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// When retry number `attempt + 1` is due, or `None` if it could not be sent before `deadline`
    /// (or the server asked for a wait longer than we accept).
    pub fn due(&mut self, now_ms: u64, attempt: u32, wait: Wait, deadline: u64) -> Option<u64> {
        let delay = match wait {
            Wait::Status { retry_after_ms: Some(ms), .. } if ms > MAX_RETRY_AFTER_MS => return None,
            Wait::Status { retry_after_ms: Some(ms), .. } => ms,
            _ => {
                let step = BASE_BACKOFF_MS.saturating_mul(1 << attempt.min(16)).min(MAX_BACKOFF_MS);
                step / 2 + self.next() % (step / 2 + 1)
            }
        };
        let due = now_ms.saturating_add(delay);
        // A retry needs some time to run, not just to start.
        (due.saturating_add(BASE_BACKOFF_MS) < deadline).then_some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(k: &str, v: &str) -> Vec<(String, String)> {
        vec![(k.to_string(), v.to_string())]
    }

    #[test]
    fn which_statuses_are_retried() {
        assert_eq!(status_wait(429, &[]), Some(Wait::Status { status: 429, retry_after_ms: None }));
        assert!(status_wait(503, &[]).is_some());
        assert!(status_wait(500, &[]).is_some());
        for s in [200, 400, 401, 403, 404, 422] {
            assert_eq!(status_wait(s, &[]), None, "{s}");
        }
        assert_eq!(
            status_wait(429, &h("retry-after", "3")),
            Some(Wait::Status { status: 429, retry_after_ms: Some(3000) })
        );
        // An HTTP date is not read: the backoff applies.
        assert_eq!(
            status_wait(503, &h("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")),
            Some(Wait::Status { status: 503, retry_after_ms: None })
        );
        assert_eq!(failure_wait(&Failure::NotSent("x".into())), None);
    }

    #[test]
    fn backoff_grows_with_jitter_and_respects_the_deadline() {
        let mut b = Backoff::new(7);
        let far = u64::MAX;
        for attempt in 0..6 {
            let step = (BASE_BACKOFF_MS << attempt).min(MAX_BACKOFF_MS);
            for _ in 0..50 {
                let d = b.due(1000, attempt, Wait::Reset, far).unwrap() - 1000;
                assert!((step / 2..=step).contains(&d), "attempt {attempt}: {d} not in {}..={step}", step / 2);
            }
        }
        let retry_after = Wait::Status { status: 429, retry_after_ms: Some(2000) };
        assert_eq!(b.due(1000, 0, retry_after, far), Some(3000));
        assert_eq!(b.due(1000, 0, retry_after, 3100), None, "past the deadline");
        let too_long = Wait::Status { status: 429, retry_after_ms: Some(MAX_RETRY_AFTER_MS + 1) };
        assert_eq!(b.due(1000, 0, too_long, far), None);
    }

    #[test]
    fn the_seed_decides_the_jitter() {
        let run = |seed| {
            let mut b = Backoff::new(seed);
            (0..8).map(|_| b.due(0, 3, Wait::Timeout, u64::MAX)).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
