//! Secrets out of log lines: every configured secret (and its percent-encoded form, as it appears in a
//! query string) is replaced before a line reaches the host, at every level.

use std::borrow::Cow;

pub const MASK: &str = "[redacted]";

/// `text` with every occurrence of every secret replaced by `MASK`. `secrets` is longest first (see
/// `Config::secrets`), so a secret that contains another is replaced whole.
pub fn redact<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        if out.contains(s.as_str()) {
            out = Cow::Owned(out.replace(s.as_str(), MASK));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_is_masked_longest_first() {
        let secrets = vec!["sk-abcdef-long".to_string(), "sk-abc".to_string()];
        assert_eq!(redact("a sk-abcdef-long b sk-abc c", &secrets), "a [redacted] b [redacted] c");
        assert!(matches!(redact("nothing here", &secrets), Cow::Borrowed(_)));
    }
}
