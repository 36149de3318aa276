//! Listing an MCP server's tools (`tools/list`, every page), sans-IO: the host sends the requests this
//! gives it, feeds back the replies with its clock, and gets the whole list, or a failure and the time
//! to try again (backoff doubling from 1 s up to the interval). Each listing runs its own handshake: it
//! is rare, and a session kept between listings would only be lost in between.

use super::{handshake_error, in_session, initialize, initialized, list, reply, session_of, with_id};
use crate::upstream::{Api, Request};
use serde_json::{json, Value};

const FIRST_BACKOFF_MS: u64 = 1000;
/// A server that pages forever is not listed.
const MAX_PAGES: u32 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Idle,
    Initialize,
    Initialized,
    List,
}

#[derive(Debug)]
pub struct Discovery {
    pub api: usize,
    path: String,
    interval_ms: u64,
    step: Step,
    session: Option<String>,
    tools: Vec<Value>,
    pages: u32,
    failures: u32,
    /// When the next listing is due (host milliseconds).
    pub next_at: u64,
}

/// What a reply leads to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Send(Request),
    /// The whole `tools/list` result (`{"tools": [...]}`), to build the catalog from.
    Listed(Value),
    /// Why the listing failed; the next one is due at `next_at`.
    Failed(String),
}

impl Discovery {
    /// A server at `path` of `apis[api]`, listed at once and then every `interval_ms`.
    pub fn new(api: usize, path: &str, interval_ms: u64, now: u64) -> Discovery {
        Discovery {
            api,
            path: path.to_string(),
            interval_ms,
            step: Step::Idle,
            session: None,
            tools: Vec::new(),
            pages: 0,
            failures: 0,
            next_at: now,
        }
    }

    /// The first request of a listing, when one is due and none runs.
    pub fn start(&mut self, api: &Api, now: u64) -> Option<Request> {
        if self.step != Step::Idle || now < self.next_at {
            return None;
        }
        (self.step, self.session, self.tools, self.pages) = (Step::Initialize, None, Vec::new(), 0);
        Some(self.id(initialize(api, &self.path)))
    }

    /// A reply to the request last given.
    pub fn on_reply(&mut self, api: &Api, status: u16, headers: &[(String, String)], body: &[u8], now: u64) -> Outcome {
        match self.step {
            Step::Idle => Outcome::Failed("a reply no listing waits for".into()),
            Step::Initialize | Step::Initialized => {
                if let Some(why) = handshake_error(status, body) {
                    return self.failed(why, now);
                }
                if self.step == Step::Initialize {
                    self.session = session_of(headers);
                    self.step = Step::Initialized;
                    return Outcome::Send(in_session(initialized(api, &self.path), self.session.as_deref()));
                }
                self.step = Step::List;
                self.page(api, None)
            }
            Step::List => self.on_page(api, status, body, now),
        }
    }

    /// The request last given was not answered (reset, timeout, refused).
    pub fn on_failure(&mut self, why: &str, now: u64) -> Outcome {
        self.failed(why.to_string(), now)
    }

    fn on_page(&mut self, api: &Api, status: u16, body: &[u8], now: u64) -> Outcome {
        if let Some(why) = handshake_error(status, body) {
            return self.failed(why, now);
        }
        let result = reply::response(body).and_then(|m| m.get("result").cloned()).unwrap_or(Value::Null);
        let Some(Value::Array(tools)) = result.get("tools") else {
            return self.failed("the tools/list result has no 'tools' array".into(), now);
        };
        self.tools.extend(tools.iter().cloned());
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(_) if self.pages >= MAX_PAGES => self.failed(format!("more than {MAX_PAGES} pages of tools"), now),
            Some(cursor) => self.page(api, Some(cursor.to_string())),
            None => {
                (self.step, self.failures, self.next_at) = (Step::Idle, 0, now.saturating_add(self.interval_ms));
                Outcome::Listed(json!({"tools": std::mem::take(&mut self.tools)}))
            }
        }
    }

    fn page(&mut self, api: &Api, cursor: Option<String>) -> Outcome {
        self.pages += 1;
        let request = self.id(list(api, &self.path, cursor.as_deref()));
        Outcome::Send(in_session(request, self.session.as_deref()))
    }

    fn failed(&mut self, why: String, now: u64) -> Outcome {
        self.failures += 1;
        let backoff = FIRST_BACKOFF_MS.saturating_mul(1 << self.failures.min(20).saturating_sub(1));
        (self.step, self.next_at) = (Step::Idle, now.saturating_add(backoff.min(self.interval_ms)));
        Outcome::Failed(why)
    }

    /// JSON-RPC ids of a listing: unique within its own session.
    fn id(&self, request: Request) -> Request {
        with_id(request, &format!("list-{}-{}", self.api, self.pages))
    }
}
