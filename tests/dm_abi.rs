//! The dynamic module's hand-written ABI (`src/dm/abi.rs`, `src/dm/hooks.rs`, the callbacks
//! `src/dm/optional.rs` resolves by name) checked against Envoy's `abi.h` (`tests/vendor/envoy/`, the
//! declarations the module uses): every function's name, parameter and return types, and every
//! enum value the module passes or reads. A wrong integer or signature compiles; here it fails.
//!
//! Types compare by ABI: C enums are `u32` in Rust, except what a hook returns, which must be the Rust
//! enum of its hook kind (`HeadersStatus`, …) with the header's values; pointer constness is not
//! compared (the same ABI), what a pointer points to is.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

/// The header versions the module is checked against.
const HEADERS: &[(&str, &str)] = &[("envoy main 0199da4", include_str!("vendor/envoy/abi-0199da4.h"))];

const ABI_RS: &str = include_str!("../src/dm/abi.rs");
const HOOKS_RS: &str = include_str!("../src/dm/hooks.rs");
const OPTIONAL_RS: &str = include_str!("../src/dm/optional.rs");

/// The Rust enum each hook-status C enum must be returned as.
const STATUS_ENUMS: &[(&str, &str)] = &[
    ("envoy_dynamic_module_type_on_http_filter_request_headers_status", "HeadersStatus"),
    ("envoy_dynamic_module_type_on_http_filter_response_headers_status", "HeadersStatus"),
    ("envoy_dynamic_module_type_on_http_filter_request_body_status", "BodyStatus"),
    ("envoy_dynamic_module_type_on_http_filter_response_body_status", "BodyStatus"),
    ("envoy_dynamic_module_type_on_http_filter_request_trailers_status", "TrailersStatus"),
    ("envoy_dynamic_module_type_on_http_filter_response_trailers_status", "TrailersStatus"),
];

/// Every integer `abi.rs` names (a `pub const` or an enum variant) and the C enum member it is.
const VALUES: &[(&str, &str)] = &[
    ("LOG_TRACE", "envoy_dynamic_module_type_log_level_Trace"),
    ("LOG_DEBUG", "envoy_dynamic_module_type_log_level_Debug"),
    ("LOG_INFO", "envoy_dynamic_module_type_log_level_Info"),
    ("LOG_WARN", "envoy_dynamic_module_type_log_level_Warn"),
    ("LOG_ERROR", "envoy_dynamic_module_type_log_level_Error"),
    ("HeaderMap::Request", "envoy_dynamic_module_type_http_header_type_RequestHeader"),
    ("HeaderMap::Response", "envoy_dynamic_module_type_http_header_type_ResponseHeader"),
    ("Body::ReceivedRequest", "envoy_dynamic_module_type_http_body_type_ReceivedRequestBody"),
    ("Body::BufferedRequest", "envoy_dynamic_module_type_http_body_type_BufferedRequestBody"),
    ("Body::ReceivedResponse", "envoy_dynamic_module_type_http_body_type_ReceivedResponseBody"),
    ("Body::BufferedResponse", "envoy_dynamic_module_type_http_body_type_BufferedResponseBody"),
    ("Attribute::ResponseCode", "envoy_dynamic_module_type_attribute_id_ResponseCode"),
    ("Attribute::XdsClusterName", "envoy_dynamic_module_type_attribute_id_XdsClusterName"),
    ("Attribute::XdsRouteName", "envoy_dynamic_module_type_attribute_id_XdsRouteName"),
    ("CALLOUT_SUCCESS", "envoy_dynamic_module_type_http_callout_result_Success"),
    ("CALLOUT_RESET", "envoy_dynamic_module_type_http_callout_result_Reset"),
    ("INIT_SUCCESS", "envoy_dynamic_module_type_http_callout_init_result_Success"),
    ("INIT_MISSING_HEADERS", "envoy_dynamic_module_type_http_callout_init_result_MissingRequiredHeaders"),
    ("INIT_CLUSTER_NOT_FOUND", "envoy_dynamic_module_type_http_callout_init_result_ClusterNotFound"),
    ("INIT_CANNOT_CREATE", "envoy_dynamic_module_type_http_callout_init_result_CannotCreateRequest"),
    ("RESET_LOCAL", "envoy_dynamic_module_type_http_filter_stream_reset_reason_LocalReset"),
    ("HeadersStatus::Continue", "envoy_dynamic_module_type_on_http_filter_request_headers_status_Continue"),
    ("HeadersStatus::StopIteration", "envoy_dynamic_module_type_on_http_filter_request_headers_status_StopIteration"),
    ("BodyStatus::Continue", "envoy_dynamic_module_type_on_http_filter_request_body_status_Continue"),
    (
        "BodyStatus::StopIterationAndBuffer",
        "envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationAndBuffer",
    ),
    ("TrailersStatus::Continue", "envoy_dynamic_module_type_on_http_filter_request_trailers_status_Continue"),
    ("TrailersStatus::StopIteration", "envoy_dynamic_module_type_on_http_filter_request_trailers_status_StopIteration"),
];

