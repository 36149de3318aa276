//! Where calls go and what they carry: an Envoy cluster with its `:authority` and timeout (`Upstream`),
//! an `apis[]` entry's credentials (`Api`, `ApiKey`), and the HTTP request a tool call becomes
//! (`Request`). The configuration fills them in; every tool source and the hosts only read them.

/// Where a callout goes: the Envoy cluster, the `:authority` it carries, and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub cluster: String,
    /// `domain`: the `:authority` of every call.
    pub authority: Option<String>,
    /// `serviceName`: the `:authority` when nothing better is known.
    pub service: Option<String>,
    pub timeout_ms: u64,
}

impl Upstream {
    pub fn authority_or_service(&self) -> String {
        self.authority.clone().or_else(|| self.service.clone()).unwrap_or_else(|| self.cluster.clone())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiKey {
    Header { name: String, value: String },
    Query { name: String, value: String },
}

/// One `apis[]` entry: where its tools are called and with which credentials.
#[derive(Debug, Clone)]
pub struct Api {
    pub upstream: Upstream,
    pub api_key: Option<ApiKey>,
    pub headers: Vec<(String, String)>,
    /// Retries of a GET or HEAD tool call that failed with 429, 5xx, a reset or a timeout (opt-in:
    /// other methods may not be idempotent).
    pub max_retries: u32,
}

/// A tool's HTTP request before it has a call id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: &'static str,
    /// Path and query string, ready for `:path`.
    pub path: String,
    pub authority: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}
