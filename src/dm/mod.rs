//! The Envoy dynamic-module host shim (feature `dynamic-module`, `make build-dm`): the same agent as
//! the Proxy-Wasm filter, loaded by `envoy.filters.http.dynamic_modules` as `libapi_agent.so`.
//!
//! Threads: Envoy parses the configuration on the main thread and runs each stream on one worker.
//! The configuration text is checked there once (a bad one fails the load with the Wasm build's
//! message); the agent's `Plugin` holds `Rc`s, so each worker parses its own copy on its first
//! request, as each Wasm VM (one per worker) does.
//!
//! Re-entrancy: a local reply runs the encoder filters, this one included, inside the call that sent
//! it, and a callout can fail inside the call that started it. A stream's state is a `RefCell`: a hook
//! that finds it borrowed is a re-entrant one; callout replies and wake-ups that come then are queued
//! and handled when the running hook returns.

#![deny(unsafe_code)]

mod abi;
mod discover;
mod envoy;
mod hooks;
mod optional;
mod port;
mod stream;
mod streamed;
mod tally;
mod timer;
mod tracing;

use crate::config::Plugin;
use crate::host::fault::{self, Fate, Path};
use crate::host::logger::{self, Logger};
use crate::host::metrics::Metrics;
use crate::host::Instance;
use abi::{BodyStatus, HeadersStatus, Status, TrailersStatus};
use envoy::{CalloutReply, Envoy, EnvoyConfig, StreamEvent};
use port::StatId;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use stream::Stream;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BUILD: &str = env!("API_AGENT_BUILD");
/// The name the filter is configured with (`filter_name`).
const FILTER_NAME: &[u8] = b"api-agent";

/// One filter configuration: its text (parsed again per worker), its metrics, and what its MCP
/// listings publish for the workers.
pub struct DmConfig {
    id: u64,
    text: Vec<u8>,
    metrics: Metrics<StatId>,
    /// The streams' counter additions, handed to Envoy by the main thread (`None`: this Envoy has no
    /// configuration-level counters, so each stream adds its own).
    tally: Option<tally::Tally>,
    published: Arc<discover::Published>,
}

impl DmConfig {
    pub fn id(&self) -> u64 {
        self.id
    }
}

static NEXT_CONFIG: AtomicU64 = AtomicU64::new(1);
/// Configurations Envoy still holds: a worker drops its parsed copies of the others.
static LIVE: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

thread_local! {
    /// This worker's plugin instances, one per configuration Envoy holds, with the generation of the
    /// published MCP lists each has applied.
    static INSTANCES: RefCell<Vec<(u64, Rc<Instance>, u64)>> = const { RefCell::new(Vec::new()) };
}

/// `log` records to Envoy's `[dynamic_modules]` log, secrets masked (`host::logger`).
static LOGGER: Logger = Logger(envoy::log);

// The layer hands each line its level as `host::logger::level_code` numbers it: this ABI's numbers.
const _: () = assert!(
    abi::LOG_TRACE == 0 && abi::LOG_DEBUG == 1 && abi::LOG_INFO == 2 && abi::LOG_WARN == 3 && abi::LOG_ERROR == 4
);

thread_local! {
    /// Where the last panic on this thread happened, for the one line that reports it.
    static PANICKED_AT: RefCell<String> = const { RefCell::new(String::new()) };
}

fn program_init() {
    logger::install(&LOGGER);
    // Only where: what a panic carries may hold a body or a secret. The catch_unwind that stops it
    // logs the line with what became of the stream (`host::fault`).
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        PANICKED_AT.with(|p| *p.borrow_mut() = at);
    }));
}

