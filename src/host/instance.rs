//! One plugin instance: the parsed configuration and what is kept across its requests on purpose
//! (MCP sessions and what else the LLM server taught, exchanged tokens). Proxy-Wasm has one per root
//! context; the dynamic module one per worker and configuration.

use super::sessions::Sessions;
use super::tokens::TokenCache;
use crate::config::{Config, Plugin};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Debug)]
pub struct Instance {
    plugin: RefCell<Rc<Plugin>>,
    sessions: RefCell<Sessions>,
    tokens: RefCell<TokenCache>,
}

impl Instance {
    pub fn new(plugin: Plugin) -> Self {
        Instance {
            plugin: RefCell::new(Rc::new(plugin)),
            sessions: RefCell::new(Sessions::default()),
            tokens: RefCell::new(TokenCache::default()),
        }
    }

    /// The configuration new requests see (streams running keep the one they started with).
    pub fn plugin(&self) -> Rc<Plugin> {
        Rc::clone(&self.plugin.borrow())
    }

    /// Configuration `index` replaced by `next` (an MCP server listed again), in one step.
    pub fn swap(&self, index: usize, next: Rc<Config>) {
        let plugin = self.plugin();
        if let Some(old) = plugin.configs().nth(index) {
            self.sessions.borrow_mut().moved(old, &next);
        }
        let swapped = plugin.with_config(index, next);
        *self.plugin.borrow_mut() = Rc::new(swapped);
    }

    pub fn sessions(&self) -> &RefCell<Sessions> {
        &self.sessions
    }

    /// Tokens exchanged for clients, kept for their next requests.
    pub fn tokens(&self) -> &RefCell<TokenCache> {
        &self.tokens
    }
}
