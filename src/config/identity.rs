//! The client's identity on an API's calls: `forwardHeaders` (headers of the client's request copied
//! onto the calls) and `tokenExchange` (a token for the API exchanged for the client's, RFC 8693), on
//! `apiProvider` and `mcpServer`. Checked against the API's own credentials (`apiKey`, `headers`): one
//! header has one source.

use super::fields::Fields;
use super::service::{check_header_text, is_token_byte, parse_upstream};
use super::ConfigError;
use crate::doc;
use crate::upstream::{ApiKey, Identity, TokenExchange};
use serde_json::Value;

/// `passthrough`: what becomes of a request on the filter's route that the agent does not take (another
/// path, method or content type, an empty body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Passthrough {
    /// Passed on to the route's upstream as the agent's first turn would be: the client's identity
    /// headers (`identity_headers`) removed, `llm.apiKey` in place of its credentials.
    #[default]
    Forward,
    /// Refused with an OpenAI-shaped 4xx: the route serves the agent only.
    Refuse,
}

/// `passthrough` of the configuration's root.
pub fn parse_passthrough(root: &mut Fields<'_>) -> Result<Passthrough, ConfigError> {
    match root.opt_str("passthrough")?.as_deref() {
        None | Some("forward") => Ok(Passthrough::Forward),
        Some("refuse") => Ok(Passthrough::Refuse),
        Some(other) => Err(root.err("passthrough", format!("must be 'forward' or 'refuse', found '{other}'"))),
    }
}

/// Headers a call sets itself: copying the client's would contradict the request the tool makes.
const NOT_FORWARDED: [&str; 7] =
    ["host", "content-length", "content-type", "transfer-encoding", "connection", "accept-encoding", "te"];

/// The static credentials of the entry, to check forwarded headers against.
pub struct Credentials<'c> {
    pub api_key: Option<&'c ApiKey>,
    pub headers: &'c [(String, String)],
    /// The entry is an MCP server (`mcpServer`), not an OpenAPI API.
    pub mcp: bool,
}

/// `forwardHeaders` and `tokenExchange` of `f` (an `apiProvider` or `mcpServer` object).
pub fn parse_identity(f: &mut Fields<'_>, creds: &Credentials<'_>) -> Result<Identity, ConfigError> {
    let forward_headers = parse_forward(f, creds)?;
    let token_exchange = match f.opt_object("tokenExchange")? {
        Some(t) => Some(parse_exchange(t)?),
        None => None,
    };
    if token_exchange.is_some() {
        let exchange = f.child_path("tokenExchange");
        if let Some(i) = forward_headers.iter().position(|h| h == "authorization") {
            return Err(f.err(
                &format!("forwardHeaders[{i}]"),
                format!("'authorization' is also set by '{exchange}' (the exchanged token)"),
            ));
        }
        if let Some(other) = authorization_source(f, creds) {
            return Err(ConfigError::new(
                &exchange,
                format!("sets 'authorization' (the exchanged token), which '{other}' sets too"),
            ));
        }
    }
    Ok(Identity { forward_headers, token_exchange })
}

/// The field of the entry's static credentials that sets `authorization`, if one does.
fn authorization_source(f: &Fields<'_>, creds: &Credentials<'_>) -> Option<String> {
    if let Some(ApiKey::Header { .. }) = creds.api_key {
        return Some(f.child_path("apiKey"));
    }
    creds
        .headers
        .iter()
        .any(|(k, _)| k == "authorization")
        .then(|| format!("{}.authorization", f.child_path("headers")))
}

fn parse_forward(f: &mut Fields<'_>, creds: &Credentials<'_>) -> Result<Vec<String>, ConfigError> {
    let Some(v) = f.get("forwardHeaders") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(f.err("forwardHeaders", format!("must be a list of header names, found {}", doc::type_name(v))));
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let key = format!("forwardHeaders[{i}]");
        let Some(name) = item.as_str().map(str::trim) else {
            return Err(f.err(&key, format!("must be a header name, found {}", doc::type_name(item))));
        };
        if name.is_empty() || name.starts_with(':') || !name.bytes().all(is_token_byte) {
            return Err(f.err(&key, format!("'{name}' is not a valid header name")));
        }
        let name = name.to_ascii_lowercase();
        if NOT_FORWARDED.contains(&name.as_str()) {
            return Err(f.err(&key, format!("'{name}' is set by the call itself and cannot be forwarded")));
        }
        if names.contains(&name) {
            return Err(f.err(&key, format!("'{name}' is listed twice")));
        }
        if creds.mcp && name == "authorization" {
            return Err(f.err(
                &key,
                "an MCP server must not get the client's own token (the MCP authorization spec forbids \
                 passing it through): use 'tokenExchange' to send a token issued for the server",
            ));
        }
        if let Some(other) = static_source(f, creds, &name) {
            return Err(f.err(&key, format!("'{name}' is also set by '{other}'")));
        }
        names.push(name);
    }
    Ok(names)
}

/// The field of the entry's static credentials that sets header `name`, if one does.
fn static_source(f: &Fields<'_>, creds: &Credentials<'_>, name: &str) -> Option<String> {
    if let Some(ApiKey::Header { name: key, .. }) = creds.api_key {
        // Higress's meaning: `Authorization: <name> <value>` and `<name>: <value>`.
        if name == "authorization" || key.eq_ignore_ascii_case(name) {
            return Some(f.child_path("apiKey"));
        }
    }
    creds.headers.iter().any(|(k, _)| k == name).then(|| format!("{}.{name}", f.child_path("headers")))
}

/// `tokenExchange`: the token service (a callout target), what is asked, and with which credentials.
fn parse_exchange(mut t: Fields<'_>) -> Result<TokenExchange, ConfigError> {
    let upstream = parse_upstream(&mut t)?;
    let path = t.req_str("path")?;
    if !path.starts_with('/') || path.contains(['\r', '\n', ' ', '\0']) {
        return Err(t.err("path", format!("must be a path starting with '/', found '{path}'")));
    }
    let audience = t.opt_nonempty("audience")?;
    let scope = t.opt_nonempty("scope")?;
    if audience.is_none() && scope.is_none() {
        return Err(t.err("audience", "required (or 'scope'): the token service must know what the token is for"));
    }
    let client_id = t.opt_nonempty("clientId")?;
    let client_secret = t.opt_str("clientSecret")?;
    let client = match (client_id, client_secret) {
        (Some(id), Some(secret)) if !secret.trim().is_empty() => {
            check_header_text(&t, "clientId", &id)?;
            check_header_text(&t, "clientSecret", &secret)?;
            Some((id, secret))
        }
        (Some(_), _) => return Err(t.err("clientSecret", "required with 'clientId' (HTTP Basic credentials)")),
        (None, Some(_)) => return Err(t.err("clientId", "required with 'clientSecret' (HTTP Basic credentials)")),
        (None, None) => None,
    };
    let subject_header = t.opt_nonempty("subjectHeader")?.unwrap_or_else(|| "authorization".to_string());
    if subject_header.starts_with(':') || !subject_header.bytes().all(is_token_byte) {
        return Err(t.err("subjectHeader", format!("'{subject_header}' is not a valid header name")));
    }
    let subject_header = subject_header.to_ascii_lowercase();
    t.deny_unknown()?;
    Ok(TokenExchange { upstream, path, audience, scope, client, subject_header })
}
