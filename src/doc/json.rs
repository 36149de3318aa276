//! JSON text → `Value` in one pass, as `serde_json::from_str` builds it (key order kept), but refusing
//! nesting deeper than `MAX_DEPTH` with our own message, and duplicate keys: serde_json keeps the last
//! one silently, where YAML refuses them, and an operator's second `apiKey` or `type` is a mistake.

use super::{truncate, DocError, MAX_DEPTH};
use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;

pub(super) enum Failure {
    /// Not JSON; the text may still be YAML (whose flow style is a superset of JSON's).
    Syntax,
    /// JSON, but refused: no point in reading it as YAML.
    Refused(DocError),
}

/// What the builder refused, and where: serde_json's errors carry only a message and a position.
#[derive(Default)]
struct Refusal {
    kind: Cell<Option<Kind>>,
    /// A duplicate key, then the keys and indices up to the root, noted as the error unwinds.
    path: Cell<Vec<String>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    TooDeep,
    DuplicateKey,
}

impl Refusal {
    fn note(&self, step: String) {
        if self.kind.get() == Some(Kind::DuplicateKey) {
            let mut path = self.path.take();
            path.push(step);
            self.path.set(path);
        }
    }
}

pub(super) fn parse(text: &str) -> Result<Value, Failure> {
    let refusal = Refusal::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Node { depth: 1, refusal: &refusal }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| match refusal.kind.get() {
        None => Failure::Syntax,
        Some(Kind::TooDeep) => Failure::Refused(DocError::TooDeep(e.to_string())),
        Some(Kind::DuplicateKey) => {
            let at = format!("at line {} column {}", e.line(), e.column());
            Failure::Refused(DocError::Invalid(format!(
                "not valid JSON: duplicate key {}{at}",
                place(refusal.path.take())
            )))
        }
    })
}

/// `'key' in outer.inner[2] ` from the key and the steps noted innermost first.
fn place(path: Vec<String>) -> String {
    let mut steps = path.into_iter();
    let key = steps.next().unwrap_or_default();
    let within = steps.rev().fold(String::new(), |mut place, step| {
        if !place.is_empty() && !step.starts_with('[') {
            place.push('.');
        }
        place + &step
    });
    if within.is_empty() {
        format!("'{key}' ")
    } else {
        format!("'{key}' in {within} ")
    }
}

/// Builds one value; `depth` counts the collections it would be inside of, itself included.
#[derive(Clone, Copy)]
struct Node<'r> {
    depth: usize,
    refusal: &'r Refusal,
}

impl<'r> Node<'r> {
    /// The node's children, after checking that the node itself may be a collection.
    fn children<E: Error>(self) -> Result<Node<'r>, E> {
        if self.depth > MAX_DEPTH {
            self.refusal.kind.set(Some(Kind::TooDeep));
            return Err(E::custom(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(Node { depth: self.depth + 1, refusal: self.refusal })
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let child = self.children()?;
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(child) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    self.refusal.note(format!("[{}]", items.len()));
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.children()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match out.entry(key) {
                Entry::Vacant(slot) => match map.next_value_seed(child) {
                    Ok(value) => {
                        slot.insert(value);
                    }
                    Err(e) => {
                        self.refusal.note(truncate(slot.key(), 64).into_owned());
                        return Err(e);
                    }
                },
                Entry::Occupied(slot) => {
                    self.refusal.kind.set(Some(Kind::DuplicateKey));
                    self.refusal.path.set(vec![truncate(slot.key(), 64).into_owned()]);
                    return Err(Error::custom("duplicate key"));
                }
            }
        }
        Ok(Value::Object(out))
    }
}
