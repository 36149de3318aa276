//! Kubernetes resources: a Higress `WasmPlugin` becomes what Higress's controller gives the filter, an
//! Istio `WasmPlugin` its `pluginConfig`; other resources are skipped.

use super::found::Found;
use serde_json::{Map, Value};

const HIGRESS: &str = "extensions.higress.io/";
const ISTIO: &str = "extensions.istio.io/";
/// A match rule's keys and the `_rules_` matchers Higress's controller writes for them.
const MATCH_KEYS: [(&str, &str); 3] =
    [("ingress", "_match_route_"), ("service", "_match_service_"), ("domain", "_match_domain_")];

pub fn resource(label: &str, api_version: &str, kind: &str, value: &Value) -> Found {
    let meta = value.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("(unnamed)");
    let name = match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    let label = format!("{label}: {kind} {name}");
    let spec = value.get("spec").and_then(Value::as_object).cloned().unwrap_or_default();
    match kind {
        "WasmPlugin" if api_version.starts_with(HIGRESS) => higress(label, &spec),
        "WasmPlugin" if api_version.starts_with(ISTIO) => istio(label, &spec),
        _ => Found::skipped(label, format!("{api_version} {kind} is not a WasmPlugin")),
    }
}

/// Istio passes `pluginConfig` to the filter as JSON; without one, the filter gets no configuration.
fn istio(label: String, spec: &Map<String, Value>) -> Found {
    match spec.get("pluginConfig") {
        None | Some(Value::Null) => Found::config(label, Vec::new()),
        Some(config) => Found::value(label, config),
    }
}

/// As Higress's controller builds it: `pluginConfig` if set; else `defaultConfig` (unless
/// `defaultConfigDisable`) as the global part, and each enabled `matchRules` entry as a `_rules_`
/// entry: its `config` with the matchers of its `ingress`, `service` and `domain` lists.
fn higress(label: String, spec: &Map<String, Value>) -> Found {
    if let Some(config) = spec.get("pluginConfig").filter(|c| !c.is_null()) {
        return Found::value(label, config);
    }
    let disabled = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
    let default_disabled = disabled(spec.get("defaultConfigDisable"));
    let mut root = match spec.get("defaultConfig") {
        Some(Value::Object(m)) if !default_disabled => m.clone(),
        _ => Map::new(),
    };
    let mut rules = Vec::new();
    let mut origins = Vec::new();
    let match_rules = spec.get("matchRules").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (j, rule) in match_rules.iter().enumerate() {
        if disabled(rule.get("configDisable")) {
            continue;
        }
        match rule_config(rule) {
            Some(config) => rules.push(Value::Object(config)),
            None => {
                let why = format!("matchRules[{j}] has no ingress, service or domain to match (Higress refuses it)");
                return Found::unusable(label, why);
            }
        }
        origins.push(j);
    }
    if rules.is_empty() && default_disabled {
        return Found::skipped(label, "defaultConfigDisable and no enabled matchRules: Higress delivers nothing");
    }
    if !rules.is_empty() {
        root.insert("_rules_".into(), Value::Array(rules));
    }
    let mut found = Found::value(label, &Value::Object(root));
    found.origins = origins;
    found
}

/// A rule's `config` with its matchers, or None when it has none.
fn rule_config(rule: &Value) -> Option<Map<String, Value>> {
    let mut config = rule.get("config").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut matched = false;
    for (key, matcher) in MATCH_KEYS {
        if let Some(Value::Array(items)) = rule.get(key).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
            config.insert(matcher.to_string(), Value::Array(items.clone()));
            matched = true;
        }
    }
    matched.then_some(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::found::What;
    use serde_json::json;

    fn built(found: &Found) -> Value {
        match &found.what {
            What::Config(b) => serde_json::from_slice(b).unwrap(),
            other => panic!("not a configuration: {other:?}"),
        }
    }

    #[test]
    fn higress_rules_are_built_as_the_controller_builds_them() {
        let plugin = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
        "defaultConfig": {"a": 1}, "defaultConfigDisable": true,
        "matchRules": [
            {"ingress": ["r1"], "config": {"b": 2}},
            {"domain": ["x.io"], "configDisable": true, "config": {"c": 3}},
            {"service": ["s.dns:80"]},
        ]}});
        let found = resource("f.yaml", "extensions.higress.io/v1alpha1", "WasmPlugin", &plugin);
        assert_eq!(found.label, "f.yaml: WasmPlugin ns/p");
        assert_eq!(
            built(&found),
            json!({"_rules_": [{"b": 2, "_match_route_": ["r1"]}, {"_match_service_": ["s.dns:80"]}]})
        );
        assert_eq!(found.origins, [0, 2]);
    }

    #[test]
    fn higress_default_config_is_the_global_part_and_plugin_config_wins() {
        let spec = json!({"spec": {"defaultConfig": {"a": 1}}});
        let found = resource("f", "extensions.higress.io/v1alpha1", "WasmPlugin", &spec);
        assert_eq!(built(&found), json!({"a": 1}));
        let spec = json!({"spec": {"pluginConfig": {"p": 1}, "defaultConfig": {"a": 1}}});
        assert_eq!(built(&resource("f", "extensions.higress.io/v1alpha1", "WasmPlugin", &spec)), json!({"p": 1}));
    }

    #[test]
    fn higress_refusals_and_empty_plugins_are_named() {
        let spec = json!({"spec": {"matchRules": [{"config": {"a": 1}}]}});
        let found = resource("f", "extensions.higress.io/v1alpha1", "WasmPlugin", &spec);
        assert!(matches!(&found.what, What::Unusable(m) if m.starts_with("matchRules[0] has no ingress")));
        let spec = json!({"spec": {"defaultConfigDisable": true}});
        let found = resource("f", "extensions.higress.io/v1alpha1", "WasmPlugin", &spec);
        assert!(matches!(found.what, What::Skipped(_)));
    }

    #[test]
    fn istio_plugin_config_and_other_kinds() {
        let spec = json!({"spec": {"pluginConfig": {"llm": {}}}});
        assert_eq!(built(&resource("f", "extensions.istio.io/v1alpha1", "WasmPlugin", &spec)), json!({"llm": {}}));
        let found = resource("f", "v1", "Service", &json!({}));
        assert!(matches!(found.what, What::Skipped(_)));
    }
}
