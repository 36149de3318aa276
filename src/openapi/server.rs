//! The server a tool is called on: the first entry of the nearest `servers` list (operation, path item,
//! document), with its variables' defaults filled in. Without any, OpenAPI's default is `/`.

use super::{ErrorKind, OpenApiError};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Server {
    /// The URL's host (and port), if it names one; `apiProvider.domain` takes precedence.
    pub host: Option<String>,
    /// The URL's path, without a trailing `/` (`/api/v3`, or empty).
    pub base_path: String,
}

impl Server {
    pub fn pick(servers: Option<&Value>) -> Result<Server, OpenApiError> {
        let first = match servers {
            Some(Value::Array(list)) => list.first(),
            _ => None,
        };
        let Some(first) = first else {
            return Ok(Server::default());
        };
        let url = first
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| OpenApiError::new(ErrorKind::BadServer, "servers[0] has no url"))?;
        let url = substitute(url, first.get("variables"))?;
        Server::parse(&url)
    }

    fn parse(url: &str) -> Result<Server, OpenApiError> {
        let (host, path) = if let Some(i) = url.find("://") {
            split_host(&url[i + 3..])
        } else if let Some(rest) = url.strip_prefix("//") {
            split_host(rest)
        } else {
            (None, url)
        };
        if let Some(h) = &host {
            if h.is_empty() || h.contains(['@', ' ', '{', '}']) {
                return Err(OpenApiError::new(ErrorKind::BadServer, format!("server URL '{url}' has no usable host")));
            }
            check_port(url, h)?;
        }
        let path = path.split(['?', '#']).next().unwrap_or("").trim_end_matches('/');
        let base_path = if path.is_empty() || path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        Ok(Server { host, base_path })
    }
}

/// The port after the host (`h:8080`, `[::1]:8080`), if there is one, must be a TCP port: it becomes
/// the `:authority` of every call.
fn check_port(url: &str, host: &str) -> Result<(), OpenApiError> {
    let after_ipv6 = host.rfind(']').map_or(host, |i| &host[i + 1..]);
    let Some((_, port)) = after_ipv6.rsplit_once(':') else {
        return Ok(());
    };
    let number = port.parse::<u32>().ok().filter(|_| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    match number {
        Some(1..=65535) => Ok(()),
        _ => Err(OpenApiError::new(
            ErrorKind::BadServer,
            format!("server URL '{url}' has port '{port}', not a number from 1 to 65535"),
        )),
    }
}

fn split_host(rest: &str) -> (Option<String>, &str) {
    match rest.find('/') {
        Some(i) => (Some(rest[..i].to_string()), &rest[i..]),
        None => (Some(rest.to_string()), ""),
    }
}

/// `{name}` → the variable's `default`.
fn substitute(url: &str, variables: Option<&Value>) -> Result<String, OpenApiError> {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            return Err(OpenApiError::new(ErrorKind::BadServer, format!("unclosed '{{' in server URL '{url}'")));
        };
        let name = &rest[start + 1..start + len];
        let value = variables
            .and_then(|v| v.get(name))
            .and_then(|v| v.get("default"))
            .and_then(|d| match d {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .ok_or_else(|| {
                OpenApiError::new(ErrorKind::BadServer, format!("server variable '{name}' has no default"))
            })?;
        out.push_str(&value);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn picks_first_server_with_variables() {
        let s = Server::pick(Some(&json!([{"url": "{scheme}://developer.uspto.gov/ds-api/",
            "variables": {"scheme": {"default": "https", "enum": ["https", "http"]}}}])))
        .unwrap();
        assert_eq!(s, Server { host: Some("developer.uspto.gov".into()), base_path: "/ds-api".into() });
    }

    #[test]
    fn relative_and_missing_servers() {
        assert_eq!(Server::pick(None).unwrap(), Server::default());
        let s = Server::pick(Some(&json!([{"url": "/v1"}]))).unwrap();
        assert_eq!(s, Server { host: None, base_path: "/v1".into() });
        let s = Server::pick(Some(&json!([{"url": "http://h:8080"}]))).unwrap();
        assert_eq!(s, Server { host: Some("h:8080".into()), base_path: String::new() });
    }

    #[test]
    fn ports_are_tcp_ports() {
        for (url, port) in [
            ("http://api.example.com:99999/v1", "99999"),
            ("http://api.example.com:0", "0"),
            ("https://h:65536", "65536"),
            ("https://h:+80", "+80"),
            ("https://h:http/x", "http"),
            ("https://h:", ""),
            ("https://[::1]:70000", "70000"),
        ] {
            let e = Server::pick(Some(&json!([{"url": url}]))).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadServer, "{url}");
            assert_eq!(e.detail, format!("server URL '{url}' has port '{port}', not a number from 1 to 65535"));
        }
        for (url, host) in [("http://h:1", "h:1"), ("http://h:65535/", "h:65535"), ("http://[::1]/", "[::1]")] {
            assert_eq!(Server::pick(Some(&json!([{"url": url}]))).unwrap().host.as_deref(), Some(host), "{url}");
        }
        let with_variable = json!([{"url": "https://h:{port}", "variables": {"port": {"default": "123456"}}}]);
        assert!(Server::pick(Some(&with_variable)).unwrap_err().detail.contains("port '123456'"));
    }

    #[test]
    fn variable_without_default_is_named() {
        let e = Server::pick(Some(&json!([{"url": "https://{region}.example.com"}]))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadServer);
    }
}
