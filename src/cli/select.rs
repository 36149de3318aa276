//! For `prompt` and `run`: the one configuration a request uses, with the command line's mode, and the
//! client's chat-completions request.

use super::plugin::{self, Entry, Scope, State};
use super::CliError;
use crate::agent::RequestMeta;
use crate::config::{Config, Mode, MAX_NATIVE_TOOLS};
use serde_json::{json, Value};
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the command line asks for.
#[derive(Debug)]
pub struct Request {
    pub config: String,
    pub question: String,
    pub mode: Option<Mode>,
    pub stream: bool,
    pub model: Option<String>,
    pub plugin: Option<usize>,
    pub rule: Option<String>,
}

/// The configuration chosen, and where it is.
pub struct Chosen {
    pub label: String,
    pub config: Rc<Config>,
}

impl Request {
    /// The configuration of `--plugin` and `--rule` (needed only when CONFIG holds several), with
    /// `--mode` applied.
    pub fn choose(&self) -> Result<Chosen, CliError> {
        let entries = plugin::entries(&self.config)?;
        let entry = pick_entry(entries, self.plugin)?;
        let State::Valid(p) = &entry.state else {
            return match entry.state {
                State::Rejected(m) | State::Unusable(m) => Err(CliError::failed(format!("{}: {m}", entry.label))),
                _ => Err(CliError::failed(format!("{}: not an api-agent configuration", entry.label))),
            };
        };
        let scope = pick_scope(plugin::scopes(p), self.rule.as_deref(), &entry.label)?;
        let label = scope.place(&entry.label, p.rules.is_empty());
        Ok(Chosen { label, config: with_mode(scope.config, self.mode)? })
    }

    /// The client's request: the question as the one user message.
    pub fn client_body(&self, cfg: &Config) -> Vec<u8> {
        let mut body = json!({"messages": [{"role": "user", "content": self.question}]});
        if let Some(model) = self.model.as_ref().or(cfg.llm.model.as_ref()) {
            body["model"] = Value::String(model.clone());
        }
        if self.stream {
            body["stream"] = Value::Bool(true);
        }
        body.to_string().into_bytes()
    }
}

fn pick_entry(entries: Vec<Entry>, n: Option<usize>) -> Result<Entry, CliError> {
    let mut candidates: Vec<Entry> = entries.into_iter().filter(|e| !matches!(e.state, State::Skipped(_))).collect();
    let count = candidates.len();
    match n {
        _ if count == 0 => Err(CliError::failed("no api-agent configuration found")),
        Some(n) if (1..=count).contains(&n) => Ok(candidates.swap_remove(n - 1)),
        Some(n) => Err(CliError::usage(format!("--plugin {n}: CONFIG holds {count} plugin configuration(s)"))),
        None if count == 1 => Ok(candidates.swap_remove(0)),
        None => {
            let list: Vec<String> =
                candidates.iter().enumerate().map(|(i, e)| format!("{}: {}", i + 1, e.label)).collect();
            Err(CliError::usage(format!(
                "CONFIG holds {count} plugin configurations; choose one with --plugin N: {}",
                list.join("; ")
            )))
        }
    }
}

/// `--rule`: `global` or a rule's index; without it, the global configuration, or the only rule.
fn pick_scope(scopes: Vec<Scope>, rule: Option<&str>, label: &str) -> Result<Scope, CliError> {
    let names: Vec<String> = scopes.iter().map(|s| s.name.clone()).collect();
    let wanted = match rule {
        None if scopes.len() == 1 || scopes.first().is_some_and(|s| s.name == "global") => names[0].clone(),
        None => {
            return Err(CliError::usage(format!(
                "{label} has no global configuration; choose a rule with --rule INDEX ({})",
                names.join(", ")
            )))
        }
        Some("global") => "global".to_string(),
        Some(i) => format!("_rules_[{i}]"),
    };
    scopes
        .into_iter()
        .find(|s| s.name == wanted)
        .ok_or_else(|| CliError::usage(format!("{label} has no {wanted}; it has {}", names.join(", "))))
}

/// The configuration with `--mode` applied; native mode keeps OpenAI's limit on tools, as loading does.
fn with_mode(cfg: Rc<Config>, mode: Option<Mode>) -> Result<Rc<Config>, CliError> {
    let Some(mode) = mode.filter(|m| *m != cfg.mode) else {
        return Ok(cfg);
    };
    if mode == Mode::Native && cfg.tools.len() > MAX_NATIVE_TOOLS {
        return Err(CliError::failed(format!(
            "apis: mode 'native' allows at most {MAX_NATIVE_TOOLS} tools (OpenAI's limit); these APIs define {}",
            cfg.tools.len()
        )));
    }
    let mut changed = (*cfg).clone();
    changed.mode = mode;
    Ok(Rc::new(changed))
}

/// Per-request inputs from the clock, as the filter takes them from the host.
pub fn meta(now_ms: u64) -> RequestMeta {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    RequestMeta {
        id: format!("cli{:x}", since_epoch.as_millis()),
        now_ms,
        unix_s: since_epoch.as_secs(),
        seed: since_epoch.as_nanos() as u64 ^ u64::from(std::process::id()),
        // `run --json` prints its own transcript.
        steps: false,
        context_headers: Vec::new(),
        policy_headers: Vec::new(),
        client_headers: Default::default(),
        live: false,
        trace: Vec::new(),
        api: Default::default(),
        // One request: nothing learnt before it.
        memory: Default::default(),
    }
}
