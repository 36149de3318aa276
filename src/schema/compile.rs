//! Schema checking at compile time: keyword shapes, patterns compiled once, anchors collected, every
//! `$ref` resolved, and the unsupported features named.

use super::{Draft, Schema};
use crate::doc::type_name;
use crate::vec_map::VecMap;
use regex_lite::{Regex, RegexBuilder};
use serde_json::{Map, Value};

const MAX_PATTERNS: usize = 64;
const MAX_PATTERN_LEN: usize = 1024;
const PATTERN_SIZE_LIMIT: usize = 256 * 1024;
const TYPES: [&str; 7] = ["null", "boolean", "object", "array", "number", "string", "integer"];
const UNSUPPORTED: [(&str, &str); 4] = [
    ("$dynamicRef", "dynamic references"),
    ("$recursiveRef", "recursive references"),
    ("unevaluatedProperties", "unevaluatedProperties"),
    ("unevaluatedItems", "unevaluatedItems"),
];
/// Keywords whose value is one subschema.
const ONE: [&str; 9] =
    ["additionalProperties", "propertyNames", "additionalItems", "contains", "not", "if", "then", "else", "items"];
/// Keywords whose value is a list of subschemas.
const LIST: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value is a map of subschemas.
const MAP: [&str; 5] = ["properties", "patternProperties", "dependentSchemas", "$defs", "definitions"];
const NON_NEGATIVE: [&str; 8] =
    ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"];
const NUMBERS: [&str; 4] = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

pub fn compile(root: &Value) -> Result<Schema, String> {
    let draft = match root.get("$schema").and_then(Value::as_str) {
        Some(s) if s.contains("draft-07") || s.contains("draft-06") || s.contains("draft-04") => Draft::Draft7,
        Some(s) if s.contains("2020-12") || s.contains("2019-09") => Draft::Draft2020,
        Some(other) => return Err(format!("$schema: unknown dialect '{other}' (draft-07 and 2020-12 are supported)")),
        None => Draft::Draft2020,
    };
    let root_id = root.get("$id").and_then(Value::as_str).map(|s| s.trim_end_matches('#').to_string());
    let mut c = Compiler { draft, regexes: VecMap::new(), anchors: VecMap::new(), refs: Vec::new() };
    c.walk(root, "", true)?;
    let mut schema = Schema { root: root.clone(), draft, regexes: VecMap::new(), anchors: c.anchors.clone(), root_id };
    // A $ref may point anywhere, also outside the keywords walked above (`{"$ref": "#/x", "x": ...}`):
    // its target is checked like any subschema, so validation never meets an unchecked keyword.
    let mut checked: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some((at, r)) = c.refs.get(i).cloned() {
        i += 1;
        let target = resolve(&schema, &r).map_err(|e| format!("{}: {e}", shown(&at)))?;
        ref_cycle(&schema, target, 0).map_err(|e| format!("{}: {e}", shown(&at)))?;
        let pointer = pointer_of(&schema, &r).map_err(|e| format!("{}: {e}", shown(&at)))?;
        if !checked.contains(&pointer) {
            c.walk(target, &pointer, pointer.is_empty())?;
            checked.push(pointer);
            schema.anchors.clone_from(&c.anchors);
        }
    }
    schema.regexes = c.regexes;
    Ok(schema)
}

struct Compiler {
    draft: Draft,
    regexes: VecMap<String, Regex>,
    anchors: VecMap<String, String>,
    /// (where, reference) of every `$ref`, resolved once the anchors are known.
    refs: Vec<(String, String)>,
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        "schema"
    } else {
        path
    }
}

impl Compiler {
    fn walk(&mut self, s: &Value, at: &str, is_root: bool) -> Result<(), String> {
        let m = match s {
            Value::Bool(_) => return Ok(()),
            Value::Object(m) => m,
            other => {
                return Err(format!(
                    "{}: a schema must be an object or a boolean, found {}",
                    shown(at),
                    type_name(other)
                ))
            }
        };
        for (kw, what) in UNSUPPORTED {
            if m.contains_key(kw) {
                return Err(format!("{}: {what} ({kw}) are not supported", shown(at)));
            }
        }
        self.identify(m, at, is_root)?;
        self.shapes(m, at)?;
        self.children(m, at)
    }

    /// `$id`, `$anchor`, `$ref`.
    fn identify(&mut self, m: &Map<String, Value>, at: &str, is_root: bool) -> Result<(), String> {
        if let Some(id) = m.get("$id").and_then(Value::as_str) {
            match id.strip_prefix('#') {
                Some(anchor) if self.draft == Draft::Draft7 && !anchor.is_empty() => {
                    self.anchors.insert(anchor.to_string(), at.to_string());
                }
                _ if is_root => {}
                _ => return Err(format!("{at}: $id below the root (a new base URI) is not supported")),
            }
        }
        if let Some(anchor) = m.get("$anchor").and_then(Value::as_str) {
            self.anchors.insert(anchor.to_string(), at.to_string());
        }
        match m.get("$ref") {
            None => Ok(()),
            Some(Value::String(r)) => {
                self.refs.push((at.to_string(), r.clone()));
                Ok(())
            }
            Some(other) => Err(format!("{at}/$ref: must be a string, found {}", type_name(other))),
        }
    }

