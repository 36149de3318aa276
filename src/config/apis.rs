//! `apis[]`: each entry an OpenAPI document (`apiProvider` + `api`) or an MCP server (`mcpServer`), with
//! its `policy`, read into the service its tools are called on and the tools themselves, gathered in one
//! catalog.

use super::fields::Fields;
use super::header_params;
use super::identity::{parse_identity, Credentials};
use super::policy;
use super::refresh::McpSource;
use super::service::parse_service;
use super::ConfigError;
use crate::doc;
use crate::openapi;
use crate::tools::{Catalog, Tool};
use crate::upstream::Api;
use serde_json::Value;

pub fn parse_apis(
    root: &mut Fields<'_>,
    warnings: &mut Vec<String>,
    confirm: &mut Vec<String>,
    mcp: &mut Vec<McpSource>,
) -> Result<(Vec<Api>, Catalog), ConfigError> {
    let list = match root.required("apis")? {
        Value::Array(list) if !list.is_empty() => list,
        Value::Array(_) => return Err(root.err("apis", "must list at least one API")),
        other => return Err(root.err("apis", format!("must be a list, found {}", doc::type_name(other)))),
    };
    let mut apis = Vec::with_capacity(list.len());
    let mut catalog = Catalog::default();
    for (i, entry) in list.iter().enumerate() {
        let mut f = Fields::new(format!("apis[{i}]"), entry)?;
        let api_path = f.path().to_string();
        let Entry { api, mut tools, warnings: more, source, server } = match f.get("mcpServer") {
            Some(_) => parse_mcp(&mut f, i)?,
            None => parse_openapi(&mut f, i)?,
        };
        let policy = f.opt_object("policy")?.map(policy::Policy::parse).transpose()?;
        f.deny_unknown()?;
        let listed = server.as_ref().is_none_or(|s| s.pinned);
        if let Some(server) = server {
            mcp.push(McpSource { policy: policy.clone(), ..server });
        }
        // A server to be listed has no tools yet: its policy applies once it has.
        if let Some(policy) = policy.filter(|_| listed) {
            let (kept, needs_approval) = policy.apply(tools)?;
            tools = kept;
            confirm.extend(needs_approval);
        }
        if api.upstream.authority.is_none() && api.upstream.service.is_none() {
            let no_host = |t: &&Tool| t.openapi().is_some_and(|op| op.server.host.is_none());
            if let Some(tool) = tools.iter().find(no_host) {
                return Err(ConfigError::new(
                    &format!("{api_path}.apiProvider.domain"),
                    format!("required: the server URL of tool '{}' has no host", tool.name),
                ));
            }
        }
        warnings.extend(more);
        catalog.extend(tools).map_err(|e| ConfigError::new(&source, e))?;
        apis.push(api);
    }
    Ok((apis, catalog))
}

/// One `apis[]` entry's service, tools, warnings, and the field its tools come from (for errors).
struct Entry {
    api: Api,
    tools: Vec<Tool>,
    warnings: Vec<String>,
    source: String,
    server: Option<McpSource>,
}

/// `apiProvider` + `api`: an OpenAPI document's operations.
fn parse_openapi(f: &mut Fields<'_>, i: usize) -> Result<Entry, ConfigError> {
    let mut provider = f.opt_object("apiProvider")?.ok_or_else(|| f.err("apiProvider", "required (or 'mcpServer')"))?;
    let (upstream, api_key, headers) = parse_service(&mut provider)?;
    let max_retries = provider.opt_uint("maxRetries", 0, 10)?.unwrap_or(0) as u32;
    let creds = Credentials { api_key: api_key.as_ref(), headers: &headers, mcp: false };
    let identity = parse_identity(&mut provider, &creds)?;
    provider.deny_unknown()?;
    let spec_text = match f.required("api")? {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        Value::String(_) => return Err(f.err("api", "must not be empty")),
        // An already-parsed document (the YAML config held the spec as a map) is accepted too.
        other @ Value::Object(_) => other.to_string(),
        other => {
            return Err(f.err("api", format!("must be an OpenAPI document as text, found {}", doc::type_name(other))))
        }
    };
    let api_path = f.child_path("api");
    let mut loaded = openapi::load(&spec_text, i).map_err(|e| ConfigError::new(&api_path, e.to_string()))?;
    let mut warnings: Vec<String> = loaded.warnings.into_iter().map(|w| format!("{api_path}: {w}")).collect();
    let api = Api { upstream, api_key, headers, max_retries, identity };
    header_params::check(&mut loaded.tools, &api, &api_path, &f.child_path("apiProvider"), &mut warnings)?;
    let tools = loaded.tools.into_iter().map(Tool::from_openapi).collect();
    Ok(Entry { api, tools, warnings, source: api_path, server: None })
}

/// `mcpServer`: the tools of an MCP server, from its pinned `toolsList`.
fn parse_mcp(f: &mut Fields<'_>, i: usize) -> Result<Entry, ConfigError> {
    for key in ["apiProvider", "api"] {
        if f.get(key).is_some() {
            return Err(f.err(key, "not allowed with 'mcpServer' (an entry is an OpenAPI API or an MCP server)"));
        }
    }
    let mut server = f.opt_object("mcpServer")?.ok_or_else(|| f.err("mcpServer", "must be an object"))?;
    let (upstream, api_key, headers) = parse_service(&mut server)?;
    let path = server.req_str("path")?;
    if !path.starts_with('/') || path.contains(['\r', '\n', ' ']) {
        return Err(server.err("path", format!("must be a path starting with '/', found '{path}'")));
    }
    let allow = mcp_allow(&mut server)?;
    let creds = Credentials { api_key: api_key.as_ref(), headers: &headers, mcp: true };
    let identity = parse_identity(&mut server, &creds)?;
    let list_path = server.child_path("toolsList");
    let list = server.get("toolsList");
    server.deny_unknown()?;
    let api = Api { upstream, api_key, headers, max_retries: 0, identity };
    let pinned = list.is_some();
    let server = McpSource { api: i, path, allow, policy: None, field: list_path, pinned };
    let Some(list) = list else {
        // Listed by the host (discovery); the tools join the catalog then.
        return Ok(Entry {
            api,
            tools: Vec::new(),
            warnings: Vec::new(),
            source: f.child_path("mcpServer"),
            server: Some(server),
        });
    };
    let loaded = crate::tools::mcp::load(list, &server.allow, &server.path, i, &server.field)?;
    let warnings = loaded.warnings.into_iter().map(|w| format!("{}: {w}", server.field)).collect();
    Ok(Entry { api, tools: loaded.tools, warnings, source: f.child_path("mcpServer"), server: Some(server) })
}

/// `mcpServer.tools`: the server's tools the model may see (all when absent).
fn mcp_allow(server: &mut Fields<'_>) -> Result<Vec<String>, ConfigError> {
    let Some(v) = server.get("tools") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(server.err("tools", format!("must be a list of tool names, found {}", doc::type_name(v))));
    };
    items
        .iter()
        .enumerate()
        .map(|(j, item)| match item.as_str().map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(server.err(&format!("tools[{j}]"), "must be a non-empty string")),
        })
        .collect()
}