/// Callbacks `optional.rs` resolves by name: the type alias it calls each through.
const OPTIONAL: &[(&str, &str)] = &[
    ("SetMetadataNumber", "envoy_dynamic_module_callback_http_set_dynamic_metadata_number"),
    ("SetMetadataString", "envoy_dynamic_module_callback_http_set_dynamic_metadata_string"),
    ("SetFilterState", "envoy_dynamic_module_callback_http_set_filter_state_bytes"),
    ("ResetStream", "envoy_dynamic_module_callback_http_filter_reset_stream"),
];

// ---------------------------------------------------------------- the C header

/// A function: its parameter types and return type, each canonical (`canonical_c`/`canonical_rust`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sig {
    params: Vec<String>,
    ret: String,
}

#[derive(Default)]
struct Header {
    /// typedef name → what it stands for (`*void`, `*c_char`, `struct`, `enum`).
    typedefs: BTreeMap<String, String>,
    /// enum member → value.
    members: BTreeMap<String, i64>,
    /// enum type names.
    enums: Vec<String>,
    functions: BTreeMap<String, Sig>,
}

fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Struct bodies out (their fields end in `;` too): only the names matter here.
fn strip_struct_bodies(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("typedef struct ") {
        let open = at + rest[at..].find('{').unwrap();
        let close = open + rest[open..].find('}').unwrap();
        out.push_str(&rest[..=open]);
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

fn parse_header(text: &str) -> Header {
    let text = strip_struct_bodies(&strip_comments(text));
    let mut h = Header::default();
    for statement in text.split(';').map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")) {
        if statement.is_empty() {
            continue;
        }
        if let Some(body) = statement.strip_prefix("typedef enum ") {
            let open = body.find('{').unwrap();
            let close = body.rfind('}').unwrap();
            let name = body[close + 1..].trim().to_string();
            let mut next = 0;
            for member in body[open + 1..close].split(',').map(str::trim).filter(|m| !m.is_empty()) {
                let (member, value) = match member.split_once('=') {
                    Some((m, v)) => (m.trim(), v.trim().parse().unwrap()),
                    None => (member, next),
                };
                h.members.insert(member.to_string(), value);
                next = value + 1;
            }
            h.typedefs.insert(name.clone(), "enum".into());
            h.enums.push(name);
        } else if let Some(body) = statement.strip_prefix("typedef struct ") {
            let name = body[body.rfind('}').unwrap() + 1..].trim().to_string();
            h.typedefs.insert(name, "struct".into());
        } else if let Some(body) = statement.strip_prefix("typedef ") {
            let (ty, name) = body.rsplit_once(' ').unwrap();
            let target = match ty.replace("const ", "").as_str() {
                "void*" => "*void",
                "char*" => "*c_char",
                other => panic!("unknown typedef {other} {name}"),
            };
            h.typedefs.insert(name.to_string(), target.into());
        } else if statement.contains('(') {
            let open = statement.find('(').unwrap();
            let (ret, name) = statement[..open].trim().rsplit_once(' ').unwrap();
            let params = statement[open + 1..statement.rfind(')').unwrap()].trim();
            let params = if params.is_empty() || params == "void" {
                Vec::new()
            } else {
                params.split(',').map(|p| canonical_c(&h, p, true)).collect()
            };
            let sig = Sig { params, ret: canonical_c(&h, ret, false) };
            h.functions.insert(name.to_string(), sig);
        }
    }
    h
}

/// A C type (with its parameter name when `named`) as the ABI sees it.
fn canonical_c(h: &Header, decl: &str, named: bool) -> String {
    let decl = decl.replace('*', " * ").replace("const ", "");
    let mut words: Vec<&str> = decl.split_whitespace().collect();
    if named {
        words.pop();
    }
    let pointers = words.iter().filter(|w| **w == "*").count();
    let base = words.iter().find(|w| **w != "*").copied().unwrap_or("void");
    let base = match base {
        "void" if pointers == 0 => return "()".into(),
        "void" => "void",
        "bool" => "bool",
        "size_t" => "usize",
        "uint64_t" => "u64",
        "uint32_t" => "u32",
        "int64_t" => "i64",
        "double" => "f64",
        "char" => "c_char",
        "envoy_dynamic_module_type_envoy_buffer" => "EnvoyBuffer",
        "envoy_dynamic_module_type_module_buffer" => "ModuleBuffer",
        "envoy_dynamic_module_type_module_http_header" => "ModuleHeader",
        "envoy_dynamic_module_type_envoy_http_header" => "EnvoyHeader",
        other => match h.typedefs.get(other).map(String::as_str) {
            Some("enum") => return format!("{}enum {other}", "*".repeat(pointers)),
            Some(target @ ("*void" | "*c_char")) => return format!("{}{target}", "*".repeat(pointers)),
            _ => panic!("unknown C type {other}"),
        },
    };
    format!("{}{base}", "*".repeat(pointers))
}

// ---------------------------------------------------------------- the Rust side

/// A Rust type as the ABI sees it.
fn canonical_rust(ty: &str) -> String {
    let ty = ty.trim();
    if ty.is_empty() {
        return "()".into();
    }
    if let Some(inner) = ty.strip_prefix("*mut ").or_else(|| ty.strip_prefix("*const ")) {
        return format!("*{}", canonical_rust(inner));
    }
    match ty {
        "c_void" => "void".into(),
        other => other.to_string(),
    }
}

/// `name(params) -> ret` of a Rust fn, from the text after `fn `.
fn rust_sig(text: &str) -> (String, Sig) {
    let open = text.find('(').unwrap();
    let name = text[..open].trim().to_string();
    let mut depth = 0;
    let mut close = open;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = open + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let params = text[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| canonical_rust(p.split_once(':').map_or(p, |(_, t)| t)))
        .collect();
    let rest = &text[close + 1..];
    let ret = rest.trim_start().strip_prefix("->").map_or("", |r| r.split(['{', ';']).next().unwrap_or(""));
    (name, Sig { params, ret: canonical_rust(ret) })
}

/// The callbacks of `abi.rs`'s `extern "C"` block.
fn rust_callbacks() -> BTreeMap<String, Sig> {
    let block = &ABI_RS[ABI_RS.find("extern \"C\" {").unwrap()..];
    block.split("pub fn ").skip(1).map(rust_sig).collect()
}

/// The hooks `hooks.rs` exports.
fn rust_hooks() -> BTreeMap<String, Sig> {
    HOOKS_RS.split("pub extern \"C\" fn ").skip(1).map(rust_sig).collect()
}

/// `optional.rs`'s function types: alias → signature.
fn rust_optional() -> BTreeMap<String, Sig> {
    OPTIONAL_RS
        .lines()
        .filter_map(|l| l.trim().strip_prefix("type "))
        .filter_map(|l| l.split_once(" = unsafe extern \"C\" fn"))
        .map(|(alias, rest)| (alias.to_string(), rust_sig(&format!("f{rest}")).1))
        .collect()
}

/// Every integer `abi.rs` names: `pub const X: u32 = N` and `Enum::Variant = N`.
fn rust_values() -> BTreeMap<String, i64> {
    let mut values = BTreeMap::new();
    let mut current_enum: Option<String> = None;
    for line in ABI_RS.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("pub const ") {
            if let Some((name, value)) = rest.split_once(": u32 = ") {
                values.insert(name.to_string(), value.trim_end_matches(';').parse().unwrap());
            }
        } else if let Some(rest) = line.strip_prefix("pub enum ") {
            current_enum = Some(rest.trim_end_matches(" {").to_string());
        } else if line == "}" {
            current_enum = None;
        } else if let (Some(e), Some((variant, value))) = (&current_enum, line.split_once(" = ")) {
            values.insert(format!("{e}::{variant}"), value.trim_end_matches(',').parse().unwrap());
        }
    }
    values
}

