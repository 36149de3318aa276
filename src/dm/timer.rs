//! Wake-ups for streams: this host has no timers for HTTP filters, so one thread per process keeps
//! every pending wake-up in order and, when one is due, commits it to its stream's scheduler, which
//! brings it back on the stream's worker thread. A replaced or cancelled wake-up still fires; the
//! stream ignores a number it no longer waits for, and a closed scheduler ignores the commit.

use super::envoy::Scheduler;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Due {
    at: Instant,
    event: u64,
    scheduler: Scheduler,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.event == other.event
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.event).cmp(&(other.at, other.event))
    }
}

#[derive(Default)]
struct Wheel {
    due: Mutex<BinaryHeap<Reverse<Due>>>,
    changed: Condvar,
}

static WHEEL: OnceLock<Option<&'static Wheel>> = OnceLock::new();

/// The process's timer thread, started on first use; `None` if it could not start.
fn wheel() -> Option<&'static Wheel> {
    *WHEEL.get_or_init(|| {
        let wheel: &'static Wheel = Box::leak(Box::default());
        match std::thread::Builder::new().name("api-agent-timer".into()).spawn(move || run(wheel)) {
            Ok(_) => Some(wheel),
            Err(e) => {
                log::error!("starting the retry timer thread failed: {e}");
                None
            }
        }
    })
}

fn run(wheel: &Wheel) {
    let Ok(mut due) = wheel.due.lock() else { return };
    loop {
        let now = Instant::now();
        match due.peek().map(|Reverse(d)| d.at) {
            Some(at) if at <= now => {
                if let Some(Reverse(d)) = due.pop() {
                    // Committed outside the lock: Envoy's scheduler takes its own.
                    drop(due);
                    d.scheduler.commit(d.event);
                    due = match wheel.due.lock() {
                        Ok(g) => g,
                        Err(_) => return,
                    };
                }
            }
            Some(at) => {
                due = match wheel.changed.wait_timeout(due, at - now) {
                    Ok((g, _)) => g,
                    Err(_) => return,
                };
            }
            None => {
                due = match wheel.changed.wait(due) {
                    Ok(g) => g,
                    Err(_) => return,
                };
            }
        }
    }
}

/// Commits `event` to `scheduler` after `wait`; false if no timer thread runs.
pub fn wake_after(wait: Duration, scheduler: Scheduler, event: u64) -> bool {
    let Some(wheel) = wheel() else { return false };
    let Ok(mut due) = wheel.due.lock() else { return false };
    due.push(Reverse(Due { at: Instant::now() + wait, event, scheduler }));
    wheel.changed.notify_one();
    true
}
