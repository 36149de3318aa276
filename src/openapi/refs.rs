//! Local `$ref` resolution. References are inlined; a reference that leads back into itself (a tree of
//! comments, say) is kept as `{"$ref": "#/$defs/Name"}` and its target emitted once under `$defs`, so the
//! result stays a finite, valid JSON Schema.

use super::{ErrorKind, OpenApiError};
use crate::doc;
use serde_json::{Map, Value};

const MAX_DEPTH: usize = 64;

/// Keywords of OpenAPI's schema dialect that mean nothing to a model or a JSON Schema validator.
const DROPPED_KEYWORDS: [&str; 3] = ["xml", "externalDocs", "discriminator"];

pub struct Resolver<'a> {
    root: &'a Value,
    /// JSON nodes produced so far: inlining is bounded, since schemas that each use the next several
    /// times grow exponentially.
    nodes: std::cell::Cell<usize>,
}

/// Far above any real document (the largest of the corpus, deepl-full.yaml with 610 `$ref`s, loads
/// well within it: `openapi_corpus` checks every corpus document).
const MAX_NODES: usize = 300_000;

/// The references being resolved, each with the depth its target is walked at.
type Stack = Vec<(String, usize)>;

/// Recursive targets met while resolving one schema, emitted as `$defs`.
#[derive(Default)]
pub struct Defs {
    pending: Vec<String>,
    done: Map<String, Value>,
}

impl<'a> Resolver<'a> {
    pub fn new(root: &'a Value) -> Self {
        Resolver { root, nodes: std::cell::Cell::new(0) }
    }

