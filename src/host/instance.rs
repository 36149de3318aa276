//! One plugin instance: the parsed configuration and what is kept across its requests on purpose, in
//! one structure (`memory.rs`). Proxy-Wasm has one per root context; the dynamic module one per
//! worker and configuration.

use super::memory::Memory;
use crate::config::{Config, Plugin};
use std::cell::RefCell;
use std::rc::Rc;

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
