//! The Proxy-Wasm host shim (wasm32 only): the only code that touches the host. It parses the
//! configuration once, maps host callbacks to the HTTP context of each stream, and runs timers for
//! retries. See `../shared/notes/envoy-proxy-wasm.md` for why each rule here exists.
//!
//! Re-entrancy: Envoy can call back into the module from inside a host call (writing a body past the
//! buffer limit resets the stream and calls `proxy_on_log` inside `proxy_set_buffer_bytes`; a callout
//! that fails at once can be reported inside `proxy_http_call`). No borrow is held across a host call:
//! a stream's context is taken out of the table while one of its callbacks runs. A callback that comes
//! for a context that is out is recorded (the stream closed, a callout replied) and handled when the
//! running callback returns.

mod abi;
mod http;
mod port;

use crate::config::Plugin;
use crate::host::discovery::Listings;
use crate::host::logger::{self, Logger};
use crate::host::metrics::Metrics;
use crate::host::Instance;
use crate::vec_map::VecMap;
use http::{CallData, Http};
use port::{now_ms, Root, Stats};
use std::cell::RefCell;
use std::rc::Rc;

/// The module's Rust allocator: Talc in place of wasi-libc's dlmalloc (which stays linked for the
/// standard library's panic path). A Proxy-Wasm VM is single-threaded (no `atomics`), which Talc's
/// cell requires. Smaller, and as fast: BENCHMARKS.md, "The allocator".
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BUILD: &str = env!("API_AGENT_BUILD");
/// Timer resolution for retry backoffs, while any retry waits.
const TICK_MS: u32 = 20;
/// Timer resolution for MCP listings (due every few minutes, backoffs from 1 s).
const DISCOVERY_TICK_MS: u32 = 500;

const CONTINUE: u32 = 0;

enum Slot {
    Here(Box<Http>),
    /// A callback of this stream is running; what came for it meanwhile.
    Busy {
        closed: bool,
        replies: Vec<CallData>,
    },
}

/// One root context: a filter configuration of this VM (several may share a `vm_id`), with its
/// plugin instance once configured, and the tick period set on it (ms; 0: none).
#[derive(Default)]
struct RootCtx {
    instance: Option<Rc<Instance>>,
    ticking: u32,
}

#[derive(Default)]
struct Vm {
    roots: VecMap<u32, RootCtx>,
    streams: VecMap<u32, Slot>,
    /// Callout tokens → the stream that made the call.
    callouts: VecMap<u32, u32>,
    /// Streams waiting for a wake-up, and when (host milliseconds).
    timers: VecMap<u32, u64>,
}

thread_local! {
    static VM: RefCell<Vm> = RefCell::new(Vm::default());
    /// The metrics (apart from `VM`: recording them makes host calls but never re-enters).
    static STATS: (Metrics<usize>, Stats) = (Stats::catalogue(), Stats::default());
    /// MCP discovery of each root's plugin instance (its callouts never call back from inside the call).
    static LISTINGS: RefCell<VecMap<u32, Listings>> = const { RefCell::new(VecMap::new()) };
}

/// Runs `f` with the metric catalogue and the stats it records into.
fn with_metrics<R>(f: impl FnOnce(&Metrics<usize>, &Stats) -> R) -> R {
    STATS.with(|(metrics, stats)| f(metrics, stats))
}

