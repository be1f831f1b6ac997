//! A fast path for the common streamed chunk: one pass over the bytes, no allocation.
//!
//! At hundreds of streams the typed `serde_json` parse of every chunk was the largest share of the
//! client's own CPU per chunk. Load runs (no text kept) only need each chunk's kind flags, the
//! response id and the finish reason, so [`scan`] reads just those from a strictly validated
//! object. It answers `None`, and the caller falls back to the full `serde_json` parse, for
//! anything it does not handle exactly as that parse would: a string with an escape, a non-null
//! `usage`, `error` or `timings`, a repeated key, a value of an unexpected type, invalid UTF-8,
//! malformed JSON. So the fast path never decides a chunk differently from the full parse; the
//! tests in this file check that on edited and corrupted chunks.

use super::trace::kind;

/// What the fast path read from one chunk.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scanned<'a> {
    pub kind: u8,
    pub id: Option<&'a str>,
    /// The last choice's finish reason, as the full parse keeps it.
    pub finish_reason: Option<&'a str>,
}

/// Scans a chunk's JSON; `None` means "use the full parse".
pub fn scan(data: &[u8]) -> Option<Scanned<'_>> {
    // UTF-8 is checked once, string by string (`plain_str`), in the same pass that looks for
    // control characters: outside strings the scanner takes only ASCII, so that is the same as
    // checking the whole payload, which is what the full parse requires of what we accept.
    let mut s = Scanner {
        b: data,
        i: 0,
        depth: 0,
    };
    let mut out = Scanned::default();
    s.ws();
    s.expect(b'{')?;
    let mut seen = 0u8;
    s.object(|s, key| {
        let bit = match key {
            "id" => 1,
            "choices" => 2,
            "usage" => 4,
            "error" => 8,
            "timings" => 16,
            _ => 0,
        };
        first_time(&mut seen, bit)?;
        match key {
            "id" => {
                if !s.null() {
                    out.id = Some(s.plain_str()?);
                }
            }
            "choices" => {
                if !s.null() {
                    s.choices(&mut out)?;
                }
            }
            // Rare (once per response or on failure): the full parse handles them.
            "usage" | "error" | "timings" => {
                if !s.null() {
                    return None;
                }
            }
            _ => s.skip_value()?,
        }
        Some(())
    })?;
    s.ws();
    (s.i == s.b.len()).then_some(out)
}

/// Nesting beyond this goes to the full parse (which has its own recursion limit).
const MAX_DEPTH: u32 = 64;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Consumes `null` if it is next.
    fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    /// The members of an object whose `{` was consumed; `f` must consume each value.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.expect(b':')?;
            f(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The elements of an array whose `[` was consumed; `f` must consume each element.
    fn array(&mut self, mut f: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            f(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string without escapes or control characters (anything else: `None`).
    fn plain_str(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.i;
        let rest = &self.b[start..];
        let n = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[n] != b'"' {
            return None;
        }
        let v = &rest[..n];
        // One pass: printable ASCII (the usual case) needs no UTF-8 check; a control character
        // declines; anything else is checked as UTF-8.
        let text = if v.iter().any(|&c| c.wrapping_sub(0x20) >= 0x60) {
            if v.iter().any(|&c| c < 0x20) {
                return None;
            }
            std::str::from_utf8(v).ok()?
        } else {
            // SAFETY: every byte is printable ASCII (0x20..0x80), which is valid UTF-8.
            unsafe { std::str::from_utf8_unchecked(v) }
        };
        self.i = start + n + 1;
        Some(text)
    }

    /// A string value that may be null: Some(non-empty) for a string, None for null.
    fn opt_nonempty(&mut self) -> Option<Option<bool>> {
        if self.null() {
            return Some(None);
        }
        Some(Some(!self.plain_str()?.is_empty()))
    }

    fn choices(&mut self, out: &mut Scanned<'a>) -> Option<()> {
        self.expect(b'[')?;
        self.array(|s| {
            s.expect(b'{')?;
            let mut seen = 0u8;
            s.object(|s, key| {
                let bit = match key {
                    "delta" => 1,
                    "text" => 2,
                    "finish_reason" => 4,
                    _ => 0,
                };
                first_time(&mut seen, bit)?;
                match key {
                    "text" => {
                        if s.opt_nonempty()? == Some(true) {
                            out.kind |= kind::CONTENT;
                        }
                    }
                    "finish_reason" => {
                        if !s.null() {
                            out.finish_reason = Some(s.plain_str()?);
                            out.kind |= kind::FINISH;
                        }
                    }
                    "delta" => {
                        if !s.null() {
                            s.expect(b'{')?;
                            s.delta(out)?;
                        }
                    }
                    _ => s.skip_value()?,
                }
                Some(())
            })
        })
    }

    fn delta(&mut self, out: &mut Scanned<'a>) -> Option<()> {
        let mut seen = 0u8;
        // The full parse takes `reasoning_content` and falls back to `reasoning`.
        let (mut rc, mut r) = (None, None);
        self.object(|s, key| {
            let bit = match key {
                "content" => 1,
                "reasoning_content" => 2,
                "reasoning" => 4,
                "role" => 8,
                "tool_calls" => 16,
                _ => 0,
            };
            first_time(&mut seen, bit)?;
            match key {
                "content" => {
                    if s.opt_nonempty()? == Some(true) {
                        out.kind |= kind::CONTENT;
                    }
                }
                "reasoning_content" => rc = s.opt_nonempty()?,
                "reasoning" => r = s.opt_nonempty()?,
                "role" => {
                    if !s.null() {
                        s.skip_value()?;
                        out.kind |= kind::ROLE;
                    }
                }
                // Tool calls are rare and carry nested objects: the full parse checks them.
                "tool_calls" => {
                    if !s.null() {
                        return None;
                    }
                }
                _ => s.skip_value()?,
            }
            Some(())
        })?;
        if rc.or(r) == Some(true) {
            out.kind |= kind::REASONING;
        }
        Some(())
    }

    /// Skips any JSON value, validating it.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.plain_str().map(|_| ()),
            b'{' | b'[' => {
                if self.depth >= MAX_DEPTH {
                    return None;
                }
                self.depth += 1;
                let open = self.b[self.i];
                self.i += 1;
                let r = if open == b'{' {
                    self.object(|s, _| s.skip_value())
                } else {
                    self.array(|s| s.skip_value())
                };
                self.depth -= 1;
                r
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(lit)
            .then(|| self.i += lit.len())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        let b = self.b;
        let mut i = self.i;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        let digits = |i: &mut usize| {
            let s = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - s
        };
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(c) if c.is_ascii_digit() => {
                digits(&mut i);
            }
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return None;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return None;
            }
        }
        self.i = i;
        Some(())
    }
}

/// Marks key `bit` as seen (0: a key the scanner doesn't track). None when it was seen already:
/// the full parse rejects a duplicate field, so the scanner declines and lets it decide.
#[inline]
fn first_time(seen: &mut u8, bit: u8) -> Option<()> {
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}
