//! Higress's per-route configuration: the plugin configuration may hold `_rules_`, each a whole
//! configuration with its matchers (`_match_route_`, `_match_route_prefix_`, `_match_domain_`,
//! `_match_service_`, `_match_consumer_`), next to an optional global part. As Higress's Go plugin SDK
//! (which its `ai-agent` uses) reads them: a rule's kind is the first of route (with service: both must
//! match), domain, service, route prefix (with consumer: both must match) that it has; the first rule
//! (in order) that matches the request wins; else the global part; else the request is not the agent's
//! and passes through untouched. Every rule is validated at start, its errors named `_rules_[i].…`.

use super::{Config, ConfigError};
use crate::doc;
use serde_json::{Map, Value};
use std::rc::Rc;

const RULES: &str = "_rules_";
const MATCHERS: [&str; 4] = ["_match_route_", "_match_route_prefix_", "_match_domain_", "_match_service_"];
const CONSUMER: &str = "_match_consumer_";
/// Higress's consumer header, set by its authentication plugins.
pub const CONSUMER_HEADER: &str = "x-mse-consumer";

/// The plugin configuration as Envoy or Higress delivers it: a global configuration, rules, or both.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub global: Option<Rc<Config>>,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub matcher: Matcher,
    pub config: Rc<Config>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// Route names, exactly; with `services`, the cluster must match one of them too.
    Routes { routes: Vec<String>, services: Vec<String> },
    /// Hosts: `*.example.com` (suffix), `api.*` (prefix) or exact; the request's port is ignored.
    Domains(Vec<String>),
    /// `name` or `name:port`, against the fqdn and port of the cluster `outbound|port||fqdn`.
    Services(Vec<String>),
    /// Route name prefixes; with `consumers`, Higress's consumer header must name one of them too.
    RoutePrefixes { prefixes: Vec<String>, consumers: Vec<String> },
}

/// What a request is matched by.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestKeys<'a> {
    pub route: &'a str,
    pub host: &'a str,
    pub cluster: &'a str,
    pub consumer: &'a str,
}

impl Plugin {
    pub fn from_slice(bytes: &[u8]) -> Result<Plugin, ConfigError> {
        let value = super::parse_text(bytes)?;
        Plugin::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Plugin, ConfigError> {
        let Some(map) = value.as_object() else {
            return Config::from_value(value).map(|c| Plugin { global: Some(Rc::new(c)), rules: Vec::new() });
        };
        let Some(rules) = map.get(RULES) else {
            return Ok(Plugin { global: Some(Rc::new(Config::from_value(value)?)), rules: Vec::new() });
        };
        let Value::Array(list) = rules else {
            return Err(ConfigError::new(RULES, format!("must be a list, found {}", doc::type_name(rules))));
        };
        let rules = list.iter().enumerate().map(|(i, r)| parse_rule(i, r)).collect::<Result<Vec<_>, _>>()?;
        // The global part: anything but `_rules_` and Higress's own `_…_` keys. With rules, it may be
        // absent (Higress's `defaultConfigDisable: true`); if it is there, it must be valid.
        let global: Map<String, Value> =
            map.iter().filter(|(k, _)| !k.starts_with('_')).map(|(k, v)| (k.clone(), v.clone())).collect();
        let global = if global.is_empty() && !rules.is_empty() {
            None
        } else {
            Some(Rc::new(Config::from_value(&Value::Object(global))?))
        };
        Ok(Plugin { global, rules })
    }

    /// The configuration that applies to a request, if any, with its place in `configs()`.
    pub fn select(&self, keys: RequestKeys<'_>) -> Option<(usize, &Rc<Config>)> {
        let first = usize::from(self.global.is_some());
        match self.rules.iter().position(|r| r.matcher.matches(keys)) {
            Some(i) => Some((first + i, &self.rules[i].config)),
            None => self.global.as_ref().map(|g| (0, g)),
        }
    }

    /// The same plugin with configuration `index` (in `configs()` order) replaced.
    pub fn with_config(&self, index: usize, cfg: Rc<Config>) -> Plugin {
        let mut p = self.clone();
        let slot = match (index, p.global.is_some()) {
            (0, true) => p.global.as_mut(),
            (i, true) => p.rules.get_mut(i - 1).map(|r| &mut r.config),
            (i, false) => p.rules.get_mut(i).map(|r| &mut r.config),
        };
        if let Some(slot) = slot {
            *slot = cfg;
        }
        p
    }

    /// Every configuration: the global one, then the rules'.
    pub fn configs(&self) -> impl Iterator<Item = &Rc<Config>> {
        self.global.iter().chain(self.rules.iter().map(|r| &r.config))
    }

    /// Every secret of every configuration, for log redaction: longest first (a secret that contains
    /// another is masked whole), each once.
    pub fn secrets(&self) -> Vec<String> {
        let mut all: Vec<String> = self.configs().flat_map(|c| c.secrets().iter().cloned()).collect();
        sort_secrets(&mut all);
        all
    }

    /// What a host logs when the plugin starts, the same on every host: (warnings, summary lines).
    pub fn startup_lines(&self) -> (Vec<String>, Vec<String>) {
        let (mut warnings, mut lines) = (Vec::new(), Vec::new());
        for (i, cfg) in self.configs().enumerate() {
            let scope = match (i, self.global.is_some()) {
                (0, true) => "global".to_string(),
                (i, true) => format!("_rules_[{}]", i - 1),
                (i, false) => format!("_rules_[{i}]"),
            };
            warnings.extend(cfg.warnings.iter().map(|w| format!("api-agent configuration ({scope}): {w}")));
            lines.push(format!(
                "api-agent configured ({scope}): {} tool(s) from {} API(s), mode {:?}, loop {:?}, LLM cluster '{}'",
                cfg.tools.len(),
                cfg.apis.len(),
                cfg.mode,
                cfg.loop_phase,
                cfg.llm.upstream.cluster
            ));
            if let Some(o) = &cfg.offer {
                lines.push(format!(
                    "api-agent ({scope}): the catalog is offered per request as a selection of at most {} bytes of tools, with find_tools (index: {} terms, {} bytes)",
                    o.max_prompt_bytes,
                    o.index.terms(),
                    o.index.bytes()
                ));
            }
        }
        if self.global.is_none() {
            lines.push("api-agent: no global configuration; requests that no rule matches pass through".into());
        }
        (warnings, lines)
    }

    /// Whether some rule needs the route name (reading it costs a host call per request).
    pub fn needs_route(&self) -> bool {
        self.rules.iter().any(|r| matches!(r.matcher, Matcher::Routes { .. } | Matcher::RoutePrefixes { .. }))
    }

    pub fn needs_cluster(&self) -> bool {
        self.rules.iter().any(|r| match &r.matcher {
            Matcher::Services(_) => true,
            Matcher::Routes { services, .. } => !services.is_empty(),
            _ => false,
        })
    }

    pub fn needs_consumer(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(&r.matcher, Matcher::RoutePrefixes { consumers, .. } if !consumers.is_empty()))
    }
}

