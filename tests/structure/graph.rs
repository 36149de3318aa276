//! The import graph: which module each named path is, and the circles of every folder's graph.

use super::code::{code_only, paths};
use super::{Module, Source};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One import: where it is written and the path as written.
#[derive(Clone)]
pub struct Import {
    pub from: Module,
    pub to: Module,
    pub at: String,
    pub path: String,
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
pub fn imports(sources: &[Source]) -> Vec<Import> {
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
pub fn circles(imports: &[Import]) -> Vec<String> {
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
        source("src/a/x.rs", &["a", "x"], "use super::{Y, B};\nfn f() { super::z(); let r = b'{'; let s = br\"\\\"; }"),
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
