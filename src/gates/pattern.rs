//! A small, safe regular-expression subset for answer validators (no `regex` crate).
//!
//! Supported: literal characters; `\` escapes of any punctuation; `\d \w \s` and `\D \W \S`;
//! `.` (any character); classes `[abc]`, ranges `[a-z0-9]`, negation `[^...]`; greedy quantifiers
//! `*`, `+`, `?`, `{n}`, `{m,}`, `{m,n}` (bounds up to 1000); anchors `^` and `$`; groups
//! `( ... )` with alternation `|` (also at the top level); a leading `(?i)` for case-insensitive
//! matching. Not supported (refused when the suite is loaded): backreferences, lookaround, lazy
//! quantifiers, named groups, Unicode classes.
//!
//! A pattern matches when it matches anywhere in the text (use `^...$` for a whole-text match).
//! Matching backtracks with a step limit, so a pathological pattern fails loudly instead of hanging.

use std::cell::Cell;

/// Largest `{m,n}` bound accepted.
const MAX_BOUND: u32 = 1000;
/// Backtracking steps allowed per match before the pattern is declared too complex.
const STEP_LIMIT: u64 = 2_000_000;

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Char(char),
    Any,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    Start,
    End,
    Group(Vec<Vec<Piece>>),
}

#[derive(Debug, Clone, PartialEq)]
struct Piece {
    node: Node,
    min: u32,
    max: Option<u32>,
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    source: String,
    alts: Vec<Vec<Piece>>,
    ignore_case: bool,
}

impl Pattern {
    /// Compiles `src`; the error says what is wrong and where.
    pub fn new(src: &str) -> Result<Pattern, String> {
        let (ignore_case, body) = match src.strip_prefix("(?i)") {
            Some(rest) => (true, rest),
            None => (false, src),
        };
        let chars: Vec<char> = body.chars().collect();
        let mut p = Parser { s: &chars, i: 0 };
        let alts = p.alternation()?;
        if p.i < chars.len() {
            return Err(format!(
                "unexpected '{}' at character {} (an unmatched ')'?)",
                chars[p.i],
                p.i + 1
            ));
        }
        Ok(Pattern {
            source: src.to_string(),
            alts,
            ignore_case,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// True when the pattern matches somewhere in `text`. Err when the step limit is reached.
    pub fn is_match(&self, text: &str) -> Result<bool, String> {
        let text: Vec<char> = text.chars().collect();
        let m = Matcher {
            text: &text,
            ci: self.ignore_case,
            steps: Cell::new(0),
        };
        for start in 0..=text.len() {
            let found = self.alts.iter().any(|seq| m.seq(seq, start, &mut |_| true));
            if m.steps.get() > STEP_LIMIT {
                return Err(format!(
                    "the pattern {:?} needed more than {STEP_LIMIT} matching steps; simplify it",
                    self.source
                ));
            }
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn alternation(&mut self) -> Result<Vec<Vec<Piece>>, String> {
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.i += 1;
            alts.push(self.sequence()?);
        }
        Ok(alts)
    }

    fn sequence(&mut self) -> Result<Vec<Piece>, String> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let at = self.i + 1;
            let node = self.atom()?;
            let (min, max) = self.quantifier()?;
            if (min, max) != (1, Some(1)) && matches!(node, Node::Start | Node::End) {
                return Err(format!("a quantifier after an anchor at character {at}"));
            }
            seq.push(Piece { node, min, max });
        }
        Ok(seq)
    }

    fn atom(&mut self) -> Result<Node, String> {
        let at = self.i + 1;
        let c = self.peek().expect("caller checked");
        self.i += 1;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '(' => {
                if self.peek() == Some('?') {
                    return Err(format!(
                        "'(?' at character {at}: only a leading (?i) is supported"
                    ));
                }
                let alts = self.alternation()?;
                if self.peek() != Some(')') {
                    return Err(format!("the group opened at character {at} is not closed"));
                }
                self.i += 1;
                Node::Group(alts)
            }
            '[' => self.class(at)?,
            '\\' => self.escape(at, false)?,
            '*' | '+' | '?' | '{' => {
                return Err(format!("'{c}' at character {at} has nothing to repeat"))
            }
            ']' | '}' => return Err(format!("unescaped '{c}' at character {at}")),
            c => Node::Char(c),
        })
    }

