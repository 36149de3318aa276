//! The host-neutral layer: everything both hosts decide about a stream, written once. A host reads
//! and changes its stream through `Port` (headers, attributes, local replies), records metrics through
//! `MetricSink`, and runs the agent's commands through `Host`; `src/filter/` (Proxy-Wasm) and `src/dm/`
//! (dynamic module) only translate their ABI to these and back.

pub mod admit;
pub mod discovery;
pub mod fault;
pub mod logger;
pub mod memory;
pub mod metrics;
pub mod port;
pub mod stream_run;
pub mod summary;
pub mod tokens;
pub mod tracer;

pub use memory::Instance;
pub use port::Lost;
pub use port::{Attr, Headers, Host, Port};
pub use stream_run::{Head, Start, StreamRun};