    /// The object a `$ref` points at (no further resolution).
    pub fn target(&self, reference: &str) -> Result<&'a Value, OpenApiError> {
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(OpenApiError::new(
                ErrorKind::ExternalRef,
                format!("'{reference}': only references inside the document (#/...) are supported"),
            ));
        };
        let pointer = doc::percent_decode(pointer);
        self.root
            .pointer(&pointer)
            .ok_or_else(|| OpenApiError::new(ErrorKind::BrokenRef, format!("'{reference}' points at nothing")))
    }

    /// Follows `$ref` chains on an object that must be an object (a parameter, a request body).
    pub fn deref(&self, mut v: &'a Value) -> Result<&'a Value, OpenApiError> {
        for _ in 0..MAX_DEPTH {
            match v.get("$ref").and_then(Value::as_str) {
                Some(r) => v = self.target(r)?,
                None => return Ok(v),
            }
        }
        Err(OpenApiError::new(ErrorKind::RefCycle, "a chain of $refs that never ends"))
    }

    /// A schema with every reference resolved; recursive ones collected in `defs`.
    pub fn schema(&self, v: &Value, defs: &mut Defs) -> Result<Value, OpenApiError> {
        let mut stack = Vec::new();
        self.walk(v, &mut stack, defs, 0)
    }

    /// Resolves the targets `schema` left pending and returns them as a `$defs` map (empty if none).
    pub fn finish_defs(&self, mut defs: Defs) -> Result<Map<String, Value>, OpenApiError> {
        while let Some(reference) = defs.pending.pop() {
            let name = def_name(&reference);
            if defs.done.contains_key(&name) {
                continue;
            }
            defs.done.insert(name.clone(), Value::Null);
            let target = self.target(&reference)?;
            let mut stack = vec![(reference, 0)];
            let resolved = self.walk(target, &mut stack, &mut defs, 0)?;
            defs.done.insert(name, resolved);
        }
        Ok(defs.done)
    }

    fn walk(&self, v: &Value, stack: &mut Stack, defs: &mut Defs, depth: usize) -> Result<Value, OpenApiError> {
        if depth > MAX_DEPTH {
            return Err(OpenApiError::new(ErrorKind::TooDeep, format!("schema nested deeper than {MAX_DEPTH} levels")));
        }
        self.nodes.set(self.nodes.get() + 1);
        if self.nodes.get() > MAX_NODES {
            return Err(OpenApiError::new(
                ErrorKind::TooDeep,
                format!("schemas expand to more than {MAX_NODES} nodes once $refs are inlined"),
            ));
        }
        match v {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    return self.walk_ref(reference, map, stack, defs, depth);
                }
                let mut out = Map::with_capacity(map.len());
                for (k, child) in map {
                    if k.starts_with("x-") || DROPPED_KEYWORDS.contains(&k.as_str()) {
                        continue;
                    }
                    out.insert(k.clone(), self.walk(child, stack, defs, depth + 1)?);
                }
                Ok(nullable_to_type(out))
            }
            Value::Array(items) => items
                .iter()
                .map(|i| self.walk(i, stack, defs, depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => Ok(other.clone()),
        }
    }

    fn walk_ref(
        &self,
        reference: &str,
        map: &Map<String, Value>,
        stack: &mut Stack,
        defs: &mut Defs,
        depth: usize,
    ) -> Result<Value, OpenApiError> {
        if let Some(i) = stack.iter().position(|(r, _)| r == reference) {
            // Every step is one level deeper: if the steps back to the reference were all `$ref`s, no
            // keyword that describes a part of the instance (`properties`, `items`…) was passed.
            let refs_only = depth == stack[i].1 + (stack.len() - 1 - i);
            if refs_only {
                return Err(OpenApiError::new(
                    ErrorKind::RefCycle,
                    format!("'{reference}' leads back to itself through $refs alone: a schema without instances"),
                ));
            }
            defs.pending.push(reference.to_string());
            return Ok(serde_json::json!({ "$ref": format!("#/$defs/{}", def_name(reference)) }));
        }
        let target = self.target(reference)?;
        stack.push((reference.to_string(), depth + 1));
        let resolved = self.walk(target, stack, defs, depth + 1);
        stack.pop();
        let mut resolved = resolved?;
        // OpenAPI 3.1 allows keywords beside $ref (a description, say); they refine the target.
        if let Value::Object(out) = &mut resolved {
            for (k, child) in map {
                if k != "$ref" && !k.starts_with("x-") {
                    out.insert(k.clone(), self.walk(child, stack, defs, depth + 1)?);
                }
            }
        }
        Ok(resolved)
    }
}

/// OpenAPI 3.0's `nullable: true` is JSON Schema's `type: [T, "null"]`.
fn nullable_to_type(mut map: Map<String, Value>) -> Value {
    if map.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(t)) = map.get("type").cloned() {
            map.insert("type".into(), serde_json::json!([t, "null"]));
            map.remove("nullable");
        }
    }
    Value::Object(map)
}