    fn escape(&mut self, at: usize, in_class: bool) -> Result<Node, String> {
        let Some(e) = self.peek() else {
            return Err(format!("a trailing '\\' at character {at}"));
        };
        self.i += 1;
        let digit = vec![('0', '9')];
        let word = vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
        let space = vec![
            (' ', ' '),
            ('\t', '\t'),
            ('\n', '\n'),
            ('\r', '\r'),
            ('\u{b}', '\u{c}'),
        ];
        Ok(match e {
            'd' => Node::Class { ranges: digit, negated: false },
            'w' => Node::Class { ranges: word, negated: false },
            's' => Node::Class { ranges: space, negated: false },
            'D' | 'W' | 'S' if in_class => {
                return Err(format!("'\\{e}' inside a class at character {at} is not supported"))
            }
            'D' => Node::Class { ranges: digit, negated: true },
            'W' => Node::Class { ranges: word, negated: true },
            'S' => Node::Class { ranges: space, negated: true },
            'n' => Node::Char('\n'),
            't' => Node::Char('\t'),
            c if c.is_ascii_punctuation() || c == ' ' => Node::Char(c),
            c => {
                return Err(format!(
                    "the escape '\\{c}' at character {at} is not supported (backreferences, \\b and Unicode classes are outside the subset)"
                ))
            }
        })
    }

    fn class(&mut self, at: usize) -> Result<Node, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.i += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("the class opened at character {at} is not closed"));
            };
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            let here = self.i + 1;
            self.i += 1;
            let lo = if c == '\\' {
                match self.escape(here, true)? {
                    Node::Char(ch) => ch,
                    Node::Class { ranges: r, .. } => {
                        ranges.extend(r);
                        continue;
                    }
                    _ => unreachable!("escape returns chars and classes"),
                }
            } else {
                c
            };
            if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|&n| n != ']') {
                self.i += 1;
                let mut hi = self.peek().expect("checked");
                self.i += 1;
                if hi == '\\' {
                    match self.escape(self.i, true)? {
                        Node::Char(ch) => hi = ch,
                        _ => {
                            return Err(format!(
                                "a class shorthand as a range end at character {}",
                                self.i
                            ))
                        }
                    }
                }
                if hi < lo {
                    return Err(format!(
                        "the range {lo}-{hi} at character {here} is reversed"
                    ));
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Node::Class { ranges, negated })
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.i == start {
            return None;
        }
        self.s[start..self.i]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }

    fn quantifier(&mut self) -> Result<(u32, Option<u32>), String> {
        let at = self.i + 1;
        let q = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.i += 1;
                let min = self.number().ok_or_else(|| {
                    format!("'{{' at character {at} must be followed by a number")
                })?;
                let max = if self.peek() == Some(',') {
                    self.i += 1;
                    self.number()
                } else {
                    Some(min)
                };
                if self.peek() != Some('}') {
                    return Err(format!(
                        "the repetition at character {at} is not closed with '}}'"
                    ));
                }
                if min > MAX_BOUND || max.is_some_and(|m| m > MAX_BOUND || m < min) {
                    return Err(format!(
                        "the repetition at character {at} must have bounds 0..={MAX_BOUND} with m ≤ n"
                    ));
                }
                (min, max)
            }
            _ => return Ok((1, Some(1))),
        };
        self.i += 1;
        if matches!(self.peek(), Some('?' | '+')) {
            return Err(format!(
                "lazy or possessive quantifiers (at character {}) are not supported",
                self.i + 1
            ));
        }
        if matches!(self.peek(), Some('*' | '{')) {
            return Err(format!("a repeated quantifier at character {}", self.i + 1));
        }
        Ok(q)
    }
}

struct Matcher<'a> {
    text: &'a [char],
    ci: bool,
    steps: Cell<u64>,
}

fn lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn upper(c: char) -> char {
    c.to_uppercase().next().unwrap_or(c)
}

