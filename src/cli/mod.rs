//! `api-agent`, the command-line tool: the filter's own core on the host. `validate` and `tools` check a
//! configuration before it is deployed. Nothing here is compiled for wasm32.

mod envoy;
mod k8s;
mod out;
mod plugin;
mod source;
mod tools;
mod validate;

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;

/// Exit statuses: 0 for success, `FAILED` when the configuration or the answer is bad, `USAGE` when
/// the command line is (clap uses 2 for its own usage errors too).
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;

/// Checks and lists api-agent configurations with the filter's own core, without Envoy.
#[derive(Debug, Parser)]
#[command(name = "api-agent", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validates every plugin configuration in CONFIG exactly as the filter does when it starts.
    Validate {
        #[command(flatten)]
        source: SourceArg,
    },
    /// Lists every tool of every configuration in CONFIG: schema, request, cluster, credentials (masked).
    Tools {
        #[command(flatten)]
        source: SourceArg,
        /// Prints a machine-readable JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct SourceArg {
    /// The plugin configuration (JSON or YAML), an Envoy bootstrap, a Higress or Istio WasmPlugin, or a
    /// multi-document YAML file of these; '-' reads standard input.
    #[arg(value_name = "CONFIG")]
    config: String,
}

/// Why a command failed, and the exit status that says so.
#[derive(Debug)]
pub struct CliError {
    pub status: u8,
    pub message: String,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> Self {
        CliError { status: USAGE, message: message.into() }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        CliError { status: FAILED, message: message.into() }
    }
}

/// Parses the command line, runs the subcommand and returns its exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            out::error_line(&format!("api-agent: {}", e.message));
            ExitCode::from(e.status)
        }
    }
}

fn dispatch(command: Command) -> Result<u8, CliError> {
    match command {
        Command::Validate { source } => validate::run(&source.config),
        Command::Tools { source, json } => tools::run(&source.config, json),
    }
}
