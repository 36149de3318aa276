//! Validation of one instance: every keyword of the applicable draft, errors with instance paths.

use super::compile::{escape, resolve};
use super::{Draft, Schema, SchemaError};
use crate::doc::type_name;
use serde_json::{Map, Value};
use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Deeper than this, a schema is recursing without consuming the instance.
const MAX_DEPTH: usize = 256;
/// Work one validation may do: subschema checks, and the properties, enum values, compared items and
/// string bytes (by `STRING_STEP`) that keywords go through. An `anyOf` of self-references checks one
/// value an exponential number of times (`{"anyOf": [{"$ref": "#"}, {"$ref": "#"}]}`), and each check
/// of a large object or a long string costs its size.
const MAX_STEPS: u32 = 200_000;
/// String bytes that cost one step.
const STRING_STEP: usize = 256;
const STOPPED: &str = "validation stopped: the schema needs too many steps for this value";

pub struct Checker<'s> {
    schema: &'s Schema,
    steps: Cell<u32>,
}

type Errors = Vec<SchemaError>;

impl<'s> Checker<'s> {
    pub fn new(schema: &'s Schema) -> Self {
        Checker { schema, steps: Cell::new(0) }
    }

    pub fn errors(&self, s: &Value, v: &Value) -> Errors {
        let mut out = Vec::new();
        self.check(s, v, "", 0, &mut out);
        // Keywords skip their work once the budget is spent: the value was not fully checked.
        if self.steps.get() > MAX_STEPS && !out.iter().any(|e| e.message == STOPPED) {
            push(&mut out, "", STOPPED.into());
        }
        out
    }

    /// Counts `units` of work; false once the budget is spent, and the caller then skips its work.
    fn charge(&self, units: usize) -> bool {
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        self.steps.set(self.steps.get().saturating_add(units));
        self.steps.get() <= MAX_STEPS
    }

    fn valid(&self, s: &Value, v: &Value, at: &str, depth: usize) -> bool {
        let mut out = Vec::new();
        self.check(s, v, at, depth, &mut out);
        out.is_empty()
    }

