//! Listing an MCP server's tools (`tools/list`, every page), sans-IO: the host sends the requests this
//! gives it, feeds back the replies with its clock and a random number, and gets the whole list, or a
//! failure and the time to try again (backoff doubling from 1 s up to the interval).
//!
//! The revision is negotiated, not configured: a listing asks in 2026-07-28 first and falls back to the
//! `initialize` handshake when the server answers as a 2025 server does (`Refusal`); the revision that
//! worked is asked first the next time (and the fallback runs again if the server changed). A 2025
//! listing runs its own handshake: it is rare, and a session kept between listings would be lost in
//! between. The next listing is due when the list stops being fresh (`ttlMs`, bounded by
//! `MIN_REFRESH_MS`..`MAX_REFRESH_MS`, the interval when the server gives none), less a jitter of up to
//! a tenth so that workers and pods that started together do not list together.

use super::{agreed, handshake_error, in_session, initialize, initialized, list, refusal, reply, session_of};
use super::{speaking, Revision, MODERN};
use crate::upstream::{Api, Request};
use serde_json::{Map, Value};

const FIRST_BACKOFF_MS: u64 = 1000;
/// A server that pages forever is not listed.
const MAX_PAGES: u32 = 100;
/// The shortest refresh a server's `ttlMs` gets: a fleet lists every server from every worker.
pub const MIN_REFRESH_MS: u64 = 10_000;
/// The longest: a server that says "fresh for a day" is still listed hourly.
pub const MAX_REFRESH_MS: u64 = 3_600_000;

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
    /// The revision of the listing running, and the one that last worked (asked first).
    speaking: Revision,
    known: Option<Revision>,
    session: Option<String>,
    tools: Vec<Value>,
    pages: u32,
    /// The shortest `ttlMs` of the pages so far, and whether any page was `private`.
    ttl_ms: Option<u64>,
    private: bool,
    failures: u32,
    /// When the next listing is due (host milliseconds).
    pub next_at: u64,
}

/// What a reply leads to.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Send(Request),
    /// The whole `tools/list` result (`{"tools": [...]}`, with the `ttlMs` and `cacheScope` that
    /// applied), to build the catalog from.
    Listed(Value),
    /// Why the listing failed; the next one is due at `next_at`.
    Failed(String),
}

impl Discovery {
    /// A server at `path` of `apis[api]`, listed at once and then every `interval_ms` unless its
    /// lists say how long they stay fresh.
    pub fn new(api: usize, path: &str, interval_ms: u64, now: u64) -> Discovery {
        Discovery {
            api,
            path: path.to_string(),
            interval_ms,
            step: Step::Idle,
            speaking: Revision::Modern,
            known: None,
            session: None,
            tools: Vec::new(),
            pages: 0,
            ttl_ms: None,
            private: false,
            failures: 0,
            next_at: now,
        }
    }

    /// The revision the last listing that worked spoke.
    pub fn revision(&self) -> Option<Revision> {
        self.known
    }

    /// The first request of a listing, when one is due and none runs.
    pub fn start(&mut self, api: &Api, now: u64) -> Option<Request> {
        if self.step != Step::Idle || now < self.next_at {
            return None;
        }
        (self.session, self.tools, self.pages, self.ttl_ms, self.private) = (None, Vec::new(), 0, None, false);
        match self.known {
            Some(legacy @ Revision::Legacy(_)) => Some(self.handshake(api, legacy)),
            _ => {
                self.speaking = Revision::Modern;
                self.page(api, None).sent()
            }
        }
    }

    /// A reply to the request last given; `random` jitters the next listing.
    pub fn on_reply(
        &mut self,
        api: &Api,
        status: u16,
        headers: &[(String, String)],
        body: &[u8],
        now: u64,
        random: u64,
    ) -> Outcome {
        match self.step {
            Step::Idle => Outcome::Failed("a reply no listing waits for".into()),
            Step::Initialize | Step::Initialized => {
                if let Some(why) = handshake_error(status, body) {
                    return self.failed(why, now);
                }
                if self.step == Step::Initialize {
                    match agreed(body) {
                        Ok(revision) => self.speaking = revision,
                        Err(why) => return self.failed(why, now),
                    }
                    self.session = session_of(headers);
                    self.step = Step::Initialized;
                    let note = speaking(initialized(api, &self.path), self.speaking, "");
                    return Outcome::Send(in_session(note, self.session.as_deref()));
                }
                self.step = Step::List;
                self.page(api, None)
            }
            Step::List => self.on_page(api, status, body, now, random),
        }
    }

