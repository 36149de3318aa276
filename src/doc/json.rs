//! JSON text → `Value` in one pass, as `serde_json::from_str` builds it (key order kept), but refusing
//! nesting deeper than `MAX_DEPTH` with our own message.

use super::{DocError, MAX_DEPTH};
use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;

pub(super) enum Failure {
    /// Not JSON; the text may still be YAML (whose flow style is a superset of JSON's).
    Syntax,
    /// JSON, but refused: no point in reading it as YAML.
    Refused(DocError),
}

/// What the builder refused, since serde_json's errors only carry a message.
#[derive(Clone, Copy)]
enum Refusal {
    TooDeep,
}

pub(super) fn parse(text: &str) -> Result<Value, Failure> {
    let refusal = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Node { depth: 1, refusal: &refusal }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| match refusal.get() {
        Some(Refusal::TooDeep) => Failure::Refused(DocError::TooDeep(e.to_string())),
        None => Failure::Syntax,
    })
}

/// Builds one value; `depth` counts the collections it would be inside of, itself included.
#[derive(Clone, Copy)]
struct Node<'r> {
    depth: usize,
    refusal: &'r Cell<Option<Refusal>>,
}

impl<'r> Node<'r> {
    /// The node's children, after checking that the node itself may be a collection.
    fn children<E: Error>(self) -> Result<Node<'r>, E> {
        if self.depth > MAX_DEPTH {
            self.refusal.set(Some(Refusal::TooDeep));
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
        while let Some(item) = seq.next_element_seed(child)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.children()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(child)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}
