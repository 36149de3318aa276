//! The client's identity on its tools' calls: the headers an API forwards (`forwardHeaders`) and the
//! token exchanged for the client's (`tokenExchange`, RFC 8693). A call of an API with an exchange
//! waits for its token: the exchange is a callout of its own, made before the API's first call in the
//! request (or not at all when the host seeded a token it kept). The tokens and the client's headers
//! are credentials: never logged, never in the steps, never sent to the LLM.

use crate::agent::protocol::{Call, CallId, ClientHeaders, Exchanged};
use crate::config::{Api, TokenExchange};
use crate::vec_map::VecMap;

/// `expires_in` when the token service gives none (seconds).
const DEFAULT_EXPIRES_S: u64 = 300;
/// A kept token is used until this long before it expires (seconds).
const EXPIRY_MARGIN_S: u64 = 30;
const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// One request's identity: the client's headers and, per API, the token it got (or was refused).
#[derive(Default)]
pub struct Identity {
    client: ClientHeaders,
    /// `apis[]` index → the exchanged token, or `None`: refused (the API is not called).
    tokens: VecMap<usize, Option<String>>,
    /// Exchanged by this request, not yet taken by the host.
    fresh: Vec<Exchanged>,
    /// Cache keys of tokens an API refused (HTTP 401), for the host to drop.
    dropped: Vec<[u8; 32]>,
    /// APIs whose token was refused once in this request: not exchanged again.
    refused_once: Vec<usize>,
    /// APIs whose token the host kept (seeded), and whether a call has used it yet.
    seeded: Vec<(usize, bool)>,
}

/// What a tool call of an API may do now.
pub enum Gate {
    /// Go, with these headers added.
    Go(Vec<(String, String)>),
    /// Wait for the API's exchange, which is under way.
    Wait,
    /// Wait for the API's exchange, which must start.
    Exchange,
    /// The caller is not authorized: the API is not called.
    Denied,
}

impl Identity {
    pub fn new(client: ClientHeaders) -> Identity {
        Identity {
            client,
            tokens: VecMap::new(),
            fresh: Vec::new(),
            dropped: Vec::new(),
            refused_once: Vec::new(),
            seeded: Vec::new(),
        }
    }

    /// A token the host kept for API `api` and this request's subject.
    pub fn seed(&mut self, api: usize, token: String) {
        self.seeded.push((api, false));
        self.tokens.insert(api, Some(token));
    }

    /// The tokens exchanged since the last call, for the host to keep.
    pub fn take_fresh(&mut self) -> Vec<Exchanged> {
        std::mem::take(&mut self.fresh)
    }

