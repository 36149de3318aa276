//! Secrets out of what leaves the plugin: every configured secret is replaced before a log line
//! reaches the host, at every level, and every credential before a tool's reply reaches the model, the
//! steps or a span (`agent::identity::Identity::mask`).
//!
//! A secret is found in every spelling a JSON or HTTP encoder writes, mixed freely within one
//! occurrence: as is, JSON-escaped (`\/`, `\t`, `\"`, `\uXXXX` for any character, surrogate pairs
//! included) and percent-encoded (either hex case, `+` for a space). The text is decoded on the fly
//! while each secret is matched, and the raw bytes of every match are replaced; matches that overlap
//! are replaced as one. Nothing is allocated when no secret is found.

use std::borrow::Cow;

pub const MASK: &str = "[redacted]";

/// How many bytes a match may read before it gives up, per byte of the secret (a match backtracks
/// only where an escape and the literal byte both fit, `%25` or `\\` against a `%` or `\` of the
/// secret; the bound keeps a hostile secret from making it exponential).
const STEPS_PER_BYTE: usize = 4;
/// How deep those backtracking points nest.
const MAX_BRANCHES: u32 = 16;

/// `text` with every spelling of every secret replaced by `MASK`.
pub fn redact<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    redact_all(text, secrets.iter().map(String::as_str))
}

