//! The data-flow guard (`policy.guard`): a sensitive call whose argument values occur in this run's
//! tool replies but in none of the client's messages is *tool-derived*, the mark of an instruction a
//! tool's reply slipped to the model ("transfer the balance to account X"). Values are compared as
//! their letters and digits, lower-cased (so `DE89 3704-0044` is `de8937040044`), against the replies
//! as the model saw them and their decoded spellings (JSON escapes, base64, percent-encoding); a long
//! value is also tool-derived when a piece of it (`minStringLength` characters) is in a reply and the
//! whole is not the client's, when each of its words is in a reply, or, for a number of 8 digits or
//! more, when both halves of some split are (values split across a reply). docs/policy.md says what this misses.

use crate::config::call_policy::Guard;
use crate::openai::ChatRequest;
use serde_json::Value;

/// What the client said and what the tools replied in this run, normalized for comparison.
#[derive(Debug, Default)]
pub struct Flow {
    client: String,
    tools: String,
}

impl Flow {
    /// The client's messages: their text and the arguments of the calls in them.
    pub fn new(req: &ChatRequest) -> Flow {
        let mut client = String::new();
        for m in &req.messages {
            push_norm(&mut client, &m.text);
            for c in &m.tool_calls {
                push_norm(&mut client, &c.arguments);
            }
        }
        Flow { client, tools: String::new() }
    }

    /// A turn's tool replies, as the model is told them, with their decoded spellings.
    pub fn observed(&mut self, observations: &[String]) {
        for o in observations {
            push_norm(&mut self.tools, o);
            for spelling in decoded(o) {
                push_norm(&mut self.tools, &spelling);
            }
        }
    }

    /// The argument paths (`to.iban`) whose values are tool-derived.
    pub fn derived(&self, g: &Guard, args: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if !self.tools.is_empty() {
            self.walk(g, args, String::new(), &mut out);
        }
        out
    }

    fn walk(&self, g: &Guard, v: &Value, path: String, out: &mut Vec<String>) {
        let text = match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    self.walk(g, v, p, out);
                }
                return;
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    self.walk(g, v, format!("{path}[{i}]"), out);
                }
                return;
            }
            Value::String(s) if s.chars().filter(|c| word_char(*c)).count() >= g.min_string => norm(s),
            Value::Number(n) if n.to_string().bytes().filter(u8::is_ascii_digit).count() >= g.min_digits => {
                norm(&n.to_string())
            }
            _ => return,
        };
        let parts = match v {
            Value::String(s) => self.in_parts(s),
            _ => false,
        };
        if parts || self.tool_derived(&text, g.min_string.min(text.len())) {
            out.push(if path.is_empty() { "(input)".into() } else { path });
        }
    }

    /// A string of two or more words (letters and digits, 3 or more each) that are all in the tools'
    /// replies, and not all in the client's messages: a value the model put together from pieces.
    fn in_parts(&self, s: &str) -> bool {
        let words: Vec<String> = s.split(|c: char| !word_char(c)).filter(|w| w.len() >= 3).map(norm).collect();
        words.len() >= 2
            && words.iter().all(|w| self.tools.contains(w.as_str()))
            && !words.iter().all(|w| self.client.contains(w.as_str()))
            && !self.client.contains(&norm(s))
    }

    /// The value (normalized) is not the client's, and it, or a piece of it of `piece` bytes, is
    /// in a tool's reply.
    fn tool_derived(&self, value: &str, piece: usize) -> bool {
        if value.is_empty() || self.client.contains(value) {
            return false;
        }
        if self.tools.contains(value) {
            return true;
        }
        let b = value.as_bytes();
        let windows = (0..=b.len().saturating_sub(piece))
            .filter_map(|i| value.get(i..i + piece))
            .any(|w| self.tools.contains(w) && !self.client.contains(w));
        // A long number given in two pieces of 4 digits or more ("4815 followed by 1623").
        let digits = b.len() >= 8 && b.iter().all(u8::is_ascii_digit);
        windows
            || (digits
                && (4..=b.len() - 4).any(|k| self.tools.contains(&value[..k]) && self.tools.contains(&value[k..])))
    }
}

/// Letters and digits, lower-cased, each text on its own line (a value never spans two texts).
fn push_norm(out: &mut String, text: &str) {
    out.push_str(&norm(text));
    out.push('\n');
}

/// ASCII letters lower-cased and digits; other ASCII dropped; non-ASCII kept as it is (Unicode's
/// case and class tables would cost the `.wasm` 12 KB).
fn norm(text: &str) -> String {
    text.chars().filter(|c| word_char(*c)).map(|c| c.to_ascii_lowercase()).collect()
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || !c.is_ascii()
}

/// Other spellings of a reply a model may decode: the strings of its JSON (escapes undone), base64
/// runs and percent-encoded runs.
fn decoded(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        strings(&v, &mut out);
    }
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || "+/=%-_".contains(c))) {
        if word.len() >= 12 {
            out.extend(base64(word.trim_end_matches('=')));
        }
        if word.contains('%') {
            out.extend(percent(word));
        }
    }
    out
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            out.push(s.clone());
            // A JSON string inside the reply (a tool that returns JSON text) is read too.
            if let Ok(inner) = serde_json::from_str::<Value>(s) {
                strings(&inner, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(m) => m.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Standard or URL-safe base64 without padding, when it decodes to UTF-8 text.
fn base64(word: &str) -> Option<String> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut bytes = Vec::with_capacity(word.len() * 3 / 4);
    for c in word.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            bytes.push((bits >> n) as u8);
        }
    }
    String::from_utf8(bytes).ok()
}

fn percent(word: &str) -> Option<String> {
    let b = word.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = word.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