fn def_name(reference: &str) -> String {
    let last = reference.rsplit('/').next().unwrap_or(reference);
    let name: String = doc::percent_decode(last)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' { c } else { '_' })
        .collect();
    if name.is_empty() {
        "def".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inlines_nested_refs_and_keeps_siblings() {
        let doc = json!({"components": {"schemas": {
            "Pet": {"type": "object", "properties": {"tag": {"$ref": "#/components/schemas/Tag"}}, "x-internal": 1},
            "Tag": {"type": "string", "nullable": true}
        }}});
        let r = Resolver::new(&doc);
        let mut defs = Defs::default();
        let s = r.schema(&json!({"$ref": "#/components/schemas/Pet", "description": "a pet"}), &mut defs).unwrap();
        assert_eq!(
            s,
            json!({"type": "object", "properties": {"tag": {"type": ["string", "null"]}}, "description": "a pet"})
        );
        assert!(r.finish_defs(defs).unwrap().is_empty());
    }

    #[test]
    fn cycles_become_defs() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}
        }}});
        let r = Resolver::new(&doc);
        let mut defs = Defs::default();
        let s = r.schema(&json!({"$ref": "#/components/schemas/Node"}), &mut defs).unwrap();
        assert_eq!(s["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
        let defs = r.finish_defs(defs).unwrap();
        assert_eq!(defs["Node"]["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
        // Through a $ref-only alias, the recursion still passes `items`.
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "array", "items": {"$ref": "#/components/schemas/Alias"}},
            "Alias": {"$ref": "#/components/schemas/Node"}
        }}});
        let r = Resolver::new(&doc);
        let mut defs = Defs::default();
        let s = r.schema(&json!({"$ref": "#/components/schemas/Alias"}), &mut defs).unwrap();
        assert_eq!(s, json!({"type": "array", "items": {"$ref": "#/$defs/Alias"}}));
        assert_eq!(r.finish_defs(defs).unwrap()["Alias"], s);
    }

    #[test]
    fn cycles_of_refs_alone_are_refused() {
        let doc = json!({"components": {"schemas": {
            "A": {"$ref": "#/components/schemas/B"},
            "B": {"$ref": "#/components/schemas/A", "description": "siblings describe no part of the instance"},
            "Self": {"$ref": "#/components/schemas/Self"},
            "Box": {"type": "object", "properties": {"inner": {"$ref": "#/components/schemas/A"}}}
        }}});
        let r = Resolver::new(&doc);
        for (name, back) in [("A", "A"), ("B", "B"), ("Self", "Self"), ("Box", "A")] {
            let e =
                r.schema(&json!({"$ref": format!("#/components/schemas/{name}")}), &mut Defs::default()).unwrap_err();
            assert_eq!(e.kind, ErrorKind::RefCycle, "{name}: {e}");
            assert_eq!(
                e.detail,
                format!("'#/components/schemas/{back}' leads back to itself through $refs alone: a schema without instances")
            );
        }
    }

    #[test]
    fn broken_and_external_refs_are_named() {
        let doc = json!({});
        let r = Resolver::new(&doc);
        let mut defs = Defs::default();
        let e = r.schema(&json!({"$ref": "#/components/schemas/Missing"}), &mut defs).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BrokenRef);
        let e = r.schema(&json!({"$ref": "other.yaml#/Pet"}), &mut defs).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ExternalRef);
    }

    #[test]
    fn the_largest_corpus_document_is_far_below_the_node_bound() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/openapi-corpus/deepl-full.yaml");
        let root = crate::doc::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let r = Resolver::new(&root);
        let mut defs = Defs::default();
        for (_, item) in root["paths"].as_object().unwrap() {
            r.schema(item, &mut defs).unwrap();
        }
        assert!(r.nodes.get() < MAX_NODES / 4, "{} nodes", r.nodes.get());
    }

    #[test]
    fn deep_documents_still_load() {
        // A parameter schema 54 arrays deep: the document nests 60 levels, in block YAML and in JSON.
        let mut schema = json!({"type": "string"});
        for _ in 0..54 {
            schema = json!({"type": "array", "items": schema});
        }
        let spec = json!({"openapi": "3.1.0", "paths": {"/a": {"get": {"operationId": "a",
            "parameters": [{"name": "q", "in": "query", "schema": schema}]}}}});
        let yaml = yaml_serde::to_string(&spec).unwrap();
        assert!(yaml.lines().any(|l| l.starts_with(&" ".repeat(100))), "block style, indented");
        for text in [spec.to_string(), yaml] {
            let tools = crate::openapi::load(&text, 0).unwrap().tools;
            assert_eq!(
                tools[0].schema.pointer(&format!("/properties/q{}", "/items".repeat(54))).unwrap()["type"],
                "string"
            );
        }
    }

    #[test]
    fn pointer_escapes() {
        let doc = json!({"paths": {"/a/{b}": {"x": 1}}});
        let r = Resolver::new(&doc);
        assert_eq!(r.target("#/paths/~1a~1%7Bb%7D").unwrap(), &json!({"x": 1}));
    }
}