/// Longest first, then by text, so that `dedup` removes every repeat. An insertion sort: the lists
/// are short (configured secrets, a request's tokens), and each library sort costs ~4 KB of .wasm.
pub fn sort_secrets(secrets: &mut Vec<String>) {
    let before = |a: &String, b: &String| b.len().cmp(&a.len()).then_with(|| a.cmp(b)).is_lt();
    for i in 1..secrets.len() {
        let mut j = i;
        while j > 0 && before(&secrets[j], &secrets[j - 1]) {
            secrets.swap(j, j - 1);
            j -= 1;
        }
    }
    secrets.dedup();
}

fn parse_rule(i: usize, rule: &Value) -> Result<Rule, ConfigError> {
    let path = format!("{RULES}[{i}]");
    let Value::Object(map) = rule else {
        return Err(ConfigError::new(&path, format!("must be an object, found {}", doc::type_name(rule))));
    };
    let list = |key: &str| names(map, &path, key);
    let (routes, prefixes, domains, services, consumers) =
        (list(MATCHERS[0])?, list(MATCHERS[1])?, list(MATCHERS[2])?, list(MATCHERS[3])?, list(CONSUMER)?);
    // Higress's Go SDK: the first kind a rule has decides how it matches.
    let matcher = if !routes.is_empty() {
        Matcher::Routes { routes, services }
    } else if !domains.is_empty() {
        Matcher::Domains(domains)
    } else if !services.is_empty() {
        Matcher::Services(services)
    } else if !prefixes.is_empty() {
        Matcher::RoutePrefixes { prefixes, consumers }
    } else {
        return Err(ConfigError::new(&path, format!("needs one of {} (not empty)", MATCHERS.join(", "))));
    };
    let config = Config::from_value(rule).map_err(|e| e.under(&path))?;
    Ok(Rule { matcher, config: Rc::new(config) })
}

/// The non-empty strings of a matcher key; an empty or absent list is no matcher, as in Higress.
fn names(map: &serde_json::Map<String, Value>, path: &str, key: &str) -> Result<Vec<String>, ConfigError> {
    let Some(v) = map.get(key).filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let p = format!("{path}.{key}");
    let Value::Array(items) = v else {
        return Err(ConfigError::new(&p, format!("must be a list of strings, found {}", doc::type_name(v))));
    };
    items
        .iter()
        .enumerate()
        .map(|(j, item)| match item.as_str().map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(ConfigError::new(&format!("{p}[{j}]"), "must be a non-empty string")),
        })
        .collect()
}