    fn shapes(&mut self, m: &Map<String, Value>, at: &str) -> Result<(), String> {
        let bad = |kw: &str, what: &str| Err(format!("{at}/{kw}: {what}"));
        if let Some(t) = m.get("type") {
            let ok = match t {
                Value::String(s) => TYPES.contains(&s.as_str()),
                Value::Array(a) => a.iter().all(|x| x.as_str().is_some_and(|s| TYPES.contains(&s))),
                _ => false,
            };
            if !ok {
                return bad("type", &format!("must be one of {} or a list of them, found {t}", TYPES.join(", ")));
            }
        }
        for kw in NON_NEGATIVE {
            if m.get(kw).is_some_and(|v| !is_whole(v)) {
                return bad(kw, "must be a non-negative integer");
            }
        }
        for kw in NUMBERS {
            if m.get(kw).is_some_and(|v| !(v.is_number() || self.draft == Draft::Draft7 && v.is_boolean())) {
                return bad(kw, "must be a number");
            }
        }
        if m.get("multipleOf").is_some_and(|v| v.as_f64().is_none_or(|f| f <= 0.0)) {
            return bad("multipleOf", "must be a number greater than 0");
        }
        if m.get("required").is_some_and(|v| !v.as_array().is_some_and(|a| a.iter().all(Value::is_string))) {
            return bad("required", "must be a list of property names");
        }
        if m.get("enum").is_some_and(|v| !v.is_array()) {
            return bad("enum", "must be a list");
        }
        if let Some(p) = m.get("pattern") {
            let p = p.as_str().ok_or_else(|| format!("{at}/pattern: must be a string"))?;
            self.regex(p, &format!("{at}/pattern"))?;
        }
        if let Some(Value::Object(pp)) = m.get("patternProperties") {
            for p in pp.keys() {
                self.regex(p, &format!("{at}/patternProperties"))?;
            }
        }
        Ok(())
    }

    /// Patterns are compiled once, here, within bounds: a client's schema must not be able to make the
    /// filter build megabytes of automata.
    fn regex(&mut self, pattern: &str, at: &str) -> Result<(), String> {
        if self.regexes.contains_key(pattern) {
            return Ok(());
        }
        if self.regexes.len() >= MAX_PATTERNS || pattern.len() > MAX_PATTERN_LEN {
            return Err(format!(
                "{at}: at most {MAX_PATTERNS} patterns of at most {MAX_PATTERN_LEN} bytes are supported"
            ));
        }
        let re = RegexBuilder::new(pattern)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("{at}: '{pattern}' is not a supported regular expression: {e}"))?;
        self.regexes.insert(pattern.to_string(), re);
        Ok(())
    }

    fn children(&mut self, m: &Map<String, Value>, at: &str) -> Result<(), String> {
        for (kw, v) in m {
            let here = format!("{at}/{}", escape(kw));
            match v {
                Value::Array(items) if LIST.contains(&kw.as_str()) => {
                    for (i, s) in items.iter().enumerate() {
                        self.walk(s, &format!("{here}/{i}"), false)?;
                    }
                }
                Value::Object(map) if MAP.contains(&kw.as_str()) => {
                    for (k, s) in map {
                        self.walk(s, &format!("{here}/{}", escape(k)), false)?;
                    }
                }
                Value::Object(deps) if kw == "dependencies" => {
                    for (k, s) in deps.iter().filter(|(_, s)| !s.is_array()) {
                        self.walk(s, &format!("{here}/{}", escape(k)), false)?;
                    }
                }
                _ if ONE.contains(&kw.as_str()) => self.walk(v, &here, false)?,
                _ if LIST.contains(&kw.as_str()) || MAP.contains(&kw.as_str()) => {
                    return Err(format!(
                        "{here}: must be a {}",
                        if LIST.contains(&kw.as_str()) { "list of schemas" } else { "map of schemas" }
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn is_whole(v: &Value) -> bool {
    v.as_u64().is_some() || v.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0)
}

/// JSON pointer escaping of one token.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The subschema a `$ref` points at.
pub fn resolve<'s>(schema: &'s Schema, reference: &str) -> Result<&'s Value, String> {
    let pointer = pointer_of(schema, reference)?;
    schema.root.pointer(&pointer).ok_or_else(|| format!("the reference '{reference}' points at nothing"))
}

/// The JSON pointer, inside the document, of the subschema a `$ref` names.
fn pointer_of(schema: &Schema, reference: &str) -> Result<String, String> {
    let local = match &schema.root_id {
        Some(id) if !id.is_empty() && reference.starts_with(id.as_str()) => &reference[id.len()..],
        _ => reference,
    };
    let Some(fragment) = local.strip_prefix('#').or(if local.is_empty() { Some("") } else { None }) else {
        return Err(format!("the reference '{reference}' leaves the document; remote references are not supported"));
    };
    if fragment.is_empty() || fragment.starts_with('/') {
        Ok(crate::doc::percent_decode(fragment))
    } else {
        schema.anchors.get(fragment).cloned().ok_or_else(|| format!("the anchor '#{fragment}' is not defined"))
    }
}

/// A `$ref` that leads back to itself through `$ref`s alone would recurse forever on any instance.
fn ref_cycle(schema: &Schema, target: &Value, depth: usize) -> Result<(), String> {
    if depth > 32 {
        return Err("a chain of $refs that never ends".into());
    }
    match target.get("$ref").and_then(Value::as_str) {
        Some(r) => ref_cycle(schema, resolve(schema, r)?, depth + 1),
        None => Ok(()),
    }
}
