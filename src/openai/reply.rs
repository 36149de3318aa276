//! An LLM's chat.completion, read into the parts the loop uses. Serde reads those fields and skips the
//! rest without building a tree: with `preserve_order` every object of a `Value` is an `IndexMap`
//! hashed with SipHash, and reading both replies of a request into `Value`s was ~45% of its cost.
//! The reading is as lenient as `Value::get` was (a field of another type reads as absent; a later
//! duplicate key wins). `choices[0].message` is kept as its JSON text, made a tree only where native
//! mode puts it back into the conversation.

use super::{content_text, parse_tool_call, reasoning, sse, ToolCall, Unread, Usage};
use crate::doc::truncate;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// The parts of an LLM reply the loop uses.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmReply {
    /// `choices[0].message` as the provider wrote it, as JSON text (native mode keeps it in the
    /// conversation: `message_value`).
    pub message: String,
    /// The reply's text, without the model's thinking.
    pub content: String,
    /// The model's thinking, from a reasoning field or a leading think block.
    pub reasoning: Option<reasoning::Reasoning>,
    pub tool_calls: Vec<ToolCall>,
    pub model: Option<String>,
    /// The counts as read: a total below prompt + completion is their sum, each count at most
    /// `MAX_COUNT`.
    pub usage: Usage,
    /// The counts the reply did not say (`Usage::estimate`).
    pub unread: Unread,
}

impl LlmReply {
    /// A chat.completion body; `Err` says what is wrong with it.
    pub fn parse(body: &[u8]) -> Result<LlmReply, String> {
        if body.trim_ascii_start().starts_with(b"data:") {
            // A server that streams although it was not asked to: the chunks make the same reply.
            let mut stream = sse::ChunkStream::new();
            stream.feed(body);
            return LlmReply::parse(&stream.completion()?);
        }
        let c: Completion<'_> = serde_json::from_slice(body).map_err(|e| {
            format!("the LLM's reply is not JSON ({e}): {}", truncate(&String::from_utf8_lossy(body), 200))
        })?;
        if let Some(err) = c.error {
            // Rare: the tree is built only to say what the error is.
            let err: Value = serde_json::from_str(err.get()).unwrap_or_default();
            let msg = err.get("message").and_then(Value::as_str).map_or_else(|| err.to_string(), str::to_string);
            return Err(format!("the LLM returned an error: {}", truncate(&msg, 300)));
        }
        let raw = c
            .choices
            .and_then(|choices| choices.into_iter().next())
            .and_then(|choice| choice.message)
            .ok_or("the LLM's reply has no choices[0].message")?;
        let m: Message = serde_json::from_slice(raw.get().as_bytes()).map_err(|e| format!("the LLM's reply: {e}"))?;
        let text = match m.content {
            Some(Value::String(s)) => s,
            other => content_text(other.as_ref()).map_err(|e| format!("the LLM's reply: {e}"))?,
        };
        // A reasoning field wins; else a think block leading the content is the thinking. Each is
        // looked for only where it may be: a field that came, text with a `<` (every think tag has one).
        let fields = m.reasoning_content.is_some() || m.reasoning.is_some();
        let of_fields = fields.then(|| reasoning::of_fields(m.reasoning_content.as_ref(), m.reasoning.as_ref()));
        let (reasoning, content) = match of_fields.flatten() {
            Some(r) => (Some(r), split_think(&text).1.to_string()),
            None => match split_think(&text) {
                (Some(t), rest) => {
                    (Some(reasoning::Reasoning { text: t, field: reasoning::Field::Think }), rest.to_string())
                }
                (None, _) => (None, text),
            },
        };
        let tool_calls = match &m.tool_calls {
            Some(Value::Array(calls)) => calls.iter().map(parse_tool_call).collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let (usage, unread) = c.usage.read();
        Ok(LlmReply { message: raw.get().to_string(), content, reasoning, tool_calls, model: c.model.0, usage, unread })
    }

    /// `choices[0].message` as a tree, as the provider wrote it.
    pub fn message_value(&self) -> Value {
        // The text was read from valid JSON: it cannot fail to parse.
        serde_json::from_str(&self.message).unwrap_or_default()
    }
}

/// `reasoning::split_think`, entered only for text with a `<`: every think tag has one.
fn split_think(text: &str) -> (Option<String>, &str) {
    match text.as_bytes().contains(&b'<') {
        true => reasoning::split_think(text),
        false => (None, text),
    }
}

/// The fields of a chat.completion the loop reads.
#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    model: Text,
    #[serde(default)]
    usage: UsageIn,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