    /// The request last given was not answered (reset, timeout, refused).
    pub fn on_failure(&mut self, why: &str, now: u64) -> Outcome {
        self.failed(why.to_string(), now)
    }

    fn on_page(&mut self, api: &Api, status: u16, body: &[u8], now: u64, random: u64) -> Outcome {
        if self.pages == 1 && self.speaking == Revision::Modern {
            if let Some(refused) = refusal(status, body) {
                return match refused.next(Revision::Modern) {
                    Ok(next @ Revision::Legacy(_)) => {
                        log::info!("MCP server of apis[{}] does not speak {}: trying its handshake", self.api, MODERN);
                        Outcome::Send(self.handshake(api, next))
                    }
                    Ok(Revision::Modern) => self.failed(format!("the server refused {MODERN} while naming it"), now),
                    Err(why) => self.failed(why, now),
                };
            }
        }
        if let Some(why) = handshake_error(status, body) {
            return self.failed(why, now);
        }
        let result = reply::response(body).and_then(|m| m.get("result").cloned()).unwrap_or(Value::Null);
        let Some(Value::Array(tools)) = result.get("tools") else {
            return self.failed("the tools/list result has no 'tools' array".into(), now);
        };
        self.tools.extend(tools.iter().cloned());
        self.cacheable(&result);
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(_) if self.pages >= MAX_PAGES => self.failed(format!("more than {MAX_PAGES} pages of tools"), now),
            Some(cursor) => self.page(api, Some(cursor.to_string())),
            None => self.listed(now, random),
        }
    }

    /// What a page says of its freshness (`ttlMs`, `cacheScope`): the list is as fresh as its least
    /// fresh page, and private if any page is.
    fn cacheable(&mut self, result: &Value) {
        if let Some(ttl) = result.get("ttlMs").and_then(Value::as_f64) {
            // A negative TTL counts as 0 (the specification); a fraction is cut.
            let ttl = if ttl.is_finite() && ttl > 0.0 { ttl.min(u64::MAX as f64) as u64 } else { 0 };
            self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |t| t.min(ttl)));
        }
        self.private |= result.get("cacheScope").and_then(Value::as_str) == Some("private");
    }

    fn listed(&mut self, now: u64, random: u64) -> Outcome {
        let fresh = self.ttl_ms.map_or(self.interval_ms, |t| t.clamp(MIN_REFRESH_MS, MAX_REFRESH_MS));
        let jitter = random % (fresh / 10 + 1);
        (self.step, self.failures, self.known) = (Step::Idle, 0, Some(self.speaking));
        self.next_at = now.saturating_add(fresh - jitter);
        // A `tools/list` result, as a pinned `toolsList` is written.
        let mut list = Map::new();
        list.insert("tools".into(), Value::Array(std::mem::take(&mut self.tools)));
        if let Some(ttl) = self.ttl_ms {
            list.insert("ttlMs".into(), ttl.into());
            list.insert("cacheScope".into(), if self.private { "private" } else { "public" }.into());
        }
        Outcome::Listed(Value::Object(list))
    }

    /// A listing in `revision` by its handshake: `initialize` first.
    fn handshake(&mut self, api: &Api, revision: Revision) -> Request {
        (self.step, self.speaking, self.session, self.pages) = (Step::Initialize, revision, None, 0);
        speaking(initialize(api, &self.path), revision, &self.id())
    }

    fn page(&mut self, api: &Api, cursor: Option<String>) -> Outcome {
        (self.step, self.pages) = (Step::List, self.pages + 1);
        let request = speaking(list(api, &self.path, cursor.as_deref()), self.speaking, &self.id());
        Outcome::Send(in_session(request, self.session.as_deref()))
    }

    /// A failed listing; the next one asks for the revision again (the server may have changed).
    fn failed(&mut self, why: String, now: u64) -> Outcome {
        (self.failures, self.known) = (self.failures + 1, None);
        let backoff = FIRST_BACKOFF_MS.saturating_mul(1 << self.failures.min(20).saturating_sub(1));
        (self.step, self.next_at) = (Step::Idle, now.saturating_add(backoff.min(self.interval_ms)));
        Outcome::Failed(why)
    }

    /// JSON-RPC ids of a listing: unique within its own session.
    fn id(&self) -> String {
        format!("list-{}-{}", self.api, self.pages)
    }
}

impl Outcome {
    fn sent(self) -> Option<Request> {
        match self {
            Outcome::Send(r) => Some(r),
            _ => None,
        }
    }
}
