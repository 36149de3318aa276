//! What a plugin instance (one per Wasm VM, one per worker and configuration on the dynamic module)
//! learns from its requests and hands to the next ones, per configuration: MCP sessions (`apis[]`
//! index → session id), so that requests share one session per server (a server keeps a bounded
//! number of sessions) instead of opening one each; the LLM parameters the server refused, so
//! that later requests do not send them; and whether the server's chat template opens think blocks.

use crate::agent::Agent;
use crate::config::Config;
use crate::vec_map::VecMap;
use std::rc::Rc;

type Known = crate::agent::McpSessions;

/// Keyed by the configuration's address: stable while the instance holds it; a configuration replaced
/// by discovery hands its sessions on (`moved`).
#[derive(Debug, Default)]
pub struct Sessions {
    /// MCP sessions any request may share (not those opened with a client's identity).
    mcp: VecMap<usize, Known>,
    /// LLM parameters the server refused.
    refused: VecMap<usize, Vec<&'static str>>,
    /// Configurations whose server's chat template opens think blocks.
    template_opens: Vec<usize>,
}

fn key(cfg: &Rc<Config>) -> usize {
    Rc::as_ptr(cfg) as usize
}

/// The calls of API `api` carry the client's identity: its MCP sessions are the request's own.
fn carries_identity(cfg: &Config, api: usize) -> bool {
    cfg.apis.get(api).is_some_and(|a| a.identity != crate::config::Identity::default())
}

impl Sessions {
    /// Gives a new request's agent the sessions known for its configuration.
    pub fn seed(&self, cfg: &Rc<Config>, agent: &mut Agent) {
        if cfg.tools.iter().any(|t| t.is_mcp()) {
            let mut known = self.mcp.get(&key(cfg)).cloned().unwrap_or_default();
            // A session opened with one client's identity is not another's.
            known.retain(|api, _| !carries_identity(cfg, *api));
            agent.set_mcp_sessions(known);
        }
        if let Some(refused) = self.refused.get(&key(cfg)) {
            agent.set_refused_params(refused.clone());
        }
        if self.template_opens.contains(&key(cfg)) {
            agent.set_template_opens();
        }
    }

    /// Keeps the sessions the agent opened, and forgets those it found gone.
    pub fn keep(&mut self, cfg: &Rc<Config>, agent: &Agent) {
        let refused = agent.refused_params();
        if !refused.is_empty() && self.refused.get(&key(cfg)).is_none_or(|r| r.len() != refused.len()) {
            self.refused.insert(key(cfg), refused.to_vec());
        }
        if agent.template_opens() && !cfg.template_opens && !self.template_opens.contains(&key(cfg)) {
            self.template_opens.push(key(cfg));
        }
        // Called after every event: compared in place, copied only when they changed.
        let shared = || agent.mcp_sessions().iter().filter(|(api, _)| !carries_identity(cfg, **api));
        let unchanged = match self.mcp.get(&key(cfg)) {
            Some(kept) => kept.iter().eq(shared()),
            None => shared().next().is_none(),
        };
        if !unchanged {
            let mut now = Known::new();
            for (api, session) in shared() {
                now.insert(*api, session.clone());
            }
            self.mcp.insert(key(cfg), now);
        }
    }

    /// A configuration replaced by its next version (its servers listed again): the sessions are the
    /// same servers', and move with it, so that no later configuration at the old address finds them.
    pub fn moved(&mut self, old: &Rc<Config>, new: &Rc<Config>) {
        if let Some(known) = self.mcp.remove(&key(old)) {
            self.mcp.insert(key(new), known);
        }
        if let Some(refused) = self.refused.remove(&key(old)) {
            self.refused.insert(key(new), refused);
        }
        if let Some(at) = self.template_opens.iter().position(|k| *k == key(old)) {
            self.template_opens[at] = key(new);
        }
    }
}