    fn check(&self, s: &Value, v: &Value, at: &str, depth: usize, out: &mut Errors) {
        let m = match s {
            Value::Bool(true) => return,
            Value::Bool(false) => return push(out, at, "no value is allowed here (false schema)".into()),
            Value::Object(m) => m,
            _ => return,
        };
        if depth > MAX_DEPTH {
            return push(out, at, "the schema recurses without end".into());
        }
        if !self.charge(1) {
            return push(out, at, STOPPED.into());
        }
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            match resolve(self.schema, r) {
                Ok(target) => self.check(target, v, at, depth + 1, out),
                Err(e) => push(out, at, e),
            }
            if self.schema.draft == Draft::Draft7 {
                return; // draft-07: keywords beside $ref are ignored
            }
        }
        self.generic(m, v, at, out);
        match v {
            Value::Number(_) => numeric(m, v, at, out),
            Value::String(text) => self.string(m, text, at, out),
            Value::Array(items) => self.array(m, items, at, depth, out),
            Value::Object(props) => self.object(m, props, v, at, depth, out),
            _ => {}
        }
        self.combinators(m, v, at, depth, out);
    }

    fn generic(&self, m: &Map<String, Value>, v: &Value, at: &str, out: &mut Errors) {
        if let Some(t) = m.get("type") {
            let allowed: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !allowed.iter().any(|t| is_type(t, v)) {
                push(out, at, format!("expected {}, found {}", allowed.join(" or "), type_name(v)));
            }
        }
        if let Some(Value::Array(options)) = m.get("enum") {
            if !options.iter().any(|o| self.same(o, v)) {
                let list: Vec<String> = options.iter().take(10).map(Value::to_string).collect();
                push(out, at, format!("must be one of {}", list.join(", ")));
            }
        }
        if let Some(c) = m.get("const") {
            if !self.same(c, v) {
                push(out, at, format!("must be {}", crate::doc::truncate(&c.to_string(), 100)));
            }
        }
    }

    fn string(&self, m: &Map<String, Value>, text: &str, at: &str, out: &mut Errors) {
        let keywords = ["minLength", "maxLength", "pattern"];
        if !keywords.iter().any(|k| m.contains_key(*k)) || !self.charge(text.len() / STRING_STEP) {
            return;
        }
        let len = text.chars().count() as u64;
        if let Some(min) = m.get("minLength").and_then(whole) {
            if len < min {
                push(out, at, format!("must be at least {min} characters long, is {len}"));
            }
        }
        if let Some(max) = m.get("maxLength").and_then(whole) {
            if len > max {
                push(out, at, format!("must be at most {max} characters long, is {len}"));
            }
        }
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            if self.schema.regexes.get(p).is_some_and(|re| !re.is_match(text)) {
                push(out, at, format!("must match the pattern {p}"));
            }
        }
    }

    fn array(&self, m: &Map<String, Value>, items: &[Value], at: &str, depth: usize, out: &mut Errors) {
        let n = items.len() as u64;
        if m.get("minItems").and_then(whole).is_some_and(|min| n < min) {
            push(out, at, format!("must have at least {} items, has {n}", m["minItems"]));
        }
        if m.get("maxItems").and_then(whole).is_some_and(|max| n > max) {
            push(out, at, format!("must have at most {} items, has {n}", m["maxItems"]));
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true)) {
            if let Some((i, j)) = self.duplicate(items) {
                push(out, at, format!("items {i} and {j} are equal; items must be unique"));
            }
        }
        let child = |i: usize| format!("{at}/{i}");
        // Tuples: 2020-12's prefixItems, or an `items` list (draft-07, also accepted in 2020-12).
        let (tuple, rest) = match (m.get("prefixItems"), m.get("items")) {
            (Some(Value::Array(t)), rest) => (t.as_slice(), rest),
            (None, Some(Value::Array(t))) => (t.as_slice(), m.get("additionalItems")),
            (_, rest) => (&[][..], rest),
        };
        for (i, (s, v)) in tuple.iter().zip(items).enumerate() {
            self.check(s, v, &child(i), depth + 1, out);
        }
        if let Some(rest) = rest.filter(|r| !r.is_array()) {
            for (i, v) in items.iter().enumerate().skip(tuple.len()) {
                self.check(rest, v, &child(i), depth + 1, out);
            }
        }
        if let Some(c) = m.get("contains") {
            let found =
                items.iter().enumerate().filter(|(i, v)| self.valid(c, v, &child(*i), depth + 1)).count() as u64;
            let draft2020 = self.schema.draft == Draft::Draft2020;
            let min = if draft2020 { m.get("minContains").and_then(whole).unwrap_or(1) } else { 1 };
            if found < min {
                push(out, at, format!("must contain at least {min} matching item(s), has {found}"));
            }
            if let Some(max) = m.get("maxContains").and_then(whole).filter(|_| draft2020) {
                if found > max {
                    push(out, at, format!("must contain at most {max} matching item(s), has {found}"));
                }
            }
        }
    }

    fn object(
        &self,
        m: &Map<String, Value>,
        props: &Map<String, Value>,
        v: &Value,
        at: &str,
        depth: usize,
        out: &mut Errors,
    ) {
        let n = props.len() as u64;
        if m.get("minProperties").and_then(whole).is_some_and(|min| n < min) {
            push(out, at, format!("must have at least {} properties, has {n}", m["minProperties"]));
        }
        if m.get("maxProperties").and_then(whole).is_some_and(|max| n > max) {
            push(out, at, format!("must have at most {} properties, has {n}", m["maxProperties"]));
        }
        if let Some(Value::Array(required)) = m.get("required") {
            if self.charge(required.len()) {
                for name in required.iter().filter_map(Value::as_str).filter(|r| !props.contains_key(*r)) {
                    push(out, at, format!("missing required property '{name}'"));
                }
            }
        }
        let per_property = ["properties", "patternProperties", "additionalProperties", "propertyNames"];
        if per_property.iter().any(|k| m.contains_key(*k)) && self.charge(props.len()) {
            self.properties(m, props, at, depth, out);
        }
        self.dependencies(m, props, v, at, depth, out);
    }

    fn properties(&self, m: &Map<String, Value>, props: &Map<String, Value>, at: &str, depth: usize, out: &mut Errors) {
        let declared = m.get("properties").and_then(Value::as_object);
        let patterns = m.get("patternProperties").and_then(Value::as_object);
        for (k, v) in props {
            let here = format!("{at}/{}", escape(k));
            let mut matched = false;
            if let Some(s) = declared.and_then(|d| d.get(k)) {
                matched = true;
                self.check(s, v, &here, depth + 1, out);
            }
            for (p, s) in patterns.into_iter().flatten() {
                if self.schema.regexes.get(p).is_some_and(|re| re.is_match(k)) {
                    matched = true;
                    self.check(s, v, &here, depth + 1, out);
                }
            }
            match m.get("additionalProperties") {
                Some(Value::Bool(false)) if !matched => push(out, at, format!("property '{k}' is not allowed")),
                Some(s) if !matched => self.check(s, v, &here, depth + 1, out),
                _ => {}
            }
            if let Some(names) = m.get("propertyNames") {
                if !self.valid(names, &Value::String(k.clone()), &here, depth + 1) {
                    push(out, at, format!("property name '{k}' is not valid against propertyNames"));
                }
            }
        }
    }

    /// `dependentRequired`, `dependentSchemas`, and draft-07's `dependencies` (either form).
    fn dependencies(
        &self,
        m: &Map<String, Value>,
        props: &Map<String, Value>,
        v: &Value,
        at: &str,
        depth: usize,
        out: &mut Errors,
    ) {
        let kws = ["dependentRequired", "dependentSchemas", "dependencies"];
        let maps = kws.iter().filter_map(|kw| m.get(*kw).and_then(Value::as_object));
        for (k, dep) in maps.filter(|deps| self.charge(deps.len())).flatten() {
            if !props.contains_key(k) {
                continue;
            }
            match dep {
                Value::Array(names) if self.charge(names.len()) => {
                    for n in names.iter().filter_map(Value::as_str).filter(|n| !props.contains_key(*n)) {
                        push(out, at, format!("property '{n}' is required when '{k}' is present"));
                    }
                }
                Value::Array(_) => {}
                s => self.check(s, v, at, depth + 1, out),
            }
        }
    }

    fn combinators(&self, m: &Map<String, Value>, v: &Value, at: &str, depth: usize, out: &mut Errors) {
        let list = |kw: &str| m.get(kw).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for s in list("allOf") {
            self.check(s, v, at, depth + 1, out);
        }
        if m.contains_key("anyOf") && !list("anyOf").iter().any(|s| self.valid(s, v, at, depth + 1)) {
            push(out, at, "does not match any of the alternatives (anyOf)".into());
        }
        if m.contains_key("oneOf") {
            let n = list("oneOf").iter().filter(|s| self.valid(s, v, at, depth + 1)).count();
            if n != 1 {
                push(out, at, format!("matches {n} of the oneOf alternatives; exactly one must match"));
            }
        }
        if let Some(s) = m.get("not") {
            if self.valid(s, v, at, depth + 1) {
                push(out, at, "must not match the schema under 'not'".into());
            }
        }
        if let Some(cond) = m.get("if") {
            let branch = if self.valid(cond, v, at, depth + 1) { m.get("then") } else { m.get("else") };
            if let Some(s) = branch {
                self.check(s, v, at, depth + 1, out);
            }
        }
    }
}

