//! The catalog index: an inverted index over what the operator wrote about each tool, ranked with
//! BM25F (Robertson and Zaragoza): each field's term frequency is normalized by the field's length and
//! weighted, the sum saturated once. Field lengths are known when the index is built, so each
//! posting stores its saturated weight, quantized to a byte; a query adds `idf × weight` per term.
//! Postings are one byte vector (document gaps as LEB128 varints, then the weight byte), terms one
//! string with a hash table over it: a 2,000-operation catalog takes a few hundred KB, no model file, nothing to load.

use super::text::words;
use crate::tools::{Binding, Catalog, Tool};
use serde_json::Value;

/// The fields of a tool, in the order of `WEIGHTS`.
const NAME: usize = 0;
const DESCRIPTION: usize = 1;
const TAGS: usize = 2;
const PATH: usize = 3;
const PARAMS: usize = 4;
const FIELDS: usize = 5;
/// A word of the name says more than a word of a parameter's description.
const WEIGHTS: [f32; FIELDS] = [3.0, 1.0, 1.5, 1.0, 0.5];
/// Length normalization per field (BM25's `b`): short fields barely.
const B: [f32; FIELDS] = [0.3, 0.75, 0.3, 0.3, 0.75];
const K1: f32 = 1.2;
/// The most documents a query ranks: more than any byte budget holds.
pub const MAX_RANKED: usize = 512;
/// How deep parameter schemas are read (nested objects, array items).
const MAX_SCHEMA_DEPTH: usize = 3;

/// The index of one catalog, in its order (a document is a tool's position in the catalog).
#[derive(Debug, Clone, Default)]
pub struct Index {
    docs: u32,
    /// Every term, end to end, in the order first seen; `term_ends[i]` is where term `i` ends.
    terms: String,
    term_ends: Vec<u32>,
    /// An open-addressing table of the terms: term id + 1 per slot, 0 for none; a power of two long.
    slots: Vec<u32>,
    /// Per term: its documents in order, each as the gap from the previous one (varint), then its
    /// weight (1..=255); `post_ends[i]` is where term `i`'s postings end.
    postings: Vec<u8>,
    post_ends: Vec<u32>,
    /// How many documents each term is in.
    df: Vec<u32>,
}

/// One document while the index is built: its terms with their frequency per field.
struct Doc {
    terms: Vec<(String, [u16; FIELDS])>,
    lens: [u32; FIELDS],
}

impl Index {
    pub fn build(catalog: &Catalog) -> Index {
        let docs: Vec<Doc> = catalog.iter().map(doc).collect();
        let n = docs.len().max(1) as f32;
        let mut avg = [0f32; FIELDS];
        for d in &docs {
            for (a, l) in avg.iter_mut().zip(d.lens) {
                *a += l as f32 / n;
            }
        }
        let mut index = Index { docs: catalog.len() as u32, ..Index::default() };
        // Each term's postings, in document order as the documents come.
        let mut lists: Vec<(Vec<u8>, u32)> = Vec::new();
        for (i, d) in docs.into_iter().enumerate() {
            for (term, tf) in d.terms {
                let t = index.intern(&term);
                if t == lists.len() {
                    lists.push((Vec::new(), 0));
                    index.df.push(0);
                }
                let (list, last) = &mut lists[t];
                varint(list, i as u32 - *last);
                list.push(weight(&tf, &d.lens, &avg));
                *last = i as u32;
                index.df[t] += 1;
            }
        }
        for (list, _) in lists {
            index.postings.extend_from_slice(&list);
            index.post_ends.push(index.postings.len() as u32);
        }
        index.terms.shrink_to_fit();
        index.term_ends.shrink_to_fit();
        index.postings.shrink_to_fit();
        index.post_ends.shrink_to_fit();
        index.df.shrink_to_fit();
        index
    }

    /// The documents that share a word with `query`, best first (ties in catalog order), with their
    /// scores.
    pub fn rank(&self, query: &str) -> Vec<(u32, f32)> {
        let mut ids: Vec<usize> = Vec::new();
        words(query, |w| {
            if let Some(t) = self.find(w).filter(|t| !ids.contains(t)) {
                ids.push(t);
            }
        });
        if ids.is_empty() {
            return Vec::new();
        }
        let mut scores = vec![0f32; self.docs as usize];
        let n = self.docs as f32;
        for t in ids {
            let df = self.df[t] as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            let start = if t == 0 { 0 } else { self.post_ends[t - 1] as usize };
            let mut at = start;
            let mut doc = 0u32;
            while at < self.post_ends[t] as usize {
                doc += read_varint(&self.postings, &mut at);
                let w = self.postings[at];
                at += 1;
                scores[doc as usize] += idf * f32::from(w) / 255.0;
            }
        }
        // The best `MAX_RANKED`, kept in order as they come: no library sort (each costs the module
        // kilobytes), and a query that matches every tool moves at most `MAX_RANKED` entries per tool.
        let mut ranked: Vec<(u32, f32)> = Vec::new();
        for (d, s) in scores.into_iter().enumerate().filter(|(_, s)| *s > 0.0) {
            // Ties keep catalog order: a later document goes after the equal scores.
            let at = ranked.partition_point(|(_, r)| *r >= s);
            if at < MAX_RANKED {
                ranked.insert(at, (d as u32, s));
                ranked.truncate(MAX_RANKED);
            }
        }
        ranked
    }

