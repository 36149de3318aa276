//! The wire is typed (issue 32, item 4): what the filter reads and writes is spelled by structs and
//! enums, not assembled with `json!` where a field name typo compiles. `json_macros_stay_few` counts the
//! `json!` invocations in the code of src/ (test code is not counted: `#[cfg(test)]` items, `tests.rs`
//! files and modules declared under `#[cfg(test)]`; comments and string contents are not code) and fails
//! above `MAX_JSON_MACROS`, naming each file's count.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

#[path = "structure/code.rs"]
#[allow(dead_code)] // this test uses only the readers, not the path finder
mod code;

use code::{code_only, rust_files, without_tests};
use std::fs;
use std::path::{Path, PathBuf};

/// The most `json!` the code of src/ may hold ("under 30", issue 32). What remains: the command-line
/// tool's reports (src/cli/, not in the .wasm), JSON Schema documents (src/openapi/, src/config/,
/// src/tools/search/, agent/format.rs) and a few values inside src/agent/.
const MAX_JSON_MACROS: usize = 29;

#[test]
fn json_macros_stay_few() {
    let counts = json_macro_counts();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let listing: Vec<String> = counts.iter().map(|(file, n)| format!("{n:4}  {file}")).collect();
    assert!(
        total <= MAX_JSON_MACROS,
        "{total} `json!` outside tests in src/ (at most {MAX_JSON_MACROS}); type the value instead:\n{}",
        listing.join("\n")
    );
}

#[test]
fn the_count_sees_code_and_skips_tests() {
    let text = "fn a() { json!({\"a\": 1}); }\n// json!(x)\nlet s = \"json!(1)\";\n\
                #[cfg(test)]\nmod tests { fn t() { json!(2); } }\nfn b() { serde_json::json!(3); }\n";
    assert_eq!(count_in(text).0, 2);
    assert_eq!(count_in("#[cfg(test)]\nmod tests;\n").1, vec!["tests".to_string()]);
}

/// `json!` in the code of `text`, and the child modules it declares under `#[cfg(test)]`.
fn count_in(text: &str) -> (usize, Vec<String>) {
    let (code, test_children) = without_tests(&code_only(text));
    let count = code
        .match_indices("json!")
        .filter(|(at, _)| !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .count();
    (count, test_children)
}

/// Each src/ file with `json!` in its code, and how many, most first.
fn json_macro_counts() -> Vec<(String, usize)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found: Vec<(PathBuf, usize, Vec<String>)> = files
        .into_iter()
        .map(|path| {
            let (n, children) = count_in(&fs::read_to_string(&path).unwrap());
            (path, n, children)
        })
        .collect();
    // A module declared under `#[cfg(test)]` is test code: `x.rs` or `x/mod.rs` next to its parent's
    // file, or inside the parent's folder, and everything below it.
    let test_dirs: Vec<PathBuf> = found
        .iter()
        .flat_map(|(path, _, children)| {
            let dir = module_dir(path);
            children.iter().map(move |c| dir.join(c))
        })
        .collect();
    found.retain(|(path, n, _)| {
        let test_file = path.file_name().is_some_and(|f| f == "tests.rs")
            || path.starts_with(root.join("bin"))
            || test_dirs.iter().any(|d| path.starts_with(d) || *path == d.with_extension("rs"));
        *n > 0 && !test_file
    });
    let mut out: Vec<(String, usize)> =
        found.into_iter().map(|(path, n, _)| (path.strip_prefix(&root).unwrap().display().to_string(), n)).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// The folder a file's child modules live in: `a/mod.rs` and `lib.rs` → their folder, `a/b.rs` → `a/b/`.
fn module_dir(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap().to_path_buf();
    match path.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib") => parent,
        Some(stem) => parent.join(stem),
        None => parent,
    }
}
