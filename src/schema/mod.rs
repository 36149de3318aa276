//! A JSON Schema validator for JSON mode: draft 2020-12 and draft-07 (chosen by `$schema`; 2020-12
//! when absent). Written here because the crates that exist cost 1.3–2.2 MB of Wasm (regex with Unicode
//! tables, URL and IDNA stacks) against a whole-module budget of 600 KB. Local `$ref`s (pointers,
//! `$anchor`s) are supported; what is not — remote references, `$id` base changes below the root,
//! `$dynamicRef`, `unevaluated*` — fails compilation with its name rather than being ignored. `format`
//! is an annotation, as both drafts define it by default. Checked against the official
//! JSON-Schema-Test-Suite (`tests/json_schema_suite.rs`).

mod check;
mod compile;

use crate::vec_map::VecMap;
use regex_lite::Regex;
use serde_json::Value;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draft {
    Draft7,
    Draft2020,
}

/// A compiled schema: the document, its regexes and anchors, ready to validate many instances.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
    draft: Draft,
    regexes: VecMap<String, Regex>,
    /// `$anchor` (or draft-07 `$id: "#name"`) → JSON pointer of the subschema.
    anchors: VecMap<String, String>,
    /// The root's `$id`, so that `$ref`s that spell it out resolve locally.
    root_id: Option<String>,
}

/// One reason an instance is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON pointer into the instance (`""` is the whole value).
    pub instance: String,
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.instance.is_empty() { "/" } else { &self.instance };
        write!(f, "at {at}: {}", self.message)
    }
}

impl Schema {
    /// Checks the schema and compiles its patterns; `Err` names what is wrong and where.
    pub fn compile(schema: &Value) -> Result<Schema, String> {
        compile::compile(schema)
    }

    pub fn draft(&self) -> Draft {
        self.draft
    }

    pub fn root(&self) -> &Value {
        &self.root
    }

    pub fn validate(&self, instance: &Value) -> Result<(), Vec<SchemaError>> {
        let errors = check::Checker::new(self).errors(&self.root, instance);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// The errors as lines, at most `max` of them, for a message to a model or a client.
pub fn describe(errors: &[SchemaError], max: usize) -> String {
    let mut lines: Vec<String> = errors.iter().take(max).map(SchemaError::to_string).collect();
    if errors.len() > max {
        lines.push(format!("… and {} more", errors.len() - max));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ref_targets_outside_keywords_are_checked_too() {
        // Unchecked, `multipleOf: -1` reached `i64::MIN % -1`, which panics.
        let e = Schema::compile(&json!({"$ref": "#/x", "x": {"multipleOf": -1}})).unwrap_err();
        assert!(e.contains("/x/multipleOf: must be a number greater than 0"), "{e}");
        let s = Schema::compile(&json!({"$ref": "#/x", "x": {"multipleOf": 1}})).unwrap();
        assert!(s.validate(&json!(i64::MIN)).is_ok());
    }

    #[test]
    fn self_referencing_alternatives_end() {
        let s = Schema::compile(&json!({"anyOf": [{"$ref": "#"}, {"$ref": "#"}]})).unwrap();
        let errors = s.validate(&json!(1)).unwrap_err();
        assert!(describe(&errors, 3).contains("anyOf"), "{errors:?}");
    }

    #[test]
    fn patterns_are_bounded() {
        let many: serde_json::Map<String, Value> =
            (0..65).map(|i| (format!("p{i}"), json!({"pattern": format!("^a{i}$")}))).collect();
        let e = Schema::compile(&json!({"properties": many})).unwrap_err();
        assert!(e.contains("at most 64 patterns"), "{e}");
        let e = Schema::compile(&json!({"pattern": "(a{999}){999}"})).unwrap_err();
        assert!(e.contains("is not a supported regular expression"), "{e}");
    }
}
