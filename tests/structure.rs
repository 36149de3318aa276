//! The shape of src/ (issue 18: no import circles; files a reader can hold in mind). Every
//! `src/**/*.rs` file is read, and these fail, naming what they found:
//! - `files_are_short`: a file over `MAX_LINES` lines;
//! - `no_import_circles`: a circle in the import graph, at two levels: between the top-level modules of
//!   src/ (config, doc, openapi, …), and between the files and subfolders of each folder (agent/convo,
//!   agent/native, …), each circle with the import line of every step;
//! - `imports_follow_the_rules`: an import of a top-level module that `ONLY_IMPORTED_BY` keeps from the
//!   importer;
//! - `layers_point_down`, `agent_rooms_point_down`: an import that goes up or sideways in `LAYERS` (the
//!   top-level modules) or `AGENT_ROOMS` (the rooms of src/agent/ and the files beside them), or a
//!   module neither names.
//!
//! A module imports another where its code names it: `use crate::…`, `use super::…`, `use self::…`,
//! `use child::…`, and the same paths written in code (`crate::tz::Zone::parse(…)`). Comments, doc
//! comments and the contents of string and char literals are not code.
//!
//! Inside a folder, its own file (`agent/mod.rs`, or `doc.rs` for doc/) declares, wires and re-exports
//! its children: its imports of them make no circle. A name a child takes from it (`use super::Call`)
//! counts where that file takes it from: its own item, or the sibling it re-exports (`pub use
//! protocol::Call` → agent/protocol), so that a circle through a re-export is still seen.
//!
//! Test code (`#[cfg(test)]` items such as `mod tests { … }`, `tests.rs` files and other modules
//! declared under `#[cfg(test)]`) is not part of the graph. src/bin/ is another crate (it reaches the
//! library as `api_agent::…`): only its length is checked.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // test code

#[path = "structure/code.rs"]
mod code;
#[path = "structure/graph.rs"]
mod graph;

use code::{code_only, rust_files, without_tests};
use graph::{circles, imports, Import};
use std::fs;
use std::path::Path;

/// The longest a file of src/ may be.
const MAX_LINES: usize = 600;

/// Top-level modules of src/ that only the listed top-level modules may import (a module's own files
/// always may). One line per rule.
const ONLY_IMPORTED_BY: &[(&str, &[&str])] = &[
    // The hosts: the Proxy-Wasm filter and the Envoy dynamic module. Nothing depends on either.
    ("filter", &[]),
    ("dm", &[]),
    // What the two hosts share.
    ("host", &["filter", "dm"]),
];

/// The layers of src/, lowest first: a top-level module may import only modules of lower layers
/// (and its own files). docs/architecture.md draws the same table; a module missing here fails.
const LAYERS: &[&[&str]] = &[
    // Leaves: text and JSON helpers, secrets masking, time zones, where calls go, a small map.
    &["doc", "redact", "tz", "upstream", "vec_map"],
    // Formats: JSON Schema, the OpenAI wire, OpenAPI documents, the CEL of call rules.
    &["schema", "openai", "openapi", "policy"],
    // The tool registry (OpenAPI and MCP tools), and Anthropic Messages (read into and written from
    // the OpenAI wire); then the prompts built from the registry.
    &["tools", "anthropic"],
    &["prompt"],
    // The plugin configuration, validated once.
    &["config"],
    // The sans-IO agent loop.
    &["agent"],
    // What both hosts decide.
    &["host"],
    // The hosts and the command-line tool.
    &["filter", "dm", "cli"],
];

/// The rooms of src/agent/ and the files beside them, lowest first: each may import only those of
/// lower layers (and its own files), so a reader follows one request down, room by room, and the
/// rooms never import in a circle. docs/architecture.md draws the same table; a child of src/agent/
/// missing here fails.
const AGENT_ROOMS: &[&[&str]] = &[
    // What every room shares: the seam (errors, the protocol of events, commands and bodies), the MCP
    // sessions the instance keeps, and the callouts' ids and backoff.
    &["error", "mcp"],
    &["protocol"],
    &["calls"],
    // What the request did (report, steps, spans), for those who watch it.
    &["record"],
    // A turn's tool calls.
    &["tools"],
    // An LLM turn, in ReAct or native mode, and JSON mode's formatting call.
    &["turn"],
    // The client's answer, in the format of its API.
    &["answer"],
    // The loop: the only place the state changes.
    &["machine"],
];

