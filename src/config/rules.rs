//! Higress's per-route configuration: the plugin configuration may hold `_rules_`, each a whole
//! configuration with one matcher (`_match_route_`, `_match_route_prefix_`, `_match_domain_` or
//! `_match_service_`), next to an optional global part. As Higress's plugin SDKs match them: the first
//! rule (in order) that matches the request wins; else the global part; else the request is not the
//! agent's and passes through untouched. Every rule is validated at start, its errors named
//! `_rules_[i].…`.

use super::{Config, ConfigError};
use crate::doc;
use serde_json::{Map, Value};
use std::rc::Rc;

const RULES: &str = "_rules_";
const MATCHERS: [&str; 4] = ["_match_route_", "_match_route_prefix_", "_match_domain_", "_match_service_"];

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
    /// Route names, exactly.
    Routes(Vec<String>),
    RoutePrefixes(Vec<String>),
    /// Hosts: `*.example.com` (suffix), `api.*` (prefix) or exact; the request's port is ignored.
    Domains(Vec<String>),
    /// `name` or `name:port`, against the fqdn and port of the cluster `outbound|port||fqdn`.
    Services(Vec<String>),
}

/// What a request is matched by.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestKeys<'a> {
    pub route: &'a str,
    pub host: &'a str,
    pub cluster: &'a str,
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

    /// The configuration that applies to a request, if any.
    pub fn select(&self, keys: RequestKeys<'_>) -> Option<&Rc<Config>> {
        self.rules.iter().find(|r| r.matcher.matches(keys)).map(|r| &r.config).or(self.global.as_ref())
    }

    /// Every configuration: the global one, then the rules'.
    pub fn configs(&self) -> impl Iterator<Item = &Rc<Config>> {
        self.global.iter().chain(self.rules.iter().map(|r| &r.config))
    }

    /// Whether some rule needs the route name (reading it costs a host call per request).
    pub fn needs_route(&self) -> bool {
        self.rules.iter().any(|r| matches!(r.matcher, Matcher::Routes(_) | Matcher::RoutePrefixes(_)))
    }

    pub fn needs_cluster(&self) -> bool {
        self.rules.iter().any(|r| matches!(r.matcher, Matcher::Services(_)))
    }
}

fn parse_rule(i: usize, rule: &Value) -> Result<Rule, ConfigError> {
    let path = format!("{RULES}[{i}]");
    let Value::Object(map) = rule else {
        return Err(ConfigError::new(&path, format!("must be an object, found {}", doc::type_name(rule))));
    };
    let mut found: Vec<(&str, Vec<String>)> = Vec::new();
    for key in MATCHERS {
        let Some(v) = map.get(key) else { continue };
        let p = format!("{path}.{key}");
        let Value::Array(items) = v else {
            return Err(ConfigError::new(&p, format!("must be a list of strings, found {}", doc::type_name(v))));
        };
        let mut names = Vec::with_capacity(items.len());
        for (j, item) in items.iter().enumerate() {
            match item.as_str().map(str::trim) {
                Some(s) if !s.is_empty() => names.push(s.to_string()),
                _ => return Err(ConfigError::new(&format!("{p}[{j}]"), "must be a non-empty string")),
            }
        }
        if names.is_empty() {
            return Err(ConfigError::new(&p, "must not be empty"));
        }
        found.push((key, names));
    }
    let (key, names) = match found.len() {
        1 => found.remove(0),
        0 => return Err(ConfigError::new(&path, format!("needs one of {}", MATCHERS.join(", ")))),
        _ => {
            let keys: Vec<&str> = found.iter().map(|(k, _)| *k).collect();
            return Err(ConfigError::new(
                &path,
                format!("has {}: a rule matches by one of them only", keys.join(" and ")),
            ));
        }
    };
    let matcher = match key {
        "_match_route_" => Matcher::Routes(names),
        "_match_route_prefix_" => Matcher::RoutePrefixes(names),
        "_match_domain_" => Matcher::Domains(names),
        _ => Matcher::Services(names),
    };
    let config = Config::from_value(rule).map_err(|e| e.under(&path))?;
    Ok(Rule { matcher, config: Rc::new(config) })
}

impl Matcher {
    pub fn matches(&self, keys: RequestKeys<'_>) -> bool {
        match self {
            Matcher::Routes(routes) => !keys.route.is_empty() && routes.iter().any(|r| r == keys.route),
            Matcher::RoutePrefixes(prefixes) => {
                !keys.route.is_empty() && prefixes.iter().any(|p| keys.route.starts_with(p.as_str()))
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

    fn keys<'a>(route: &'a str, host: &'a str, cluster: &'a str) -> RequestKeys<'a> {
        RequestKeys { route, host, cluster }
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
        assert!(Matcher::Routes(vec!["llm-route".into()]).matches(keys("llm-route", "", "")));
        assert!(!Matcher::Routes(vec!["llm-route".into()]).matches(keys("llm-route-2", "", "")));
        assert!(Matcher::RoutePrefixes(vec!["llm-".into()]).matches(keys("llm-route-2", "", "")));
        assert!(!Matcher::RoutePrefixes(vec!["llm-".into()]).matches(keys("", "", "")));
    }
}
