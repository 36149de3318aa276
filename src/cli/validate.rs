//! `api-agent validate CONFIG`: the filter's start-up validation of every configuration in CONFIG, one
//! line each (`ok: …`, `error: …`), then the warnings the filter would log.

use super::out;
use super::plugin::{self, Entry, State};
use super::{CliError, FAILED};

pub fn run(path: &str) -> Result<u8, CliError> {
    let entries = plugin::entries(path)?;
    let mut lines = Vec::new();
    let invalid = report(&entries, &mut lines);
    lines.iter().for_each(|l| out::line(l));
    Ok(if invalid { FAILED } else { 0 })
}

/// Writes the report; true if CONFIG holds an invalid configuration, or none at all.
fn report(entries: &[Entry], lines: &mut Vec<String>) -> bool {
    let mut invalid = false;
    let mut any = false;
    for e in entries {
        match &e.state {
            State::Valid(p) => {
                any = true;
                valid(&e.label, p, lines);
            }
            State::Rejected(msg) | State::Unusable(msg) => {
                any = true;
                invalid = true;
                lines.push(format!("error: {}: {msg}", e.label));
            }
            State::Skipped(why) => lines.push(format!("skipped: {}: {why}", e.label)),
        }
    }
    if !any {
        lines.push("error: no api-agent configuration found".into());
    }
    invalid || !any
}

fn valid(label: &str, p: &crate::config::Plugin, lines: &mut Vec<String>) {
    let scopes = plugin::scopes(p);
    let alone = p.rules.is_empty();
    for s in &scopes {
        let c = &s.config;
        let n = c.tools.len();
        lines.push(format!(
            "ok: {} ({n} tool{}, mode {}, loop {})",
            s.place(label, alone),
            if n == 1 { "" } else { "s" },
            plugin::mode_name(c.mode),
            plugin::loop_name(c.loop_phase)
        ));
    }
    for s in &scopes {
        for w in &s.config.warnings {
            lines.push(format!("warning: {}: {w}", s.place(label, alone)));
        }
    }
    if p.global.is_none() {
        lines.push(format!("note: {label}: no global configuration; requests that no rule matches pass through"));
    }
}
