//! MCP discovery, for either host: every configuration's servers without a pinned `toolsList` are
//! listed when the plugin starts and again when their list stops being fresh (the server's `ttlMs`,
//! bounded and jittered, else `INTERVAL_MS`), by callouts made outside any stream; a complete list
//! swaps in a new configuration (catalog, prompt, native tools) in one step. A failing server keeps
//! the tools it had (logged) and is listed again after a backoff (`Discovery`).

use super::memory::Instance;
use super::port::{Outgoing, RESET};
use crate::config::{Api, Config};
use crate::tools::mcp::discovery::{Discovery, Outcome};
use crate::tools::Request;
use crate::vec_map::VecMap;
use std::rc::Rc;

/// How often a server's tools are listed again when its lists do not say how long they stay fresh.
pub const INTERVAL_MS: u64 = 5 * 60 * 1000;

/// What discovery needs of its host: callouts outside any stream, a clock, and a place to count.
pub trait RootPort {
    /// Starts a callout; the host's token, or why it could not start.
    fn callout(&self, call: &Outgoing<'_>) -> Result<u64, String>;
    fn now_ms(&self) -> u64;
    /// A random number, for the jitter of the next listing (the process's random source).
    fn random(&self) -> u64 {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(self.now_ms())
    }
    /// One listing's outcome (the `mcp_listings` metric).
    fn counted(&self, api: usize, outcome: ListingOutcome);
    /// A complete list of server `apis[api]` of configuration `config` joined the catalog (a host
    /// whose workers keep their own copies of the configuration hands it on).
    fn listed(&self, _config: usize, _api: usize, _list: &serde_json::Value) {}
}

/// How one listing ended, as the `mcp_listings` metric's `outcome` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingOutcome {
    /// A complete list joined the catalog.
    Listed,
    /// The server could not be listed (it keeps its tools; listed again after a backoff).
    Failed,
    /// The list came but the configuration refused it (it keeps its tools).
    Refused,
}

impl ListingOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ListingOutcome::Listed => "listed",
            ListingOutcome::Failed => "failed",
            ListingOutcome::Refused => "refused",
        }
    }
}

/// A listing callout's reply: status, headers (lower case, no `:status`) and body.
pub type Answer<'a> = (u16, &'a [(String, String)], &'a [u8]);

struct Server {
    /// Index of its configuration in `Plugin::configs()`.
    config: usize,
    listing: Discovery,
}

/// The listings of one plugin instance.
#[derive(Default)]
pub struct Listings {
    servers: Vec<Server>,
    /// Callout tokens → the server whose listing made the call.
    calls: VecMap<u64, usize>,
}

impl Listings {
    /// The servers of the instance's configuration, due at once.
    pub fn new(instance: &Instance, now: u64) -> Listings {
        let mut servers = Vec::new();
        for (config, cfg) in instance.plugin().configs().enumerate() {
            for s in cfg.listed_servers() {
                servers.push(Server { config, listing: Discovery::new(s.api, &s.path, INTERVAL_MS, now) });
            }
        }
        Listings { servers, calls: VecMap::new() }
    }

    /// Whether any server is listed (the host then keeps a slow timer).
    pub fn any(&self) -> bool {
        !self.servers.is_empty()
    }

    /// Whether callout `token` is a listing's.
    pub fn owns(&self, token: u64) -> bool {
        self.calls.contains_key(&token)
    }

    /// When the next listing is due, if any.
    pub fn next_due(&self) -> Option<u64> {
        self.servers.iter().map(|s| s.listing.next_at).min()
    }

    /// Starts the listings that are due.
    pub fn tick(&mut self, port: &impl RootPort, instance: &Instance) {
        let now = port.now_ms();
        for i in 0..self.servers.len() {
            let Some((_, api)) = self.config_of(i, instance) else { continue };
            if let Some(request) = self.servers[i].listing.start(&api, now) {
                self.send(i, request, port, instance);
            }
        }
    }

