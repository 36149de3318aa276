//! CEL's tokens: literals (ints, uints, doubles, strings in every quoting CEL has), identifiers,
//! operators and punctuation, each with the byte offset it starts at (for the errors' positions).

use super::value::parse_double;
use super::CelError;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// An int literal's magnitude: `-9223372036854775808` is a negated magnitude above `i64::MAX`.
    Int(u64),
    Uint(u64),
    Double(f64),
    Str(String),
    Ident(String),
    /// Operators and punctuation, as written.
    Op(&'static str),
    End,
}

const OPS: [&str; 24] = [
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%", "?", ":", ".", ",", "(", ")", "[", "]",
    "{", "}",
];

/// The tokens of `src`, each with its byte offset; the last is `End`.
pub fn lex(src: &str) -> Result<Vec<(Tok, usize)>, CelError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (tok, end) = number(src, i)?;
            out.push((tok, i));
            i = end;
        } else if c == b'"' || c == b'\'' {
            let (s, end) = string(src, i, i, false)?;
            out.push((Tok::Str(s), i));
            i = end;
        } else if (c == b'r' || c == b'R') && matches!(b.get(i + 1), Some(b'"' | b'\'')) {
            let (s, end) = string(src, i + 1, i, true)?;
            out.push((Tok::Str(s), i));
            i = end;
        } else if (c == b'b' || c == b'B') && matches!(b.get(i + 1), Some(b'"' | b'\'')) {
            return Err(CelError::at(i, "bytes literals are not supported"));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let end = i + b[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count();
            out.push((Tok::Ident(src[i..end].to_string()), i));
            i = end;
        } else if let Some(op) = OPS.iter().find(|op| src[i..].starts_with(**op)) {
            out.push((Tok::Op(op), i));
            i += op.len();
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(CelError::at(i, format!("unexpected character '{ch}'")));
        }
    }
    out.push((Tok::End, src.len()));
    Ok(out)
}

/// A number at `start`: `123`, `0x1F`, `123u`, `1.5`, `1e3`, `.5`.
fn number(src: &str, start: usize) -> Result<(Tok, usize), CelError> {
    let b = src.as_bytes();
    let digits = |from: usize, hex: bool| {
        from + b[from..].iter().take_while(|c| if hex { c.is_ascii_hexdigit() } else { c.is_ascii_digit() }).count()
    };
    let too_large = || CelError::at(start, "number out of range");
    if b[start] == b'0' && matches!(b.get(start + 1), Some(b'x' | b'X')) {
        let end = digits(start + 2, true);
        let n = u64::from_str_radix(&src[start + 2..end], 16).map_err(|_| too_large())?;
        return Ok(with_suffix(b, n, end));
    }
    let mut end = digits(start, false);
    let mut float = false;
    if b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
        float = true;
        end = digits(end + 1, false);
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(end + 1), Some(b'+' | b'-')));
        if b.get(end + 1 + sign).is_some_and(u8::is_ascii_digit) {
            float = true;
            end = digits(end + 1 + sign, false);
        }
    }
    let text = &src[start..end];
    if float {
        return parse_double(text).map(|f| (Tok::Double(f), end)).ok_or_else(too_large);
    }
    let n = text.parse::<u64>().map_err(|_| too_large())?;
    Ok(with_suffix(b, n, end))
}

fn with_suffix(b: &[u8], n: u64, end: usize) -> (Tok, usize) {
    if matches!(b.get(end), Some(b'u' | b'U')) {
        (Tok::Uint(n), end + 1)
    } else {
        (Tok::Int(n), end)
    }
}

/// A quoted string whose quote is at `q` (`at`: where the literal starts, its prefix included):
/// single, double or triple quotes; escapes unless `raw`.
fn string(src: &str, q: usize, at: usize, raw: bool) -> Result<(String, usize), CelError> {
    let quote = &src[q..q + 1];
    let triple = src[q..].starts_with(&quote.repeat(3));
    let close = if triple { quote.repeat(3) } else { quote.to_string() };
    let mut i = q + close.len();
    let mut out = String::new();
    loop {
        let rest = &src[i..];
        if rest.starts_with(close.as_str()) {
            return Ok((out, i + close.len()));
        }
        let Some(ch) = rest.chars().next() else {
            return Err(CelError::at(at, "unterminated string"));
        };
        if (ch == '\n' || ch == '\r') && !triple {
            return Err(CelError::at(at, "unterminated string"));
        }
        if ch == '\\' && !raw {
            let (c, len) = escape(&src[i..]).ok_or_else(|| CelError::at(i, "invalid escape sequence"))?;
            out.push(c);
            i += len;
        } else {
            out.push(ch);
            i += ch.len_utf8();
        }
    }
}

/// The escape at the start of `s` (which starts with a backslash), and its length.
fn escape(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    let simple = match *b.get(1)? {
        b'a' => Some('\x07'),
        b'b' => Some('\x08'),
        b'f' => Some('\x0c'),
        b'n' => Some('\n'),
        b'r' => Some('\r'),
        b't' => Some('\t'),
        b'v' => Some('\x0b'),
        c @ (b'\\' | b'\'' | b'"' | b'`' | b'?') => Some(c as char),
        _ => None,
    };
    if let Some(c) = simple {
        return Some((c, 2));
    }
    let (radix, len) = match b[1] {
        b'x' | b'X' => (16, 2),
        b'u' => (16, 4),
        b'U' => (16, 8),
        b'0'..=b'3' => (8, 3),
        _ => return None,
    };
    let from = if radix == 8 { 1 } else { 2 };
    let digits = s.get(from..from + len)?;
    let n = u32::from_str_radix(digits, radix).ok()?;
    Some((char::from_u32(n)?, from + len))
}
