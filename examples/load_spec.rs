//! Prints the tools one OpenAPI document becomes: `cargo run --example load_spec -- FILE`.
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: load_spec FILE");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    match api_agent::openapi::load(&text, 0) {
        Ok(loaded) => {
            for t in &loaded.tools {
                println!(
                    "{} {} {}{} {}",
                    t.name,
                    t.method,
                    t.server.host.as_deref().unwrap_or("-"),
                    t.server.base_path,
                    t.path
                );
            }
            for w in &loaded.warnings {
                println!("warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