    /// `text` with the client's credentials this request carries (forwarded or exchanged headers that
    /// hold one, `is_credential`, with and without `Bearer `), the tokens it got and the `configured`
    /// secrets masked in every spelling (`redact`): a tool that echoes its request must not hand them
    /// to the model. Allocates only when one is found.
    pub fn mask<'t>(&self, text: &'t str, configured: &[String]) -> std::borrow::Cow<'t, str> {
        let credentials = self.client.0.iter().filter(|(k, _)| is_credential(k));
        let client = credentials.clone().map(|(_, v)| v.as_str());
        let bare =
            credentials.filter_map(|(_, v)| v.get(..7).filter(|p| p.eq_ignore_ascii_case("bearer ")).map(|_| &v[7..]));
        let tokens = self.tokens.values().flatten().map(String::as_str);
        let theirs = client.chain(bare).chain(tokens).filter(|s| s.len() >= 4);
        crate::redact::redact_all(text, theirs.chain(configured.iter().map(String::as_str)))
    }

    /// The cache keys of tokens refused since the last call, for the host to drop.
    pub fn take_dropped(&mut self) -> Vec<[u8; 32]> {
        std::mem::take(&mut self.dropped)
    }

    /// API `index` answered 401 to a call made with its exchanged token: the token is revoked or no
    /// longer accepted. It is dropped (here, and by the host: no later request gets it) and the API's
    /// next call in this request exchanges again; once per request, so a service that keeps refusing
    /// costs one exchange, not one per call.
    /// True when the token was dropped.
    pub fn refused(&mut self, apis: &[Api], index: usize) -> bool {
        let Some(x) = apis.get(index).and_then(|a| a.identity.token_exchange.as_ref()) else {
            return false;
        };
        if !matches!(self.tokens.get(&index), Some(Some(_))) || self.refused_once.contains(&index) {
            return false;
        }
        self.seeded.retain(|(api, _)| *api != index);
        self.refused_once.push(index);
        self.tokens.remove(&index);
        if let Some(key) = x.subject(&self.client.0).map(|s| x.cache_key(s)) {
            self.fresh.retain(|f| f.key != key);
            self.dropped.push(key);
        }
        log::info!(
            "apis[{index}] refused its exchanged token (HTTP 401): dropped, and exchanged again on its next call"
        );
        true
    }

    /// A call of API `index` goes out with a token the host kept: true the first time in this request.
    pub fn first_use_of_kept(&mut self, index: usize) -> bool {
        match self.seeded.iter_mut().find(|(api, used)| *api == index && !*used) {
            Some(entry) => {
                entry.1 = true;
                true
            }
            None => false,
        }
    }

    /// What a call of API `index` may do, `exchanging`: an exchange for it is under way.
    pub fn gate(&mut self, apis: &[Api], index: usize, exchanging: bool) -> Gate {
        let Some(api) = apis.get(index) else {
            return Gate::Go(Vec::new());
        };
        let mut headers = self.forwarded(api);
        let Some(x) = &api.identity.token_exchange else {
            return Gate::Go(headers);
        };
        match self.tokens.get(&index) {
            Some(Some(token)) => {
                headers.push(("authorization".into(), format!("Bearer {token}")));
                Gate::Go(headers)
            }
            Some(None) => Gate::Denied,
            None if exchanging => Gate::Wait,
            None if x.subject(&self.client.0).is_none() => {
                log::info!("apis[{index}]: the client sent no '{}': its tools are not called", x.subject_header);
                self.tokens.insert(index, None);
                Gate::Denied
            }
            None => Gate::Exchange,
        }
    }

    /// The client's values of the headers API `api` forwards (a header the client did not send is
    /// absent).
    fn forwarded(&self, api: &Api) -> Vec<(String, String)> {
        let names = &api.identity.forward_headers;
        self.client.0.iter().filter(|(k, _)| names.contains(k)).cloned().collect()
    }

    /// The token exchange for API `index`, under `id` (none if it has no exchange or no subject).
    pub fn exchange_call(&self, apis: &[Api], index: usize, id: CallId, timeout_ms: u64) -> Option<Call> {
        let x = apis.get(index)?.identity.token_exchange.as_ref()?;
        let subject = x.subject(&self.client.0)?;
        Some(exchange_request(x, subject, id, timeout_ms))
    }

    /// The token service's answer for API `index`: the token, kept for this request and offered to
    /// the host; `None`: refused (the API's calls are not made).
    pub fn answered(&mut self, apis: &[Api], index: usize, token: Option<Granted>) {
        let Some(granted) = token else {
            self.tokens.insert(index, None);
            return;
        };
        let x = apis.get(index).and_then(|a| a.identity.token_exchange.as_ref());
        let key = x.and_then(|x| Some(x.cache_key(x.subject(&self.client.0)?)));
        let ttl_s = granted.expires_s.unwrap_or(DEFAULT_EXPIRES_S).saturating_sub(EXPIRY_MARGIN_S);
        if let (Some(key), true) = (key, ttl_s > 0) {
            let token = granted.token.clone();
            // `expires_in` is the token service's word: kept at most a day, and never overflowing.
            self.fresh.push(Exchanged { api: index, key, token, ttl_ms: ttl_s.min(86_400).saturating_mul(1000) });
        }
        self.tokens.insert(index, Some(granted.token));
    }
}

