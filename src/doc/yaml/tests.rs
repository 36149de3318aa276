//! The one-pass reader against the route it replaced (parse into `yaml_serde::Value`, `apply_merge`,
//! convert), kept here as the oracle: both must give the same value, with keys in the same order, or the
//! same error, on every document of the repository and on texts made to reach each corner.

use super::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

/// The replaced route, as it was.
fn old(text: &str) -> Result<Value, DocError> {
    let mut yaml: yaml_serde::Value = yaml_serde::from_str(text).map_err(parser_error)?;
    yaml.apply_merge().map_err(|e| DocError::Invalid(format!("YAML merge key: {e}")))?;
    from_yaml(yaml, 1)
}

fn from_yaml(v: yaml_serde::Value, depth: usize) -> Result<Value, DocError> {
    use yaml_serde::Value as Y;
    if matches!(v, Y::Sequence(_) | Y::Mapping(_)) && depth > MAX_DEPTH {
        return Err(DocError::TooDeep(format!("nested deeper than {MAX_DEPTH} levels")));
    }
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => yaml_number(&n),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => {
            Value::Array(items.into_iter().map(|i| from_yaml(i, depth + 1)).collect::<Result<_, _>>()?)
        }
        Y::Mapping(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m {
                out.insert(yaml_key(k)?, from_yaml(v, depth + 1)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => from_yaml(t.value, depth)?,
    })
}

fn yaml_number(n: &yaml_serde::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Number(i.into())
    } else if let Some(u) = n.as_u64() {
        Value::Number(u.into())
    } else {
        n.as_f64().and_then(Number::from_f64).map(Value::Number).unwrap_or(Value::Null)
    }
}

fn yaml_key(k: yaml_serde::Value) -> Result<String, DocError> {
    use yaml_serde::Value as Y;
    match k {
        Y::String(s) => Ok(s),
        Y::Number(n) => Ok(n.to_string()),
        Y::Bool(b) => Ok(b.to_string()),
        Y::Null => Ok("null".into()),
        Y::Tagged(t) => yaml_key(t.value),
        Y::Sequence(_) | Y::Mapping(_) => Err(DocError::Invalid("a YAML mapping key that is a list or a map".into())),
    }
}

/// Where the two routes part, if they do; values compared as JSON text (`Value`'s equality ignores key
/// order).
fn differs(text: &str) -> Option<String> {
    let new = parse(text).map(|v| v.to_string());
    let old = old(text).map(|v| v.to_string());
    (new != old).then(|| format!("{}\n new: {new:?}\n old: {old:?}", super::super::truncate(text, 300)))
}

