//! MCP sessions per VM (Proxy-Wasm) or per worker thread (dynamic module): each configuration's map of `apis[]` index → session id, seeded into every
//! request's agent and updated from what the request leaves. Requests then share one session per
//! server (a server keeps a bounded number of sessions) instead of opening one each.

use super::Agent;
use crate::config::Config;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

type Sessions = BTreeMap<usize, Option<String>>;

thread_local! {
    /// Keyed by the configuration's address: stable while the plugin holds it; a new configuration
    /// (new addresses) starts with no session.
    static SESSIONS: RefCell<BTreeMap<usize, Sessions>> = const { RefCell::new(BTreeMap::new()) };
}

fn key(cfg: &Rc<Config>) -> usize {
    Rc::as_ptr(cfg) as usize
}

/// Gives a new request's agent the sessions known for its configuration.
pub fn seed(cfg: &Rc<Config>, agent: &mut Agent) {
    if cfg.tools.iter().any(|t| t.is_mcp()) {
        let known = SESSIONS.with(|s| s.borrow().get(&key(cfg)).cloned()).unwrap_or_default();
        agent.set_mcp_sessions(known);
    }
}

/// Keeps the sessions the agent opened, and forgets those it found gone.
pub fn keep(cfg: &Rc<Config>, agent: &Agent) {
    let now = agent.mcp_sessions();
    SESSIONS.with(|s| {
        let mut s = s.borrow_mut();
        if now.is_empty() && !s.contains_key(&key(cfg)) {
            return;
        }
        s.insert(key(cfg), now.clone());
    });
}

/// A configuration replaced by its next version (its servers listed again): the sessions are the same
/// servers', and move with it, so that no later configuration at the old address finds them.
pub fn moved(old: &Rc<Config>, new: &Rc<Config>) {
    SESSIONS.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(known) = s.remove(&key(old)) {
            s.insert(key(new), known);
        }
    });
}

/// A new plugin configuration: the old configurations' sessions are no longer reachable.
pub fn clear() {
    SESSIONS.with(|s| s.borrow_mut().clear());
}