/// A module: its path below the crate (`["agent", "convo"]`; the crate root is `[]`).
type Module = Vec<String>;

struct Source {
    /// `src/agent/convo.rs`.
    file: String,
    module: Module,
    lines: usize,
    /// The text with comments, string contents and test items blanked out (line breaks kept).
    code: String,
    /// Names of child modules declared under `#[cfg(test)]` (`mod tests;`).
    test_children: Vec<String>,
    /// Not part of the graph: src/bin/, or test code.
    exempt: bool,
}

#[test]
fn files_are_short() {
    let findings: Vec<String> = sources()
        .iter()
        .filter(|s| s.lines > MAX_LINES)
        .map(|s| format!("{}: {} lines (at most {MAX_LINES})", s.file, s.lines))
        .collect();
    assert!(findings.is_empty(), "files over {MAX_LINES} lines:\n{}", findings.join("\n"));
}

#[test]
fn no_import_circles() {
    let findings = circles(&imports(&sources()));
    assert!(findings.is_empty(), "import circles:\n{}", findings.join("\n"));
}

#[test]
fn imports_follow_the_rules() {
    let findings = against_the_rules(&imports(&sources()));
    assert!(findings.is_empty(), "imports against the rules:\n{}", findings.join("\n"));
}

#[test]
fn layers_point_down() {
    let findings = against_the_layers(&imports(&sources()), &modules_in(&[]), &TOP);
    assert!(findings.is_empty(), "imports against the layers:\n{}", findings.join("\n"));
}

#[test]
fn agent_rooms_point_down() {
    let findings = against_the_layers(&imports(&sources()), &modules_in(&["agent"]), &ROOMS);
    assert!(findings.is_empty(), "imports against the agent's rooms:\n{}", findings.join("\n"));
}

/// A layer table and the folder whose children it orders (`[]`: the top-level modules of src/).
struct Table {
    name: &'static str,
    layers: &'static [&'static [&'static str]],
    folder: &'static [&'static str],
}

const TOP: Table = Table { name: "LAYERS", layers: LAYERS, folder: &[] };
const ROOMS: Table = Table { name: "AGENT_ROOMS", layers: AGENT_ROOMS, folder: &["agent"] };

impl Table {
    fn layer_of(&self, module: &str) -> Option<usize> {
        self.layers.iter().position(|layer| layer.contains(&module))
    }

    /// The child of the folder that `module` is in (`agent/turn/convo` → `turn` for agent/).
    fn child<'m>(&self, module: &'m [String]) -> Option<&'m String> {
        let inside = module.len() > self.folder.len() && self.folder.iter().zip(module).all(|(f, m)| f == m);
        inside.then(|| &module[self.folder.len()])
    }

    fn path(&self, child: &str) -> String {
        self.folder.iter().map(|f| format!("{f}/")).collect::<String>() + child
    }
}

