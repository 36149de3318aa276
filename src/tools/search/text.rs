//! Words for the catalog index: text split into words at spaces and punctuation, and inside
//! identifiers at camelCase, snake_case, kebab-case and digit boundaries; lower-cased, English
//! stopwords dropped, and a light stemmer (suffix stripping) so that `users`, `user`, `created`,
//! `creating`, `creation` and `create` meet. CJK ideographs are words of one character each.
//! The same function reads the operator's text and the model's query, so they meet in one vocabulary.

/// English words too common to tell tools apart (sorted: looked up by binary search).
const STOPWORDS: [&str; 74] = [
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "being", "but", "by", "can",
    "could", "do", "does", "each", "for", "from", "given", "has", "have", "he", "her", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "one", "or", "our", "please", "she", "should",
    "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "us", "use", "was", "we", "were", "what", "which", "who", "will", "with", "would",
];

/// The longest word kept: longer ones are identifiers or noise (hashes, base64).
const MAX_WORD: usize = 40;

/// Calls `emit` with each word of `text`, normalized (lower case, stemmed), stopwords left out. The
/// word is borrowed from a buffer reused for every word: no allocation per word.
pub fn words(text: &str, mut emit: impl FnMut(&str)) {
    let mut word = String::new();
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if is_ideograph(c) {
            flush(&mut word, &mut emit);
            let mut buf = [0u8; 4];
            emit(c.encode_utf8(&mut buf));
            prev = None;
            continue;
        }
        if !c.is_alphanumeric() {
            flush(&mut word, &mut emit);
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let next_lower = chars.peek().is_some_and(char::is_ascii_lowercase);
            // getWeather | HTTPServer (before the S) | v3 | 3d
            let boundary = (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                || (p.is_ascii_uppercase() && c.is_ascii_uppercase() && next_lower)
                || (p.is_ascii_digit() != c.is_ascii_digit());
            if boundary {
                flush(&mut word, &mut emit);
            }
        }
        // Case is folded for ASCII only: Unicode's case tables would cost the module tens of KB.
        word.push(c.to_ascii_lowercase());
        prev = Some(c);
    }
    flush(&mut word, &mut emit);
}

fn flush(word: &mut String, emit: &mut impl FnMut(&str)) {
    if !word.is_empty() && word.len() <= MAX_WORD && STOPWORDS.binary_search(&word.as_str()).is_err() {
        stem(word);
        emit(word);
    }
    word.clear();
}

fn is_ideograph(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// Suffix stripping in the manner of Porter's first steps, kept small: plurals, `-ing`, `-ed`,
/// `-tion`, then a final `e`, so that the forms of one verb or noun share a stem. Stems keep
/// at least three letters; words that are not ASCII are left as they are.
pub fn stem(w: &mut String) {
    if w.len() <= 3 || !w.is_ascii() {
        return;
    }
    plural(w);
    if w.len() >= 6 && w.ends_with("ing") {
        cut(w, 3);
        undouble(w);
    } else if w.len() >= 5 && w.ends_with("ied") {
        cut(w, 3);
        w.push('y');
    } else if w.len() >= 5 && w.ends_with("ed") && !w.ends_with("eed") {
        cut(w, 2);
        undouble(w);
    } else if w.len() >= 6 && w.ends_with("tion") {
        cut(w, 3);
    }
    if w.len() >= 4 && w.ends_with('e') {
        cut(w, 1);
    }
}

fn plural(w: &mut String) {
    let b = w.as_bytes();
    let n = b.len();
    if w.ends_with("ies") && n > 4 {
        cut(w, 3);
        w.push('y');
    } else if w.ends_with("es")
        && n > 4
        && (matches!(b[n - 3], b's' | b'x' | b'z') || w.ends_with("ches") || w.ends_with("shes"))
    {
        cut(w, 2);
    } else if w.ends_with('s') && !matches!(b[n - 2], b's' | b'u' | b'i') {
        cut(w, 1);
    }
}

fn cut(w: &mut String, n: usize) {
    w.truncate(w.len() - n);
}

/// `runn` → `run`, `gett` → `get` (not `ll`, `ss`, `zz`: `call`, `pass`).
fn undouble(w: &mut String) {
    let b = w.as_bytes();
    let n = b.len();
    if n >= 4 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'a' | b'e' | b'i' | b'o' | b'u' | b'l' | b's' | b'z') {
        cut(w, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        words(text, |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn identifiers_split_at_case_underscores_dashes_and_digits() {
        assert_eq!(all("getWeatherNow"), ["get", "weather", "now"]);
        assert_eq!(all("list_user-accounts"), ["list", "user", "account"]);
        assert_eq!(all("HTTPServerError"), ["http", "server", "error"]);
        assert_eq!(all("/v3/weather/{cityId}"), ["v", "3", "weather", "city", "id"]);
        assert_eq!(all("get2faCodes"), ["get", "2", "fa", "cod"]);
    }

    #[test]
    fn stopwords_are_dropped_and_case_is_folded() {
        assert_eq!(all("What is THE weather in Jinan?"), ["weather", "jinan"]);
        assert!(all("the of and to").is_empty());
    }

    #[test]
    fn forms_of_one_word_share_a_stem() {
        let stem_of = |w: &str| all(w).pop().unwrap_or_default();
        for group in [
            &["create", "creates", "created", "creating", "creation"][..],
            &["calculate", "calculation", "calculated", "calculates"],
            &["user", "users"],
            &["category", "categories"],
            &["run", "running"],
            &["box", "boxes"],
            &["match", "matches"],
            &["address", "addresses"],
            &["delete", "deleted", "deletion", "deletes"],
        ] {
            let first = stem_of(group[0]);
            for w in group {
                assert_eq!(stem_of(w), first, "{w} vs {}", group[0]);
            }
        }
        // Words that end like a suffix but are not one keep their letters.
        assert_eq!(stem_of("status"), "status");
        assert_eq!(stem_of("analysis"), "analysis");
        assert_eq!(stem_of("need"), "need");
        assert_eq!(stem_of("call"), "call");
    }

    #[test]
    fn ideographs_are_words_and_long_noise_is_dropped() {
        assert_eq!(all("查询天气 now"), ["查", "询", "天", "气", "now"]);
        assert!(all(&"x".repeat(41)).is_empty());
    }
}
