//! CONFIG as the filter would receive it. The file may hold the plugin configuration itself, an Envoy
//! configuration with wasm filters, a Higress or Istio `WasmPlugin`, or several of these as a
//! multi-document YAML file; each becomes the exact bytes Envoy would hand the filter.

use super::found::Found;
use super::{envoy, k8s, CliError};
use crate::doc;
use serde::Deserialize;
use serde_json::Value;
use std::io::Read;

/// CONFIG's name for messages and its bytes; `-` is standard input.
pub fn read(path: &str) -> Result<(String, Vec<u8>), CliError> {
    if path == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::usage(format!("cannot read standard input: {e}")))?;
        return Ok(("<stdin>".into(), bytes));
    }
    let bytes = std::fs::read(path).map_err(|e| CliError::usage(format!("cannot read {path}: {e}")))?;
    Ok((path.to_string(), bytes))
}

/// Every plugin configuration in `bytes`, in order.
pub fn find(name: &str, bytes: &[u8]) -> Vec<Found> {
    // Text that is not UTF-8 or not a document goes to the plugin as it is: its own message says why.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return vec![Found::config(name.to_string(), bytes.to_vec())];
    };
    match doc::parse(text) {
        Ok(value) => classify(name, &value).unwrap_or_else(|| vec![Found::config(name.to_string(), bytes.to_vec())]),
        Err(_) => match documents(text) {
            Ok(docs) if docs.len() > 1 => docs
                .iter()
                .flat_map(|(n, d)| {
                    let label = format!("{name}#{n}");
                    classify(&label, d).unwrap_or_else(|| vec![Found::value(label, d)])
                })
                .collect(),
            Err(e) if text.contains("\n---") => vec![Found::unusable(name.to_string(), e)],
            _ => vec![Found::config(name.to_string(), bytes.to_vec())],
        },
    }
}

/// What a document is, if it is not the plugin configuration itself.
fn classify(label: &str, value: &Value) -> Option<Vec<Found>> {
    let str_of = |key: &str| value.get(key).and_then(Value::as_str);
    if let (Some(api_version), Some(kind)) = (str_of("apiVersion"), str_of("kind")) {
        return Some(vec![k8s::resource(label, api_version, kind, value)]);
    }
    if envoy::is_envoy(value) {
        return Some(envoy::filters(label, value));
    }
    None
}

/// The documents of a multi-document YAML text with their positions (from 1), empty ones left out. Each
/// is read back through `doc::parse`, so that keys, numbers and merge keys become the values the filter
/// would see.
fn documents(text: &str) -> Result<Vec<(usize, Value)>, String> {
    let mut out = Vec::new();
    for (i, de) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let yaml =
            yaml_serde::Value::deserialize(de).map_err(|e| format!("document {}: not valid YAML: {e}", i + 1))?;
        if yaml.is_null() {
            continue;
        }
        let again = yaml_serde::to_string(&yaml).map_err(|e| format!("document {}: {e}", i + 1))?;
        out.push((i + 1, doc::parse(&again).map_err(|e| format!("document {}: {e}", i + 1))?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::found::What;

    #[test]
    fn a_plain_configuration_is_passed_as_written() {
        let found = find("c.json", b"{\"llm\": {}}");
        assert_eq!(found.len(), 1);
        assert!(matches!(&found[0].what, What::Config(b) if b == b"{\"llm\": {}}"));
    }

    #[test]
    fn documents_are_named_by_position_and_empty_ones_skipped() {
        let text = "a: 1\n---\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n";
        let found = find("all.yaml", text.as_bytes());
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].label, "all.yaml#1");
        assert!(matches!(&found[0].what, What::Config(b) if b == b"{\"a\":1}"));
        assert_eq!(found[1].label, "all.yaml#3: Service s");
        assert!(matches!(&found[1].what, What::Skipped(_)));
    }

    #[test]
    fn a_broken_document_is_named() {
        let found = find("x.yaml", b"a: 1\n---\nb: [1\n");
        assert!(matches!(&found[0].what, What::Unusable(m) if m.starts_with("document 2: not valid YAML")));
    }
}