// ---------------------------------------------------------------- the checks

/// Whether the Rust signature is the C one. `hook`: a C enum it returns must be its typed status.
fn mismatches(h: &Header, name: &str, rust: &Sig, hook: bool) -> Vec<String> {
    let Some(c) = h.functions.get(name) else {
        return vec![format!("{name}: not in abi.h")];
    };
    let mut out = Vec::new();
    if c.params.len() != rust.params.len() {
        out.push(format!("{name}: {} parameters in abi.h, {} in Rust", c.params.len(), rust.params.len()));
    }
    for (i, (c, r)) in c.params.iter().zip(&rust.params).enumerate() {
        if !same(c, r, false) {
            out.push(format!("{name}: parameter {i} is `{c}` in abi.h, `{r}` in Rust"));
        }
    }
    if !same(&c.ret, &rust.ret, hook) {
        out.push(format!("{name}: returns `{}` in abi.h, `{}` in Rust", c.ret, rust.ret));
    }
    out
}

fn same(c: &str, rust: &str, hook_return: bool) -> bool {
    match c.strip_prefix("enum ") {
        Some(e) => match STATUS_ENUMS.iter().find(|(name, _)| *name == e) {
            Some((_, typed)) => rust == *typed,
            None => !hook_return && rust == "u32",
        },
        None => c == rust,
    }
}

