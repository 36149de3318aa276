//! The Proxy-Wasm host shim (wasm32 only): the only code that touches the host. It parses the
//! configuration once, maps host events to agent events, and runs the agent's commands. See
//! `../shared/notes/envoy-proxy-wasm.md` for why each rule here exists. Host calls go through
//! `hostcalls` (which return `Result`) rather than the SDK's trait helpers, which unwrap and so panic on
//! an unexpected host status.

mod host;
mod http;

use crate::config::Config;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{ContextType, LogLevel};
use std::rc::Rc;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BUILD: &str = env!("API_AGENT_BUILD");

proxy_wasm::main! {{
    // Host calls are not allowed here (Envoy: "restricted_callback"); the level is read at VM start.
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| Box::new(Root { config: None }));
}}

struct Root {
    config: Option<Rc<Config>>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _size: usize) -> bool {
        if let Ok(level) = proxy_wasm::hostcalls::get_log_level() {
            proxy_wasm::set_log_level(level);
        }
        log::info!("api-agent {VERSION} ({BUILD}) started");
        true
    }

    fn on_configure(&mut self, _size: usize) -> bool {
        let bytes = host::plugin_configuration();
        match Config::from_slice(&bytes) {
            Ok(cfg) => {
                for w in &cfg.warnings {
                    log::warn!("api-agent configuration: {w}");
                }
                log::info!(
                    "api-agent configured: {} tool(s) from {} API(s), mode {:?}, LLM cluster '{}'",
                    cfg.tools.len(),
                    cfg.apis.len(),
                    cfg.mode,
                    cfg.llm.upstream.cluster
                );
                self.config = Some(Rc::new(cfg));
                true
            }
            Err(e) => {
                log::error!("api-agent configuration rejected: {e}");
                false
            }
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(http::Http::new(context_id, self.config.clone())))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}
