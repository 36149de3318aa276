//! The tool calls of one turn: sent at most `limit` at a time, answered in any order, their
//! observations returned in the order of the calls. A call whose API allows retries is kept until it
//! is answered, so that it can be sent again after a backoff.

use super::identity::Pending;
use super::work::{ToolCall, Work};
use crate::agent::protocol::{CallId, Event};
use crate::vec_map::VecMap;
use std::collections::VecDeque;

#[derive(Debug)]
pub struct Batch {
    names: Vec<String>,
    results: Vec<Option<String>>,
    queue: VecDeque<(usize, ToolCall)>,
    in_flight: VecMap<CallId, usize>,
    /// MCP calls in flight, as they were before the step sent under each id (`agent::mcp`).
    mcp: VecMap<CallId, ToolCall>,
    /// Per call: retries allowed, retries sent, and the request kept for them.
    retries: Vec<(u32, u32, Option<ToolCall>)>,
    /// Per call: what the model is told before the reply (e.g. arguments that were dropped).
    notes: Vec<Option<String>>,
    /// Per call: the result came from the tool (not from the filter).
    real: Vec<bool>,
    /// Per call: the arguments sent, as JSON text (for the client's transcript).
    args: Vec<String>,
    /// Calls waiting for their backoff to end: (due, call index).
    delayed: Vec<(u64, usize)>,
    /// Token exchanges and the calls waiting for them (`agent::identity`).
    pub identity: Pending,
    limit: usize,
}

impl Batch {
    pub fn new(work: Vec<Work>, limit: usize) -> Batch {
        let mut b = Batch {
            names: Vec::new(),
            results: Vec::new(),
            queue: VecDeque::new(),
            in_flight: VecMap::new(),
            mcp: VecMap::new(),
            retries: Vec::new(),
            notes: Vec::new(),
            real: Vec::new(),
            args: Vec::new(),
            delayed: Vec::new(),
            identity: Pending::default(),
            limit: limit.max(1),
        };
        for (i, w) in work.into_iter().enumerate() {
            match w {
                Work::Confirm { name, .. } => {
                    // Not run here: the agent returns such calls to the client first.
                    b.names.push(name);
                    b.results.push(Some(String::new()));
                    b.retries.push((0, 0, None));
                    b.notes.push(None);
                    b.real.push(false);
                    b.args.push(String::new());
                }
                Work::Known(observation) | Work::Refused { observation, .. } | Work::Found { observation, .. } => {
                    b.names.push(String::new());
                    b.results.push(Some(observation));
                    b.retries.push((0, 0, None));
                    b.notes.push(None);
                    b.real.push(false);
                    b.args.push(String::new());
                }
                Work::Call { name, call, retries, note, args } => {
                    b.names.push(name);
                    b.results.push(None);
                    b.notes.push(note);
                    b.real.push(true);
                    b.args.push(args);
                    b.retries.push((retries, 0, (retries > 0).then(|| call.clone())));
                    b.queue.push_back((i, call));
                }
            }
        }
        b
    }

    /// The next call to send, if the concurrency limit allows one, under the id `mint` gives it.
    pub fn take(&mut self, mint: impl FnOnce() -> CallId) -> Option<(CallId, ToolCall)> {
        if self.in_flight.len() >= self.limit {
            return None;
        }
        let (i, call) = self.queue.pop_front()?;
        let id = mint();
        self.in_flight.insert(id, i);
        Some((id, call))
    }

    /// Keeps the MCP call whose step went out under `id`, to go on from once it is answered.
    pub fn hold(&mut self, id: CallId, call: ToolCall) {
        self.mcp.insert(id, call);
    }

    /// The MCP call whose step went out under `id`, once that step is answered.
    pub fn release(&mut self, id: CallId) -> Option<ToolCall> {
        self.mcp.remove(&id)
    }

    /// The tool of call `id`, while it is in flight.
    pub fn name_of(&self, id: CallId) -> Option<&str> {
        self.in_flight.get(&id).map(|i| self.names[*i].as_str())
    }

    /// The place of call `id` in its turn, while it is in flight.
    pub fn index_of(&self, id: CallId) -> Option<usize> {
        self.in_flight.get(&id).copied()
    }

    pub fn args_of(&self, id: CallId) -> Option<&str> {
        self.in_flight.get(&id).map(|i| self.args[*i].as_str())
    }

    pub fn waits_for(&self, id: CallId) -> bool {
        self.in_flight.contains_key(&id)
    }

    /// The event is for this batch: an answer to one of its calls, or a wake-up for its retries.
    pub fn takes(&self, event: &Event<'_>) -> bool {
        match event {
            Event::CallReply { id, .. } | Event::CallFailed { id, .. } => {
                self.waits_for(*id) || self.identity.calls.contains_key(id)
            }
            Event::Wake => true,
            _ => false,
        }
    }

    /// Stores the observation for call `id`, made from its tool's name.
    pub fn reply(&mut self, id: CallId, observation: impl FnOnce(&str) -> String) {
        if let Some(i) = self.in_flight.remove(&id) {
            let text = observation(&self.names[i]);
            self.results[i] = Some(match &self.notes[i] {
                Some(note) => format!("(Note: {note}.)\n{text}"),
                None => text,
            });
        }
    }

    /// The last result that came from a tool, once complete.
    pub fn last_real(&self) -> Option<&str> {
        self.results.iter().zip(&self.real).rev().find(|(_, real)| **real).and_then(|(r, _)| r.as_deref())
    }

    /// (retries sent, retries left) for call `id`, if it may be retried at all.
    pub fn attempts_left(&self, id: CallId) -> Option<(u32, u32)> {
        let i = *self.in_flight.get(&id)?;
        let (max, done, kept) = &self.retries[i];
        (kept.is_some() && done < max).then_some((*done, max - done))
    }

    /// Takes call `id` out of flight and queues it again once `due` has passed.
    pub fn retry_later(&mut self, id: CallId, due: u64) -> bool {
        if self.attempts_left(id).is_none() {
            return false;
        }
        let Some(i) = self.in_flight.remove(&id) else {
            return false;
        };
        self.retries[i].1 += 1;
        self.delayed.push((due, i));
        true
    }

    /// The earliest time a delayed call is due.
    pub fn next_due(&self) -> Option<u64> {
        self.delayed.iter().map(|(due, _)| *due).min().into_iter().chain(self.identity.next_due()).min()
    }

    /// Queues every delayed call that is due at `now_ms`.
    pub fn wake(&mut self, now_ms: u64) {
        let (due, later): (Vec<_>, Vec<_>) = self.delayed.drain(..).partition(|(d, _)| *d <= now_ms);
        self.delayed = later;
        for (_, i) in due {
            if let Some(call) = self.retries[i].2.clone() {
                self.queue.push_back((i, call));
            }
        }
    }

    /// Call `id` goes on as `call` (its next step), first in the queue, under a new id.
    pub fn resume(&mut self, id: CallId, call: ToolCall) {
        if let Some(i) = self.in_flight.remove(&id) {
            self.queue.push_front((i, call));
        }
    }

    /// Every call of the turn is answered.
    pub fn is_complete(&self) -> bool {
        self.results.iter().all(Option::is_some)
    }

    /// Every observation, in call order (once complete).
    pub fn into_observations(self) -> Vec<String> {
        self.results.into_iter().flatten().collect()
    }
}
