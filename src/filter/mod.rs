//! Proxy-Wasm host shim (wasm32 only).
