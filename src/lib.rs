//! api-agent: a Proxy-Wasm filter that turns an Envoy or Higress gateway into an AI agent over the
//! gateway's own APIs. Everything but `filter` and `cli` is a pure, host-independent core.

pub mod agent;
pub mod anthropic;
pub mod config;
pub mod doc;
pub mod host;
pub mod openai;
pub mod openapi;
pub mod policy;
pub mod prompt;
pub mod redact;
pub mod schema;
pub mod tools;
pub mod tz;
pub mod upstream;
pub mod vec_map;

#[cfg(target_arch = "wasm32")]
mod filter;

/// The Envoy dynamic-module host shim (`make build-dm` → dist/libapi_agent.so).
#[cfg(all(feature = "dynamic-module", not(target_arch = "wasm32")))]
mod dm;

/// The `api-agent` command-line tool (src/bin/api-agent.rs): host only, never in the .wasm.
#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