/// Root `root`'s MCP listings, with what they need of the root context.
fn discovery(root: u32, f: impl FnOnce(&mut Listings, &Root<'_>, &Instance)) {
    let Some(instance) = VM.with(|vm| vm.borrow().roots.get(&root).and_then(|r| r.instance.clone())) else {
        return;
    };
    with_metrics(|metrics, stats| {
        LISTINGS.with(|l| {
            if let Some(listings) = l.borrow_mut().get_mut(&root) {
                f(listings, &Root { stats, metrics }, &instance);
            }
        });
    });
}

/// The tick period root `root` should have: fast on the first root while a stream waits for a
/// wake-up, slow where MCP servers are listed, else none.
fn tick_period(timers: bool, first: bool, root: u32) -> u32 {
    match (timers && first, lists_servers(root)) {
        (true, _) => TICK_MS,
        (false, true) => DISCOVERY_TICK_MS,
        (false, false) => 0,
    }
}

/// Whether root `root` lists MCP servers (it then ticks, slowly).
fn lists_servers(root: u32) -> bool {
    LISTINGS.with(|l| l.borrow().get(&root).is_some_and(Listings::any))
}

/// `log` records to the host's log, secrets masked (`host::logger`).
static LOGGER: Logger = Logger(abi::log);

// The layer hands each line its level as `host::logger::level_code` numbers it: this ABI's numbers.
const _: () = assert!(
    abi::LOG_TRACE == 0 && abi::LOG_DEBUG == 1 && abi::LOG_INFO == 2 && abi::LOG_WARN == 3 && abi::LOG_ERROR == 4
);

#[cfg(target_os = "wasi")]
extern "C" {
    fn __wasm_call_ctors();
}

#[no_mangle]
pub extern "C" fn _initialize() {
    #[cfg(target_os = "wasi")]
    // SAFETY: the reactor's static constructors, run once before anything else, as WASI requires.
    unsafe {
        __wasm_call_ctors();
    }
    // Host calls are not allowed here (Envoy: "restricted_callback"); the level is read at VM start.
    logger::install(&LOGGER);
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(id: u32, root_id: u32) {
    VM.with(|vm| {
        let mut vm = vm.borrow_mut();
        if root_id == 0 {
            vm.roots.get_or_insert_with(id, RootCtx::default);
        } else {
            // The stream's own configuration: the root context it was created for.
            let instance = vm.roots.get(&root_id).and_then(|r| r.instance.clone());
            vm.streams.insert(id, Slot::Here(Box::new(Http::new(id, instance))));
        }
    });
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_id: u32, _size: usize) -> u32 {
    // The host's level, so that records below it are not even formatted.
    log::set_max_level(logger::filter_of(abi::log_level().unwrap_or(abi::LOG_INFO)));
    log::info!("api-agent {VERSION} ({BUILD}) started");
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(root_id: u32, _size: usize) -> u32 {
    let bytes = abi::get_buffer(abi::Buffer::PluginConfiguration, usize::MAX).unwrap_or_default();
    match Plugin::from_slice(&bytes) {
        Ok(plugin) => {
            logger::add_secrets(plugin.secrets());
            let (warnings, lines) = plugin.startup_lines();
            warnings.iter().for_each(|w| log::warn!("{w}"));
            lines.iter().for_each(|l| log::info!("{l}"));
            // A new instance: the old configurations' sessions and listings are no longer reachable.
            let instance = Rc::new(Instance::new(plugin));
            LISTINGS.with(|l| l.borrow_mut().insert(root_id, Listings::new(&instance, now_ms())));
            VM.with(|vm| vm.borrow_mut().roots.get_or_insert_with(root_id, RootCtx::default).instance = Some(instance));
            discovery(root_id, |l, root, instance| l.tick(root, instance));
            sync_tick(None);
            1
        }
        Err(e) => {
            log::error!("api-agent configuration rejected: {e}");
            0
        }
    }
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(id: u32, _n: usize, eos: u32) -> u32 {
    with_stream(id, |h| h.on_request_headers(eos != 0)).unwrap_or(CONTINUE)
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(id: u32, size: usize, eos: u32) -> u32 {
    with_stream(id, |h| h.on_request_body(size, eos != 0)).unwrap_or(CONTINUE)
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(id: u32, _n: usize) -> u32 {
    with_stream(id, Http::on_request_trailers).unwrap_or(CONTINUE)
}

#[no_mangle]
pub extern "C" fn proxy_on_response_headers(id: u32, _n: usize, eos: u32) -> u32 {
    with_stream(id, |h| h.on_response_headers(eos != 0)).unwrap_or(CONTINUE)
}

#[no_mangle]
pub extern "C" fn proxy_on_response_body(id: u32, size: usize, eos: u32) -> u32 {
    with_stream(id, |h| h.on_response_body(size, eos != 0)).unwrap_or(CONTINUE)
}

#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(id: u32, _n: usize) -> u32 {
    with_stream(id, Http::on_response_trailers).unwrap_or(CONTINUE)
}

/// Envoy calls this on the root context: the stream is found by the callout's token.
#[no_mangle]
pub extern "C" fn proxy_on_http_call_response(root_id: u32, token: u32, _headers: usize, body_size: usize, _t: usize) {
    if LISTINGS.with(|l| l.borrow().get(&root_id).is_some_and(|l| l.owns(u64::from(token)))) {
        let data = CallData::read(token, body_size);
        let reply = data.status.map(|s| (s, data.headers.as_slice(), data.body.as_slice()));
        discovery(root_id, |l, root, instance| l.on_reply(u64::from(token), reply, root, instance));
        sync_tick(None);
        return;
    }
    let Some(id) = VM.with(|vm| vm.borrow_mut().callouts.remove(&token)) else {
        log::warn!("reply for unknown callout token {token} (its stream is gone)");
        return;
    };
    // Reads and host calls from here on are this stream's.
    if let Err(s) = abi::set_effective_context(id) {
        log::warn!("stream {id} is gone ({s:?}); the reply to callout {token} is dropped");
        return;
    }
    // The reply's buffers exist only during this callback: read them now, whoever handles them.
    let data = CallData::read(token, body_size);
    let queued = VM.with(|vm| match vm.borrow_mut().streams.get_mut(&id) {
        Some(Slot::Busy { replies, .. }) => {
            replies.push(data.clone());
            true
        }
        _ => false,
    });
    if queued {
        log::debug!("callout {token} answered while its stream's callback ran; handled after it");
    } else {
        with_stream(id, |h| h.on_call_response(data));
    }
    let _ = abi::set_effective_context(root_id);
}

/// Remembers which stream callout `token` belongs to.
fn register_callout(token: u32, stream: u32) {
    VM.with(|vm| vm.borrow_mut().callouts.insert(token, stream));
}

#[no_mangle]
pub extern "C" fn proxy_on_tick(root_id: u32) {
    let now = now_ms();
    let due: Vec<u32> =
        VM.with(|vm| vm.borrow().timers.iter().filter(|(_, at)| **at <= now).map(|(id, _)| *id).collect());
    for id in due {
        // Host calls made for a stream (callouts, resuming) must act on that stream.
        if abi::set_effective_context(id).is_ok() {
            with_stream(id, Http::on_wake);
        }
    }
    let _ = abi::set_effective_context(root_id);
    discovery(root_id, |l, root, instance| l.tick(root, instance));
    sync_tick(None);
}

#[no_mangle]
pub extern "C" fn proxy_on_log(id: u32) {
    mark_closed(id);
}

#[no_mangle]
pub extern "C" fn proxy_on_done(id: u32) -> u32 {
    mark_closed(id);
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_delete(id: u32) {
    // A root context (a removed filter configuration) takes its instance and listings with it.
    LISTINGS.with(|l| l.borrow_mut().remove(&id));
    let (root, gone) = VM.with(|vm| {
        let mut vm = vm.borrow_mut();
        let root = vm.roots.remove(&id).is_some();
        vm.timers.remove(&id);
        vm.callouts.retain(|_, stream| *stream != id);
        match vm.streams.get_mut(&id) {
            // Deleted from inside one of its own callbacks: dropped when that returns.
            Some(Slot::Busy { closed, .. }) => {
                *closed = true;
                (root, None)
            }
            _ => (root, vm.streams.remove(&id)),
        }
    });
    if let Some(Slot::Here(mut h)) = gone {
        h.on_closed();
    }
    if root {
        // The fast tick lived on the first root: another one takes it, or streams waiting for a
        // retry's backoff would wait for some unrelated callback.
        sync_tick(None);
    }
}

fn mark_closed(id: u32) {
    VM.with(|vm| {
        if let Some(Slot::Busy { closed, .. }) = vm.borrow_mut().streams.get_mut(&id) {
            log::debug!("stream {id} closed by the host inside one of its callbacks");
            *closed = true;
        }
    });
}

/// Whether the host closed stream `id` while one of its callbacks runs (the shim stops touching it).
fn closed_meanwhile(id: u32) -> bool {
    VM.with(|vm| matches!(vm.borrow().streams.get(&id), Some(Slot::Busy { closed: true, .. })))
}

/// What `with_stream` does once a callback returned.
enum After {
    /// Callout replies came meanwhile: handle them, then look again.
    Replies(Vec<CallData>),
    /// The context is back in the table.
    Back,
    /// The host closed the stream meanwhile.
    Closed,
}

/// Runs `f` on stream `id`'s context with no borrow of the table held, then the callout replies that
/// came in meanwhile; puts the context back unless the host closed the stream. `None`: no such
/// context, or one of its callbacks is already running (a re-entrant call, which is logged).
fn with_stream<R>(id: u32, f: impl FnOnce(&mut Http) -> R) -> Option<R> {
    let taken = VM.with(|vm| {
        let mut vm = vm.borrow_mut();
        let slot = vm.streams.get_mut(&id)?;
        match std::mem::replace(slot, Slot::Busy { closed: false, replies: Vec::new() }) {
            Slot::Here(h) => Some(h),
            busy => {
                *slot = busy;
                None
            }
        }
    });
    let Some(mut h) = taken else {
        if VM.with(|vm| vm.borrow().streams.contains_key(&id)) {
            log::warn!("stream {id}: a host callback re-entered a running one; ignored");
        }
        return None;
    };
    let result = f(&mut h);
    let mut held = Some(h);
    loop {
        // Usually one borrow: nothing came meanwhile and the stream is open, so the context goes back
        // (with its wake-up) at once.
        let next = VM.with(|vm| {
            let mut vm = vm.borrow_mut();
            let Vm { streams, timers, .. } = &mut *vm;
            let Some(slot) = streams.get_mut(&id) else { return After::Closed };
            match slot {
                Slot::Busy { closed: true, .. } => return After::Closed,
                Slot::Busy { replies, .. } if !replies.is_empty() => return After::Replies(std::mem::take(replies)),
                _ => {}
            }
            let Some(h) = held.take() else { return After::Closed };
            match h.wake_at() {
                Some(at) => timers.insert(id, at),
                None => timers.remove(&id),
            };
            *slot = Slot::Here(h);
            After::Back
        });
        match next {
            After::Replies(replies) => {
                if let Some(h) = held.as_mut() {
                    for r in replies {
                        h.on_call_response(r);
                    }
                }
            }
            After::Back => break,
            After::Closed => {
                // Reported outside of any borrow: reporting makes host calls.
                if let Some(mut h) = held.take() {
                    h.on_closed();
                }
                VM.with(|vm| {
                    let mut vm = vm.borrow_mut();
                    vm.timers.remove(&id);
                    vm.streams.remove(&id);
                });
                break;
            }
        }
    }
    sync_tick(Some(id));
    Some(result)
}

/// Ticks run often while some stream waits for a wake-up (on the first root context: any root's tick
/// wakes every due stream), slowly on each root that lists MCP servers, else not at all. A period is a
/// root context's: it is set with that root as the effective context.
fn sync_tick(current: Option<u32>) {
    // Called after every host callback: the common case (no period to change) allocates nothing.
    let (timers, roots) = VM.with(|vm| {
        let vm = vm.borrow();
        let timers = !vm.timers.is_empty();
        let first = vm.roots.keys().next().copied();
        let stale = |(id, r): (&u32, &RootCtx)| tick_period(timers, Some(*id) == first, *id) != r.ticking;
        let roots =
            vm.roots.iter().any(stale).then(|| vm.roots.iter().map(|(id, r)| (*id, r.ticking)).collect::<Vec<_>>());
        (timers, roots)
    });
    let Some(roots) = roots else { return };
    let first = roots.first().map(|(id, _)| *id);
    let mut changed = false;
    for (root, ticking) in roots {
        let period = tick_period(timers, Some(root) == first, root);
        if period == ticking {
            continue;
        }
        changed = true;
        let _ = abi::set_effective_context(root);
        match abi::set_tick_period_ms(period) {
            Ok(()) => VM.with(|vm| {
                if let Some(r) = vm.borrow_mut().roots.get_mut(&root) {
                    r.ticking = period;
                }
            }),
            Err(s) => log::error!("setting the tick period to {period} ms failed: {s:?}"),
        }
    }
    if let (true, Some(id)) = (changed, current) {
        let _ = abi::set_effective_context(id);
    }
}
