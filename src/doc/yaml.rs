//! YAML text → `Value` in one pass: yaml_serde's parser drives the visitor below, which builds the
//! `serde_json::Value` directly. The earlier route built a `yaml_serde::Value` first, a tree thrown away
//! at once: its code (the Value, Mapping and Number types, the hashing of Value keys, `apply_merge`) and
//! Ryu's tables, which only displayed float keys (serde_json's own formatter does that here), were 19 KB
//! of the module.
//!
//! The result is that route's, value for value and error for error (the tests hold the old route as
//! their oracle). It ran three passes, and this one pass keeps what each of them did:
//! 1. the parser: syntax, duplicate keys (checked here, with yaml_serde's words, on keys compared as
//!    yaml_serde compared them), its recursion limit, a second document;
//! 2. `apply_merge`, top-down on unmerged values: a `<<` entry's mapping, or each mapping of its list,
//!    adds the entries whose keys the mapping lacks; a merged mapping's own `<<` is not applied but kept
//!    as an ordinary entry; the removed `<<` entry's place goes to the mapping's last entry;
//! 3. the conversion: keys become strings, tags go, nesting deeper than `MAX_DEPTH` is refused.
//!
//! The errors of passes 2 and 3 are noted in each built value, not raised, so that the parser's errors
//! anywhere in the text still come first, and an error inside an entry that a merge drops stays unseen.