/// The message's fields the loop reads (small subtrees, or none: `tool_calls` only in native mode).
#[derive(Default)]
struct Message {
    content: Option<Value>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Value>,
}

#[derive(Default)]
struct UsageIn {
    prompt: Count,
    completion: Count,
    total: Count,
    details: Details,
}

/// `completion_tokens_details`.
#[derive(Default)]
struct Details {
    reasoning: Count,
}

/// A count: a non-negative number, floored, or such a number in a string; none when it is anything
/// else. At most `MAX_COUNT`.
#[derive(Default)]
struct Count(Option<u64>);

/// The most tokens one reply's count says: more is no real turn's (a count above u64 too), and sums
/// of such counts stay exact in any JSON reader (below 2^53) and far from overflowing.
pub const MAX_COUNT: u64 = u32::MAX as u64;

/// A string, as `Value::as_str` reads one: any other value is none.
#[derive(Default)]
struct Text(Option<String>);

impl UsageIn {
    /// The counts, the total at least prompt + completion (a provider's total can leave some out),
    /// and which counts are unknown: none when the total was read.
    fn read(self) -> (Usage, Unread) {
        let (prompt, completion) = (self.prompt.0.unwrap_or(0), self.completion.0.unwrap_or(0));
        let total = self.total.0.unwrap_or(0).max(prompt + completion);
        let unread = match self.total.0 {
            Some(_) => Unread::default(),
            None => Unread { prompt: self.prompt.0.is_none(), completion: self.completion.0.is_none() },
        };
        let reasoning_tokens = self.details.reasoning.0.unwrap_or(0);
        (Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total, reasoning_tokens }, unread)
    }
}

/// A value read whatever its JSON type: what is not the expected one reads as the default.
trait Lenient<'de>: Default {
    fn number(_: u64) -> Self {
        Self::default()
    }
    fn float(_: f64) -> Self {
        Self::default()
    }
    fn text(_: &str) -> Self {
        Self::default()
    }
    /// An object: each field the type reads, the others skipped.
    fn field<A: MapAccess<'de>>(&mut self, _key: &str, map: &mut A) -> Result<(), A::Error> {
        map.next_value::<IgnoredAny>().map(|_| ())
    }
}

impl Lenient<'_> for Count {
    fn number(n: u64) -> Self {
        Count(Some(n.min(MAX_COUNT)))
    }
    fn float(n: f64) -> Self {
        // In range, `as` floors; NaN and infinities are no count.
        Count((n.is_finite() && n >= 0.0).then(|| (n.min(MAX_COUNT as f64) as u64).min(MAX_COUNT)))
    }
    fn text(s: &str) -> Self {
        let s = s.trim();
        match s.parse::<u64>() {
            Ok(n) => Count::number(n),
            Err(_) => s.parse::<f64>().map_or(Count(None), Count::float),
        }
    }
}

impl Lenient<'_> for Text {
    fn text(s: &str) -> Self {
        Text(Some(s.to_string()))
    }
}

impl<'de> Lenient<'de> for UsageIn {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "prompt_tokens" => self.prompt = map.next_value()?,
            "completion_tokens" => self.completion = map.next_value()?,
            "total_tokens" => self.total = map.next_value()?,
            "completion_tokens_details" => self.details = map.next_value()?,
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> Lenient<'de> for Details {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "reasoning_tokens" => self.reasoning = map.next_value()?,
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> Lenient<'de> for Message {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            "content" => &mut self.content,
            "reasoning_content" => &mut self.reasoning_content,
            "reasoning" => &mut self.reasoning,
            "tool_calls" => &mut self.tool_calls,
            _ => return map.next_value::<IgnoredAny>().map(|_| ()),
        };
        *slot = Some(map.next_value()?);
        Ok(())
    }
}

macro_rules! lenient {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(Any(PhantomData))
            }
        }
    )*};
}
lenient!(Count, Text, UsageIn, Details, Message);

struct Any<T>(PhantomData<T>);

impl<'de, T: Lenient<'de>> Visitor<'de> for Any<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E>(self, n: u64) -> Result<T, E> {
        Ok(T::number(n))
    }
    fn visit_f64<E>(self, n: f64) -> Result<T, E> {
        Ok(T::float(n))
    }
    fn visit_str<E>(self, s: &str) -> Result<T, E> {
        Ok(T::text(s))
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut out = T::default();
        while let Some(Key(key)) = map.next_key()? {
            out.field(&key, &mut map)?;
        }
        Ok(out)
    }
}

/// An object's key: borrowed from the body unless it had escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}