/// Where the last panic on this thread happened.
fn panic_location() -> String {
    PANICKED_AT.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

fn config_new(envoy: EnvoyConfig, name: &[u8], text: Vec<u8>) -> Option<Arc<DmConfig>> {
    // Envoy's level for dynamic modules (the lowest one enabled), so that records below it are not
    // even formatted.
    let levels = [abi::LOG_TRACE, abi::LOG_DEBUG, abi::LOG_INFO, abi::LOG_WARN];
    let lowest = levels.into_iter().find(|l| envoy::log_enabled(*l));
    log::set_max_level(logger::filter_of(lowest.unwrap_or(abi::LOG_ERROR)));
    log::info!("api-agent {VERSION} ({BUILD}) loaded as an Envoy dynamic module (ABI v0.2.0)");
    if name != FILTER_NAME {
        log::warn!("api-agent: filter_name is '{}', expected 'api-agent'", String::from_utf8_lossy(name));
    }
    let plugin = match Plugin::from_slice(&text) {
        Ok(plugin) => plugin,
        Err(e) => {
            log::error!("api-agent configuration rejected: {e}");
            return None;
        }
    };
    describe(&plugin);
    logger::add_secrets(plugin.secrets());
    let id = NEXT_CONFIG.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut live) = LIVE.lock() {
        live.insert(id);
    }
    let published = Arc::new(discover::Published::default());
    let metrics = port::define(envoy);
    let tally = optional::optional().config_increment.is_some().then(|| tally::Tally::new(envoy));
    // MCP servers without a pinned toolsList are listed by the configuration, on this thread.
    discover::start(id, envoy, Instance::new(plugin), Arc::clone(&published));
    Some(Arc::new(DmConfig { id, text, metrics, tally, published }))
}

