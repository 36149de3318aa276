//! Text documents (plugin configuration, OpenAPI specs, JSON Schemas) arrive as JSON or YAML. Both are
//! read into one `serde_json::Value` tree, keeping key order, so every later step works on one type.

mod json;
mod nesting;
mod yaml;

use serde_json::Value;
use std::fmt;

/// How deeply collections may nest. Real documents stay far below (the OpenAPI corpus at 16), and the
/// limit is what keeps parsing linear: libyaml's work grows with the square of the depth. It is below
/// the parsers' own limits (128), so that this check, with its message, is the one that fires.
pub const MAX_DEPTH: usize = 100;

/// Why a text is not a usable document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocError {
    /// Nested deeper than `MAX_DEPTH`.
    TooDeep(String),
    /// Not JSON or YAML.
    Invalid(String),
}

impl fmt::Display for DocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocError::TooDeep(m) | DocError::Invalid(m) => f.write_str(m),
        }
    }
}

impl From<DocError> for String {
    fn from(e: DocError) -> String {
        e.to_string()
    }
}

/// Parses JSON, or YAML when the text is not JSON. YAML's non-string keys (`200:` response codes) become
/// strings, merge keys (`<<`) are applied, and tags are dropped (their values are kept).
pub fn parse(text: &str) -> Result<Value, DocError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        match json::parse(trimmed) {
            Ok(v) => return Ok(v),
            Err(json::Failure::Refused(e)) => return Err(e),
            Err(json::Failure::Syntax) => {}
        }
    }
    // Before the YAML parser, whose time grows with the square of the depth.
    nesting::check(trimmed, MAX_DEPTH).map_err(DocError::TooDeep)?;
    yaml::parse(trimmed)
}

/// RFC 9110 `tchar`: the bytes of a header name.
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Standard base64 with padding (RFC 4648 §4): HTTP Basic credentials, MCP's encoded header values.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The JSON type name of a value, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// At most `max` bytes of `s`, cut on a character boundary, with a marker when cut. Used for every body
/// that reaches a log line or a prompt.
pub fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…[truncated, {} bytes in all]", &s[..end], s.len()))
}

/// Where `needle` first occurs in `hay`. A model's reply is read for short markers (`Action:`,
/// `\nObservation:`, a think block's close) several times per turn; for such needles a scan for the
/// first byte costs less than `str::find`, whose two-way searcher is set up anew on every call. The
/// scan is `memchr`'s, a word at a time even in the size-optimized .wasm (a byte loop there cost ~7,000
/// instructions per request). A match is on a character boundary: a needle starts with a UTF-8 lead
/// byte, which no continuation byte equals.
pub fn find_str(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let Some(&first) = n.first() else { return Some(0) };
    let last_start = h.len().checked_sub(n.len())?;
    let mut at = 0;
    while at <= last_start {
        let i = memchr::memchr(first, &h[at..=last_start])?;
        if h[at + i..].starts_with(n) {
            return Some(at + i);
        }
        at += i + 1;
    }
    None
}

