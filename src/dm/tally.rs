//! Counter additions of a configuration's streams, handed to Envoy in batches from the main thread.
//!
//! Envoy 1.40's dynamic-module ABI resolves a labelled metric's label values to a stat on every
//! update (~3,500 instructions each, 3 counters per agent request: BENCHMARKS.md, "The dynamic
//! module's cost, counted"). A stream adds its counts here instead (a lock and a short scan); the
//! first addition of a batch asks the timer thread for a flush `FLUSH_MS` later, which reaches the
//! configuration's scheduler on the main thread, where each distinct (counter, labels) is added to
//! Envoy once. Counters then lag by at most `FLUSH_MS` (Envoy's histograms lag by its
//! `stats_flush_interval` anyway). Histograms are not batched: each value must be recorded.
//! The batch is bounded (`MAX_KEYS`): past it a count goes to Envoy at once, never dropped.

use super::envoy::{EnvoyConfig, KeptConfig, Scheduler};
use super::timer;
use std::sync::Mutex;
use std::time::Duration;

/// How long a count waits for its batch at most.
pub const FLUSH_MS: u64 = 100;
/// The configuration scheduler's event that flushes the batch (listings use 0).
pub const FLUSH_EVENT: u64 = 1;
/// Distinct (counter, labels) a batch holds at most: labels come from the configuration (tool names,
/// `apis[]` indexes, modes, outcomes), so a batch stays far below this.
const MAX_KEYS: usize = 512;

/// One counter with its label values, and what was added to it since the last flush.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    id: usize,
    labels: Vec<String>,
    by: u64,
}

#[derive(Debug, Default)]
struct Batch {
    entries: Vec<Entry>,
    /// A flush is asked for and has not run yet.
    armed: bool,
}

/// The batch of one configuration, shared by its streams (any worker) and the main thread.
pub struct Tally {
    batch: Mutex<Batch>,
    scheduler: Scheduler,
    /// Envoy's configuration, for the last flush at its destroy (`close`, on the main thread).
    envoy: KeptConfig,
}

impl Tally {
    /// On the main thread, in config_new: the configuration's scheduler brings flushes back there.
    pub fn new(envoy: EnvoyConfig) -> Self {
        Tally { batch: Mutex::new(Batch::default()), scheduler: envoy.scheduler(), envoy: KeptConfig::new(envoy) }
    }

    /// Adds `by` to counter `id` with these label values; false when the batch cannot take it (full,
    /// poisoned, no timer thread): the caller then adds it to Envoy itself.
    pub fn add(&self, id: usize, labels: &[&str], by: u64) -> bool {
        let Ok(mut batch) = self.batch.lock() else { return false };
        if !batch.add(id, labels, by) {
            return false;
        }
        if !batch.armed {
            if !timer::wake_after(Duration::from_millis(FLUSH_MS), self.scheduler.clone(), FLUSH_EVENT) {
                batch.take(id, labels, by);
                return false;
            }
            batch.armed = true;
        }
        true
    }

    /// Hands every batched count to Envoy (the main thread, from the configuration's scheduler or
    /// its destroy).
    pub fn flush(&self, envoy: EnvoyConfig) {
        let entries = match self.batch.lock() {
            Ok(mut batch) => {
                batch.armed = false;
                std::mem::take(&mut batch.entries)
            }
            Err(_) => return,
        };
        for e in entries {
            let labels: Vec<&str> = e.labels.iter().map(String::as_str).collect();
            envoy.increment(e.id, &labels, e.by);
        }
    }

    /// The configuration is going away (config_destroy, on the main thread): no flush after this one.
    pub fn close(&self) {
        self.flush(self.envoy.on_main_thread());
        self.scheduler.close();
    }
}

impl Batch {
    fn add(&mut self, id: usize, labels: &[&str], by: u64) -> bool {
        if let Some(e) = self.entries.iter_mut().find(|e| e.id == id && e.labels.iter().eq(labels)) {
            e.by = e.by.saturating_add(by);
            return true;
        }
        if self.entries.len() >= MAX_KEYS {
            return false;
        }
        self.entries.push(Entry { id, labels: labels.iter().map(|l| (*l).to_string()).collect(), by });
        true
    }

    /// Takes back an addition just made (no flush could be asked for).
    fn take(&mut self, id: usize, labels: &[&str], by: u64) {
        if let Some(i) = self.entries.iter().position(|e| e.id == id && e.labels.iter().eq(labels)) {
            let e = &mut self.entries[i];
            e.by -= by.min(e.by);
            if e.by == 0 {
                self.entries.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_one_key_add_up_and_keys_stay_apart() {
        let mut b = Batch::default();
        assert!(b.add(0, &["react", "answered"], 1));
        assert!(b.add(0, &["react", "answered"], 2));
        assert!(b.add(0, &["react", "error"], 1));
        assert!(b.add(1, &["react"], 4));
        let got: Vec<_> = b.entries.iter().map(|e| (e.id, e.labels.join("|"), e.by)).collect();
        assert_eq!(
            got,
            vec![(0, "react|answered".into(), 3), (0, "react|error".into(), 1), (1, "react".to_string(), 4)]
        );
    }

    #[test]
    fn a_full_batch_refuses_a_new_key_but_still_adds_to_a_known_one() {
        let mut b = Batch::default();
        for i in 0..MAX_KEYS {
            assert!(b.add(i, &[], 1));
        }
        assert!(!b.add(MAX_KEYS, &[], 1), "the caller counts it itself");
        assert!(b.add(3, &[], 1));
        assert_eq!(b.entries[3].by, 2);
    }

    #[test]
    fn taking_back_an_addition_leaves_the_rest() {
        let mut b = Batch::default();
        b.add(0, &["a"], 2);
        b.add(0, &["a"], 3);
        b.take(0, &["a"], 3);
        assert_eq!(b.entries, vec![Entry { id: 0, labels: vec!["a".into()], by: 2 }]);
        b.take(0, &["a"], 2);
        assert!(b.entries.is_empty());
    }
}