use super::{DocError, MAX_DEPTH};
use serde::de::{DeserializeSeed, EnumAccess, Error, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// yaml_serde's words for a `<<` it cannot merge.
const SCALAR_IN_MERGE: &str = "expected a mapping or list of mappings for merging, but found scalar";
const TAGGED_IN_MERGE: &str = "unexpected tagged value in merge";
const SCALAR_IN_MERGE_ELEMENT: &str = "expected a mapping for merging, but found scalar";
const SEQUENCE_IN_MERGE_ELEMENT: &str = "expected a mapping for merging, but found sequence";

/// The `id` of the merge key: the string `<<`, plain or quoted (yaml_serde did not tell them apart).
const MERGE_KEY: &str = "s<<";

pub(super) fn parse(text: &str) -> Result<Value, DocError> {
    let root = Seed::Node(1).deserialize(yaml_serde::Deserializer::from_str(text)).map_err(parser_error)?;
    let root = root.built();
    if let Some(message) = root.merge {
        return Err(DocError::Invalid(format!("YAML merge key: {message}")));
    }
    root.refused.map_or(Ok(root.value), Err)
}

fn parser_error(e: yaml_serde::Error) -> DocError {
    let message = e.to_string();
    // The pre-scan does not count a sequence written at its parent key's indentation (`key:\n- a`):
    // nesting made of those reaches yaml_serde's own limit.
    if message.starts_with("recursion limit exceeded") {
        return too_deep();
    }
    DocError::Invalid(format!("not valid JSON or YAML: {message}"))
}

fn too_deep() -> DocError {
    DocError::TooDeep(format!("nested deeper than {MAX_DEPTH} levels"))
}

/// What one node of the text is read as. One visitor type for all of them: each visitor type is another
/// copy of yaml_serde's generic deserializer in the module.
#[derive(Clone, Copy)]
enum Seed {
    /// A value of the document, `depth` counting the collections it is inside of, itself included.
    Node(usize),
    /// A mapping key, a yaml_serde `Value` of its own (merges are not applied in keys).
    Key,
    /// The value of a `<<` entry (`element`: an item of that value's list), whose mappings' entries
    /// become entries of the merging mapping, at `depth`.
    Merge { depth: usize, element: bool },
}

/// What a seed yields: `Seed::Node` a `Built`, `Seed::Key` a `Key`, `Seed::Merge` a `Merged`.
enum Out {
    Node(Built),
    Key(Key),
    Merge(Merged),
}

/// A mapping's entries, in order.
type List = Vec<(Key, Out)>;

/// Entries to merge, in the order `apply_merge` offered them, or why there are none.
type Merged = Result<List, &'static str>;

/// A value as the old route would have made it, and the first error its later passes met in it.
#[derive(Default)]
struct Built {
    value: Value,
    /// `apply_merge`'s, in its order: a node, then its children from the last to the first.
    merge: Option<&'static str>,
    /// The conversion's, in document order: a collection too deep, a key that is a list or a map.
    refused: Option<DocError>,
}

impl Built {
    /// A sequence or mapping at `depth`, before its children.
    fn collection(depth: usize) -> Built {
        Built { refused: (depth > MAX_DEPTH).then(too_deep), ..Built::default() }
    }

    fn note(&mut self, merge: Option<&'static str>, refused: Option<DocError>) {
        self.merge = merge.or(self.merge);
        self.refused = self.refused.take().or(refused);
    }
}

/// A mapping key. `id` is equal for keys yaml_serde held equal: a letter for the kind, then a canonical
/// text, which is the string the key becomes for a string, an integer or a boolean. `text` is that
/// string for the other kinds: a float's, a tagged key's (its value's), none for a list or a map.
struct Key {
    id: String,
    text: Option<String>,
}

impl Key {
    fn scalar(value: &Value) -> Key {
        let (kind, text) = match value {
            Value::String(s) => ('s', s.as_str()),
            Value::Bool(b) => ('b', if *b { "true" } else { "false" }),
            Value::Number(n) => return Key::new('i', &n.to_string()),
            _ => ('n', ""),
        };
        Key::new(kind, text)
    }

    /// `format!("{kind}{canonical}")` without the formatting machinery: keys are made by the thousand.
    fn new(kind: char, canonical: &str) -> Key {
        let mut id = String::with_capacity(canonical.len() + 1);
        id.push(kind);
        id.push_str(canonical);
        Key { id, text: None }
    }

    /// As yaml_serde's `Number` displays it: Ryu's shortest round trip (serde_json's formatter gives the
    /// same digits, with `e+` for a positive exponent), YAML's names for the non-finite ones.
    fn float(f: f64) -> Key {
        let text = match Number::from_f64(f) {
            Some(n) => n.to_string().replace("e+", "e"),
            None if f.is_nan() => ".nan".to_string(),
            None if f > 0.0 => ".inf".to_string(),
            None => "-.inf".to_string(),
        };
        // 0.0 and -0.0 were equal keys (so were two NaNs, which have one text).
        Key { id: if f == 0.0 { "f0".to_string() } else { format!("f{text}") }, text: Some(text) }
    }

    /// The string the key becomes; None for a list or a map.
    fn into_text(mut self) -> Option<String> {
        match self.id.as_bytes().first() {
            Some(b's' | b'i' | b'b') => {
                self.id.remove(0);
                Some(self.id)
            }
            Some(b'n') => Some("null".to_string()),
            _ => self.text,
        }
    }
}

/// A key's id inside a longer one, its length first, so that ids of lists and maps are unambiguous.
fn frame(id: &str) -> String {
    format!("{}:{id}", id.len())
}

/// A mapping's entries, and the ids of their keys once they are more than `SCAN` (until then they are
/// looked for by a scan: most mappings are small, and the scan spares their keys a copy and a hash).
#[derive(Default)]
struct Entries {
    list: List,
    /// A set of ids, held as serde_json's map (values all `Null`): that map type is compiled into the
    /// module anyway, a set type of its own would add its code.
    index: Map<String, Value>,
}

const SCAN: usize = 8;

impl Entries {
    fn has(&self, id: &str) -> bool {
        if self.index.is_empty() {
            return self.list.iter().any(|(key, _)| key.id == id);
        }
        self.index.contains_key(id)
    }

    /// Adds an entry whose key is not there yet.
    fn push(&mut self, key: Key, value: Out) {
        if !self.index.is_empty() {
            self.index.insert(key.id.clone(), Value::Null);
        }
        self.list.push((key, value));
        if self.index.is_empty() && self.list.len() > SCAN {
            self.index = self.list.iter().map(|(key, _)| (key.id.clone(), Value::Null)).collect();
        }
    }

    /// yaml_serde's message for a key met twice, which names the first of the two (`0.0` and `-0.0`
    /// were equal keys, with different texts).
    fn duplicate(&self, key: &Key) -> String {
        let first = self.list.iter().map(|(first, _)| first).find(|first| first.id == key.id);
        let first = first.and_then(|k| k.text.as_deref()).unwrap_or(key.id.get(1..).unwrap_or_default());
        match key.id.as_bytes().first() {
            Some(b'n') => "duplicate entry with null key".to_string(),
            Some(b'b') => format!("duplicate entry with key `{first}`"),
            Some(b'i' | b'f') => format!("duplicate entry with key {first}"),
            Some(b's') => format!("duplicate entry with key {first:?}"),
            _ => "duplicate entry in YAML map".to_string(),
        }
    }
}

impl Out {
    // Each seed yields its own kind of `Out`: the fallbacks are never taken.
    fn built(self) -> Built {
        let Out::Node(built) = self else { return Built::default() };
        built
    }

    fn key(self) -> Key {
        let Out::Key(key) = self else { return Key { id: String::new(), text: None } };
        key
    }

    fn merged(self) -> Merged {
        let Out::Merge(merged) = self else { return Ok(Vec::new()) };
        merged
    }
}

impl Seed {
    fn scalar(self, value: Value) -> Out {
        match self {
            Seed::Node(_) => Out::Node(Built { value, ..Built::default() }),
            Seed::Key => Out::Key(Key::scalar(&value)),
            Seed::Merge { element: false, .. } => Out::Merge(Err(SCALAR_IN_MERGE)),
            Seed::Merge { element: true, .. } => Out::Merge(Err(SCALAR_IN_MERGE_ELEMENT)),
        }
    }

    fn value_seed(self, key: &Key) -> Seed {
        match self {
            Seed::Node(depth) if key.id == MERGE_KEY => Seed::Merge { depth: depth + 1, element: false },
            Seed::Node(depth) => Seed::Node(depth + 1),
            Seed::Merge { depth, .. } => Seed::Node(depth),
            Seed::Key => Seed::Key,
        }
    }

    /// A mapping's entries in document order, its keys checked as yaml_serde's `Mapping` did.
    fn entries<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
        let mut entries = Entries::default();
        while let Some(key) = map.next_key_seed(Seed::Key)? {
            let key = key.key();
            if entries.has(&key.id) {
                return Err(A::Error::custom(entries.duplicate(&key)));
            }
            let value = map.next_value_seed(self.value_seed(&key))?;
            entries.push(key, value);
        }
        Ok(entries)
    }
}

