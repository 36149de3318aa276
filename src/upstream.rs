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
    /// The client's identity on this API's calls (`forwardHeaders`, `tokenExchange`).
    pub identity: Identity,
}

/// What of the client's identity an API's calls carry: headers of the client's request copied as they
/// are (lower-case names), and a token exchanged for the client's (RFC 8693).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub forward_headers: Vec<String>,
    pub token_exchange: Option<TokenExchange>,
}

/// `tokenExchange`: where the token service is and what the exchange asks of it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenExchange {
    pub upstream: Upstream,
    pub path: String,
    pub audience: Option<String>,
    pub scope: Option<String>,
    /// `clientId` and `clientSecret`, sent as HTTP Basic credentials (RFC 6749 §2.3.1).
    pub client: Option<(String, String)>,
    /// The client's request header that holds the subject token (lower case; `Bearer ` is stripped).
    pub subject_header: String,
}

impl std::fmt::Debug for TokenExchange {
    /// Without the client secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchange")
            .field("upstream", &self.upstream)
            .field("path", &self.path)
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .field("client_id", &self.client.as_ref().map(|(id, _)| id))
            .field("subject_header", &self.subject_header)
            .finish()
    }
}

impl TokenExchange {
    /// The subject token in the client's headers (`(name, value)`, lower-case names): the value of
    /// `subjectHeader` with a leading `Bearer ` taken off; none when absent or empty.
    pub fn subject<'h>(&self, client: &'h [(String, String)]) -> Option<&'h str> {
        let value = client.iter().find(|(k, _)| *k == self.subject_header).map(|(_, v)| v.trim())?;
        if value.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = match value.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case("bearer ") => value[7..].trim_start(),
            _ => value,
        };
        (!token.is_empty()).then_some(token)
    }

    /// The key an exchanged token is kept under: a SHA-256 of the subject token, the token service
    /// (cluster, path, client id), the audience and the scope (never the token itself). Two APIs that
    /// exchange at different services never share a token, even with the same audience and scope.
    pub fn cache_key(&self, subject: &str) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let client = self.client.as_ref().map_or("", |(id, _)| id.as_str());
        let service = [self.upstream.cluster.as_str(), self.path.as_str(), client];
        let scoped = [subject, self.audience.as_deref().unwrap_or(""), self.scope.as_deref().unwrap_or("")];
        for part in service.into_iter().chain(scoped) {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        h.finalize().into()
    }
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