impl Matcher<'_> {
    fn tick(&self) -> bool {
        let s = self.steps.get() + 1;
        self.steps.set(s);
        s <= STEP_LIMIT
    }

    fn seq(&self, seq: &[Piece], pos: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        if !self.tick() {
            return false;
        }
        match seq.split_first() {
            None => k(pos),
            Some((piece, rest)) => self.repeat(piece, 0, pos, &mut |p| self.seq(rest, p, k)),
        }
    }

    /// Greedy repetition of `piece` after `count` matches, ending at `pos`.
    fn repeat(
        &self,
        piece: &Piece,
        count: u32,
        pos: usize,
        k: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        if !self.tick() {
            return false;
        }
        if piece.max.is_none_or(|m| count < m) {
            let more = self.node(&piece.node, pos, &mut |p| {
                // A repetition that consumed nothing cannot make progress: stop repeating.
                (p != pos || count < piece.min) && self.repeat(piece, count + 1, p, k)
            });
            if more {
                return true;
            }
        }
        count >= piece.min && k(pos)
    }

    fn char_eq(&self, a: char, b: char) -> bool {
        a == b || (self.ci && lower(a) == lower(b))
    }

    fn in_class(&self, ranges: &[(char, char)], c: char) -> bool {
        let has = |c: char| ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        has(c) || (self.ci && (has(lower(c)) || has(upper(c))))
    }

    fn node(&self, node: &Node, pos: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        match node {
            Node::Start => pos == 0 && k(pos),
            Node::End => pos == self.text.len() && k(pos),
            Node::Group(alts) => alts.iter().any(|seq| self.seq(seq, pos, k)),
            _ => {
                let Some(&c) = self.text.get(pos) else {
                    return false;
                };
                let ok = match node {
                    Node::Char(x) => self.char_eq(*x, c),
                    Node::Any => true,
                    Node::Class { ranges, negated } => self.in_class(ranges, c) != *negated,
                    _ => unreachable!(),
                };
                ok && k(pos + 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Pattern::new(p).unwrap().is_match(t).unwrap()
    }

    #[test]
    fn matches_the_subset() {
        assert!(m("^[0-9]{5}$", "94103"));
        assert!(!m("^[0-9]{5}$", "9410"));
        assert!(!m("^[0-9]{5}$", "941034"));
        assert!(m("^\\d+(\\.\\d+)?$", "3.14"));
        assert!(!m("^\\d+(\\.\\d+)?$", "3."));
        assert!(m("(yes|no)", "I say no."));
        assert!(m("^(yes|no)$", "yes"));
        assert!(!m("^(yes|no)$", "yesno"));
        assert!(m("^a.c$", "abc"));
        assert!(m("^colou?r$", "color"));
        assert!(m("^colou?r$", "colour"));
        assert!(m("^ab*c$", "ac"));
        assert!(m("^ab+c$", "abbbc"));
        assert!(!m("^ab+c$", "ac"));
        assert!(m("[^a-z]", "abc1"));
        assert!(!m("^[^a-z]+$", "abc1"));
        assert!(m("(?i)^paris$", "PARIS"));
        assert!(m("(?i)^[a-c]+$", "ABC"));
        assert!(!m("^paris$", "PARIS"));
        assert!(m("^\\w+\\s\\w+$", "hello world"));
        assert!(m("^(ab)+$", "ababab"));
        assert!(m("^x{2,}$", "xxxx"));
        assert!(m("^x{0,2}$", ""));
        assert!(m("a|b", "b"));
        assert!(m("^$", ""));
        assert!(m("^[-a]+$", "-a-"));
        assert!(m("^\\$\\d$", "$5"));
        // Zero-width repetition terminates.
        assert!(m("^(a*)*$", "aaa"));
        assert!(m("^(a|)+b$", "aab"));
    }

    #[test]
    fn refuses_what_is_outside_the_subset() {
        for bad in [
            "(?=x)", "a**", "a+?", "(ab", "ab)", "[ab", "\\1", "\\b", "*a", "x{3,1}", "x{5000}",
            "^*", "[z-a]",
        ] {
            assert!(Pattern::new(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn pathological_patterns_hit_the_step_limit() {
        let p = Pattern::new("^(a|a)*(a|a)*(a|a)*(a|a)*b$").unwrap();
        assert!(p.is_match(&"a".repeat(40)).is_err());
    }
}