fn config_destroy(cfg: &DmConfig) {
    discover::stop(cfg.id);
    if let Some(tally) = &cfg.tally {
        tally.close();
    }
    if let Ok(mut live) = LIVE.lock() {
        live.remove(&cfg.id);
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The configuration's log lines, as the Wasm build writes them.
fn describe(plugin: &Plugin) {
    let (warnings, lines) = plugin.startup_lines();
    warnings.iter().for_each(|w| log::warn!("{w}"));
    lines.iter().for_each(|l| log::info!("{l}"));
}

/// This worker's instance of a configuration (parsed on its first request).
fn instance(cfg: &DmConfig) -> Option<Rc<Instance>> {
    INSTANCES.with(|instances| {
        let mut instances = instances.borrow_mut();
        if let Some((_, i, seen)) = instances.iter_mut().find(|(id, _, _)| *id == cfg.id) {
            cfg.published.apply(i, seen);
            return Some(Rc::clone(i));
        }
        if let Ok(live) = LIVE.lock() {
            instances.retain(|(id, _, _)| live.contains(id));
        }
        match Plugin::from_slice(&cfg.text) {
            Ok(p) => {
                let i = Rc::new(Instance::new(p));
                let mut seen = 0;
                cfg.published.apply(&i, &mut seen);
                instances.push((cfg.id, Rc::clone(&i), seen));
                Some(i)
            }
            Err(e) => {
                log::error!("api-agent configuration rejected on a worker: {e}");
                None
            }
        }
    })
}

/// What reaches a stream from outside its header/body hooks.
#[derive(Debug)]
pub enum Deferred {
    Callout(CalloutReply),
    /// An event of a streamed callout (Envoy's stream id).
    Stream(u64, StreamEvent),
    /// A timer's wake-up; the number tells a current timer from a replaced one.
    Wake(u64),
}

/// A stream as Envoy holds it (see the re-entrancy note above).
pub struct Slot {
    envoy: Envoy,
    stream: RefCell<Stream>,
    pending: RefCell<Vec<Deferred>>,
    /// A hook panicked: the stream was answered with a 500 (or reset) and is left alone from then on.
    poisoned: Cell<bool>,
    /// A response hook ran: a panic from now on resets the stream.
    response: Cell<bool>,
    /// Hooks of this slot on the stack (a re-entrant one counts too).
    depth: Cell<u32>,
    /// Envoy destroyed the filter inside a hook (`hooks::on_slot`): the slot is freed when the
    /// outermost hook returns.
    doomed: Cell<bool>,
}

impl Slot {
    fn new(cfg: Arc<DmConfig>, envoy: Envoy) -> Slot {
        let instance = instance(&cfg);
        Slot {
            envoy,
            stream: RefCell::new(Stream::new(envoy, cfg, instance)),
            pending: RefCell::new(Vec::new()),
            poisoned: Cell::new(false),
            response: Cell::new(false),
            depth: Cell::new(0),
            doomed: Cell::new(false),
        }
    }

    /// Runs one hook on the stream, then what was queued meanwhile; a re-entrant call, or one on a
    /// stream a panic left, lets the data go on. A panic answers 500 while no response has begun,
    /// else resets the stream (`host::fault`); `response`: the hook is one of the response's.
    fn run<S: Status>(&self, response: bool, f: impl FnOnce(&mut Stream) -> S) -> S {
        if self.poisoned.get() || self.doomed.get() {
            return S::CONTINUE;
        }
        if response {
            self.response.set(true);
        }
        let Ok(mut stream) = self.stream.try_borrow_mut() else {
            return S::CONTINUE;
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            let action = f(&mut stream);
            loop {
                let queued = std::mem::take(&mut *self.pending.borrow_mut());
                // A stream Envoy tore down takes no more events.
                if queued.is_empty() || self.doomed.get() {
                    break;
                }
                for d in queued {
                    stream.on_deferred(d);
                }
            }
            if !self.doomed.get() {
                stream.sync_wake();
            }
            action
        }));
        let begun = self.response.get() || stream.opened();
        drop(stream);
        match result {
            Ok(action) => action,
            Err(_) => {
                self.panicked(Path::of(begun));
                S::STOP
            }
        }
    }

    /// A panic: the stream is answered or reset, and left alone from then on.
    fn panicked(&self, path: Path) {
        self.poisoned.set(true);
        let fate = fault::fate(path);
        log::error!("{}", fault::line(&panic_location(), Some(fate)));
        if !self.envoy.live() {
            return;
        }
        let reset = fate == Fate::Reset && optional::reset_stream(self.envoy.0, "api_agent_panic");
        if !reset {
            // Before the response: the 500. After it, where this Envoy cannot reset a stream: Envoy
            // resets it itself on a local reply that comes too late.
            let headers = [("content-type", crate::openai::answer::JSON)];
            self.envoy.send_response(500, &headers, &fault::body(), "api_agent_panic");
        }
    }

    fn request_headers(&self, eos: bool) -> HeadersStatus {
        self.run(false, |s| s.on_request_headers(eos))
    }

    fn request_body(&self, eos: bool) -> BodyStatus {
        self.run(false, |s| s.on_request_body(eos))
    }

    fn request_trailers(&self) -> TrailersStatus {
        self.run(false, Stream::on_request_trailers)
    }

    fn response_headers(&self, eos: bool) -> HeadersStatus {
        self.run(true, |s| s.on_response_headers(eos))
    }

    fn response_body(&self, eos: bool) -> BodyStatus {
        self.run(true, |s| s.on_response_body(eos))
    }

    fn response_trailers(&self) -> TrailersStatus {
        self.run(true, Stream::on_response_trailers)
    }

    fn stream_complete(&self) {
        self.run(false, |s| {
            s.on_closed();
            HeadersStatus::Continue
        });
    }

    /// A callout reply or a wake-up: handled now, or after the hook that is running.
    fn deliver(&self, d: Deferred) {
        self.pending.borrow_mut().push(d);
        self.run(false, |_| HeadersStatus::Continue);
    }

    /// A hook begins.
    fn enter(&self) {
        self.depth.set(self.depth.get() + 1);
    }

    /// A hook ends: true when it was the outermost and Envoy destroyed the filter meanwhile, so the
    /// slot is to be freed now.
    fn leave(&self) -> bool {
        let depth = self.depth.get().saturating_sub(1);
        self.depth.set(depth);
        depth == 0 && self.doomed.get()
    }

    /// Envoy's destroy: true when the slot may be freed now. Inside a hook (Envoy 1.38 destroys
    /// the filter inside the call that ends its stream) the stream is torn down and its slot freed
    /// when that hook returns: freeing it now would pull the memory from under the running hook.
    fn destroyed(&self) -> bool {
        if self.depth.get() == 0 {
            return true;
        }
        log::debug!("Envoy destroyed the filter inside a hook: the stream is released when the hook returns");
        self.envoy.tear_down();
        self.doomed.set(true);
        false
    }

    fn destroy(&self) {
        if let Ok(mut s) = self.stream.try_borrow_mut() {
            if catch_unwind(AssertUnwindSafe(|| s.on_destroy())).is_err() {
                log::error!("{}", fault::line(&panic_location(), None));
            }
        }
        // The filter's address may come back as another stream's.
        self.envoy.forget();
    }
}