/// A document's mapping: its merge applied (the `<<` entry's place taken by the last one, as
/// `swap_remove` left it; entries added unless their key is there), then converted.
fn node_map(depth: usize, mut entries: Entries) -> Built {
    if let Some(at) = entries.list.iter().position(|(_, value)| matches!(value, Out::Merge(_))) {
        match entries.list.swap_remove(at).1.merged() {
            Err(message) => return Built { merge: Some(message), ..Built::default() },
            Ok(merged) => {
                entries.index.swap_remove(MERGE_KEY);
                for (key, value) in merged {
                    if !entries.has(&key.id) {
                        entries.push(key, value);
                    }
                }
            }
        }
    }
    let mut built = Built::collection(depth);
    let mut out = Map::with_capacity(entries.list.len());
    for (key, value) in entries.list {
        let value = value.built();
        let text = key.into_text();
        if text.is_none() {
            built.note(None, Some(DocError::Invalid("a YAML mapping key that is a list or a map".into())));
        }
        built.note(value.merge, value.refused);
        if let Some(text) = text {
            out.insert(text, value.value);
        }
    }
    built.value = Value::Object(out);
    built
}

/// A key that is a map: equal to another with the same entries in any order, as yaml_serde's were.
fn map_key(list: List) -> Key {
    let mut parts: Vec<String> = Vec::with_capacity(list.len());
    for (key, value) in list {
        let part = frame(&key.id) + &frame(&value.key().id);
        let at = parts.binary_search(&part).unwrap_or_else(|at| at);
        parts.insert(at, part);
    }
    Key { id: format!("m{}", parts.concat()), text: None }
}