/// A token the token service issued.
pub struct Granted {
    pub token: String,
    pub expires_s: Option<u64>,
}

/// A header whose value is a credential, by its (lower-case) name: masked in tool replies. Other
/// forwarded headers (`x-user`, `x-tenant`) are the client's identity, which the model may see.
fn is_credential(name: &str) -> bool {
    matches!(name, "authorization" | "proxy-authorization" | "cookie")
        || ["token", "key", "secret", "session", "auth", "password"].iter().any(|w| name.contains(w))
}

/// The RFC 8693 request: a form-encoded POST, with the client's credentials as HTTP Basic.
fn exchange_request(x: &TokenExchange, subject: &str, id: CallId, timeout_ms: u64) -> Call {
    let enc = crate::openapi::call::encode_query;
    let mut form = format!("grant_type={}&subject_token={}", enc(GRANT), enc(subject));
    form.push_str(&format!("&subject_token_type={}", enc(ACCESS_TOKEN)));
    for (key, value) in [("audience", &x.audience), ("scope", &x.scope)] {
        if let Some(v) = value {
            form.push_str(&format!("&{key}={}", enc(v)));
        }
    }
    let mut headers = vec![
        ("content-type".to_string(), "application/x-www-form-urlencoded".to_string()),
        ("accept".to_string(), "application/json".to_string()),
        ("accept-encoding".to_string(), "identity".to_string()),
    ];
    if let Some((client_id, secret)) = &x.client {
        let pair = format!("{}:{}", enc(client_id), enc(secret));
        headers.push(("authorization".to_string(), format!("Basic {}", base64(pair.as_bytes()))));
    }
    Call {
        id,
        cluster: x.upstream.cluster.clone(),
        method: "POST",
        path: x.path.clone(),
        authority: x.upstream.authority_or_service(),
        headers,
        body: Some(form.into_bytes().into()),
        timeout_ms,
        stream: false,
    }
}

/// The `error` codes a token service's refusal is logged with (RFC 6749 §5.2, and RFC 8693's
/// `invalid_target`); any other value is logged as `other`: a service may echo anything there, the
/// subject token included.
const ERROR_CODES: [&str; 7] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "invalid_target",
];

/// What the token service's reply means: a token, or why there is none (a short reason that quotes
/// no credential: the status and the `error` code).
pub fn read_reply(status: u16, body: &[u8]) -> Result<Granted, String> {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(match json.get("error").filter(|e| !e.is_null()) {
            None => format!("HTTP {status}"),
            Some(e) => format!("HTTP {status} {}", e.as_str().filter(|c| ERROR_CODES.contains(c)).unwrap_or("other")),
        });
    }
    let token = json.get("access_token").and_then(|t| t.as_str()).unwrap_or("");
    if token.is_empty() {
        return Err(format!("HTTP {status} without an access_token"));
    }
    if !is_b64token(token) {
        // It goes into an Authorization header: one the host refuses to send fails every call.
        return Err(format!("HTTP {status} with an access_token outside RFC 6750's b64token characters"));
    }
    Ok(Granted { token: token.to_string(), expires_s: json.get("expires_in").and_then(lifetime) })
}

/// RFC 6750's `b64token`, `[A-Za-z0-9-._~+/]+=*`: what a bearer token may hold.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// `expires_in` in whole seconds: a number or a numeric string, floored; negative: 0 (never kept);
/// anything else (text, `inf`, an object): `None`, the default lifetime.
fn lifetime(value: &serde_json::Value) -> Option<u64> {
    let seconds = match value {
        serde_json::Value::Number(n) => n.as_f64()?,
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite())?,
        _ => return None,
    };
    // `as` saturates: above u64 is u64::MAX, bounded later to a day.
    Some(if seconds > 0.0 { seconds.floor() as u64 } else { 0 })
}

/// What the model is told of a call its caller may not make.
pub fn not_authorized(tool: &str) -> String {
    format!(
        "The caller is not authorized to use '{tool}': the gateway could not obtain the caller's credentials \
         for its API. Do not retry it; tell the user that they are not authorized for this."
    )
}

