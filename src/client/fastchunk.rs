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
    /// The string values whose emptiness decides a kind flag (`content`, `text`,
    /// `reasoning_content`, `reasoning`): how many, and the last one's byte span (between its
    /// quotes) and flag.
    vars: u8,
    var: (usize, usize, u8),
}

/// The bytes around the one text string of the last chunk [`scan`] took, for the chunks after
/// it. A streamed response repeats the same object chunk after chunk (`{"id":…,"choices":[{
/// "index":0,"delta":{"content":"` … `"},"finish_reason":null}]}`) with only the generated text
/// changing. A chunk that is byte for byte the template's prefix, a plain string (no quote,
/// escape or control character, valid UTF-8) and the template's suffix is the same object with
/// another text: the full parse would decide it as the template chunk, with the text's flag
/// set when the text is not empty. Checking that is two comparisons and one pass over the text,
/// against a scan of every key and value.
#[derive(Default)]
pub struct Template {
    /// The prefix (up to and including the text's opening quote), then the suffix (from its
    /// closing quote).
    bytes: Vec<u8>,
    split: usize,
    /// The template chunk's flags without the text's, and the text's flag.
    base: u8,
    bit: u8,
    live: bool,
}

impl Template {
    /// Takes `data`, which [`scan`] answered with `got`, as the template when it can be one: it
    /// has exactly one text string and no finish reason (its id, the same bytes in every
    /// matching chunk, is then already recorded).
    pub fn learn(&mut self, data: &[u8], got: &Scanned<'_>) {
        self.live = got.vars == 1 && got.finish_reason.is_none();
        if !self.live {
            return;
        }
        let (start, end, bit) = got.var;
        self.bytes.clear();
        self.bytes.extend_from_slice(&data[..start]);
        self.bytes.extend_from_slice(&data[end..]);
        self.split = start;
        self.bit = bit;
        // Every source of the text's flag is a counted text string, and there is one: the
        // flag comes from this text alone.
        self.base = got.kind & !bit;
    }

    /// The kind flags of `data` when it matches the template (see [`Template`]), else `None`.
    #[inline]
    pub fn kind_of(&self, data: &[u8]) -> Option<u8> {
        if !self.live {
            return None;
        }
        let (pre, post) = self.bytes.split_at(self.split);
        if data.len() < pre.len() + post.len() || !data.starts_with(pre) || !data.ends_with(post) {
            return None;
        }
        let text = &data[pre.len()..data.len() - post.len()];
        let mut high = false;
        for &c in text {
            if c == b'"' || c == b'\\' || c < 0x20 {
                return None;
            }
            high |= c >= 0x80;
        }
        if high && std::str::from_utf8(text).is_err() {
            return None;
        }
        Some(self.base | if text.is_empty() { 0 } else { self.bit })
    }
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
        // Keys and values of a chunk are mostly a few bytes long: one byte loop finds the end
        // and checks each byte (no escape, no control character, ASCII or not) in one pass,
        // cheaper than a vectorised search's set-up. A string still open after SHORT bytes is
        // searched and checked in bulk from there.
        const SHORT: usize = 32;
        let mut high = false;
        let mut n = 0;
        let end = loop {
            let &c = rest.get(n)?;
            if c == b'"' {
                break n;
            }
            if c == b'\\' || c < 0x20 {
                return None;
            }
            high |= c >= 0x80;
            n += 1;
            if n == SHORT {
                let tail = &rest[n..];
                let m = memchr::memchr2(b'"', b'\\', tail)?;
                if tail[m] != b'"' {
                    return None;
                }
                let t = &tail[..m];
                if t.iter().any(|&c| c < 0x20) {
                    return None;
                }
                high |= t.iter().any(|&c| c >= 0x80);
                break n + m;
            }
        };
        let v = &rest[..end];
        let text = if high {
            std::str::from_utf8(v).ok()?
        } else {
            // SAFETY: every byte is ASCII (below 0x80), which is valid UTF-8.
            unsafe { std::str::from_utf8_unchecked(v) }
        };
        self.i = start + end + 1;
        Some(text)
    }

    /// A text string that may be null (`content`, `text`, `reasoning…`): Some(non-empty) for a
    /// string, None for null. A string is counted in `out` with its span and `bit`, the flag its
    /// emptiness decides (for [`Template`]).
    fn opt_nonempty(&mut self, out: &mut Scanned<'a>, bit: u8) -> Option<Option<bool>> {
        if self.null() {
            return Some(None);
        }
        let v = self.plain_str()?;
        let end = self.i - 1;
        out.vars = out.vars.saturating_add(1);
        out.var = (end - v.len(), end, bit);
        Some(Some(!v.is_empty()))
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
                        if s.opt_nonempty(out, kind::CONTENT)? == Some(true) {
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
                    if s.opt_nonempty(out, kind::CONTENT)? == Some(true) {
                        out.kind |= kind::CONTENT;
                    }
                }
                "reasoning_content" => rc = s.opt_nonempty(out, kind::REASONING)?,
                "reasoning" => r = s.opt_nonempty(out, kind::REASONING)?,
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
