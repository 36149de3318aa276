//! The keys every service of the configuration has (the LLM, each `apis[]` entry): where it is
//! (`cluster` or `serviceName`/`servicePort`, `domain`, `maxExecutionTime`) and which credentials its
//! calls carry (`apiKey`, `headers`).

use super::fields::Fields;
use super::{ConfigError, DEFAULT_TIMEOUT_MS};
use crate::doc;
use crate::upstream::{ApiKey, Upstream};
use serde_json::Value;

/// `cluster`, or Higress's `outbound|<servicePort>||<serviceName>`; `domain`; `maxExecutionTime`.
pub fn parse_upstream(f: &mut Fields<'_>) -> Result<Upstream, ConfigError> {
    let cluster = f.opt_nonempty("cluster")?;
    let service = f.opt_nonempty("serviceName")?;
    let port = f.opt_uint("servicePort", 1, 65535)?;
    let cluster = match (cluster, &service, port) {
        (Some(c), _, _) => c,
        (None, Some(name), Some(port)) => format!("outbound|{port}||{name}"),
        (None, None, _) => return Err(f.err("serviceName", "required (or name the Envoy cluster in 'cluster')")),
        (None, Some(_), None) => return Err(f.err("servicePort", "required (or name the Envoy cluster in 'cluster')")),
    };
    let authority = f.opt_nonempty("domain")?;
    if let Some(a) = &authority {
        if a.contains(['/', ' ', '\r', '\n']) {
            return Err(f.err("domain", format!("must be a host name (with an optional port), found '{a}'")));
        }
    }
    let timeout_ms = f.opt_uint("maxExecutionTime", 1, 24 * 3_600_000)?.unwrap_or(DEFAULT_TIMEOUT_MS);
    Ok(Upstream { cluster, authority, service, timeout_ms })
}

/// Where a service is and the credentials its calls carry.
pub type Service = (Upstream, Option<ApiKey>, Vec<(String, String)>);

/// The keys every service has: where (`cluster` or `serviceName`/`servicePort`, `domain`,
/// `maxExecutionTime`) and with which credentials (`apiKey`, `headers`).
pub fn parse_service(f: &mut Fields<'_>) -> Result<Service, ConfigError> {
    let upstream = parse_upstream(f)?;
    let api_key = parse_api_key(f)?;
    let headers = parse_headers(f)?;
    Ok((upstream, api_key, headers))
}

fn parse_api_key(provider: &mut Fields<'_>) -> Result<Option<ApiKey>, ConfigError> {
    let Some(mut f) = provider.opt_object("apiKey")? else {
        return Ok(None);
    };
    let location = f.opt_str("in")?;
    let name = f.opt_nonempty("name")?;
    let value = f.opt_str("value")?;
    let key = match location.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("none") | Some("") => None,
        Some(place @ ("header" | "query")) => {
            let name = name.ok_or_else(|| f.err("name", "required"))?;
            // Without a value the key would be sent empty, and the API would answer 401 to every call.
            let value = value.ok_or_else(|| f.err("value", "required"))?;
            if value.trim().is_empty() {
                return Err(f.err("value", "must not be empty"));
            }
            if place == "header" && !name.bytes().all(is_token_byte) {
                return Err(f.err("name", format!("'{name}' is not a valid header name")));
            }
            check_header_text(&f, "name", &name)?;
            check_header_text(&f, "value", &value)?;
            Some(if place == "header" { ApiKey::Header { name, value } } else { ApiKey::Query { name, value } })
        }
        Some(other) => return Err(f.err("in", format!("must be 'header', 'query' or 'none', found '{other}'"))),
    };
    f.deny_unknown()?;
    Ok(key)
}

fn parse_headers(provider: &mut Fields<'_>) -> Result<Vec<(String, String)>, ConfigError> {
    let Some(f) = provider.opt_object("headers")? else {
        return Ok(Vec::new());
    };
    let path = f.path().to_string();
    let Some(Value::Object(map)) = provider.get("headers") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        let p = format!("{path}.{name}");
        let Value::String(value) = value else {
            return Err(ConfigError::new(&p, format!("must be a string, found {}", doc::type_name(value))));
        };
        if name.is_empty() || name.starts_with(':') || !name.bytes().all(is_token_byte) {
            return Err(ConfigError::new(&p, "not a valid header name"));
        }
        if value.contains(['\r', '\n', '\0']) {
            return Err(ConfigError::new(&p, "header value must not contain CR, LF or NUL"));
        }
        out.push((name.to_ascii_lowercase(), value.clone()));
    }
    Ok(out)
}

pub fn check_header_text(f: &Fields<'_>, key: &str, text: &str) -> Result<(), ConfigError> {
    if text.contains(['\r', '\n', '\0']) {
        return Err(f.err(key, "must not contain CR, LF or NUL"));
    }
    Ok(())
}

pub use crate::doc::is_token_byte;
