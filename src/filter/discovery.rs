//! MCP discovery on the root context: every configuration's servers without a pinned `toolsList` are
//! listed when the plugin starts and every `INTERVAL_MS`; a listing's requests are root callouts, and
//! a complete list swaps in a new configuration (catalog, prompt, native tools) in one step. A failing
//! server keeps the tools it had (logged) and is listed again after a backoff (`Discovery`).

use super::http::{now_ms, CallData};
use super::{abi, VM};
use crate::config::Plugin;
use crate::tools::mcp::discovery::{Discovery, Outcome};
use crate::tools::Request;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// How often a server's tools are listed again.
const INTERVAL_MS: u64 = 5 * 60 * 1000;

struct Server {
    /// Index of its configuration in `Plugin::configs()`.
    config: usize,
    listing: Discovery,
}

#[derive(Default)]
struct Root {
    servers: Vec<Server>,
    /// Callout tokens → the server whose listing made the call.
    calls: BTreeMap<u32, usize>,
}

thread_local! {
    static ROOT: RefCell<Root> = RefCell::new(Root::default());
}

/// A new plugin: its servers, listed from now on.
pub fn configure(plugin: &Plugin) {
    let now = now_ms();
    let mut servers = Vec::new();
    for (config, cfg) in plugin.configs().enumerate() {
        for s in cfg.listed_servers() {
            servers.push(Server { config, listing: Discovery::new(s.api, &s.path, INTERVAL_MS, now) });
        }
    }
    ROOT.with(|r| *r.borrow_mut() = Root { servers, calls: BTreeMap::new() });
}

/// Whether any server is listed (the root then ticks, slowly).
pub fn any() -> bool {
    ROOT.with(|r| !r.borrow().servers.is_empty())
}

/// Starts the listings that are due.
pub fn tick() {
    let now = now_ms();
    let count = ROOT.with(|r| r.borrow().servers.len());
    for i in 0..count {
        let Some(api) = api_of(i) else { continue };
        let first = ROOT.with(|r| r.borrow_mut().servers[i].listing.start(&api, now));
        if let Some(request) = first {
            send(i, request);
        }
    }
}

/// Whether callout `token` is a listing's.
pub fn owns(token: u32) -> bool {
    ROOT.with(|r| r.borrow().calls.contains_key(&token))
}

/// The reply to a listing's callout.
pub fn on_reply(token: u32, data: &CallData) {
    let Some(i) = ROOT.with(|r| r.borrow_mut().calls.remove(&token)) else {
        return;
    };
    let Some(api) = api_of(i) else { return };
    let now = now_ms();
    let outcome = ROOT.with(|r| {
        let mut r = r.borrow_mut();
        let listing = &mut r.servers[i].listing;
        match data.status {
            Some(status) => listing.on_reply(&api, status, &data.headers, &data.body, now),
            None => listing.on_failure("no response (reset)", now),
        }
    });
    handle(i, outcome);
}

fn handle(i: usize, outcome: Outcome) {
    match outcome {
        Outcome::Send(request) => send(i, request),
        Outcome::Listed(list) => swap(i, &list),
        Outcome::Failed(why) => {
            let (api, next) = ROOT
                .with(|r| r.borrow().servers.get(i).map(|s| (s.listing.api, s.listing.next_at)))
                .unwrap_or_default();
            super::metrics::mcp_listing(api, "failed");
            log::warn!(
                "MCP tools/list of apis[{api}] failed: {why}; its tools stay as they were, next try in {} ms",
                next.saturating_sub(now_ms())
            );
        }
    }
}

fn send(i: usize, request: Request) {
    let Some((cluster, timeout)) = config_of(i)
        .and_then(|(cfg, api)| cfg.apis.get(api).map(|a| (a.upstream.cluster.clone(), a.upstream.timeout_ms)))
    else {
        return;
    };
    let mut headers: Vec<(&str, &str)> =
        vec![(":method", request.method), (":path", &request.path), (":authority", &request.authority)];
    headers.extend(request.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let timeout = u32::try_from(timeout).unwrap_or(u32::MAX);
    match abi::http_call(&cluster, &headers, request.body.as_deref(), timeout) {
        Ok(token) => ROOT.with(|r| {
            r.borrow_mut().calls.insert(token, i);
        }),
        Err(s) => {
            let now = now_ms();
            let why = format!("the call to cluster '{cluster}' could not be sent ({s:?})");
            let outcome = ROOT.with(|r| r.borrow_mut().servers[i].listing.on_failure(&why, now));
            handle(i, outcome);
        }
    }
}

/// The new list joins the catalog: the plugin is replaced in one step (new streams see it; streams
/// running keep the configuration they started with).
fn swap(i: usize, list: &serde_json::Value) {
    let Some((cfg, api)) = config_of(i) else { return };
    let Some(index) = ROOT.with(|r| r.borrow().servers.get(i).map(|s| s.config)) else { return };
    match cfg.with_mcp_tools(api, list) {
        Ok(next) => {
            let names: Vec<String> = next.tools.iter().filter(|t| t.api == api).map(|t| t.name.clone()).collect();
            super::metrics::mcp_listing(api, "listed");
            log::info!("MCP tools of apis[{api}] listed: {} tool(s): {}", names.len(), names.join(", "));
            let next = Rc::new(next);
            crate::agent::sessions::moved(&cfg, &next);
            VM.with(|vm| {
                let mut vm = vm.borrow_mut();
                if let Some(plugin) = vm.plugin.as_ref() {
                    let swapped = plugin.with_config(index, next);
                    vm.plugin = Some(Rc::new(swapped));
                }
            });
        }
        Err(e) => {
            super::metrics::mcp_listing(api, "refused");
            log::warn!("MCP tools/list of apis[{api}] refused: {e}; its tools stay as they were");
        }
    }
}

fn config_of(i: usize) -> Option<(Rc<crate::config::Config>, usize)> {
    let (index, api) = ROOT.with(|r| r.borrow().servers.get(i).map(|s| (s.config, s.listing.api)))?;
    let cfg = VM.with(|vm| vm.borrow().plugin.as_ref().and_then(|p| p.configs().nth(index).cloned()))?;
    Some((cfg, api))
}

fn api_of(i: usize) -> Option<crate::config::Api> {
    config_of(i).and_then(|(cfg, api)| cfg.apis.get(api).cloned())
}
