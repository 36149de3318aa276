//! An OpenAPI operation's header parameters against the headers the API's configuration sets on its
//! calls: the client's forwarded identity (`forwardHeaders`) and the operator's credentials (`apiKey`,
//! `headers`). A parameter of such a name is left out with a warning (the model never fills in what
//! the call sets); one that differs only by '_' / '-' is refused, since servers that read '_' as '-'
//! (CGI and WSGI environments, proxies that normalise) would take the model's value for the real one.

use super::ConfigError;
use crate::openapi::{Location, Tool};
use crate::upstream::{Api, ApiKey};

/// The headers `api`'s calls carry from its configuration: (name, the field that sets it).
fn configured(api: &Api, provider: &str) -> Vec<(String, String)> {
    let forwarded = api.identity.forward_headers.iter().enumerate();
    let mut out: Vec<(String, String)> = forwarded
        .map(|(i, n)| (n.clone(), format!("{provider}.forwardHeaders[{i}] forwards (the client's identity)")))
        .collect();
    if let Some(ApiKey::Header { name, .. }) = &api.api_key {
        out.push((name.to_ascii_lowercase(), format!("{provider}.apiKey sets")));
    }
    out.extend(api.headers.iter().map(|(n, _)| (n.clone(), format!("{provider}.headers sets"))));
    out
}

/// Leaves out of `tools` the header parameters the configuration sets (each with a warning in
/// `warnings`); `Err` for one that is such a header to servers that read '_' as '-'.
pub fn check(
    tools: &mut [Tool],
    api: &Api,
    api_path: &str,
    provider: &str,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let set = configured(api, provider);
    if set.is_empty() {
        return Ok(());
    }
    for tool in tools.iter_mut() {
        let place = format!("{} {}", tool.method, tool.path);
        let headers: Vec<String> =
            tool.params.iter().filter(|p| p.location == Location::Header).map(|p| p.name.clone()).collect();
        for name in headers {
            let lower = name.to_ascii_lowercase();
            if let Some((_, by)) = set.iter().find(|(n, _)| *n == lower) {
                warnings
                    .push(format!("{api_path}: {place}: header parameter '{name}' is not a tool argument: {by} it"));
                tool.drop_param(&name);
            } else if let Some((real, by)) = set.iter().find(|(n, _)| read_as_dash(n, &name)) {
                return Err(ConfigError::new(
                    api_path,
                    format!(
                        "{place}: header parameter '{name}' is '{real}' to servers that read '_' as '-', which {by}: \
                         rename or remove the parameter in the document"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `a` and `b` are one header name to a server that reads '_' as '-' (and case-insensitively).
fn read_as_dash(a: &str, b: &str) -> bool {
    let fold = |c: u8| if c == b'_' { b'-' } else { c.to_ascii_lowercase() };
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| fold(x) == fold(y))
}
