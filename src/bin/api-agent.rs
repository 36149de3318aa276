//! `api-agent`: the filter's core as a command-line tool (see `api_agent::cli`).

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    api_agent::cli::main()
}

/// `cargo build --target wasm32-wasip1` builds every target; the tool itself is for the host only.
#[cfg(target_arch = "wasm32")]
fn main() {}
