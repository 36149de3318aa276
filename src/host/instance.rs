//! One plugin instance: the parsed configuration and what is kept across its requests on purpose
//! (MCP sessions, exchanged tokens). A Proxy-Wasm VM has one; the dynamic module one per worker and configuration.

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
    /// Configurations (by address) whose LLM server's chat template was seen opening think blocks.
    template_opens: RefCell<Vec<usize>>,
}

impl Instance {
    pub fn new(plugin: Plugin) -> Self {
        Instance {
            plugin: RefCell::new(Rc::new(plugin)),
            sessions: RefCell::new(Sessions::default()),
            tokens: RefCell::new(TokenCache::default()),
            template_opens: RefCell::new(Vec::new()),
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

    /// Hands a new request what earlier ones learnt of `cfg`'s LLM server's chat template.
    pub fn seed_template(&self, cfg: &Rc<Config>, agent: &mut crate::agent::Agent) {
        if self.template_opens.borrow().contains(&(Rc::as_ptr(cfg) as usize)) {
            agent.set_template_opens();
        }
    }

    /// Keeps what `agent` learnt of the template (once per configuration).
    pub fn keep_template(&self, cfg: &Rc<Config>, agent: &crate::agent::Agent) {
        let key = Rc::as_ptr(cfg) as usize;
        if agent.template_opens() && !cfg.template_opens && !self.template_opens.borrow().contains(&key) {
            self.template_opens.borrow_mut().push(key);
        }
    }

    /// Tokens exchanged for clients, kept for their next requests.
    pub fn tokens(&self) -> &RefCell<TokenCache> {
        &self.tokens
    }
}