#[test]
fn every_declaration_matches_abi_h() {
    let callbacks = rust_callbacks();
    let hooks = rust_hooks();
    let optional = rust_optional();
    assert!(callbacks.len() >= 25 && hooks.len() >= 25, "the parser lost declarations: {callbacks:?} {hooks:?}");
    for (version, text) in HEADERS {
        let h = parse_header(text);
        let mut wrong = Vec::new();
        for (name, sig) in &callbacks {
            wrong.extend(mismatches(&h, name, sig, false));
        }
        for (name, sig) in &hooks {
            wrong.extend(mismatches(&h, name, sig, true));
        }
        for (alias, name) in OPTIONAL {
            let sig = optional.get(*alias).unwrap_or_else(|| panic!("optional.rs has no type {alias}"));
            wrong.extend(mismatches(&h, name, sig, false));
        }
        // The extract names nothing the module does not use, so that it cannot rot unseen.
        let used =
            |n: &String| callbacks.contains_key(n) || hooks.contains_key(n) || OPTIONAL.iter().any(|(_, o)| o == n);
        wrong.extend(h.functions.keys().filter(|n| !used(n)).map(|n| format!("{n}: in the extract, unused")));
        assert!(wrong.is_empty(), "src/dm against abi.h ({version}):\n{}", wrong.join("\n"));
    }
}

#[test]
fn every_integer_matches_abi_h() {
    let values = rust_values();
    let named: Vec<&str> = VALUES.iter().map(|(r, _)| *r).collect();
    let unchecked: Vec<&String> = values.keys().filter(|k| !named.contains(&k.as_str())).collect();
    assert!(unchecked.is_empty(), "integers of abi.rs with no abi.h member in VALUES: {unchecked:?}");
    for (version, text) in HEADERS {
        let h = parse_header(text);
        let mut wrong = Vec::new();
        for (rust, member) in VALUES {
            let r = values.get(*rust).copied();
            let c = h.members.get(*member).copied();
            if r.is_none() || r != c {
                wrong.push(format!("{rust} = {r:?}, abi.h's {member} = {c:?}"));
            }
        }
        // A typed status is the same integer for the request's hook and the response's.
        for (c_enum, typed) in STATUS_ENUMS {
            let variants = values.keys().filter(|k| k.starts_with(&format!("{typed}::")));
            for v in variants {
                let member = format!("{c_enum}_{}", v.split("::").nth(1).unwrap());
                if h.members.get(&member) != values.get(v) {
                    wrong.push(format!("{v} = {:?}, abi.h's {member} = {:?}", values.get(v), h.members.get(&member)));
                }
            }
        }
        assert!(wrong.is_empty(), "src/dm/abi.rs against abi.h ({version}):\n{}", wrong.join("\n"));
    }
}

#[test]
fn the_parsers_read_what_they_compare() {
    let h = parse_header(HEADERS[0].1);
    let callout = &h.functions["envoy_dynamic_module_callback_http_filter_http_callout"];
    assert_eq!(callout.params, ["*void", "*u64", "ModuleBuffer", "*ModuleHeader", "usize", "ModuleBuffer", "u64"]);
    assert_eq!(callout.ret, "enum envoy_dynamic_module_type_http_callout_init_result");
    assert_eq!(h.members["envoy_dynamic_module_type_attribute_id_XdsRouteName"], 61);
    assert_eq!(h.members["envoy_dynamic_module_type_http_body_type_BufferedResponseBody"], 3);
    let hooks = rust_hooks();
    assert_eq!(hooks["envoy_dynamic_module_on_http_filter_request_body"].ret, "BodyStatus");
    assert_eq!(rust_values()["Attribute::XdsRouteName"], 61);
}