    /// Bytes the index holds (its heap and itself), for the operator and the benchmarks.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Index>()
            + self.terms.capacity()
            + self.postings.capacity()
            + 4 * (self.term_ends.capacity() + self.slots.capacity() + self.post_ends.capacity() + self.df.capacity())
    }

    /// How many distinct terms the catalog has.
    pub fn terms(&self) -> usize {
        self.term_ends.len()
    }

    fn term(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.term_ends[i - 1] as usize };
        &self.terms[start..self.term_ends[i] as usize]
    }

    fn find(&self, word: &str) -> Option<usize> {
        self.slot(word).1
    }

    /// The slot of `word` in the table and its term, if it has one (else the empty slot it would take).
    fn slot(&self, word: &str) -> (usize, Option<usize>) {
        if self.slots.is_empty() {
            return (0, None);
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(word) as usize & mask;
        loop {
            match self.slots[i] {
                0 => return (i, None),
                t if self.term(t as usize - 1) == word => return (i, Some(t as usize - 1)),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The term id of `word`, added if new.
    fn intern(&mut self, word: &str) -> usize {
        if let (_, Some(t)) = self.slot(word) {
            return t;
        }
        let t = self.term_ends.len();
        // At most half full: probes stay short.
        if 2 * (t + 1) > self.slots.len() {
            self.slots = vec![0; (self.slots.len() * 2).max(64)];
            for old in 0..t {
                let (i, _) = self.slot(self.term(old));
                self.slots[i] = old as u32 + 1;
            }
        }
        let (i, _) = self.slot(word);
        self.slots[i] = t as u32 + 1;
        self.terms.push_str(word);
        self.term_ends.push(self.terms.len() as u32);
        t
    }
}

/// FNV-1a: a hash table with no random state and no library map (each costs the module kilobytes).
fn hash(word: &str) -> u32 {
    word.bytes().fold(0x811c_9dc5, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// BM25F's saturated term weight in (0, 1), as a byte (at least 1: the term is there).
fn weight(tf: &[u16; FIELDS], lens: &[u32; FIELDS], avg: &[f32; FIELDS]) -> u8 {
    let mut t = 0f32;
    for f in 0..FIELDS {
        if tf[f] > 0 {
            let norm = 1.0 - B[f] + B[f] * lens[f] as f32 / avg[f].max(1.0);
            t += WEIGHTS[f] * f32::from(tf[f]) / norm;
        }
    }
    ((t / (K1 + t)) * 255.0).round().clamp(1.0, 255.0) as u8
}

/// A tool's words by field.
fn doc(tool: &Tool) -> Doc {
    let mut all: Vec<(String, usize)> = Vec::new();
    let mut add = |text: &str, field: usize| words(text, |w| all.push((w.to_string(), field)));
    add(&tool.name, NAME);
    add(&tool.description, DESCRIPTION);
    match &tool.binding {
        Binding::OpenApi(op) => {
            for tag in &op.tags {
                add(tag, TAGS);
            }
            add(op.method, PATH);
            add(&op.path, PATH);
        }
        Binding::Mcp(m) => add(&m.remote, NAME),
    }
    schema_words(&tool.schema, 0, &mut |text| add(text, PARAMS));
    insertion_sort(&mut all);
    let mut d = Doc { terms: Vec::new(), lens: [0; FIELDS] };
    for (w, f) in all {
        d.lens[f] += 1;
        match d.terms.last_mut() {
            Some((last, tf)) if *last == w => tf[f] = tf[f].saturating_add(1),
            _ => {
                let mut tf = [0u16; FIELDS];
                tf[f] = 1;
                d.terms.push((w, tf));
            }
        }
    }
    d
}

/// The parameter names, descriptions, titles and string enum values of a schema.
fn schema_words(schema: &Value, depth: usize, add: &mut impl FnMut(&str)) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    for key in ["description", "title"] {
        if let Some(text) = schema.get(key).and_then(Value::as_str).filter(|_| depth > 0) {
            add(text);
        }
    }
    for v in schema.get("enum").and_then(Value::as_array).into_iter().flatten().take(20) {
        if let Some(s) = v.as_str() {
            add(s);
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            add(name);
            schema_words(sub, depth + 1, add);
        }
    }
    if let Some(items) = schema.get("items") {
        schema_words(items, depth + 1, add);
    }
}

/// A document's few dozen words: an insertion sort, so that the index has one library sort.
fn insertion_sort(words: &mut [(String, usize)]) {
    for i in 1..words.len() {
        let mut j = i;
        while j > 0 && words[j] < words[j - 1] {
            words.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn varint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> u32 {
    let mut n = 0u32;
    let mut shift = 0;
    while let Some(&b) = bytes.get(*at) {
        *at += 1;
        n |= u32::from(b & 0x7f) << shift;
        if b < 0x80 || shift >= 28 {
            break;
        }
        shift += 7;
    }
    n
}

#[cfg(test)]
mod tests;
