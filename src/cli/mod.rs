//! `api-agent`, the command-line tool: the filter's own core on the host. `validate` and `tools` check a
//! configuration before it is deployed, `prompt` shows the first LLM request, and `run` drives the whole
//! loop against live HTTP endpoints without Envoy. Nothing here is compiled for wasm32.

mod envoy;
mod found;
mod http;
mod k8s;
mod offer;
mod out;
mod plugin;
mod prompt;
mod run;
mod select;
mod source;
mod tools;
mod transcript;
mod validate;

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

/// Exit statuses: 0 for success, `FAILED` when the configuration or the answer is bad, `USAGE` when
/// the command line is (clap uses 2 for its own usage errors too).
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;

/// Checks, lists and runs api-agent configurations with the filter's own core, without Envoy.
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
        /// Shows which tools this question is offered (a large catalog's selection), with their ranks
        /// and scores, instead of every tool.
        #[arg(long = "for", value_name = "QUESTION")]
        question: Option<String>,
    },
    /// Prints the first LLM request body exactly as the filter would send it.
    Prompt {
        #[command(flatten)]
        request: RequestArgs,
    },
    /// Runs the agent loop against live HTTP endpoints, one per Envoy cluster, and prints each step.
    Run {
        #[command(flatten)]
        request: RequestArgs,
        /// Maps an Envoy cluster of the configuration to a base URL, e.g.
        /// 'outbound|443||api.openai.com=https://api.openai.com'. Repeat for every cluster.
        #[arg(long = "endpoint", value_name = "CLUSTER=URL")]
        endpoints: Vec<String>,
        /// A header of the client's request, e.g. 'authorization:Bearer eyJ…' or 'x-user:alice', for the
        /// APIs that forward it or exchange it for a token (`forwardHeaders`, `tokenExchange`). Repeat.
        #[arg(long = "header", value_name = "NAME:VALUE")]
        headers: Vec<String>,
        /// Prints the whole transcript as one JSON object at the end instead of the steps as they happen.
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

/// Which configuration a request uses, and the client's request.
#[derive(Debug, Args)]
struct RequestArgs {
    #[command(flatten)]
    source: SourceArg,
    /// The user's question.
    #[arg(long)]
    question: String,
    /// Overrides the configuration's mode.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// The client asks for an SSE stream (`stream: true`).
    #[arg(long)]
    stream: bool,
    /// The client's `model` (default: `llm.model`; none is sent without either).
    #[arg(long)]
    model: Option<String>,
    /// Which plugin configuration of CONFIG, counted from 1 in the order `validate` lists them.
    #[arg(long, value_name = "N")]
    plugin: Option<usize>,
    /// Which configuration of a plugin with `_rules_`: 'global' or a rule's index.
    #[arg(long, value_name = "global|INDEX")]
    rule: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    React,
    Native,
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
        Command::Tools { source, json, question } => tools::run(&source.config, json, question.as_deref()),
        Command::Prompt { request } => prompt::run(&request.into()),
        Command::Run { request, endpoints, headers, json } => run::run(&request.into(), &endpoints, &headers, json),
    }
}

impl From<RequestArgs> for select::Request {
    fn from(a: RequestArgs) -> Self {
        let mode = a.mode.map(|m| match m {
            ModeArg::React => crate::config::Mode::React,
            ModeArg::Native => crate::config::Mode::Native,
        });
        select::Request {
            config: a.source.config,
            question: a.question,
            mode,
            stream: a.stream,
            model: a.model,
            plugin: a.plugin,
            rule: a.rule,
        }
    }
}
