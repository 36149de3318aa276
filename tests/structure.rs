//! The shape of src/ (issue 18: no import circles; files a reader can hold in mind). Every
//! `src/**/*.rs` file is read, and these fail, naming what they found:
//! - `files_are_short`: a file over `MAX_LINES` lines;
//! - `no_import_circles`: a circle in the import graph, at two levels: between the top-level modules of
//!   src/ (config, doc, openapi, …), and between the files and subfolders of each folder (agent/convo,
//!   agent/native, …), each circle with the import line of every step;
//! - `imports_follow_the_rules`: an import of a top-level module that `ONLY_IMPORTED_BY` keeps from the
//!   importer.
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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

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

/// One import: where it is written and the path as written.
#[derive(Clone)]
struct Import {
    from: Module,
    to: Module,
    at: String,
    path: String,
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
    let mut findings = Vec::new();
    for i in imports(&sources()) {
        let (Some(from), Some(to)) = (i.from.first(), i.to.first()) else {
            continue;
        };
        if from == to {
            continue;
        }
        for (module, importers) in ONLY_IMPORTED_BY {
            if to == module && !importers.contains(&from.as_str()) {
                let who = if importers.is_empty() { "nothing outside it".to_string() } else { importers.join(", ") };
                findings.push(format!("{}: `{}`: `{module}` may be imported by {who} only", i.at, i.path));
            }
        }
    }
    assert!(findings.is_empty(), "imports against the rules:\n{}", findings.join("\n"));
}

