//! The tool calls of one turn: sent at most `limit` at a time, answered in any order, their
//! observations returned in the order of the calls.

use super::convo::{ToolCall, Work};
use super::CallId;
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug)]
pub struct Batch {
    names: Vec<String>,
    results: Vec<Option<String>>,
    queue: VecDeque<(usize, ToolCall)>,
    in_flight: BTreeMap<CallId, usize>,
    limit: usize,
}

impl Batch {
    pub fn new(work: Vec<Work>, limit: usize) -> Batch {
        let mut b = Batch {
            names: Vec::new(),
            results: Vec::new(),
            queue: VecDeque::new(),
            in_flight: BTreeMap::new(),
            limit: limit.max(1),
        };
        for (i, w) in work.into_iter().enumerate() {
            match w {
                Work::Known(observation) => {
                    b.names.push(String::new());
                    b.results.push(Some(observation));
                }
                Work::Call { name, call } => {
                    b.names.push(name);
                    b.results.push(None);
                    b.queue.push_back((i, call));
                }
            }
        }
        b
    }

    /// The next call to send, if the concurrency limit allows one, under the id `mint` gives it.
    pub fn take(&mut self, mint: impl FnOnce() -> CallId) -> Option<(CallId, &str, ToolCall)> {
        if self.in_flight.len() >= self.limit {
            return None;
        }
        let (i, call) = self.queue.pop_front()?;
        let id = mint();
        self.in_flight.insert(id, i);
        Some((id, self.names[i].as_str(), call))
    }

    pub fn waits_for(&self, id: CallId) -> bool {
        self.in_flight.contains_key(&id)
    }

    /// Stores the observation for call `id`, made from its tool's name.
    pub fn reply(&mut self, id: CallId, observation: impl FnOnce(&str) -> String) {
        if let Some(i) = self.in_flight.remove(&id) {
            self.results[i] = Some(observation(&self.names[i]));
        }
    }

    /// Every observation in call order, or the batch back if some are still missing.
    pub fn into_observations(self) -> Result<Vec<String>, Batch> {
        if self.results.iter().all(Option::is_some) {
            Ok(self.results.into_iter().flatten().collect())
        } else {
            Err(self)
        }
    }
}
