//! cel-spec's conformance cases for the call rules' CEL subset (tests/data/cel_conformance.json, made
//! by scripts/cel_conformance.py from github.com/google/cel-spec tests/simple/testdata). A case whose
//! expression uses what the subset refuses at load (bytes, `matches`, `type()`, timestamps, qualified
//! names, …) is skipped and counted by reason; every other case must give cel-spec's value or error,
//! except the deviations listed in `KNOWN`, each with why.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

use api_agent::policy::eval::Val;
use api_agent::policy::Program;
use serde_json::Value;
use std::collections::BTreeMap;

/// Cases whose result the subset knowingly differs on: (file/section/name, why).
const KNOWN: &[(&str, &str)] = &[];

fn same(got: &Val<'_>, want: &Value) -> bool {
    let (kind, w) = want.as_object().and_then(|o| o.iter().next()).unwrap();
    match (kind.as_str(), got) {
        ("int", Val::Int(i)) => w.as_i64() == Some(*i),
        ("uint", Val::Uint(u)) => w.as_u64() == Some(*u),
        ("double", Val::Double(d)) => match w.as_str() {
            Some("nan") => d.is_nan(),
            Some("inf") => *d == f64::INFINITY,
            Some("-inf") => *d == f64::NEG_INFINITY,
            _ => w.as_f64() == Some(*d),
        },
        ("string", Val::Str(s)) => w.as_str() == Some(s.as_ref()),
        ("bool", Val::Bool(b)) => w.as_bool() == Some(*b),
        ("null", Val::Null) => true,
        ("list", v) => match (v, w.as_array()) {
            (Val::List(items), Some(ws)) => items.len() == ws.len() && items.iter().zip(ws).all(|(g, w)| same(g, w)),
            _ => false,
        },
        _ => false,
    }
}

#[test]
fn the_subset_passes_cel_spec_conformance_cases() {
    let data: Value = serde_json::from_str(include_str!("data/cel_conformance.json")).unwrap();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    for (why, n) in data["skipped"].as_object().unwrap() {
        skipped.insert(format!("by the script: {why}"), n.as_u64().unwrap() as usize);
    }
    let (mut passed, mut failed) = (0, Vec::new());
    for case in data["cases"].as_array().unwrap() {
        let id = format!(
            "{}/{}/{}",
            case["file"].as_str().unwrap(),
            case["section"].as_str().unwrap(),
            case["name"].as_str().unwrap()
        );
        let expr = case["expr"].as_str().unwrap();
        let want = &case["want"];
        let program = match Program::compile(expr, &[]) {
            Ok(p) => p,
            Err(e) => {
                // Refused at load: the subset says so (docs/policy.md), never a wrong answer.
                let why = e.msg.split(['\'', '(']).next().unwrap_or("").trim().to_string();
                *skipped.entry(format!("refused at load: {why}")).or_default() += 1;
                continue;
            }
        };
        let ok = match (program.eval(&[]), want) {
            (Err(_), Value::String(s)) if s == "error" => true,
            (Ok(v), w) if w.is_object() => same(&v, w),
            _ => false,
        };
        if ok {
            passed += 1;
        } else if !KNOWN.iter().any(|(k, _)| *k == id) {
            failed.push(format!("{id}: {expr}"));
        }
    }
    eprintln!("cel-spec conformance: {passed} passed, skipped: {skipped:#?}");
    assert!(passed >= 300, "{passed} passed");
    assert!(failed.is_empty(), "{} failed:\n{}", failed.len(), failed.join("\n"));
}
