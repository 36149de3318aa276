//! The JSON Schema validator against the official JSON-Schema-Test-Suite (files in
//! `tests/jsonschema-suite/`, see its README). Every test of every group must pass, except groups whose
//! schema uses a feature the validator refuses by name at compile time (remote references, `$id` below
//! the root, dynamic references, `unevaluated*`): those are counted and must stay few.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

use api_agent::schema::Schema;
use serde_json::Value;
use std::path::Path;

/// Groups this validator answers differently on purpose, with the compile error it gives instead.
/// `"type": null` is not a valid schema (the metaschema wants a type name or a list of them); a
/// configuration that says it is far more likely a typo for `"null"`, so it is refused at load time.
const DEVIATIONS: [(&str, &str); 2] = [
    ("draft7/items.json: single-form items should properly handle null data", "/items/type: must be one of"),
    ("draft7/items.json: array-form items should properly handle null data", "/items/0/type: must be one of"),
];

struct Tally {
    passed: usize,
    failed: Vec<String>,
    unsupported: Vec<String>,
    deviations: usize,
}

fn run_dialect(dir: &str, meta: &str, tally: &mut Tally) -> usize {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jsonschema-suite").join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for file in &files {
        let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let name = format!("{dir}/{}", file.file_name().unwrap().to_string_lossy());
        for g in groups {
            run_group(&name, meta, &g, tally);
        }
    }
    files.len()
}

fn run_group(file: &str, meta: &str, g: &Value, tally: &mut Tally) {
    let mut schema = g["schema"].clone();
    if let Value::Object(m) = &mut schema {
        m.entry("$schema").or_insert_with(|| Value::String(meta.into()));
    }
    let label = format!("{file}: {}", g["description"].as_str().unwrap_or(""));
    let tests = g["tests"].as_array().unwrap();
    let compiled = match Schema::compile(&schema) {
        Ok(s) => s,
        Err(e) if DEVIATIONS.iter().any(|(group, why)| label == *group && e.contains(why)) => {
            tally.deviations += 1;
            return;
        }
        Err(e) if e.contains("not supported") => {
            tally.unsupported.push(format!("{label} ({} tests): {e}", tests.len()));
            return;
        }
        Err(e) => {
            tally.failed.push(format!("{label}: the schema does not compile: {e}"));
            return;
        }
    };
    for t in tests {
        let expected = t["valid"].as_bool().unwrap();
        let got = compiled.validate(&t["data"]).is_ok();
        if got == expected {
            tally.passed += 1;
        } else {
            tally
                .failed
                .push(format!("{label} / {}: expected valid={expected}", t["description"].as_str().unwrap_or("")));
        }
    }
}

#[test]
fn official_test_suite() {
    let mut tally = Tally { passed: 0, failed: Vec::new(), unsupported: Vec::new(), deviations: 0 };
    let files = run_dialect("draft2020-12", "https://json-schema.org/draft/2020-12/schema", &mut tally)
        + run_dialect("draft7", "http://json-schema.org/draft-07/schema#", &mut tally);
    println!("{files} files: {} tests passed, {} groups refused as unsupported", tally.passed, tally.unsupported.len());
    for u in &tally.unsupported {
        println!("  unsupported: {u}");
    }
    assert!(files >= 10 && tally.passed >= 300, "the suite files are missing ({files} files, {} tests)", tally.passed);
    assert!(tally.failed.is_empty(), "{} failures:\n{}", tally.failed.len(), tally.failed.join("\n"));
    // 20 groups today, each using a feature refused by name (remote refs, $id below the root, unevaluated*).
    assert!(tally.unsupported.len() <= 20, "more groups refused than before: {}", tally.unsupported.len());
    assert_eq!(tally.deviations, DEVIATIONS.len(), "a listed deviation no longer occurs");
}