fn assert_same(texts: impl IntoIterator<Item = String>) {
    let mut n = 0;
    let failures: Vec<String> = texts.into_iter().inspect(|_| n += 1).filter_map(|t| differs(&t)).collect();
    assert!(failures.is_empty(), "{} of {n} differ:\n{}", failures.len(), failures.join("\n"));
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && !name.starts_with('.') && !["target", "node_modules"].contains(&name.as_str()) {
            files(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

/// Every YAML and JSON file of the repository and of ../shared, each document of a multi-document one
/// also alone, the ```yaml blocks of the Markdown files and the raw strings of the Rust sources.
fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in ["tests", "src", "docs", "deploy", "examples", "benches", "../shared"] {
        files(&root.join(dir), &mut paths);
    }
    let top = std::fs::read_dir(root).into_iter().flatten().flatten().map(|e| e.path());
    paths.extend(top.filter(|p| p.is_file()));
    let block = regex_lite::Regex::new(r"(?s)```ya?ml\n(.*?)```").unwrap();
    let raw = regex_lite::Regex::new(r##"(?s)r#"(.*?)"#"##).unwrap();
    let mut texts = Vec::new();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
            "yaml" | "yml" | "json" => {
                texts.extend(text.split("\n---").map(str::to_string).filter(|d| d.len() < text.len()));
                texts.push(text);
            }
            "md" => texts.extend(block.captures_iter(&text).map(|c| c[1].to_string())),
            "rs" => texts.extend(raw.captures_iter(&text).map(|c| c[1].to_string())),
            _ => {}
        }
    }
    texts
}

#[test]
fn the_repository_documents_read_as_before() {
    let texts = corpus();
    let yaml = texts.iter().filter(|t| parse(t).is_ok()).count();
    assert!(yaml > 200, "only {yaml} readable texts in {}", texts.len());
    assert_same(texts);
}

const EDGE_CASES: &[&str] = &[
    // Merge keys: a mapping, a list, an alias, overriding, ordering, quoted, tagged, nested.
    "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",
    "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc: {<<: [*a, *b], z: 3}\n",
    "{a: 1, <<: {q: 1}, b: 2, c: 3}\n",
    "{a: 1, b: 2, <<: {a: 9, c: 3}}\n",
    "{<<: {a: 1}}\n",
    "{<<: {}, a: 1}\n",
    "{<<: [], a: 1}\n",
    "'<<': {a: 1}\nb: 2\n",
    "\"<<\": {a: 1}\n",
    "!!str <<: {a: 1}\n",
    "!t <<: {a: 1}\n",
    "base: &b {x: 1}\next: &e {<<: *b, y: 2}\nderived: {<<: *e, z: 3}\n",
    "<<: {<<: 5, a: 1}\n",
    "<<: [{<<: {q: 1}}, {<<: {r: 2}, s: 3}]\nt: 4\n",
    "a: {b: {<<: {c: {<<: {d: 1}}}}}\n",
    "- <<: {a: 1}\n  b: 2\n- [{<<: {c: 3}}]\n",
    "a: !t {<<: {b: 1}}\n",
    "{a: 1, <<: {a: {<<: 5}}}\n",
    "{a: 1, <<: [{b: 1}, {b: {<<: 5}}]}\n",
    "{a: 1, <<: {a: [{? [k]: v}]}}\n",
    "{1: a, <<: {1: b, '1': c}}\n",
    // Merge keys that cannot merge.
    "a: {<<: 5}\n",
    "a: {<<: ~}\n",
    "a: {<<: }\n",
    "a: {<<: !t {b: 1}}\n",
    "a: {<<: [{b: 1}, 5]}\n",
    "a: {<<: [{b: 1}, [c]]}\n",
    "a: {<<: [{b: 1}, !t {c: 1}]}\n",
    "a: {<<: [!t 1, [c]]}\n",
    "[{<<: 1}, {<<: [1]}]\n",
    "{a: {<<: !t {}}, b: {<<: [[]]}}\n",
    "{a: {<<: [[]]}, b: {<<: !t {}}}\n",
    "{? [k]: 1, a: {<<: 1}}\n",
    "a: {<<: 5}\nb: [1, 2\n",
    "a: {<<: 5}\n---\nb: 1\n",
    "a: {<<: 5}\nb: {c: 1, c: 2}\n",
    // Anchors and aliases.
    "a: &x [1, {b: 2}]\nc: *x\nd: [*x, *x]\n",
    "a: &x 1\n? *x\n: 2\n",
    "a: *nowhere\n",
    "a: &x [*x]\n",
    // Keys: numbers, booleans, null, floats, tags, lists and maps.
    "200: ok\n-1: m\n0x10: h\n0o10: o\n010: s\n+5: p\n",
    "{true: a, false: b, True: c}\n",
    "{null: a}\n",
    "{~: a}\n",
    "{: a}\n",
    "{1.5: a, 1e20: b, 1e15: c, 1e16: d, 1.0: e, 0.1: f, -2.5e-7: g, 1e-7: h, 123456789.123: i}\n",
    "{.inf: a, -.inf: b, .nan: c, .NaN: d}\n",
    "{.inf: a, -.Inf: b}\n",
    "{0.0: a, -0.0: b}\n",
    "{-0.0: a, 0.0: b}\n",
    "{1: a, 1.0: b}\n",
    "{1: a, '1': b}\n",
    "{'1': a, 1: b}\n",
    "{true: a, 'true': b, null: c, 'null': d}\n",
    "{1: a, 0x1: b}\n",
    "{!a x: 1, !<!a> x: 2}\n",
    "{!a x: 1, !b x: 2}\n",
    "{!a x: 1, x: 2}\n",
    "{!a 1: 1}\n",
    "{? [a]: 1}\n",
    "{? {a: 1}: 1}\n",
    "{? !t [a]: 1}\n",
    "{? [a, b]: 1, ? [a, b]: 2}\n",
    "{? [a, b]: 1, ? [b, a]: 2}\n",
    "{? {a: 1, b: 2}: x, ? {b: 2, a: 1}: y}\n",
    "{? {a: 1, b: 2}: x, ? {a: 1, b: 3}: y}\n",
    "{? {a: 1, a: 2}: x}\n",
    "{? [{a: 1}, [b]]: x, ? [{a: 1}, [b]]: y}\n",
    "{? ['1']: x, ? [1]: y}\n",
    "{? [0.0]: x, ? [-0.0]: y}\n",
    "{\"a\\u0000b\": 1, \"a\\tb\": 2, \"a\\tb\": 3}\n",
    "{\"é\\\"\": 1, \"é\\\"\": 2}\n",
    "{a: 1, a: 2}\n",
    "{1: a, 1: b}\n",
    "{true: a, true: b}\n",
    "{~: a, null: b}\n",
    "{1.5: a, 1.50: b}\n",
    "{.nan: a, .NAN: b}\n",
    "{!t a: 1, !t a: 2}\n",
    // Scalars: huge integers, floats, tags, block scalars.
    "a: 9223372036854775807\nb: 9223372036854775808\nc: 18446744073709551615\nd: -9223372036854775808\n",
    "a: 18446744073709551616\n",
    "a: -9223372036854775809\n",
    "a: 340282366920938463463374607431768211456\n",
    "a: -170141183460469231731687303715884105729\n",
    "? 18446744073709551616\n: a\n",
    "a: 1e400\nb: -1e400\nc: .inf\nd: .nan\ne: 1.5\nf: 1e20\ng: -0.0\n",
    "a: !!str 12\nb: !x 5\nc: !x {d: 1}\nd: !!int 7\ne: !!float 1\nf: !!bool true\ng: !!null ~\n",
    "a: !!int x\n",
    "a: !x\n",
    "a: !!binary aGVsbG8=\nb: !!map {c: 1}\nc: !!seq [1]\n",
    "a: |\n  line 1\n  line 2\nb: >-\n  folded\n  text\n\nc: |+\n  kept\n\n",
    "a: 'single' \nb: \"double\\n\"\nc: plain text\n",
    // Documents: empty, comments only, markers, several.
    "",
    "# only a comment\n",
    "---\n",
    "--- 1\n",
    "~\n",
    "a: 1\n...\n",
    "a: 1\n---\nb: 2\n",
    "---\na: 1\n---\n",
    "a: [1, 2\n",
    "a: b: c\n",
    "\t- a\n",
    "- a\nb: 1\n",
];

#[test]
fn edge_cases_read_as_before() {
    assert_same(EDGE_CASES.iter().map(|t| t.to_string()));
}

/// Mappings on both sides of the size at which keys get an index, with duplicates and merges.
#[test]
fn large_mappings_read_as_before() {
    let keys = |n: usize, prefix: &str| -> Vec<String> { (0..n).map(|i| format!("{prefix}{i}: {i}")).collect() };
    let mut texts = Vec::new();
    for n in 5..=12 {
        let own = keys(n, "k");
        for dup in ["k0: x", "k4: x", "0.0: a, -0.0: b", "1: a, '1': b, 1: c"] {
            texts.push(format!("{{{}, {dup}}}\n", own.join(", ")));
        }
        for at in [0, n / 2, n] {
            let mut entries = own.clone();
            entries.insert(at, format!("<<: {{{}}}", keys(n + 3, "k").join(", ")));
            texts.push(format!("{{{}}}\n", entries.join(", ")));
            entries[at] = format!("<<: [{{{}}}, {{{}}}]", keys(3, "m").join(", "), keys(n, "m").join(", "));
            texts.push(format!("{{{}}}\n", entries.join(", ")));
            entries[at] = format!("<<: {{{}, k1: x}}", keys(n, "m").join(", "));
            texts.push(format!("{{{}}}\n", entries.join(", ")));
        }
    }
    assert_same(texts);
}

#[test]
fn depth_reads_as_before() {
    let mut texts = Vec::new();
    for n in (95..=105).chain(125..=131) {
        let (open, close) = ("[".repeat(n), "]".repeat(n));
        texts.push(format!("{open}1{close}"));
        texts.push(format!("{}x{}", "{a: ".repeat(n), "}".repeat(n)));
        texts.push(crate::doc::tests::indentless(n));
        // Merged entries move up a level: the merged mapping's nesting is counted without the `<<`'s.
        texts.push(format!("<<: {{a: {open}{close}}}\n"));
        texts.push(format!("<<: [{{a: {open}{close}}}]\n"));
        texts.push(format!("x: {{<<: {{a: {open}{close}}}}}\n"));
        texts.push(format!("x: &b {{a: {open}{close}}}\ny: {{<<: *b}}\n"));
        // A deep value that the merge drops, one it keeps as a plain `<<`, one under a bad merge.
        texts.push(format!("{{a: 1, <<: {{a: {open}{close}}}}}\n"));
        texts.push(format!("<<: {{<<: {{a: {open}{close}}}}}\n"));
        texts.push(format!("{{a: {open}{close}, b: {{<<: 1}}}}\n"));
        texts.push(format!("{{? [k]: 1, a: {open}{close}}}\n"));
        texts.push(format!("{{a: {open}{close}, ? [k]: 1}}\n"));
        texts.push(format!("- !t {open}{close}\n"));
    }
    assert_same(texts);
}

#[test]
fn float_keys_read_as_yaml_serde_displayed_them() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut floats = vec![0.0, -0.0, 1.0, 1e15, 1e16, 1e-7, f64::MAX, f64::MIN_POSITIVE, 5e-324, f64::NAN];
    floats.extend([f64::INFINITY, f64::NEG_INFINITY, 0.1 + 0.2, 123456789.125, -2.5e-300]);
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        floats.push(f64::from_bits(x));
    }
    for f in floats {
        assert_eq!(Key::float(f).text, Some(yaml_serde::Number::from(f).to_string()), "{f:e}");
    }
}

