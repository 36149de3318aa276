//! How deep a YAML text nests, found in one linear pass before the YAML parser sees it. libyaml's scanner
//! (inside yaml_serde) does work proportional to the flow depth for every token, so 200 KB of `a: [[[…`
//! took 40 s to refuse. The pass follows libyaml's own rules for where tokens start (quoted, plain and
//! block scalars, comments, simple keys, block indentation), so its depth is the parser's: brackets in
//! strings, comments and prose do not count, and text cannot hide a real one from it. The tests check
//! that token for token against libyaml, on random texts.

/// What libyaml may spend on flow collections: every token costs it one step per open flow collection
/// (its simple-key bookkeeping). 2^24 steps take about 0.2 s natively; the 345 KB deepl-full.yaml
/// written as JSON (which only gets here when it is not valid JSON) needs 170,000.
const MAX_FLOW_WORK: usize = 1 << 24;

/// `Err` names the line and column (1-based) where the text goes deeper than `max` collections, or where
/// its flow collections cost the parser more than `MAX_FLOW_WORK`.
pub(super) fn check(text: &str, max: usize) -> Result<(), String> {
    let mut s = Scanner::new(text.as_bytes());
    let mut work = 0usize;
    while let Some((line, column)) = s.next_token() {
        let at = || format!("at line {} column {}", line + 1, column + 1);
        if s.indents.len() + s.flow > max {
            return Err(format!("nested deeper than {max} levels {}", at()));
        }
        work += s.flow;
        if work > MAX_FLOW_WORK {
            return Err(format!(
                "too many [ ] and {{ }} levels for a text this long {}: the YAML parser's work grows with both; \
                 write it in block style, or as valid JSON",
                at()
            ));
        }
    }
    Ok(())
}

