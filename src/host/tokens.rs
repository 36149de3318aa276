//! Tokens exchanged for clients (RFC 8693), kept by the plugin instance across requests so that one
//! client's requests do not each call the token service. Keyed by a SHA-256 of (token service,
//! subject token, audience, scope): a token is only ever found with the same subject token at the same
//! service, and no raw token is a key. Each is kept until its `expires_in` less 30 s; at most `capacity` are kept, the least recently
//! used going first. Part of the instance's memory (`memory.rs`).

use crate::vec_map::VecMap;

/// How many tokens an instance keeps.
pub const CAPACITY: usize = 1024;

type Key = [u8; 32];

struct Entry {
    token: String,
    /// Host clock (ms) from which it is no longer used.
    expires_ms: u64,
    /// When it was last used (a counter), for the least recently used.
    used: u64,
}

pub struct TokenCache {
    entries: VecMap<Key, Entry>,
    /// `used` → key: the least recently used first.
    order: VecMap<u64, Key>,
    tick: u64,
    capacity: usize,
}

impl std::fmt::Debug for TokenCache {
    /// The number of tokens, never a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenCache({} of {})", self.entries.len(), self.capacity)
    }
}

impl Default for TokenCache {
    fn default() -> Self {
        TokenCache::new(CAPACITY)
    }
}

impl TokenCache {
    pub fn new(capacity: usize) -> Self {
        TokenCache { entries: VecMap::new(), order: VecMap::new(), tick: 0, capacity: capacity.max(1) }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The token kept under `key`, if it has not expired at `now_ms` (an expired one is dropped).
    pub fn get(&mut self, key: &Key, now_ms: u64) -> Option<String> {
        let expired = self.entries.get(key).map(|e| e.expires_ms <= now_ms)?;
        if expired {
            self.remove(key);
            return None;
        }
        self.tick += 1;
        let tick = self.tick;
        let entry = self.entries.get_mut(key)?;
        self.order.remove(&entry.used);
        entry.used = tick;
        self.order.insert(tick, *key);
        Some(entry.token.clone())
    }

    /// Keeps `token` under `key` until `expires_ms`; the least recently used goes when full.
    pub fn put(&mut self, key: Key, token: String, expires_ms: u64) {
        self.remove(&key);
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.tick += 1;
        self.order.insert(self.tick, key);
        self.entries.insert(key, Entry { token, expires_ms, used: self.tick });
    }

    pub fn remove(&mut self, key: &Key) {
        if let Some(old) = self.entries.remove(key) {
            self.order.remove(&old.used);
        }
    }
}