const SCALARS: &[&str] = &[
    "1",
    "-1",
    "0",
    "1.5",
    "-0.0",
    "0.0",
    "1e20",
    "1e16",
    ".inf",
    "-.inf",
    ".nan",
    "true",
    "null",
    "~",
    "x",
    "y",
    "'1'",
    "\"true\"",
    "0x10",
    "010",
    "18446744073709551615",
    "!!str 12",
    "!!int 7",
    "''",
    "<<",
    "'<<'",
    "!t x",
    "!u 1",
    "!!float 1",
    "1.0",
];

fn scalar() -> impl Strategy<Value = String> {
    prop::sample::select(SCALARS).prop_map(str::to_string)
}

/// An alias of one of the document's anchored nodes, or now and then of an anchor inside a node.
fn alias() -> impl Strategy<Value = String> {
    prop::sample::select(&["*a0 ", "*a1 ", "*a2 ", "*a0 ", "*a1 ", "*a2 ", "*b "][..]).prop_map(str::to_string)
}

/// Flow-style nodes made of `leaf`: lists, maps (with `<<` keys often), tags, anchors.
fn tree(leaf: BoxedStrategy<String>) -> impl Strategy<Value = String> {
    leaf.prop_recursive(4, 40, 4, |inner| {
        let key = prop_oneof![
            6 => scalar(),
            3 => Just("<<".to_string()),
            1 => alias(),
            1 => inner.clone().prop_map(|k| format!("? {k} ")),
        ];
        prop_oneof![
            1 => prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(", "))),
            2 => prop::collection::vec((key, inner.clone()), 0..4).prop_map(|entries| {
                let entries: Vec<String> = entries.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", entries.join(", "))
            }),
            1 => inner.clone().prop_map(|v| if v.starts_with(['&', '*']) { v } else { format!("&b {v}") }),
            1 => inner.clone().prop_map(|v| if v.starts_with(['&', '*', '!']) { v } else { format!("!t {v}") }),
            1 => prop::collection::vec(inner, 0..3).prop_map(|m| format!("{{<<: [{}], k: 1}}", m.join(", "))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
    ))]

    /// Anchored nodes first, so that aliases have something to name.
    #[test]
    fn generated_documents_read_as_before(
        anchored in prop::collection::vec(tree(scalar().boxed()), 3),
        doc in tree(prop_oneof![3 => scalar(), 1 => alias()].boxed()),
    ) {
        let anchored = anchored.iter().map(|n| n.trim_start_matches("&b "));
        let defs: String = anchored.enumerate().map(|(i, n)| format!("d{i}: &a{i} {n}\n")).collect();
        let text = format!("{defs}doc: {doc}\n");
        let failure = differs(&text);
        prop_assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    }
}
