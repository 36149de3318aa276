//! The request's summary as a host with dynamic metadata hands it to Envoy (the dynamic module), in
//! the forms the configuration asks for (`summary`): one call that sets the whole `api_agent`
//! namespace from a serialized `google.protobuf.Struct` (numbers as numbers; on by default), and
//! filter state, one object per field (off by default). Envoy builds protobuf values or a
//! filter-state object per field: the metadata alone is ~3% of a request's instructions
//! (BENCHMARKS.md, "The dynamic module's cost"), so a form no one reads is not set.

use super::port::SUMMARY_STATE_KEYS;
use crate::agent::SummaryValue;
use crate::config::SummaryForms;
use std::fmt::Write;

/// Where the summary goes in a host with dynamic metadata.
pub trait SummaryTarget {
    /// Sets the namespace's fields from a serialized `google.protobuf.Struct`, in one call; false when
    /// the host has no such call (an older Envoy).
    fn metadata_struct(&self, namespace: &str, serialized: &[u8]) -> bool;
    /// One field of the namespace (an Envoy without the struct call).
    fn metadata_field(&self, namespace: &str, key: &str, value: &SummaryValue);
    /// One filter-state object (text).
    fn filter_state(&self, key: &str, value: &str);
}

/// Hands `fields` to `target` in `forms`: the metadata namespace at once, then one filter-state object
/// per field, formatted only then.
pub fn write(
    target: &impl SummaryTarget,
    namespace: &str,
    fields: &[(&'static str, SummaryValue)],
    forms: SummaryForms,
) {
    if forms.metadata && !target.metadata_struct(namespace, &struct_bytes(fields)) {
        for (key, value) in fields {
            target.metadata_field(namespace, key, value);
        }
    }
    if forms.filter_state {
        let mut text = String::new();
        for ((_, value), key) in fields.iter().zip(SUMMARY_STATE_KEYS) {
            text.clear();
            let _ = write!(text, "{value}");
            target.filter_state(key, &text);
        }
    }
}

/// `fields` as a serialized `google.protobuf.Struct` (`map<string, Value> fields = 1`; a `Value` is
/// `number_value = 2` (double) or `string_value = 3`), in one allocation of the exact size.
pub fn struct_bytes(fields: &[(&'static str, SummaryValue)]) -> Vec<u8> {
    let value_len = |v: &SummaryValue| match v {
        SummaryValue::Number(_) => 9,
        SummaryValue::Text(t) => 1 + varint_len(t.len()) + t.len(),
    };
    let entry_len = |key: &str, v: &SummaryValue| {
        1 + varint_len(key.len()) + key.len() + 1 + varint_len(value_len(v)) + value_len(v)
    };
    let total = fields.iter().map(|(k, v)| 1 + varint_len(entry_len(k, v)) + entry_len(k, v)).sum();
    let mut out = Vec::with_capacity(total);
    for (key, v) in fields {
        out.push(0x0a);
        varint(&mut out, entry_len(key, v));
        bytes_field(&mut out, 0x0a, key.as_bytes());
        out.push(0x12);
        varint(&mut out, value_len(v));
        match v {
            SummaryValue::Number(n) => {
                out.push(0x11);
                out.extend_from_slice(&(*n as f64).to_le_bytes());
            }
            SummaryValue::Text(t) => bytes_field(&mut out, 0x1a, t.as_bytes()),
        }
    }
    out
}

/// A length-delimited field: its tag, the length, the bytes.
fn bytes_field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    varint(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_len(n: usize) -> usize {
    let mut len = 1;
    let mut n = n >> 7;
    while n > 0 {
        len += 1;
        n >>= 7;
    }
    len
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::cell::RefCell;

    /// A protobuf reader just large enough for a `Struct` of numbers and strings.
    fn read_varint(b: &[u8], i: &mut usize) -> usize {
        let (mut n, mut shift) = (0usize, 0);
        loop {
            let byte = b[*i];
            *i += 1;
            n |= usize::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return n;
            }
            shift += 7;
        }
    }

    fn decode(b: &[u8]) -> Vec<(String, SummaryValue)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            assert_eq!(b[i], 0x0a, "a Struct holds only field 1");
            i += 1;
            let end = read_varint(b, &mut i) + i;
            assert_eq!(b[i], 0x0a);
            i += 1;
            let n = read_varint(b, &mut i);
            let key = String::from_utf8(b[i..i + n].to_vec()).unwrap();
            i += n;
            assert_eq!(b[i], 0x12);
            i += 1;
            let vend = read_varint(b, &mut i) + i;
            let value = match b[i] {
                0x11 => SummaryValue::Number(f64::from_le_bytes(b[i + 1..i + 9].try_into().unwrap()) as u64),
                0x1a => {
                    let mut j = i + 1;
                    let n = read_varint(b, &mut j);
                    SummaryValue::Text(String::from_utf8(b[j..j + n].to_vec()).unwrap())
                }
                other => panic!("unexpected Value field {other:#x}"),
            };
            assert_eq!(vend, end);
            i = end;
            out.push((key, value));
        }
        out
    }

    #[test]
    fn the_struct_holds_every_field_with_its_type() {
        let long = "m".repeat(300);
        let fields = [
            ("turns", SummaryValue::Number(3)),
            ("total_tokens", SummaryValue::Number(1 << 40)),
            ("model", SummaryValue::Text(long.clone())),
            ("outcome", SummaryValue::Text("answer".into())),
            ("empty", SummaryValue::Text(String::new())),
        ];
        let decoded = decode(&struct_bytes(&fields));
        let want: Vec<(String, SummaryValue)> = fields.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect();
        assert_eq!(decoded, want);
    }

    #[test]
    fn the_buffer_is_sized_exactly() {
        let fields = [("turns", SummaryValue::Number(3)), ("model", SummaryValue::Text("x".repeat(200)))];
        let bytes = struct_bytes(&fields);
        assert_eq!(bytes.len(), bytes.capacity());
    }

    #[test]
    fn one_number_is_the_bytes_protobuf_writes() {
        // {"turns": 2.0}, as protoc encodes it.
        let want = [0x0a, 0x12, 0x0a, 0x05, b't', b'u', b'r', b'n', b's', 0x12, 0x09, 0x11, 0, 0, 0, 0, 0, 0, 0, 0x40];
        assert_eq!(struct_bytes(&[("turns", SummaryValue::Number(2))]), want);
    }

    #[derive(Default)]
    struct Recorder {
        has_struct: bool,
        calls: RefCell<Vec<String>>,
    }

    impl SummaryTarget for Recorder {
        fn metadata_struct(&self, ns: &str, serialized: &[u8]) -> bool {
            if self.has_struct {
                self.calls.borrow_mut().push(format!("struct {ns} {}", decode(serialized).len()));
            }
            self.has_struct
        }
        fn metadata_field(&self, ns: &str, key: &str, value: &SummaryValue) {
            self.calls.borrow_mut().push(format!("field {ns}.{key}={value}"));
        }
        fn filter_state(&self, key: &str, value: &str) {
            self.calls.borrow_mut().push(format!("state {key}={value}"));
        }
    }

    fn fields() -> Vec<(&'static str, SummaryValue)> {
        vec![("turns", SummaryValue::Number(2)), ("tool_calls", SummaryValue::Number(1))]
    }

    const METADATA: SummaryForms = SummaryForms { metadata: true, filter_state: false };

    #[test]
    fn one_call_sets_the_metadata_and_filter_state_only_when_asked() {
        let r = Recorder { has_struct: true, ..Recorder::default() };
        write(&r, "api_agent", &fields(), METADATA);
        assert_eq!(r.calls.take(), ["struct api_agent 2"]);
        write(&r, "api_agent", &fields(), SummaryForms { metadata: true, filter_state: true });
        assert_eq!(
            r.calls.take(),
            ["struct api_agent 2", "state wasm.api_agent.turns=2", "state wasm.api_agent.tool_calls=1"]
        );
    }

    #[test]
    fn a_form_turned_off_costs_no_call() {
        let r = Recorder { has_struct: true, ..Recorder::default() };
        write(&r, "api_agent", &fields(), SummaryForms { metadata: false, filter_state: false });
        assert!(r.calls.take().is_empty());
        write(&r, "api_agent", &fields(), SummaryForms { metadata: false, filter_state: true });
        assert_eq!(r.calls.take(), ["state wasm.api_agent.turns=2", "state wasm.api_agent.tool_calls=1"]);
        let old = Recorder::default();
        write(&old, "api_agent", &fields(), SummaryForms { metadata: false, filter_state: false });
        assert!(old.calls.take().is_empty(), "no per-field metadata either");
    }

    #[test]
    fn an_envoy_without_the_struct_call_gets_one_field_at_a_time() {
        let r = Recorder::default();
        write(&r, "api_agent", &fields(), METADATA);
        assert_eq!(r.calls.take(), ["field api_agent.turns=2", "field api_agent.tool_calls=1"]);
    }
}
