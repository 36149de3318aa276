//! api-agent: a Proxy-Wasm filter that turns an Envoy or Higress gateway into an AI agent over the
//! gateway's own APIs. Everything but `filter` is a pure, host-independent core.

pub mod agent;
pub mod config;
pub mod doc;
pub mod openai;
pub mod openapi;
pub mod prompt;
pub mod redact;
pub mod schema;

#[cfg(target_arch = "wasm32")]
mod filter;