/// The children of a folder of src/ that are part of the graph (files and folders; for `[]`, the
/// top-level modules, not the crate root or src/bin/).
fn modules_in(folder: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = sources()
        .iter()
        .filter(|s| !s.exempt && s.module.len() > folder.len())
        .filter(|s| folder.iter().zip(&s.module).all(|(f, m)| f == m))
        .map(|s| s.module[folder.len()].clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Imports that go to the same or a higher layer of `table`, and children no layer names.
fn against_the_layers(imports: &[Import], modules: &[String], table: &Table) -> Vec<String> {
    let mut findings: Vec<String> = modules
        .iter()
        .filter(|m| table.layer_of(m).is_none())
        .map(|m| format!("src/{}: in no layer of {} (tests/structure.rs)", table.path(m), table.name))
        .collect();
    for i in imports {
        let (Some(from), Some(to)) = (table.child(&i.from), table.child(&i.to)) else {
            continue;
        };
        if from == to {
            continue;
        }
        if let (Some(a), Some(b)) = (table.layer_of(from), table.layer_of(to)) {
            if b >= a {
                findings
                    .push(format!("{}: `{}`: `{from}` (layer {a}) may not import `{to}` (layer {b})", i.at, i.path));
            }
        }
    }
    findings
}

#[test]
fn the_layers_name_each_upward_import() {
    let imports = [
        import(&["config", "rules"], &["agent"]),
        import(&["agent", "convo"], &["config"]),
        import(&["filter"], &["dm"]),
    ];
    let modules = ["agent".to_string(), "config".to_string(), "newcomer".to_string()];
    assert_eq!(
        against_the_layers(&imports, &modules, &TOP),
        [
            "src/newcomer: in no layer of LAYERS (tests/structure.rs)",
            "src/config/rules.rs:1: `crate::agent`: `config` (layer 4) may not import `agent` (layer 5)",
            "src/filter.rs:1: `crate::dm`: `filter` (layer 7) may not import `dm` (layer 7)",
        ]
    );
}

#[test]
fn the_rooms_name_each_upward_import() {
    let imports = [
        import(&["agent", "turn", "convo"], &["agent", "tools", "work"]),
        import(&["agent", "tools", "tool_phase"], &["agent", "turn", "convo"]),
        import(&["agent", "record", "spans"], &["agent", "record", "report"]),
        import(&["agent", "machine"], &["config"]),
        import(&["host", "run"], &["agent", "turn"]),
    ];
    let modules = ["tools".to_string(), "turn".to_string(), "attic".to_string()];
    assert_eq!(
        against_the_layers(&imports, &modules, &ROOMS),
        [
            "src/agent/attic: in no layer of AGENT_ROOMS (tests/structure.rs)",
            "src/agent/tools/tool_phase.rs:1: `crate::agent::turn::convo`: `tools` (layer 4) may not import `turn` (layer 5)",
        ]
    );
}

/// The imports `ONLY_IMPORTED_BY` forbids, each named.
fn against_the_rules(imports: &[Import]) -> Vec<String> {
    let mut findings = Vec::new();
    for i in imports {
        let (Some(from), Some(to)) = (i.from.first(), i.to.first()) else {
            continue;
        };
        if from == to {
            continue;
        }
        for (module, importers) in ONLY_IMPORTED_BY {
            if to == module && !importers.contains(&from.as_str()) {
                let rule = match importers {
                    [] => format!("nothing outside `{module}` may import it"),
                    _ => format!("only {} may import `{module}`", importers.join(", ")),
                };
                findings.push(format!("{}: `{}`: {rule}", i.at, i.path));
            }
        }
    }
    findings
}

#[test]
fn the_rules_name_each_forbidden_import() {
    let imports = [
        import(&["agent", "convo"], &["filter", "http"]),
        import(&["filter", "http"], &["filter"]),
        import(&["dm", "stream"], &["host"]),
        import(&["cli"], &["host", "tools"]),
    ];
    assert_eq!(
        against_the_rules(&imports),
        [
            "src/agent/convo.rs:1: `crate::filter::http`: nothing outside `filter` may import it",
            "src/cli.rs:1: `crate::host::tools`: only filter, dm may import `host`",
        ]
    );
}

/// An import from module `from` of module `to`, as the tests of the rules write them.
fn import(from: &[&str], to: &[&str]) -> Import {
    Import {
        from: from.iter().map(|s| s.to_string()).collect(),
        to: to.iter().map(|s| s.to_string()).collect(),
        at: format!("src/{}.rs:1", from.join("/")),
        path: format!("crate::{}", to.join("::")),
    }
}

/// Every `.rs` file of src/, read and cleaned.
fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut out: Vec<Source> = files
        .iter()
        .map(|path| {
            let rel = path.strip_prefix(&root).unwrap();
            let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            let text = fs::read_to_string(path).unwrap();
            let (code, test_children) = without_tests(&code_only(&text));
            let mut module: Module = parts.iter().map(|p| p.trim_end_matches(".rs").to_string()).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            Source {
                file: format!("src/{}", parts.join("/")),
                exempt: parts[0] == "bin" || parts.last().is_some_and(|p| p == "tests.rs"),
                module,
                lines: text.lines().count(),
                code,
                test_children,
            }
        })
        .collect();
    // A module declared under `#[cfg(test)]` is test code, and so is everything below it.
    let test_modules: Vec<Module> =
        out.iter().flat_map(|s| s.test_children.iter().map(|c| [s.module.clone(), vec![c.clone()]].concat())).collect();
    for s in &mut out {
        if test_modules.iter().any(|t| s.module.starts_with(t)) {
            s.exempt = true;
        }
    }
    out
}