struct Scanner<'a> {
    text: &'a [u8],
    /// Byte offset; also libyaml's `mark.index`.
    at: usize,
    line: usize,
    /// In characters, as libyaml counts it.
    column: usize,
    flow: usize,
    /// Columns of the open block collections (libyaml's `indents` plus `indent`).
    indents: Vec<usize>,
    key_allowed: bool,
    /// Where a block-level simple key may have started: line, byte offset, column.
    key: Option<(usize, usize, usize)>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a [u8]) -> Self {
        Scanner { text, at: 0, line: 0, column: 0, flow: 0, indents: Vec::new(), key_allowed: true, key: None }
    }

    /// Reads one token (libyaml's `fetch_next_token`) and returns where it started; None at the end of
    /// the text. Where libyaml would stop with an error, this reads on: it may then see more than the
    /// parser, never less.
    fn next_token(&mut self) -> Option<(usize, usize)> {
        self.skip_to_token();
        self.stale_key();
        if self.flow == 0 {
            self.unroll(self.column as isize);
        }
        if self.byte(0) == 0 {
            return None;
        }
        let start = (self.line, self.column);
        if self.column == 0 && self.byte(0) == b'%' {
            // A directive: libyaml wants nothing but a comment after it on its line.
            self.end_of_block_context();
            self.pass(|_| false);
        } else if self.column == 0 && self.document_marker() {
            self.end_of_block_context();
            (0..3).for_each(|_| self.bump());
        } else {
            self.token();
        }
        Some(start)
    }

    fn token(&mut self) {
        let c = self.byte(0);
        match c {
            b'[' | b'{' => {
                self.save_key();
                self.flow += 1;
                self.key_allowed = true;
                self.bump();
            }
            b']' | b'}' => {
                self.remove_key();
                self.flow = self.flow.saturating_sub(1);
                self.key_allowed = false;
                self.bump();
            }
            b',' => {
                self.remove_key();
                self.key_allowed = true;
                self.bump();
            }
            b'-' if self.blankz_at(1) => self.indicator(true),
            b'?' if self.flow > 0 || self.blankz_at(1) => self.indicator(self.flow == 0),
            b':' if self.flow > 0 || self.blankz_at(1) => self.value(),
            b'*' | b'&' => {
                self.property();
                self.bump();
                while is_alpha(self.byte(0)) {
                    self.bump();
                }
            }
            b'!' => {
                self.property();
                self.tag();
            }
            b'|' | b'>' if self.flow == 0 => {
                self.remove_key();
                self.key_allowed = true;
                self.block_scalar();
            }
            b'\'' | b'"' => {
                self.property();
                self.quoted(c == b'\'');
            }
            _ if self.plain_starts() => {
                self.property();
                self.plain();
            }
            // libyaml stops here with an error.
            _ => self.bump(),
        }
    }

    /// A block entry (`- `) or an explicit key (`? `).
    fn indicator(&mut self, key_allowed_after: bool) {
        self.roll(self.column);
        self.remove_key();
        self.key_allowed = key_allowed_after;
        self.bump();
    }

    /// `:`: a block-level simple key before it opens a mapping at the key's column.
    fn value(&mut self) {
        if self.flow > 0 {
            self.key_allowed = false;
        } else if let Some((_, _, column)) = self.key.take() {
            self.roll(column);
            self.key_allowed = false;
        } else {
            self.roll(self.column);
            self.key_allowed = true;
        }
        self.bump();
    }

    /// Anchors, aliases, tags and scalars: each may begin a simple key.
    fn property(&mut self) {
        self.save_key();
        self.key_allowed = false;
    }

    fn save_key(&mut self) {
        if self.flow == 0 && self.key_allowed {
            self.key = Some((self.line, self.at, self.column));
        }
    }

    /// Only the block level's key matters here: the others never open a block collection.
    fn remove_key(&mut self) {
        if self.flow == 0 {
            self.key = None;
        }
    }

    /// A simple key spans one line and at most 1024 bytes.
    fn stale_key(&mut self) {
        if let Some((line, at, _)) = self.key {
            if line < self.line || at + 1024 < self.at {
                self.key = None;
            }
        }
    }

    fn indent(&self) -> isize {
        self.indents.last().map_or(-1, |&c| c as isize)
    }

    fn roll(&mut self, column: usize) {
        if self.flow == 0 && self.indent() < column as isize {
            self.indents.push(column);
        }
    }

    fn unroll(&mut self, column: isize) {
        while self.indent() > column {
            self.indents.pop();
        }
    }

    /// `---`, `...` and directives close every block collection.
    fn end_of_block_context(&mut self) {
        if self.flow == 0 {
            self.indents.clear();
            self.key = None;
        }
        self.key_allowed = false;
    }

    /// Spaces, comments and line breaks (libyaml's `scan_to_next_token`).
    fn skip_to_token(&mut self) {
        loop {
            if self.column == 0 && self.byte(0) == 0xEF && self.rest().starts_with("\u{feff}".as_bytes()) {
                self.bump();
            }
            let tabs = self.flow > 0 || !self.key_allowed;
            self.spaces(|b| b == b' ' || (tabs && b == b'\t'));
            if self.byte(0) == b'#' {
                self.pass(|_| false);
            }
            if !self.break_at(0) {
                return;
            }
            self.skip_line();
            if self.flow == 0 {
                self.key_allowed = true;
            }
        }
    }

    fn plain_starts(&self) -> bool {
        let c = self.byte(0);
        let indicator = self.blankz_at(0) || b"-?:,[]{}#&*!|>'\"%@`".contains(&c);
        !indicator
            || (c == b'-' && !self.blank_at(1))
            || (self.flow == 0 && (c == b'?' || c == b':') && !self.blankz_at(1))
    }

    /// A plain scalar: to `: `, ` #`, a flow indicator inside flow collections, or a line less indented
    /// than the block it belongs to.
    fn plain(&mut self) {
        let indent = self.indent() + 1;
        let mut leading_blanks = false;
        loop {
            if (self.column == 0 && self.document_marker()) || self.byte(0) == b'#' {
                break;
            }
            while !self.blankz_at(0) {
                let flow = self.flow > 0;
                self.pass(|b| matches!(b, b' ' | b'\t' | b':') || (flow && b",[]{}".contains(&b)));
                if self.blankz_at(0) {
                    break;
                }
                let (c, next) = (self.byte(0), self.byte(1));
                if self.flow > 0 && c == b':' && b",?[]{}".contains(&next) {
                    return; // libyaml stops here with an error
                }
                if (c == b':' && self.blankz_at(1)) || (self.flow > 0 && b",[]{}".contains(&c)) {
                    break;
                }
                self.bump();
            }
            if !(self.blank_at(0) || self.break_at(0)) {
                break;
            }
            while self.blank_at(0) || self.break_at(0) {
                if self.blank_at(0) {
                    self.spaces(|b| b == b' ' || b == b'\t');
                } else {
                    self.skip_line();
                    leading_blanks = true;
                }
            }
            if self.flow == 0 && (self.column as isize) < indent {
                break;
            }
        }
        if leading_blanks {
            self.key_allowed = true;
        }
    }

    /// A single- or double-quoted scalar, across lines.
    fn quoted(&mut self, single: bool) {
        let quote = if single { b'\'' } else { b'"' };
        self.bump();
        loop {
            if (self.column == 0 && self.document_marker()) || self.byte(0) == 0 {
                return; // libyaml stops here with an error
            }
            while !self.blankz_at(0) {
                self.pass(|b| matches!(b, b' ' | b'\t' | b'\'' | b'"' | b'\\'));
                if self.blankz_at(0) {
                    break;
                }
                let c = self.byte(0);
                if single && c == b'\'' && self.byte(1) == b'\'' {
                    self.bump();
                    self.bump();
                } else if c == quote {
                    self.bump();
                    return;
                } else if !single && c == b'\\' && self.break_at(1) {
                    self.bump();
                    self.skip_line();
                    break;
                } else if !single && c == b'\\' {
                    self.bump();
                    self.bump();
                } else {
                    self.bump();
                }
            }
            while self.blank_at(0) || self.break_at(0) {
                if self.blank_at(0) {
                    self.spaces(|b| b == b' ' || b == b'\t');
                } else {
                    self.skip_line();
                }
            }
        }
    }

    /// `|` or `>`, its header, and the lines indented at least as much as its first one.
    fn block_scalar(&mut self) {
        self.bump();
        let mut increment = 0;
        for _ in 0..2 {
            match self.byte(0) {
                b'+' | b'-' => self.bump(),
                b'0' => return, // libyaml stops here with an error
                d @ b'1'..=b'9' if increment == 0 => {
                    increment = isize::from(d - b'0');
                    self.bump();
                }
                _ => break,
            }
        }
        while self.blank_at(0) {
            self.bump();
        }
        if self.byte(0) == b'#' {
            self.pass(|_| false);
        }
        if !self.breakz_at(0) {
            return; // libyaml stops here with an error
        }
        if self.break_at(0) {
            self.skip_line();
        }
        let mut indent = if increment == 0 { 0 } else { self.indent().max(0) + increment };
        self.block_breaks(&mut indent);
        while self.column as isize == indent && self.byte(0) != 0 {
            self.pass(|_| false);
            if self.break_at(0) {
                self.skip_line();
            }
            self.block_breaks(&mut indent);
        }
    }

    /// Empty lines of a block scalar; the first line with text fixes the indentation when the header
    /// did not.
    fn block_breaks(&mut self, indent: &mut isize) {
        let mut max_indent = 0;
        loop {
            while (*indent == 0 || (self.column as isize) < *indent) && self.byte(0) == b' ' {
                self.bump();
            }
            max_indent = max_indent.max(self.column as isize);
            if (*indent == 0 || (self.column as isize) < *indent) && self.byte(0) == b'\t' {
                return; // libyaml stops here with an error
            }
            if !self.break_at(0) {
                break;
            }
            self.skip_line();
        }
        if *indent == 0 {
            *indent = max_indent.max(self.indent() + 1).max(1);
        }
    }

    /// A tag's characters (libyaml's URI characters; `,[]` only in the verbatim `!<…>` form).
    fn tag(&mut self) {
        self.bump();
        let verbatim = self.byte(0) == b'<';
        if verbatim {
            self.bump();
        }
        while is_uri(self.byte(0)) || (verbatim && b",[]".contains(&self.byte(0))) {
            self.bump();
        }
        if verbatim && self.byte(0) == b'>' {
            self.bump();
        }
    }

    fn document_marker(&self) -> bool {
        let c = self.byte(0);
        (c == b'-' || c == b'.') && self.byte(1) == c && self.byte(2) == c && self.blankz_at(3)
    }

    fn rest(&self) -> &'a [u8] {
        self.text.get(self.at..).unwrap_or_default()
    }

    /// The byte `k` bytes ahead; 0 past the end, as in libyaml's buffer.
    fn byte(&self, k: usize) -> u8 {
        self.text.get(self.at + k).copied().unwrap_or(0)
    }

    /// One character (never a line break: see `skip_line`).
    fn bump(&mut self) {
        let width = match self.byte(0) {
            0 if self.at >= self.text.len() => return,
            b if b < 0x80 => 1,
            b if b >= 0xF0 => 4,
            b if b >= 0xE0 => 3,
            _ => 2,
        };
        self.at += width;
        self.column += 1;
    }

    /// Passes a run of the ASCII bytes `blank` picks.
    fn spaces(&mut self, blank: impl Fn(u8) -> bool) {
        let n = self.rest().iter().take_while(|&&b| blank(b)).count();
        self.at += n;
        self.column += n;
    }

    /// Passes ordinary characters at once: up to a byte `stop` picks, a NUL or a line break.
    fn pass(&mut self, stop: impl Fn(u8) -> bool) {
        loop {
            let rest = self.rest();
            let n = rest
                .iter()
                .position(|&b| stop(b) || matches!(b, b'\r' | b'\n' | 0 | 0xC2 | 0xE2))
                .unwrap_or(rest.len());
            self.column += rest[..n].iter().filter(|&&b| b & 0xC0 != 0x80).count();
            self.at += n;
            if !matches!(self.byte(0), 0xC2 | 0xE2) || self.break_at(0) {
                return;
            }
            self.bump(); // a character that only starts like NEL, LS or PS
        }
    }

    fn skip_line(&mut self) {
        let width = match (self.byte(0), self.byte(1)) {
            (b'\r', b'\n') => 2,
            (b'\r' | b'\n', _) => 1,
            (0xC2, _) => 2,
            _ => 3,
        };
        self.at += width;
        self.line += 1;
        self.column = 0;
    }

    /// libyaml's line breaks: CR, LF, NEL, LS and PS.
    fn break_at(&self, k: usize) -> bool {
        match self.byte(k) {
            b'\r' | b'\n' => true,
            0xC2 => self.byte(k + 1) == 0x85,
            0xE2 => self.byte(k + 1) == 0x80 && matches!(self.byte(k + 2), 0xA8 | 0xA9),
            _ => false,
        }
    }

    fn blank_at(&self, k: usize) -> bool {
        matches!(self.byte(k), b' ' | b'\t')
    }

    fn breakz_at(&self, k: usize) -> bool {
        self.byte(k) == 0 || self.break_at(k)
    }

    fn blankz_at(&self, k: usize) -> bool {
        self.blank_at(k) || self.breakz_at(k)
    }
}

fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn is_uri(c: u8) -> bool {
    is_alpha(c) || b";/?:@&=+$.%!~*'()".contains(&c)
}

#[cfg(test)]
mod tests;
