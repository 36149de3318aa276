//! One plugin instance (`Instance`: one per Wasm VM; per worker and configuration on the dynamic
//! module): its parsed configuration, and what it learns from its requests and hands to later ones,
//! in one structure (`Memory`): each request gets its share as `agent::Memory` with its inputs
//! (`recall`) and teaches back through `Command::Learn` (`learn`).
//! Nothing else crosses from one request to another.
//!
//! - MCP servers' revisions and sessions, per configuration (its place in the plugin, which a
//!   configuration replaced by discovery keeps): requests share one session per server instead of
//!   opening one each. Not the sessions of an API that carries the client's identity (a session
//!   opened with one client's identity is not another's), only that such a server needs one.
//! - What a model's server taught (parameters it refused, a chat template that opens think blocks),
//!   per configuration (so per LLM upstream) and model asked for: one client's model never changes
//!   another model's requests. At most `MODELS` are kept, each for `LEARNT_MS` from when it was last
//!   taught (then the parameter is tried again); a model name over `MODEL_NAME_BYTES` is not kept.
//! - Exchanged tokens (`tokens.rs`), keyed by a hash of the subject token: only ever found with it.

use super::tokens::TokenCache;
use crate::agent::{ClientHeaders, Lesson, McpPeer, Memory as Recalled, ModelFacts};
use crate::config::{Config, Identity, Plugin};
use crate::vec_map::VecMap;
use std::cell::RefCell;
use std::rc::Rc;

/// The configuration new requests see, and the instance's memory.
#[derive(Debug)]
pub struct Instance {
    plugin: RefCell<Rc<Plugin>>,
    memory: RefCell<Memory>,
}

impl Instance {
    pub fn new(plugin: Plugin) -> Self {
        Instance { plugin: RefCell::new(Rc::new(plugin)), memory: RefCell::new(Memory::default()) }
    }

    /// The configuration new requests see (streams running keep the one they started with).
    pub fn plugin(&self) -> Rc<Plugin> {
        Rc::clone(&self.plugin.borrow())
    }

    /// Configuration `index` replaced by `next` (an MCP server listed again), in one step; what the
    /// instance learnt of it stays (it is kept by `index`).
    pub fn swap(&self, index: usize, next: Rc<Config>) {
        let swapped = self.plugin().with_config(index, next);
        *self.plugin.borrow_mut() = Rc::new(swapped);
    }

    /// What the instance learnt from its requests, for the next ones.
    pub fn memory(&self) -> &RefCell<Memory> {
        &self.memory
    }
}

/// How many (configuration, model) entries an instance keeps.
pub const MODELS: usize = 64;
/// How long what a model's server taught is used: 10 minutes from when it was last taught.
pub const LEARNT_MS: u64 = 10 * 60 * 1000;
/// Longer model names are not learnt (a client chooses them).
pub const MODEL_NAME_BYTES: usize = 128;

/// What a model's server taught, and until when it is used.
#[derive(Debug)]
struct Taught {
    facts: ModelFacts,
    until_ms: u64,
}

#[derive(Debug, Default)]
pub struct Memory {
    /// Configuration → the MCP sessions requests may share.
    mcp: VecMap<usize, crate::agent::McpSessions>,
    /// (configuration, model) → what its server taught.
    models: VecMap<(usize, String), Taught>,
    tokens: TokenCache,
}

/// The calls of API `api` carry the client's identity: its MCP sessions are the request's own.
fn carries_identity(cfg: &Config, api: usize) -> bool {
    cfg.apis.get(api).is_some_and(|a| a.identity != Identity::default())
}

impl Memory {
    /// What a new request of configuration `config` (its place in the plugin) is given: the MCP
    /// sessions it may share, what each model's server taught (unexpired), the tokens kept for its
    /// client's subject tokens.
    pub fn recall(&mut self, config: usize, cfg: &Config, client: &ClientHeaders, now_ms: u64) -> Recalled {
        let mut out = Recalled::default();
        if cfg.tools.iter().any(|t| t.is_mcp()) {
            if let Some(known) = self.mcp.get(&config) {
                out.mcp = known.clone();
            }
        }
        if !self.models.is_empty() {
            self.models.retain(|_, t| t.until_ms > now_ms);
            let mine = self.models.iter().filter(|((c, _), _)| *c == config);
            out.models = mine.map(|((_, model), t)| (model.clone(), t.facts.clone())).collect();
        }
        for (api, a) in cfg.apis.iter().enumerate() {
            let Some(x) = &a.identity.token_exchange else { continue };
            let Some(subject) = x.subject(&client.0) else { continue };
            if let Some(token) = self.tokens.get(&x.cache_key(subject), now_ms) {
                out.tokens.push((api, token));
            }
        }
        out
    }

    /// One lesson of a request of configuration `config`.
    pub fn learn(&mut self, config: usize, cfg: &Config, lesson: Lesson, now_ms: u64) {
        match lesson {
            Lesson::McpSessions(mut sessions) => {
                sessions.retain(|api, peer| {
                    if carries_identity(cfg, *api) && matches!(peer, McpPeer::Session { .. }) {
                        *peer = McpPeer::Legacy;
                    }
                    true
                });
                self.mcp.insert(config, sessions);
            }
            Lesson::Refused { model, param } => {
                if let Some(facts) = self.taught(config, model, now_ms) {
                    if !facts.refused.contains(&param) {
                        facts.refused.push(param);
                    }
                }
            }
            Lesson::TemplateOpens { model } => {
                if let Some(facts) = self.taught(config, model, now_ms) {
                    facts.template_opens = true;
                }
            }
            Lesson::Token(x) => self.tokens.put(x.key, x.token, now_ms.saturating_add(x.ttl_ms)),
            Lesson::TokenRefused(key) => self.tokens.remove(&key),
        }
    }

    /// The facts of (`config`, `model`) to add to, kept for `LEARNT_MS` from now; the entry that
    /// expires first goes when `MODELS` are kept. `None`: a model name too long to keep.
    fn taught(&mut self, config: usize, model: String, now_ms: u64) -> Option<&mut ModelFacts> {
        if model.len() > MODEL_NAME_BYTES {
            return None;
        }
        let key = (config, model);
        if !self.models.contains_key(&key) {
            self.models.retain(|_, t| t.until_ms > now_ms);
            while self.models.len() >= MODELS {
                let first = self.models.iter().min_by_key(|(_, t)| t.until_ms).map(|(k, _)| k.clone())?;
                self.models.remove(&first);
            }
        }
        let until_ms = now_ms.saturating_add(LEARNT_MS);
        let taught = self.models.get_or_insert_with(key, || Taught { facts: ModelFacts::default(), until_ms });
        taught.until_ms = until_ms;
        Some(&mut taught.facts)
    }

    /// How many (configuration, model) entries are kept.
    pub fn models(&self) -> usize {
        self.models.len()
    }

    /// How many exchanged tokens are kept.
    pub fn tokens(&self) -> usize {
        self.tokens.len()
    }
}
