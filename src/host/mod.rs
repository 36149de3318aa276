//! The host-neutral layer: everything both hosts decide about a stream, written once. A host reads
//! and changes its stream through `Port` (headers, attributes, local replies), records metrics through
//! `MetricSink`, and runs the agent's commands through `Host`; `src/filter/` (Proxy-Wasm) and `src/dm/`
//! (dynamic module) only translate their ABI to these and back.

pub mod admit;
pub mod calls;
pub mod discovery;
pub mod exchange;
pub mod fault;
pub mod instance;
pub mod logger;
pub mod memory;
pub mod metrics;
pub mod port;
pub mod run;
pub mod spans;
pub mod summary;
pub mod tokens;

pub use calls::Lost;
pub use exchange::{Exchange, Head, Start};
pub use instance::Instance;
pub use port::{Attr, Headers, Host, Port};
