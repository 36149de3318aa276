//! `api-agent tools CONFIG [--json]`: every tool of every configuration, with what the model sees (name,
//! description, argument schema) and what the filter sends (method, URL template, cluster, authority,
//! credentials with their values masked). The text is rendered from the same JSON `--json` prints.

use super::plugin::{self, Scope, State};
use super::{offer, out};
use super::{CliError, FAILED};
use crate::config::{Api, ApiKey, Config};
use crate::tools::{Binding, Tool};
use serde_json::{json, Value};

const MASK: &str = "****";

pub fn run(path: &str, as_json: bool, question: Option<&str>) -> Result<u8, CliError> {
    let mut groups = Vec::new();
    let mut failed = false;
    for e in plugin::entries(path)? {
        match e.state {
            State::Valid(p) => {
                let alone = p.rules.is_empty();
                groups.extend(plugin::scopes(&p).iter().map(|s| group(&e.label, s, alone, question)));
            }
            State::Rejected(msg) | State::Unusable(msg) => {
                failed = true;
                groups.push(json!({"where": e.label, "error": msg}));
            }
            State::Skipped(_) => {}
        }
    }
    if as_json {
        out::line(&Value::Array(groups).to_string());
    } else {
        let texts: Vec<String> = groups.iter().map(text).collect();
        out::line(texts.join("\n").trim_end());
    }
    Ok(if failed { FAILED } else { 0 })
}

/// One configuration: its LLM, its tools (or, for a question, its selection) and its warnings.
fn group(label: &str, s: &Scope, alone: bool, question: Option<&str>) -> Value {
    let c = &s.config;
    if let Some(q) = question {
        return json!({
            "where": s.place(label, alone),
            "scope": s.name,
            "mode": plugin::mode_name(c.mode),
            "loop": plugin::loop_name(c.loop_phase),
            "selection": offer::selection(c, q),
        });
    }
    json!({
        "where": s.place(label, alone),
        "scope": s.name,
        "match": s.matcher,
        "mode": plugin::mode_name(c.mode),
        "loop": plugin::loop_name(c.loop_phase),
        "llm": llm(c),
        "tools": c.tools.iter().map(|t| tool(c, t)).collect::<Vec<_>>(),
        "warnings": c.warnings,
    })
}

fn llm(c: &Config) -> Value {
    let l = &c.llm;
    let credentials: Vec<String> = l.api_key.iter().map(|_| format!("header authorization: Bearer {MASK}")).collect();
    json!({
        "method": "POST",
        "url": l.path,
        "cluster": l.upstream.cluster,
        "authority": l.upstream.authority_or_service(),
        "model": l.model,
        "timeout_ms": l.upstream.timeout_ms,
        "credentials": credentials,
    })
}

fn tool(c: &Config, t: &Tool) -> Value {
    let api = &c.apis[t.api];
    json!({
        "name": t.name,
        "description": t.description,
        "method": t.method(),
        "url": url(t),
        "cluster": api.upstream.cluster,
        "authority": authority(t, api),
        "timeout_ms": api.upstream.timeout_ms,
        "credentials": credentials(api),
        "arguments": t.schema,
    })
}

/// The `:authority` of the tool's calls, chosen as `openapi::call::build` chooses it: `domain`, else the
/// server URL's host, else the service name.
fn authority(t: &Tool, api: &Api) -> String {
    let up = &api.upstream;
    let host = t.openapi().and_then(|op| op.server.host.clone());
    up.authority.clone().or(host).unwrap_or_else(|| up.authority_or_service())
}

/// The path the tool's calls go to: an OpenAPI operation's path template, an MCP server's endpoint.
fn url(t: &Tool) -> String {
    match &t.binding {
        Binding::OpenApi(op) => format!("{}{}", op.server.base_path, op.path),
        Binding::Mcp(m) => format!("{} (MCP tools/call '{}')", m.path, m.remote),
    }
}

/// How the operator's credentials are attached, never their values.
fn credentials(api: &Api) -> Vec<String> {
    // As `openapi::call::build` attaches them: a header key as Higress's `Authorization: <name> <value>`
    // and as its own header (unless named Authorization); static headers last, replacing any of those.
    let key = api.api_key.iter().flat_map(|k| match k {
        ApiKey::Query { name, .. } => vec![format!("query {name}={MASK}")],
        ApiKey::Header { name, .. } if name.eq_ignore_ascii_case("authorization") => {
            vec![format!("header {name}: {MASK}")]
        }
        ApiKey::Header { name, .. } => {
            vec![format!("header Authorization: {name} {MASK}"), format!("header {name}: {MASK}")]
        }
    });
    let statics = api.headers.iter().map(|(name, _)| format!("header {name}: {MASK}"));
    key.chain(statics).chain(identity(api)).collect()
}

/// The client's identity on the calls: forwarded headers, and the token exchange (without its secret).
fn identity(api: &Api) -> Vec<String> {
    let forwarded = api.identity.forward_headers.iter().map(|name| format!("header {name}: the client's"));
    let exchange = api.identity.token_exchange.iter().map(|x| {
        let mut what = vec![format!("audience {}", x.audience.as_deref().unwrap_or("(none)"))];
        what.extend(x.scope.as_ref().map(|s| format!("scope {s}")));
        what.extend(x.client.as_ref().map(|(id, _)| format!("client {id}:{MASK}")));
        format!(
            "header authorization: Bearer (exchanged for the client's '{}' at POST {} on cluster {}; {})",
            x.subject_header,
            x.path,
            x.upstream.cluster,
            what.join(", ")
        )
    });
    forwarded.chain(exchange).collect()
}

fn text(g: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    if let Some(e) = g.get("error") {
        return format!("error: {}: {}\n", s(&g["where"]), s(e));
    }
    let mut out = format!("{}\n  mode {}, loop {}\n", s(&g["where"]), s(&g["mode"]), s(&g["loop"]));
    if let Some(selection) = g.get("selection") {
        out.push_str(&offer::text(selection));
        return out;
    }
    let l = &g["llm"];
    out.push_str(&format!("  LLM: POST {} on {}\n", s(&l["url"]), upstream(l)));
    if let Some(m) = l["model"].as_str() {
        out.push_str(&format!("    model {m}\n"));
    }
    credential_lines(&l["credentials"], "    ", &mut out);
    for t in g["tools"].as_array().into_iter().flatten() {
        let first = s(&t["description"]).lines().next().unwrap_or("").to_string();
        out.push_str(&format!("  {}: {first}\n", s(&t["name"])));
        out.push_str(&format!("    {} {} on {}\n", s(&t["method"]), s(&t["url"]), upstream(t)));
        credential_lines(&t["credentials"], "    ", &mut out);
        out.push_str(&format!("    arguments: {}\n", t["arguments"]));
    }
    for w in g["warnings"].as_array().into_iter().flatten() {
        out.push_str(&format!("  warning: {}\n", s(w)));
    }
    out
}

fn upstream(v: &Value) -> String {
    format!(
        "cluster {}, :authority {}, timeout {} ms",
        v["cluster"].as_str().unwrap_or(""),
        v["authority"].as_str().unwrap_or(""),
        v["timeout_ms"]
    )
}

fn credential_lines(list: &Value, indent: &str, out: &mut String) {
    for c in list.as_array().into_iter().flatten().filter_map(Value::as_str) {
        out.push_str(&format!("{indent}credentials: {c}\n"));
    }
}