/// `redact` over any list of secrets (empty ones are skipped).
pub fn redact_all<'a, 's, I>(text: &'a str, secrets: I) -> Cow<'a, str>
where
    I: Iterator<Item = &'s str> + Clone,
{
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    // `text[..copied]` is in `out`; `span`: the masked bytes being extended.
    let (mut copied, mut span): (usize, Option<(usize, usize)>) = (0, None);
    let mut flush = |(from, to): (usize, usize), copied: &mut usize| {
        let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
        out.push_str(&text[*copied..from]);
        out.push_str(MASK);
        *copied = to;
    };
    // The bytes a spelling of some secret may start with: most of the text is passed over by one test.
    let mut starts = [0u64; 4];
    for b in secrets.clone().filter_map(|s| s.as_bytes().first()).chain(b"%\\+") {
        starts[usize::from(*b >> 6)] |= 1 << (b & 63);
    }
    let may_start = |b: u8| starts[usize::from(b >> 6)] & 1 << (b & 63) != 0;
    for i in (0..bytes.len()).filter(|i| may_start(bytes[*i])) {
        if !text.is_char_boundary(i) {
            continue;
        }
        if let Some((from, to)) = span.filter(|(_, to)| i >= *to) {
            flush((from, to), &mut copied);
            span = None;
        }
        // What the byte here may stand for, read once for every secret.
        let firsts = readings(bytes, i);
        let may_match = |s: &&str| s.as_bytes().first().is_some_and(|b| firsts.iter().flatten().any(|r| r.0[0] == *b));
        let end = secrets.clone().filter(may_match).filter_map(|s| match_at(bytes, i, s.as_bytes())).max();
        if let Some(end) = end.filter(|e| text.is_char_boundary(*e)) {
            span = Some(span.map_or((i, end), |(from, to)| (from, to.max(end))));
        }
    }
    if let Some(last) = span {
        flush(last, &mut copied);
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// Where a spelling of `secret` that starts at `text[start]` ends.
fn match_at(text: &[u8], start: usize, secret: &[u8]) -> Option<usize> {
    let mut steps = secret.len().saturating_mul(STEPS_PER_BYTE);
    match_from(text, start, secret, &mut steps, 0)
}

fn match_from(text: &[u8], mut j: usize, secret: &[u8], steps: &mut usize, depth: u32) -> Option<usize> {
    let mut k = 0;
    while k < secret.len() {
        *steps = steps.checked_sub(1)?;
        let rest = &secret[k..];
        let fits = |r: Option<Reading>| r.filter(|(d, n, _)| rest.starts_with(&d[..*n])).map(|(_, n, raw)| (n, raw));
        let mut readings = readings(text, j).into_iter().filter_map(fits);
        let (mut n, mut raw) = readings.next()?;
        // More than one reading fits (`%25` or `\\` against a `%` or `\` of the secret): each but the
        // last is tried on its own.
        for (next_n, next_raw) in readings {
            if depth < MAX_BRANCHES {
                if let Some(end) = match_from(text, j + raw, &secret[k + n..], steps, depth + 1) {
                    return Some(end);
                }
            }
            (n, raw) = (next_n, next_raw);
        }
        (j, k) = (j + raw, k + n);
    }
    Some(j)
}

/// What `text[j..]` may stand for: the UTF-8 bytes (the first `n` of the array) and how many bytes
/// of `text` they take.
type Reading = ([u8; 4], usize, usize);

/// Every reading of `text[j..]`: encoded more than once (`\\\/`, `%252F`), once (`\/`, `%2F`, `+`),
/// and the byte as written.
fn readings(text: &[u8], j: usize) -> [Option<Reading>; 3] {
    let literal = text.get(j).map(|b| ([*b, 0, 0, 0], 1, 1));
    match text.get(j) {
        Some(b'\\') => {
            let run = text[j..].iter().take_while(|b| **b == b'\\').count();
            let deep = if run > 1 { json_escape(text, j + run - 1, run) } else { None };
            [deep, json_escape(text, j, 1), literal]
        }
        Some(b'%') => {
            // `%` then `25` for each further layer, then the byte's two digits.
            let layers = text[j + 1..].chunks_exact(2).take_while(|d| *d == b"25").count();
            let deep = if layers > 0 { percent_escape(text, j, 1 + 2 * layers) } else { None };
            [deep, percent_escape(text, j, 1), literal]
        }
        Some(b'+') => [Some(([b' ', 0, 0, 0], 1, 1)), None, literal],
        _ => [None, None, literal],
    }
}

/// `%XX` whose digits start at `text[j + prefix]`.
fn percent_escape(text: &[u8], j: usize, prefix: usize) -> Option<Reading> {
    let byte = u8::try_from(hex(text.get(j + prefix..j + prefix + 2)?)?).ok()?;
    Some(([byte, 0, 0, 0], 1, prefix + 2))
}

/// A JSON escape whose last backslash is `text[at]`, after `run` backslashes in all (one layer of
/// JSON per doubling): the bytes it stands for, counted from the first backslash.
fn json_escape(text: &[u8], at: usize, run: usize) -> Option<Reading> {
    let byte = match *text.get(at + 1)? {
        b'u' => return unicode_escape(text, at, run),
        b @ (b'"' | b'\\' | b'/') => b,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    };
    Some(([byte, 0, 0, 0], 1, run + 1))
}

/// `\uXXXX` whose backslash is `text[at]`, or a surrogate pair `\uD83D\uDE00` (its second half after
/// the same `run` of backslashes), as UTF-8; a lone surrogate is no character, and no escape.
fn unicode_escape(text: &[u8], at: usize, run: usize) -> Option<Reading> {
    let high = hex(text.get(at + 2..at + 6)?)?;
    let (code, end) = if (0xD800..0xDC00).contains(&high) {
        let second = at + 6 + run - 1;
        let slashes = text.get(at + 6..second)?.iter().all(|b| *b == b'\\');
        if !slashes || text.get(second..second + 2)? != b"\\u" {
            return None;
        }
        let low = hex(text.get(second + 2..second + 6)?)?.checked_sub(0xDC00).filter(|l| *l < 0x400)?;
        (0x10000 + ((high - 0xD800) << 10) + low, second + 6)
    } else {
        (high, at + 6)
    };
    let mut buf = [0u8; 4];
    let n = char::from_u32(code)?.encode_utf8(&mut buf).len();
    Some((buf, n, end - (at + 1 - run)))
}

/// The value of hex digits (either case); `None` if one is not.
fn hex(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, d| Some(n << 4 | char::from(*d).to_digit(16)?))
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

    fn masks(secret: &str, text: &str) -> String {
        redact(text, &[secret.to_string()]).into_owned()
    }

    #[test]
    fn json_escaped_spellings_are_masked() {
        let token = "eyJh/bG+ci==";
        // PHP's json_encode writes `/` as `\/`; any character may be `\uXXXX`, in either case, mixed.
        for spelling in [r"eyJh\/bG+ci==", r"\u0065yJh\u002FbG\u002bci\u003d=", r"eyJh\/bG\u002Bci=\u003D"] {
            assert_eq!(masks(token, &format!(r#"{{"echo":"{spelling}"}}"#)), r#"{"echo":"[redacted]"}"#, "{spelling}");
        }
        assert_eq!(masks("a\tb\"c\\d", r#"x a\tb\"c\\d y"#), "x [redacted] y");
        assert_eq!(masks("a\tb", r"a\u0009b"), "[redacted]");
        assert_eq!(masks("k😀é", r"k\ud83d\ude00\u00e9!"), "[redacted]!", "a surrogate pair, a two-byte character");
        assert_eq!(masks("ab/c", r"ab\/x ab\c ab\u002"), r"ab\/x ab\c ab\u002", "no spelling of it");
    }

    #[test]
    fn percent_encoded_spellings_are_masked() {
        let token = "a b/c+é";
        for spelling in ["a+b%2Fc%2B%C3%A9", "a%20b%2fc%2b%c3%a9", "a b%2Fc+é", "a%20b/c%2B%C3%a9"] {
            assert_eq!(masks(token, &format!("q={spelling}&r")), "q=[redacted]&r", "{spelling}");
        }
        assert_eq!(masks("a+b", "a b"), "a b", "a space is not a plus");
        assert_eq!(masks("ab", "a%2"), "a%2");
    }

    #[test]
    fn a_secret_holding_escape_characters_is_masked_as_written() {
        assert_eq!(masks("p%41q", "x p%41q y"), "x [redacted] y");
        assert_eq!(masks("p%41q", "x p%2541q y"), "x [redacted] y");
        assert_eq!(masks(r"a\/b", r"x a\/b y"), "x [redacted] y");
        assert_eq!(masks(r"a\/b", r"x a\\\/b y"), "x [redacted] y");
    }

    #[test]
    fn spellings_encoded_twice_are_masked() {
        // A JSON document inside a JSON string, a query string inside a query parameter.
        for spelling in [r"a\\\/b\\u002B\\\u0063 d", r"a\\/b+\\\\u0063\\u0020d", "a%252Fb%252Bc%2520d", "a%25252fb+c d"]
        {
            assert_eq!(masks("a/b+c d", &format!("<{spelling}>")), "<[redacted]>", "{spelling}");
        }
        assert_eq!(masks("k😀", r"k\\ud83d\\ude00"), "[redacted]");
        assert_eq!(masks("k😀", r"k\\ud83d\ude00"), r"k\\ud83d\ude00", "one pair, one layer");
    }

    #[test]
    fn overlapping_secrets_are_masked_as_one() {
        let secrets = vec!["bcdef".to_string(), "abc".to_string()];
        assert_eq!(redact("xabcdefy", &secrets), "x[redacted]y");
        assert_eq!(redact("abc%2Fbcdef", &secrets), "[redacted]%2F[redacted]");
    }
}