pub use crate::doc::base64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads_as_rfc_4648() {
        for (raw, enc) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg==")] {
            assert_eq!(base64(raw.as_bytes()), enc);
        }
        assert_eq!(base64(b"agent:s3cr%2Ft"), "YWdlbnQ6czNjciUyRnQ=");
    }

    #[test]
    fn replies_read_without_quoting_credentials() {
        let ok = read_reply(200, br#"{"access_token":"abc","expires_in":"60"}"#).map(|g| (g.token, g.expires_s));
        assert_eq!(ok.ok(), Some(("abc".to_string(), Some(60))));
        let refused = read_reply(400, br#"{"error":"invalid_grant","error_description":"token eyJ..."}"#);
        assert_eq!(refused.err().as_deref(), Some("HTTP 400 invalid_grant"));
        assert!(read_reply(200, b"{}").is_err());
    }

    #[test]
    fn only_the_rfc_error_codes_reach_the_log() {
        let reason = |body: &str| read_reply(400, body.as_bytes()).err().unwrap_or_default();
        for code in ["invalid_request", "invalid_client", "invalid_grant", "unauthorized_client"] {
            assert_eq!(reason(&format!(r#"{{"error":"{code}"}}"#)), format!("HTTP 400 {code}"));
        }
        for code in ["unsupported_grant_type", "invalid_scope", "invalid_target"] {
            assert_eq!(reason(&format!(r#"{{"error":"{code}"}}"#)), format!("HTTP 400 {code}"));
        }
        // A service that echoes the subject token in `error`: none of it is logged.
        for body in [r#"{"error":"eyJhbGciOiJIUzI1NiJ9_subject"}"#, r#"{"error":5}"#, r#"{"error":"Invalid_Grant"}"#] {
            assert_eq!(reason(body), "HTTP 400 other", "{body}");
        }
        assert_eq!(reason("{}"), "HTTP 400");
        assert_eq!(reason("not json"), "HTTP 400");
    }

    #[test]
    fn expires_in_is_read_as_a_number_of_whole_seconds() {
        let expires = |v: &str| {
            let body = format!(r#"{{"access_token":"abc","expires_in":{v}}}"#);
            read_reply(200, body.as_bytes()).map(|g| g.expires_s).unwrap_or(Some(999_999))
        };
        assert_eq!(expires("60"), Some(60));
        assert_eq!(expires("59.9"), Some(59), "floored");
        assert_eq!(expires(r#""60""#), Some(60), "a numeric string");
        assert_eq!(expires(r#"" 90.5 ""#), Some(90));
        assert_eq!(expires("-1"), Some(0), "negative: never kept");
        assert_eq!(expires(r#""-300""#), Some(0));
        assert_eq!(expires("18446744073709551616"), Some(u64::MAX), "above u64: the most");
        for absent in [r#""soon""#, r#""inf""#, r#""NaN""#, "null", "true", "{}", "[]", r#""""#] {
            assert_eq!(expires(absent), None, "{absent}: the default lifetime");
        }
    }

    #[test]
    fn a_token_outside_the_b64token_alphabet_is_refused_with_the_reason() {
        for ok in ["abc", "a-b.c_d~e+f/g==", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "Zm9v="] {
            let body = serde_json::json!({"access_token": ok}).to_string();
            assert!(read_reply(200, body.as_bytes()).is_ok(), "{ok}");
        }
        for bad in ["a\u{1}b", "a\tb", "ab\u{7f}", " abc", "abc\n", "a b", "a=b", "=", "tök", "a,b", "a\"b", "a\u{85}b"]
        {
            let body = serde_json::json!({"access_token": bad}).to_string();
            let why = read_reply(200, body.as_bytes()).err().unwrap_or_default();
            assert!(why.contains("b64token"), "{bad:?}: {why}");
            assert!(!why.contains(bad), "the reason quotes no token: {why}");
        }
    }
}