/// `text` escaped as the inside of a JSON string.
pub fn json_string_contents(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// `%XX` escapes decoded (as in URI fragments holding JSON pointers); invalid escapes kept as they are.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn find_str_finds_what_str_find_finds() {
        let hays = [
            "",
            "a",
            "Action: x",
            "xx\nObservation: y\nObservation:",
            "ééAction:é",
            "ActioAction:",
            "aaab",
            "</think>",
        ];
        let needles = ["", "a", "Action:", "\nObservation:", "é", "Action:é", "aab", "</think>", "zz"];
        for h in hays {
            for n in needles {
                assert_eq!(find_str(h, n), h.find(n), "{h:?} {n:?}");
            }
        }
    }

    #[test]
    fn yaml_integer_keys_become_strings() {
        let v = parse("responses:\n  200:\n    description: ok\n").unwrap();
        assert_eq!(v, json!({"responses": {"200": {"description": "ok"}}}));
    }

    #[test]
    fn json_and_yaml_agree_and_keep_order() {
        let v = parse("{\"b\": 1, \"a\": [true, null]}").unwrap();
        let y = parse("b: 1\na: [true, null]\n").unwrap();
        assert_eq!(v, y);
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "a"]);
    }

    #[test]
    fn duplicate_keys_are_refused_in_json_as_in_yaml() {
        let e = parse("{\"a\": 1, \"b\": {\"c\": 1,\n \"c\": 2}}").unwrap_err();
        assert_eq!(e, DocError::Invalid("not valid JSON: duplicate key 'c' in b at line 2 column 4".into()));
        let e = parse("[{\"x\": 1}, {\"y\": [{\"x\": 1, \"x\": 1}]}]").unwrap_err();
        assert_eq!(e.to_string(), "not valid JSON: duplicate key 'x' in [1].y[0] at line 1 column 30");
        let e = parse("{\"x\": 1, \"x\": 1}").unwrap_err();
        assert_eq!(e.to_string(), "not valid JSON: duplicate key 'x' at line 1 column 12");
        let e = parse("a: 1\nb: {c: 1, c: 2}\n").unwrap_err().to_string();
        assert_eq!(e, "not valid JSON or YAML: b: duplicate entry with key \"c\" at line 2 column 4");
        let long = "k".repeat(1000);
        let e = parse(&format!("{{\"{long}\": 1, \"{long}\": 2}}")).unwrap_err().to_string();
        assert!(e.starts_with("not valid JSON: duplicate key 'kkkk") && e.len() < 200, "{e}");
    }

    #[test]
    fn merge_keys_are_applied() {
        let v = parse("base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n").unwrap();
        assert_eq!(v["derived"], json!({"x": 1, "y": 2}));
    }

    #[test]
    fn bad_text_is_an_error() {
        assert!(parse("a: [1, 2").unwrap_err().to_string().contains("not valid JSON or YAML"));
    }

    fn refusal(text: &str) -> String {
        match parse(text) {
            Err(DocError::TooDeep(m)) => m,
            other => panic!("{}: {other:?}", truncate(text, 40)),
        }
    }

    #[test]
    fn depth_bombs_are_refused_before_the_yaml_parser() {
        // Once the YAML parser saw them, the flow-style ones took 38 to 77 s natively.
        let n = 100_000;
        let cases = [
            (format!("{}{}", "[".repeat(n), "]".repeat(n)), "at line 1 column 101"),
            (format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)), "at line 1 column 501"),
            (format!("a: {}{}", "[".repeat(n), "]".repeat(n)), "at line 1 column 103"),
            (format!("a: {}b{}", "{a: ".repeat(n), "}".repeat(n)), "at line 1 column 400"),
            (format!("{}x\n", "- ".repeat(n)), "at line 1 column 201"),
            (format!("x: [{}", "[a, ".repeat(n)), "at line 1 column 397"),
        ];
        for (text, at) in cases {
            assert_eq!(refusal(&text), format!("nested deeper than {MAX_DEPTH} levels {at}"));
        }
    }

    #[test]
    fn deep_and_long_flow_text_is_refused_before_the_yaml_parser() {
        // Within the depth limit, but 0.6 s of the YAML parser's time per MB (natively).
        let up_and_down = format!("{}]", format!("{}{},", "[".repeat(98), "]".repeat(98)).repeat(2000));
        let e = refusal(&format!("a: [{up_and_down}"));
        assert!(e.starts_with("too many [ ] and { } levels for a text this long at line 1 column"), "{e}");
        // A large JSON document that is only YAML (a comment) stays far from the bound.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/openapi-corpus/deepl-full.yaml");
        let spec = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let text = format!("{}\n# a comment makes it YAML", serde_json::to_string_pretty(&spec).unwrap());
        assert_eq!(parse(&text).unwrap(), spec);
    }

    /// `depth` collections, each the only entry of its parent, in every style.
    fn styles(depth: usize) -> Vec<String> {
        let block: String = (0..depth).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
        vec![
            format!("{}1{}", "[".repeat(depth), "]".repeat(depth)),
            format!("{}1{}", "{\"a\": ".repeat(depth), "}".repeat(depth)),
            format!("{}x{}", "{a: ".repeat(depth), "}".repeat(depth)),
            format!("{}x\n", "- ".repeat(depth)),
            format!("{block}{}x\n", " ".repeat(depth)),
            indentless(depth),
        ]
    }

    /// `k0:\n- k1:\n  - k2:…`: sequences at their parent key's column, which libyaml does not indent.
    /// (Also the YAML reader's differential test's.)
    pub(super) fn indentless(depth: usize) -> String {
        let mut text = String::from("k0:");
        let mut level = 1;
        while level + 2 <= depth {
            text.push_str(&format!("\n{}- k{level}:", " ".repeat(level - 1)));
            level += 2;
        }
        if level < depth {
            text.push_str(&format!("\n{}- x\n", " ".repeat(level - 1)));
        } else {
            text.push_str(" x\n");
        }
        text
    }

    #[test]
    fn the_depth_limit_is_the_same_in_every_style() {
        for text in styles(MAX_DEPTH) {
            assert!(parse(&text).is_ok(), "{}", truncate(&text, 60));
        }
        for text in styles(MAX_DEPTH + 1) {
            assert!(refusal(&text).starts_with("nested deeper than 100 levels"), "{}", truncate(&text, 60));
        }
        // Past yaml_serde's own limit too.
        assert!(refusal(&styles(200)[5]).starts_with("nested deeper than 100 levels"));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("%7Bb%7D/%e5%8c%97"), "{b}/北");
        assert_eq!(percent_decode("50%"), "50%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        let s = "天气".repeat(10);
        let t = truncate(&s, 4);
        assert!(t.starts_with("天…"));
        assert!(t.contains("60 bytes"));
        assert_eq!(truncate("short", 10), "short");
    }
}