impl Matcher {
    pub fn matches(&self, keys: RequestKeys<'_>) -> bool {
        match self {
            Matcher::Routes { routes, services } => {
                !keys.route.is_empty()
                    && routes.iter().any(|r| r == keys.route)
                    && (services.is_empty() || service_matches(services, keys.cluster))
            }
            Matcher::RoutePrefixes { prefixes, consumers } => {
                !keys.route.is_empty()
                    && prefixes.iter().any(|p| keys.route.starts_with(p.as_str()))
                    && (consumers.is_empty() || consumers.iter().any(|c| c == keys.consumer))
            }
            Matcher::Domains(domains) => {
                let host = strip_port(keys.host);
                domains.iter().any(|d| host_matches(d, host))
            }
            Matcher::Services(services) => service_matches(services, keys.cluster),
        }
    }
}

fn host_matches(pattern: &str, host: &str) -> bool {
    if let Some(suffix) = pattern.strip_prefix('*') {
        host.ends_with(suffix)
    } else if let Some(prefix) = pattern.strip_suffix('*') {
        host.starts_with(prefix)
    } else {
        host == pattern
    }
}

/// `host:port` → `host`; an IPv6 literal `[::1]:80` → `[::1]`, and `[::1]` stays as it is.
fn strip_port(host: &str) -> &str {
    match (host.rfind(':'), host.rfind(']')) {
        (Some(colon), Some(bracket)) if bracket > colon => host,
        (Some(colon), _) => &host[..colon],
        (None, _) => host,
    }
}

/// Higress's cluster names are `outbound|<port>|<subset>|<fqdn>`.
fn service_matches(services: &[String], cluster: &str) -> bool {
    let parts: Vec<&str> = cluster.split('|').collect();
    let [_, port, _, fqdn] = parts.as_slice() else {
        return false;
    };
    services.iter().any(|s| match s.rsplit_once(':') {
        Some((name, p)) => name == *fqdn && p == *port,
        None => s == fqdn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn secrets_are_ordered_longest_first_then_by_text_without_repeats() {
        let mut s: Vec<String> = ["b", "ccc", "a", "dd", "ccc", "b", "ee", "a"].map(String::from).to_vec();
        sort_secrets(&mut s);
        assert_eq!(s, ["ccc", "dd", "ee", "a", "b"]);
        let mut none: Vec<String> = Vec::new();
        sort_secrets(&mut none);
        assert!(none.is_empty());
    }

    fn keys<'a>(route: &'a str, host: &'a str, cluster: &'a str) -> RequestKeys<'a> {
        RequestKeys { route, host, cluster, consumer: "" }
    }

    #[test]
    fn hosts_match_as_higress_matches_them() {
        let d = Matcher::Domains(vec!["*.example.com".into(), "api.*".into(), "exact.io".into()]);
        assert!(d.matches(keys("", "a.example.com:8080", "")));
        assert!(d.matches(keys("", "api.other.org", "")));
        assert!(d.matches(keys("", "exact.io:443", "")));
        assert!(!d.matches(keys("", "exact.io.evil", "")));
        assert!(!d.matches(keys("", "example.com", "")));
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
    }

    #[test]
    fn services_match_by_fqdn_and_optional_port() {
        let s = Matcher::Services(vec!["llm.svc".into(), "api.svc:8080".into()]);
        assert!(s.matches(keys("", "", "outbound|443||llm.svc")));
        assert!(s.matches(keys("", "", "outbound|8080||api.svc")));
        assert!(!s.matches(keys("", "", "outbound|9090||api.svc")));
        assert!(!s.matches(keys("", "", "llm.svc")));
    }

    #[test]
    fn routes_match_exactly_or_by_prefix_and_never_an_empty_name() {
        let routes = |r: &[&str], s: &[&str]| Matcher::Routes {
            routes: r.iter().map(|x| x.to_string()).collect(),
            services: s.iter().map(|x| x.to_string()).collect(),
        };
        assert!(routes(&["llm-route"], &[]).matches(keys("llm-route", "", "")));
        assert!(!routes(&["llm-route"], &[]).matches(keys("llm-route-2", "", "")));
        assert!(routes(&["llm-route"], &["llm.svc"]).matches(keys("llm-route", "", "outbound|443||llm.svc")));
        assert!(!routes(&["llm-route"], &["llm.svc"]).matches(keys("llm-route", "", "outbound|443||other.svc")));
        let prefixes = |c: &[&str]| Matcher::RoutePrefixes {
            prefixes: vec!["llm-".into()],
            consumers: c.iter().map(|x| x.to_string()).collect(),
        };
        assert!(prefixes(&[]).matches(keys("llm-route-2", "", "")));
        assert!(!prefixes(&[]).matches(keys("", "", "")));
        let by_consumer = RequestKeys { route: "llm-a", host: "", cluster: "", consumer: "team-a" };
        assert!(prefixes(&["team-a"]).matches(by_consumer));
        assert!(!prefixes(&["team-b"]).matches(by_consumer));
    }
}