/// Every `.rs` file of src/, read and cleaned.
fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
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

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with comments (line, doc, block) and the contents of string and char literals replaced by
/// spaces; line breaks stay, so that positions keep their line.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r' && !ident_before(&c, i) && matches!(next, Some('"' | '#')) {
            // A raw string `r"…"`, `r#"…"#` (or a raw identifier `r#name`, kept).
            let hashes = c[i + 1..].iter().take_while(|&&ch| ch == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            out.push_str("r\"");
            i += hashes + 2;
            while i < c.len() {
                if c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&ch| ch == '#').count() == hashes {
                    out.push('"');
                    i += hashes + 1;
                    break;
                }
                out.push(blank(c[i]));
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && next == Some('\\') {
            // An escaped char literal: `'\n'`, `'\''`, `'\u{1F600}'`.
            out.push_str("' ");
            i += 2;
            while i < c.len() && c[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else {
            // Code, or a lifetime's quote.
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Whether the `r` at `i` is inside a word (`for`, `ptr`), not the start of a raw string (`r"…"`,
/// `br"…"`).
fn ident_before(c: &[char], i: usize) -> bool {
    let word = |at: usize| c[at].is_alphanumeric() || c[at] == '_';
    let byte_prefix = |at: usize| c[at] == 'b' && (at == 0 || !word(at - 1));
    i > 0 && word(i - 1) && !byte_prefix(i - 1)
}

/// `code` without its `#[cfg(test)]` items, and the names of the child modules declared among them.
fn without_tests(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let mut out: Vec<char> = code.chars().collect();
    let mut children = Vec::new();
    let text: Vec<char> = out.clone();
    let mut from = 0;
    while let Some(at) = find(&text, MARK, from) {
        let start = at + MARK.chars().count();
        let end = item_end(&text, start);
        let item: String = text[start..end].iter().collect();
        let words: Vec<&str> = item.split_whitespace().collect();
        if let [.., "mod", name] = words.as_slice() {
            if let Some(name) = name.strip_suffix(';') {
                children.push(name.to_string());
            }
        }
        for ch in &mut out[at..end] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
        from = end;
    }
    (out.into_iter().collect(), children)
}

fn find(text: &[char], needle: &str, from: usize) -> Option<usize> {
    let needle: Vec<char> = needle.chars().collect();
    (from..text.len().saturating_sub(needle.len() - 1)).find(|&i| text[i..i + needle.len()] == needle[..])
}

/// Where the item that starts at `start` ends: after its `;` or its closing `}` (its own attributes
/// included).
fn item_end(text: &[char], start: usize) -> usize {
    let mut depth = 0i32;
    let mut i = start;
    while i < text.len() {
        match text[i] {
            '{' | '(' | '[' => depth += 1,
            ']' | ')' => depth -= 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    text.len()
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// The tokens of cleaned code, each with its line.
fn tokens(code: &str) -> Vec<(Token, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // A number is not a path segment.
            let token = if ch.is_ascii_digit() { Token::Punct('0') } else { Token::Ident(word) };
            out.push((token, line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Token::Sep, line));
            i += 2;
        } else {
            out.push((Token::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// A path a file names: in a `use` item (`binds`: the name it brings in, `None` for a glob) or in code.
struct Named {
    path: Vec<String>,
    line: usize,
    binds: Option<String>,
}

/// The paths a file names: those of its `use` items (groups expanded) and those written in code.
fn paths(code: &str) -> Vec<Named> {
    let t = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let line = t[i].1;
        let after_sep = i > 0 && t[i - 1].0 == Token::Sep;
        if ident(&t, i) == Some("use") && !after_sep {
            i += 1;
            let mut found = Vec::new();
            use_tree(&t, &mut i, Vec::new(), &mut found);
            out.extend(found.into_iter().map(|(path, binds)| Named { path, line, binds }));
        } else if ident(&t, i).is_some() && !after_sep && is_sep(&t, i + 1) {
            let mut path = Vec::new();
            while let Some(seg) = ident(&t, i) {
                path.push(seg.to_string());
                if !is_sep(&t, i + 1) {
                    break;
                }
                i += 2;
            }
            out.push(Named { path, line, binds: None });
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

fn ident(t: &[(Token, usize)], i: usize) -> Option<&str> {
    match t.get(i) {
        Some((Token::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    }
}

fn is_sep(t: &[(Token, usize)], i: usize) -> bool {
    t.get(i).is_some_and(|(x, _)| *x == Token::Sep)
}

/// The paths of one use tree starting at `*i` (after `use`), each prefixed by `prefix`, with the name
/// each brings in.
fn use_tree(t: &[(Token, usize)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix;
    let mut glob = false;
    while *i < t.len() {
        match &t[*i].0 {
            Token::Ident(s) => {
                if s != "self" {
                    path.push(s.clone());
                }
                *i += 1;
                if is_sep(t, *i) {
                    *i += 1;
                    continue;
                }
                break;
            }
            Token::Sep => *i += 1,
            Token::Punct('*') => {
                *i += 1;
                glob = true;
                break;
            }
            Token::Punct('{') => {
                *i += 1;
                while *i < t.len() && t[*i].0 != Token::Punct('}') {
                    let before = *i;
                    use_tree(t, i, path.clone(), out);
                    if t.get(*i).is_some_and(|(x, _)| *x == Token::Punct(',')) {
                        *i += 1;
                    }
                    if *i == before {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => break,
        }
    }
    let mut binds = if glob { None } else { path.last().cloned() };
    if ident(t, *i) == Some("as") {
        binds = ident(t, *i + 1).filter(|n| *n != "_").map(str::to_string);
        *i += 2;
    }
    out.push((path, binds));
}

/// The modules of the library and the names each module's file brings in with `use`.
struct Crate {
    modules: BTreeSet<Module>,
    uses: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
}

impl Crate {
    fn new(sources: &[Source]) -> Crate {
        let mut c = Crate { modules: BTreeSet::new(), uses: BTreeMap::new() };
        for s in sources.iter().filter(|s| !s.file.starts_with("src/bin/")) {
            c.modules.insert(s.module.clone());
            let uses = c.uses.entry(s.module.clone()).or_default();
            for n in paths(&s.code) {
                if let Some(name) = n.binds {
                    uses.insert(name, n.path);
                }
            }
        }
        c
    }

    /// The module of the library that `path`, written in `from`, names: the longest module its path
    /// starts with (`crate::tools::mcp::call` → `tools/mcp`). A name taken from an ancestor
    /// (`super::Call`) is followed to where the ancestor's file takes it from (`pub use
    /// protocol::Call` → the sibling `protocol`). `None`: another crate, or a local name.
    fn resolve(&self, path: &[String], from: &[String], depth: usize) -> Option<Module> {
        let first = path.first()?;
        let mut full: Module = match first.as_str() {
            "crate" => path[1..].to_vec(),
            "self" => [from, &path[1..]].concat(),
            "super" => {
                let mut base = from.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                [&base[..], rest].concat()
            }
            name if self.modules.contains(&[from, &[name.to_string()]].concat()) => [from, path].concat(),
            _ => return None,
        };
        let named = full.clone();
        while !self.modules.contains(&full) {
            full.pop()?;
        }
        if depth < 8 && full.len() < from.len() && from.starts_with(&full) {
            let taken = named.get(full.len()).and_then(|n| self.uses.get(&full)?.get(n));
            if let Some(taken) = taken {
                let further = [&taken[..], &named[full.len() + 1..]].concat();
                if let Some(m) = self.resolve(&further, &full, depth + 1) {
                    return Some(m);
                }
            }
        }
        Some(full)
    }
}

/// Every import from one module of src/ to another (test code and src/bin/ left out).
fn imports(sources: &[Source]) -> Vec<Import> {
    let krate = Crate::new(sources);
    let mut out = Vec::new();
    for s in sources.iter().filter(|s| !s.exempt) {
        for n in paths(&s.code) {
            match krate.resolve(&n.path, &s.module, 0) {
                Some(to) if to != s.module => out.push(Import {
                    from: s.module.clone(),
                    to,
                    at: format!("{}:{}", s.file, n.line),
                    path: n.path.join("::"),
                }),
                _ => {}
            }
        }
    }
    out
}

/// `src/`, `src/agent/`.
fn folder_name(m: &[String]) -> String {
    m.iter().fold("src/".to_string(), |path, part| format!("{path}{part}/"))
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("/")
    }
}

/// The circles of every folder's graph, each with one import per step.
fn circles(imports: &[Import]) -> Vec<String> {
    // Each import joins two nodes of exactly one folder: the folder both modules are in, where a node is
    // the folder's own file or one of its children (with everything below it).
    let mut folders: BTreeMap<Module, BTreeMap<(Module, Module), Import>> = BTreeMap::new();
    for i in imports {
        let common = i.from.iter().zip(&i.to).take_while(|(a, b)| a == b).count();
        if common == i.from.len() {
            // A folder's own file declares and wires its children: its uses of them are no circle.
            continue;
        }
        let folder = i.from[..common].to_vec();
        let node = |m: &Module| m[..(common + 1).min(m.len())].to_vec();
        folders.entry(folder).or_default().entry((node(&i.from), node(&i.to))).or_insert_with(|| i.clone());
    }
    let mut out = Vec::new();
    for (folder, edges) in &folders {
        let mut graph: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            graph.entry(a).or_default().push(b);
            graph.entry(b).or_default();
        }
        for component in strongly_connected(&graph) {
            if component.len() < 2 {
                continue;
            }
            let cycle = shortest_cycle(&graph, &component);
            let names: Vec<String> = cycle.iter().map(|m| name(m)).collect();
            let mut text = format!("in {}: {}", folder_name(folder), names.join(" -> "));
            if component.len() > cycle.len() - 1 {
                let all: Vec<String> = component.iter().map(|m| name(m)).collect();
                text.push_str(&format!(" (one of the circles among {})", all.join(", ")));
            }
            for pair in cycle.windows(2) {
                let i = &edges[&(pair[0].clone(), pair[1].clone())];
                text.push_str(&format!("\n    {}: `{}`", i.at, i.path));
            }
            // The other imports that tie the same modules together, one line each.
            let on_cycle = |a: &Module, b: &Module| cycle.windows(2).any(|p| p[0] == a && p[1] == b);
            for ((a, b), i) in edges {
                if component.contains(&a) && component.contains(&b) && !on_cycle(a, b) {
                    text.push_str(&format!("\n    and {} -> {}: {}: `{}`", name(a), name(b), i.at, i.path));
                }
            }
            out.push(text);
        }
    }
    out
}

/// Tarjan's strongly connected components.
fn strongly_connected<'m>(graph: &BTreeMap<&'m Module, Vec<&'m Module>>) -> Vec<Vec<&'m Module>> {
    struct State<'m> {
        index: BTreeMap<&'m Module, usize>,
        low: BTreeMap<&'m Module, usize>,
        stack: Vec<&'m Module>,
        out: Vec<Vec<&'m Module>>,
    }
    fn visit<'m>(v: &'m Module, g: &BTreeMap<&'m Module, Vec<&'m Module>>, s: &mut State<'m>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for &w in &g[v] {
            if !s.index.contains_key(w) {
                visit(w, g, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State { index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), out: Vec::new() };
    for &v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(v, graph, &mut s);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest circle through the first node of `component`, that node at both ends.
fn shortest_cycle<'m>(graph: &BTreeMap<&'m Module, Vec<&'m Module>>, component: &[&'m Module]) -> Vec<&'m Module> {
    let start = component[0];
    let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &graph[v] {
            if w == start {
                let mut cycle = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    cycle.push(at);
                }
                cycle.reverse();
                return cycle;
            }
            if component.contains(&w) && !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a component of two or more nodes has a circle through each")
}

#[test]
fn the_reader_sees_code_only() {
    let code = code_only(
        "use a::b; // use crate::x;\n/// crate::y\nlet s = \"crate::z\"; let c = '\"'; 'a: loop {}\nr#\"crate::w\"#",
    );
    let found: Vec<String> = paths(&code).into_iter().map(|n| n.path.join("::")).collect();
    assert_eq!(found, ["a::b"]);
    let (code, children) = without_tests(&code_only(
        "use super::A;\n#[cfg(test)]\nmod tests {\n    use crate::b::C;\n}\n#[cfg(test)]\nmod more;\nfn f() { crate::d::e(); }",
    ));
    let found: Vec<String> = paths(&code).into_iter().map(|n| format!("{}@{}", n.path.join("::"), n.line)).collect();
    assert_eq!(found, ["super::A@1", "crate::d::e@8"]);
    assert_eq!(children, ["more"]);
    let mut found = Vec::new();
    let t = tokens("crate::{a::{self, B}, c::D as E, f::*};");
    use_tree(&t, &mut 0, Vec::new(), &mut found);
    let found: Vec<String> = found.into_iter().map(|(p, b)| format!("{} {b:?}", p.join("::"))).collect();
    assert_eq!(found, ["crate::a Some(\"a\")", "crate::a::B Some(\"B\")", "crate::c::D Some(\"E\")", "crate::f None"]);
}

#[test]
fn names_taken_from_a_parent_are_followed() {
    let source = |file: &str, module: &[&str], code: &str| Source {
        file: file.into(),
        module: module.iter().map(|s| s.to_string()).collect(),
        lines: 1,
        code: code_only(code),
        test_children: Vec::new(),
        exempt: false,
    };
    let sources = [
        source("src/lib.rs", &[], "mod a; mod b;"),
        source("src/a/mod.rs", &["a"], "mod x; mod y; pub use y::Y; use crate::b::B;"),
        source(
            "src/a/x.rs",
            &["a", "x"],
            "use super::{Y, B};
fn f() { super::z(); let r = b'{'; let s = br\"\\\"; }",
        ),
        source("src/a/y.rs", &["a", "y"], "pub struct Y<'a>(&'a str); fn g() { super::x::f(); }"),
        source("src/b.rs", &["b"], "pub struct B;"),
    ];
    let found: Vec<String> =
        imports(&sources).iter().map(|i| format!("{}: {} -> {}", i.at, name(&i.from), name(&i.to))).collect();
    assert_eq!(
        found,
        [
            "src/a/mod.rs:1: a -> a/y",
            "src/a/mod.rs:1: a -> b",
            "src/a/x.rs:1: a/x -> a/y",
            "src/a/x.rs:1: a/x -> b",
            "src/a/x.rs:2: a/x -> a",
            "src/a/y.rs:1: a/y -> a/x"
        ]
    );
    let circles = circles(&imports(&sources));
    assert_eq!(
        circles,
        ["in src/a/: a/x -> a/y -> a/x\n    src/a/x.rs:1: `super::Y`\n    src/a/y.rs:1: `super::x::f`"]
    );
}