fn numeric(m: &Map<String, Value>, v: &Value, at: &str, out: &mut Errors) {
    let Some(x) = v.as_f64() else { return };
    let bound = |kw: &str| m.get(kw).and_then(Value::as_f64);
    // draft-04 style boolean exclusives are read as flags on minimum/maximum.
    let excl = |kw: &str| m.get(kw) == Some(&Value::Bool(true));
    if let Some(min) = bound("minimum") {
        if x < min || (excl("exclusiveMinimum") && x == min) {
            push(out, at, format!("must be >= {min}, is {x}"));
        }
    }
    if let Some(max) = bound("maximum") {
        if x > max || (excl("exclusiveMaximum") && x == max) {
            push(out, at, format!("must be <= {max}, is {x}"));
        }
    }
    if bound("exclusiveMinimum").is_some_and(|min| x <= min) {
        push(out, at, format!("must be > {}, is {x}", m["exclusiveMinimum"]));
    }
    if bound("exclusiveMaximum").is_some_and(|max| x >= max) {
        push(out, at, format!("must be < {}, is {x}", m["exclusiveMaximum"]));
    }
    if let Some(d) = bound("multipleOf") {
        if !multiple_of(v, x, d) {
            push(out, at, format!("must be a multiple of {d}"));
        }
    }
}

/// Exact for integers; for fractions, the quotient must be a whole number up to rounding error.
fn multiple_of(v: &Value, x: f64, d: f64) -> bool {
    if let (Some(a), true) = (v.as_i64(), d.fract() == 0.0 && (1.0..9.0e18).contains(&d)) {
        return a.checked_rem(d as i64) == Some(0);
    }
    let q = x / d;
    q.is_finite() && (q - q.round()).abs() < 1e-9 * q.abs().max(1.0)
}

fn is_type(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

fn whole(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
}

/// JSON equality, with `1` equal to `1.0`; `nodes` counts the pairs compared.
fn equal(a: &Value, b: &Value, nodes: &mut usize) -> bool {
    *nodes += 1;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(p), Some(q), _, _) => p == q,
            (_, _, Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q, nodes)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| equal(p, q, nodes)))
        }
        _ => a == b,
    }
}