fn merge_list<'de, A: SeqAccess<'de>>(depth: usize, mut seq: A) -> Result<Merged, A::Error> {
    let mut all: Merged = Ok(Vec::new());
    while let Some(item) = seq.next_element_seed(Seed::Merge { depth, element: true })? {
        all = match (all, item.merged()) {
            (Ok(mut all), Ok(entries)) => {
                all.extend(entries);
                Ok(all)
            }
            (Err(message), _) | (_, Err(message)) => Err(message),
        };
    }
    Ok(all)
}

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Out;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Out, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Integers beyond 64 bits keep serde's default refusal, as `yaml_serde::Value` did: its message names
/// what was expected, hence the same `expecting`.
impl<'de> Visitor<'de> for Seed {
    type Value = Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Out, E> {
        Ok(self.scalar(Value::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Out, E> {
        Ok(self.scalar(Value::from(n)))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Out, E> {
        Ok(self.scalar(Value::from(n)))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Out, E> {
        if let Seed::Key = self {
            return Ok(Out::Key(Key::float(f)));
        }
        Ok(self.scalar(Number::from_f64(f).map_or(Value::Null, Value::Number)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Out, E> {
        if let Seed::Key = self {
            return Ok(Out::Key(Key::new('s', s))); // the common key, with one copy of its text
        }
        Ok(self.scalar(Value::String(s.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Out, E> {
        Ok(self.scalar(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Out, E> {
        Ok(self.scalar(Value::Null))
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Out, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Out, A::Error> {
        match self {
            Seed::Node(depth) => {
                let mut built = Built::collection(depth);
                let mut items = Vec::new();
                while let Some(item) = seq.next_element_seed(Seed::Node(depth + 1))? {
                    let item = item.built();
                    built.note(item.merge, item.refused);
                    items.push(item.value);
                }
                built.value = Value::Array(items);
                Ok(Out::Node(built))
            }
            Seed::Key => {
                let mut id = String::from("q");
                while let Some(item) = seq.next_element_seed(Seed::Key)? {
                    id += &frame(&item.key().id);
                }
                Ok(Out::Key(Key { id, text: None }))
            }
            Seed::Merge { depth, element: false } => merge_list(depth, seq).map(Out::Merge),
            Seed::Merge { depth, element: true } => {
                while seq.next_element_seed(Seed::Node(depth))?.is_some() {}
                Ok(Out::Merge(Err(SEQUENCE_IN_MERGE_ELEMENT)))
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Out, A::Error> {
        let entries = self.entries(map)?;
        Ok(match self {
            Seed::Node(depth) => Out::Node(node_map(depth, entries)),
            Seed::Key => Out::Key(map_key(entries.list)),
            Seed::Merge { .. } => Out::Merge(Ok(entries.list)),
        })
    }

    /// A value with a custom tag (`!name value`; yaml_serde resolves `!!str` and the like itself).
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Out, A::Error> {
        let (tag, content) = data.variant::<String>()?;
        match self {
            Seed::Node(_) => content.newtype_variant_seed(self),
            Seed::Key => {
                let inner = content.newtype_variant_seed(Seed::Key)?.key();
                // yaml_serde's tags compare without their leading `!`.
                let tag = tag.strip_prefix('!').filter(|t| !t.is_empty()).unwrap_or(&tag);
                let id = format!("t{}{}", frame(tag), inner.id);
                Ok(Out::Key(Key { id, text: inner.into_text() }))
            }
            Seed::Merge { depth, .. } => {
                content.newtype_variant_seed(Seed::Node(depth))?;
                Ok(Out::Merge(Err(TAGGED_IN_MERGE)))
            }
        }
    }
}

#[cfg(test)]
mod tests;
