//! MCP discovery on the dynamic module. The filter configuration lists its servers on the main thread
//! (its callouts and scheduler are the configuration's), with `host::discovery::Listings` as on
//! Proxy-Wasm. Workers cannot share the main thread's parsed configuration (`Rc`), so each complete
//! list is published (`Published`) and a worker applies what it has not seen yet before its next
//! request: one atomic load per request when nothing changed.

use super::envoy::{EnvoyConfig, Scheduler};
use super::{now_ms, timer};
use crate::host::discovery::{Answer, Listings, RootPort};
use crate::host::port::Outgoing;
use crate::host::Instance;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the main thread looks for due listings at the most (Proxy-Wasm ticks as often).
const TICK_MS: u64 = 500;

/// What the main thread's listings hand to the workers.
#[derive(Debug, Default)]
pub struct Published {
    /// Bumped with every list published.
    generation: AtomicU64,
    /// The latest complete list of each server: (configuration index, `apis[]` index) → result.
    lists: Mutex<BTreeMap<(usize, usize), Value>>,
    /// Listing outcomes not counted yet: Envoy's metrics are recorded by streams.
    counts: Mutex<Vec<(usize, &'static str)>>,
}

impl Published {
    /// Brings a worker's instance up to date; `seen` is the generation it had.
    pub fn apply(&self, instance: &Instance, seen: &mut u64) {
        let now = self.generation.load(Ordering::Acquire);
        if now == *seen {
            return;
        }
        *seen = now;
        let Ok(lists) = self.lists.lock() else { return };
        for ((index, api), list) in lists.iter() {
            let Some(cfg) = instance.plugin().configs().nth(*index).cloned() else { continue };
            match cfg.with_mcp_tools(*api, list) {
                Ok(next) => instance.swap(*index, Rc::new(next)),
                Err(e) => log::warn!("MCP tools/list of apis[{api}] refused on a worker: {e}"),
            }
        }
    }

    /// Listing outcomes to count now.
    pub fn take_counts(&self) -> Vec<(usize, &'static str)> {
        self.counts.lock().map(|mut c| std::mem::take(&mut *c)).unwrap_or_default()
    }
}

/// The main thread's side of one configuration.
struct Main {
    envoy: EnvoyConfig,
    instance: Instance,
    listings: Listings,
    scheduler: Scheduler,
    published: Arc<Published>,
    /// When the scheduler will call next (host milliseconds), if it was asked to.
    armed: Option<u64>,
}

thread_local! {
    /// Only ever touched on the main thread: configurations' listings by configuration id.
    static MAIN: RefCell<BTreeMap<u64, Main>> = const { RefCell::new(BTreeMap::new()) };
}

struct Port<'a> {
    envoy: EnvoyConfig,
    published: &'a Published,
}

impl RootPort for Port<'_> {
    fn callout(&self, call: &Outgoing<'_>) -> Result<u64, String> {
        self.envoy.callout(call).map_err(|code| format!("init result {code}"))
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn counted(&self, api: usize, outcome: crate::host::discovery::ListingOutcome) {
        if let Ok(mut c) = self.published.counts.lock() {
            c.push((api, outcome.as_str()));
        }
    }

    fn listed(&self, config: usize, api: usize, list: &Value) {
        if let Ok(mut lists) = self.published.lists.lock() {
            lists.insert((config, api), list.clone());
        }
        self.published.generation.fetch_add(1, Ordering::Release);
    }
}

/// A new configuration with servers to list: listed as soon as the main thread is free.
pub fn start(id: u64, envoy: EnvoyConfig, instance: Instance, published: Arc<Published>) {
    let listings = Listings::new(&instance, now_ms());
    if !listings.any() {
        return;
    }
    let scheduler = envoy.scheduler();
    let main = Main { envoy, instance, listings, scheduler, published, armed: None };
    MAIN.with(|m| m.borrow_mut().insert(id, main));
    arm(id, now_ms());
}

/// The configuration is gone: its listings stop (a wake-up still queued finds nothing).
pub fn stop(id: u64) {
    if let Some(main) = MAIN.with(|m| m.borrow_mut().remove(&id)) {
        main.scheduler.close();
    }
}

/// The scheduler called: start what is due, and wait for the next.
pub fn on_scheduled(id: u64) {
    with_main(id, |main| {
        main.armed = None;
        let port = Port { envoy: main.envoy, published: &main.published };
        main.listings.tick(&port, &main.instance);
    });
    rearm(id);
}

/// A listing callout's reply (`None`: it failed without a status).
pub fn on_reply(id: u64, token: u64, reply: Option<Answer<'_>>) {
    with_main(id, |main| {
        let port = Port { envoy: main.envoy, published: &main.published };
        main.listings.on_reply(token, reply, &port, &main.instance);
    });
    rearm(id);
}

fn with_main(id: u64, f: impl FnOnce(&mut Main)) {
    MAIN.with(|m| {
        if let Some(main) = m.borrow_mut().get_mut(&id) {
            f(main);
        }
    });
}

/// Asks for a wake-up at the next listing due (not sooner than a tick away), unless one is asked for
/// by then already.
fn rearm(id: u64) {
    let due = MAIN.with(|m| m.borrow().get(&id).and_then(|main| main.listings.next_due()));
    if let Some(due) = due {
        arm(id, due.max(now_ms() + TICK_MS));
    }
}

fn arm(id: u64, at: u64) {
    with_main(id, |main| {
        if main.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        let wait = Duration::from_millis(at.saturating_sub(now_ms()));
        if timer::wake_after(wait, main.scheduler.clone(), 0) {
            main.armed = Some(at);
        } else {
            log::error!("no timer for MCP listings: servers are not listed again");
        }
    });
}
