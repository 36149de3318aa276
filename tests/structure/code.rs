//! Reading a source file: its code without comments, literals and test items, and the paths it names;
//! and finding the files.

use std::fs;
use std::path::{Path, PathBuf};

/// The `.rs` files below `dir`, at any depth, added to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with comments (line, doc, block) and the contents of string and char literals replaced by
/// spaces; line breaks stay, so that positions keep their line.
pub fn code_only(text: &str) -> String {
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
pub fn without_tests(code: &str) -> (String, Vec<String>) {
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
pub struct Named {
    pub path: Vec<String>,
    pub line: usize,
    pub binds: Option<String>,
}

/// The paths a file names: those of its `use` items (groups expanded) and those written in code.
pub fn paths(code: &str) -> Vec<Named> {
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