impl Checker<'_> {
    /// `equal`, charged by the pairs of nodes it compares; false once the budget is spent.
    fn same(&self, a: &Value, b: &Value) -> bool {
        if self.steps.get() > MAX_STEPS {
            return false;
        }
        let mut nodes = 0;
        let same = equal(a, b, &mut nodes);
        self.charge(nodes) && same
    }

    /// Two equal items, if any. Items are grouped by a hash that equal values share, so that only
    /// items of one group are compared: linear time, not quadratic, for long arrays.
    fn duplicate(&self, items: &[Value]) -> Option<(usize, usize)> {
        let mut groups: HashMap<u64, Vec<usize>> = HashMap::with_capacity(items.len());
        for (j, item) in items.iter().enumerate() {
            let mut nodes = 0;
            let group = groups.entry(fingerprint(item, &mut nodes)).or_default();
            if !self.charge(nodes) {
                return None;
            }
            if let Some(&i) = group.iter().find(|&&i| self.same(&items[i], item)) {
                return Some((i, j));
            }
            group.push(j);
        }
        None
    }
}

/// A hash that `equal` values share: numbers by their `f64` value (`1` and `1.0` are equal), object
/// members in any order. `nodes` counts the nodes hashed.
fn fingerprint(v: &Value, nodes: &mut usize) -> u64 {
    *nodes += 1;
    let mut h = DefaultHasher::new();
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, b).hash(&mut h),
        Value::Number(n) => (2u8, n.as_f64().map_or(0, |f| if f == 0.0 { 0 } else { f.to_bits() })).hash(&mut h),
        Value::String(s) => (3u8, s).hash(&mut h),
        Value::Array(items) => (4u8, items.iter().map(|i| fingerprint(i, nodes)).collect::<Vec<_>>()).hash(&mut h),
        Value::Object(m) => {
            let members = m.iter().map(|(k, v)| (k, fingerprint(v, nodes))).fold(0u64, |sum, member| {
                let mut mh = DefaultHasher::new();
                member.hash(&mut mh);
                sum.wrapping_add(mh.finish())
            });
            (5u8, members).hash(&mut h)
        }
    }
    h.finish()
}

fn push(out: &mut Errors, at: &str, message: String) {
    out.push(SchemaError { instance: at.to_string(), message });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The steps one validation of `instance` against `schema` takes.
    fn steps(schema: Value, instance: &Value) -> u32 {
        let schema = Schema::compile(&schema).unwrap();
        let checker = Checker::new(&schema);
        checker.errors(&schema.root, instance);
        checker.steps.get()
    }

    #[test]
    fn work_on_large_values_is_counted() {
        // Each was one step, however large the value: repeated by an anyOf of self-references, a check
        // of a 1,000-key object took 19 s.
        let object = Value::Object((0..1000).map(|i| (format!("k{i}"), json!(i))).collect());
        assert_eq!(steps(json!({"properties": {}}), &object), 1 + 1000);
        assert_eq!(steps(json!({"minLength": 1}), &json!("b".repeat(256 * 1000))), 1 + 1000);
        assert_eq!(steps(json!({"enum": (0..1000).collect::<Vec<_>>()}), &json!(-1)), 1 + 1000);
        let names: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
        assert_eq!(steps(json!({"required": names}), &json!({})), 1 + 1000);
        assert_eq!(steps(json!({"dependentRequired": {"a": names}}), &json!({"a": 1})), 1 + 1 + 1000);
        // Distinct items are told apart by their hashes, never compared: linear, not quadratic.
        let items = json!((0..1000).collect::<Vec<_>>());
        assert_eq!(steps(json!({"uniqueItems": true}), &items), 1 + 1000);
    }

    #[test]
    fn unique_items_by_hash_agree_with_equality() {
        let s = Schema::compile(&json!({"uniqueItems": true})).unwrap();
        let duplicates = [json!([1, 1.0]), json!([{"a": [1], "b": 2}, {"b": 2.0, "a": [1.0]}]), json!([0, -0.0])];
        for v in duplicates {
            assert!(s.validate(&v).is_err(), "{v}");
        }
        for v in
            [json!([1, "1", [1], {"1": 1}, true, null]), json!([{"a": 1}, {"a": 1, "b": 1}]), json!([[1, 2], [2, 1]])]
        {
            assert!(s.validate(&v).is_ok(), "{v}");
        }
    }

    #[test]
    fn a_spent_budget_is_reported() {
        let object = Value::Object((0..1000).map(|i| (format!("k{i}"), json!(i))).collect());
        let schema = json!({"properties": {}, "anyOf": [{"$ref": "#"}, {"$ref": "#"}]});
        let errors = Schema::compile(&schema).unwrap().validate(&object).unwrap_err();
        assert!(errors.iter().any(|e| e.message == STOPPED), "{errors:?}");
    }
}
