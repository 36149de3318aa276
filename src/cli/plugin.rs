//! Each configuration found, loaded by the filter's own `Plugin::from_slice`, and its parts: the global
//! configuration and the `_rules_`, named as the filter's log names them.

use super::found::{Found, What};
use super::source;
use super::CliError;
use crate::config::{Config, LoopPhase, Matcher, Mode, Plugin};
use std::rc::Rc;

/// One configuration of CONFIG and what the filter makes of it.
#[derive(Debug)]
pub struct Entry {
    pub label: String,
    pub state: State,
}

#[derive(Debug)]
pub enum State {
    Valid(Plugin),
    /// The filter's own words, as it logs them when it refuses to start.
    Rejected(String),
    Unusable(String),
    Skipped(String),
}

/// The global configuration or one rule of a plugin.
#[derive(Debug, Clone)]
pub struct Scope {
    /// `global` or `_rules_[i]`.
    pub name: String,
    /// `_match_route_ [a, b]`, for rules.
    pub matcher: Option<String>,
    pub config: Rc<Config>,
}

/// Every configuration in CONFIG (a path, or `-`), loaded.
pub fn entries(path: &str) -> Result<Vec<Entry>, CliError> {
    let (name, bytes) = source::read(path)?;
    Ok(source::find(&name, &bytes).into_iter().map(load).collect())
}

fn load(found: Found) -> Entry {
    let state = match found.what {
        What::Config(bytes) => match Plugin::from_slice(&bytes) {
            Ok(plugin) => State::Valid(plugin),
            Err(e) => {
                let origin = rule_origin(&e.path, &found.origins).unwrap_or_default();
                State::Rejected(format!("api-agent configuration rejected: {e}{origin}"))
            }
        },
        What::Unusable(why) => State::Unusable(why),
        What::Skipped(why) => State::Skipped(why),
    };
    Entry { label: found.label, state }
}

/// ` (from matchRules[j])` for an error inside `_rules_[i]` of a Higress plugin.
fn rule_origin(path: &str, origins: &[usize]) -> Option<String> {
    let rest = path.strip_prefix("_rules_[")?;
    let i: usize = rest.split(']').next()?.parse().ok()?;
    origins.get(i).map(|j| format!(" (from matchRules[{j}])"))
}

/// The global configuration first, then the rules, as the filter logs them.
pub fn scopes(plugin: &Plugin) -> Vec<Scope> {
    let global = plugin.global.iter().map(|c| Scope { name: "global".into(), matcher: None, config: Rc::clone(c) });
    let rules = plugin.rules.iter().enumerate().map(|(i, r)| Scope {
        name: format!("_rules_[{i}]"),
        matcher: Some(describe(&r.matcher)),
        config: Rc::clone(&r.config),
    });
    global.chain(rules).collect()
}

fn describe(m: &Matcher) -> String {
    let (key, names, and) = match m {
        Matcher::Routes { routes, services } => ("_match_route_", routes, ("_match_service_", services)),
        Matcher::RoutePrefixes { prefixes, consumers } => {
            ("_match_route_prefix_", prefixes, ("_match_consumer_", consumers))
        }
        Matcher::Domains(n) => ("_match_domain_", n, ("", &Vec::new())),
        Matcher::Services(n) => ("_match_service_", n, ("", &Vec::new())),
    };
    match and {
        (k, v) if !v.is_empty() => format!("{key} [{}] and {k} [{}]", names.join(", "), v.join(", ")),
        _ => format!("{key} [{}]", names.join(", ")),
    }
}

impl Scope {
    /// `label`, with the scope when the plugin has rules (a lone global configuration needs no name).
    pub fn place(&self, label: &str, alone: bool) -> String {
        match (&self.matcher, alone) {
            (_, true) => label.to_string(),
            (None, false) => format!("{label}, {}", self.name),
            (Some(m), false) => format!("{label}, {} matching {m}", self.name),
        }
    }
}

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::React => "react",
        Mode::Native => "native",
    }
}

pub fn loop_name(phase: LoopPhase) -> &'static str {
    match phase {
        LoopPhase::Response => "response",
        LoopPhase::Request => "request",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_errors_name_their_match_rule() {
        assert_eq!(rule_origin("_rules_[1].llm.path", &[0, 2]).as_deref(), Some(" (from matchRules[2])"));
        assert_eq!(rule_origin("_rules_[1]", &[0, 2]).as_deref(), Some(" (from matchRules[2])"));
        assert_eq!(rule_origin("llm.path", &[0, 2]), None);
        assert_eq!(rule_origin("_rules_[1].llm", &[]), None);
    }
}