    /// The reply to a listing's callout (`None`: no status, the call broke).
    pub fn on_reply(&mut self, token: u64, reply: Option<Answer<'_>>, port: &impl RootPort, instance: &Instance) {
        let Some(i) = self.calls.remove(&token) else { return };
        let Some((_, api)) = self.config_of(i, instance) else { return };
        let now = port.now_ms();
        let listing = &mut self.servers[i].listing;
        let outcome = match reply {
            Some((status, headers, body)) => listing.on_reply(&api, status, headers, body, now, port.random()),
            None => listing.on_failure(RESET, now),
        };
        self.handle(i, outcome, port, instance);
    }

    fn handle(&mut self, i: usize, outcome: Outcome, port: &impl RootPort, instance: &Instance) {
        match outcome {
            Outcome::Send(request) => self.send(i, request, port, instance),
            Outcome::Listed(list) => self.swap(i, &list, port, instance),
            Outcome::Failed(why) => {
                let listing = &self.servers[i].listing;
                port.counted(listing.api, ListingOutcome::Failed);
                log::warn!(
                    "MCP tools/list of apis[{}] failed: {why}; its tools stay as they were, next try in {} ms",
                    listing.api,
                    listing.next_at.saturating_sub(port.now_ms())
                );
            }
        }
    }

    fn send(&mut self, i: usize, request: Request, port: &impl RootPort, instance: &Instance) {
        let Some((cluster, timeout)) =
            self.config_of(i, instance).map(|(_, a)| (a.upstream.cluster, a.upstream.timeout_ms))
        else {
            return;
        };
        match port.callout(&Outgoing::of(&cluster, &request, timeout)) {
            Ok(token) => {
                self.calls.insert(token, i);
            }
            Err(e) => {
                let why = format!("the call to cluster '{cluster}' could not be sent ({e})");
                let outcome = self.servers[i].listing.on_failure(&why, port.now_ms());
                self.handle(i, outcome, port, instance);
            }
        }
    }

    /// The new list joins the catalog: new streams see it; streams running keep their configuration.
    fn swap(&mut self, i: usize, list: &serde_json::Value, port: &impl RootPort, instance: &Instance) {
        let Some((cfg, _)) = self.config_of(i, instance) else { return };
        let (index, at) = (self.servers[i].config, self.servers[i].listing.api);
        match cfg.with_mcp_tools(at, list) {
            Ok(next) => {
                let names: Vec<&str> = next.tools.iter().filter(|t| t.api == at).map(|t| t.name.as_str()).collect();
                port.counted(at, ListingOutcome::Listed);
                let listing = &self.servers[i].listing;
                let revision = listing.revision().map_or("", |r| r.version());
                let fresh = listing.next_at.saturating_sub(port.now_ms());
                let scope = list.get("cacheScope").and_then(serde_json::Value::as_str).unwrap_or("unsaid");
                log::info!(
                    "MCP tools of apis[{at}] listed: {} tool(s): {} (MCP {revision}, cacheScope {scope}, next listing in {fresh} ms)",
                    names.len(),
                    names.join(", ")
                );
                instance.swap(index, Rc::new(next));
                port.listed(index, at, list);
            }
            Err(e) => {
                port.counted(at, ListingOutcome::Refused);
                log::warn!("MCP tools/list of apis[{at}] refused: {e}; its tools stay as they were");
            }
        }
    }

    /// Server `i`'s configuration as the instance has it now, and its `apis[]` entry.
    fn config_of(&self, i: usize, instance: &Instance) -> Option<(Rc<Config>, Api)> {
        let s = self.servers.get(i)?;
        let cfg = instance.plugin().configs().nth(s.config).cloned()?;
        let api = cfg.apis.get(s.listing.api).cloned()?;
        Some((cfg, api))
    }
}

#[cfg(test)]
mod tests {
    use super::ListingOutcome;

    #[test]
    fn listing_outcomes_are_the_metric_labels_docs_name() {
        let docs = include_str!("../../docs/operating.md");
        let line = docs.lines().find(|l| l.starts_with("| `api_agent_mcp_listings`")).unwrap_or_default();
        for o in [ListingOutcome::Listed, ListingOutcome::Failed, ListingOutcome::Refused] {
            assert!(line.contains(&format!("`{}`", o.as_str())), "{o:?} not in docs/operating.md: {line}");
        }
    }
}
