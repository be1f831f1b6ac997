//! Deterministic validators: of a visible answer (quality items, tool round trips) and of tool-call
//! argument values.

use super::suite::{type_name, Fields, Here, SuiteError};
use regex::{Regex, RegexBuilder};
use serde::Serialize;
use serde_json::Value;

/// Normalised text for comparisons: lower case, surrounding quotes/backticks/asterisks and trailing
/// sentence punctuation removed, runs of whitespace collapsed to one space.
pub fn normalize(s: &str) -> String {
    let collapsed = s
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    let wrappers: &[char] = &['"', '\'', '`', '*', '“', '”', '‘', '’', '_'];
    let mut t = collapsed.as_str();
    loop {
        let before = t.len();
        t = t.trim_matches(wrappers).trim();
        t = t.trim_end_matches(['.', '!', '?', ',', ';', ':']).trim();
        if t.len() == before {
            break;
        }
    }
    t.to_string()
}

/// Alphanumeric words only (every other character is a separator), lower case: the retrieval
/// gate's normalisation.
pub fn words_only(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compiled size limit of one `pattern`, for the program and for the lazy DFA's cache each (the
/// regex crate's default is 10 MiB): a suite compiles one per item, so a large suite stays small.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// Nesting depth of groups and repetitions a `pattern` may use.
const PATTERN_NEST_LIMIT: u32 = 64;

/// Compiles a suite's `pattern` with the `regex` crate (docs/suites.md, "Patterns"): matching is a
/// search (anchor with `^...$` for the whole text), linear in the text, so no pattern can hang a
/// gate. `.` also matches a newline, as the hand-written matcher this replaced did. The error is one
/// line: what is wrong, and where in the pattern.
pub fn compile_pattern(src: &str) -> Result<Regex, String> {
    RegexBuilder::new(src)
        .dot_matches_new_line(true)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .nest_limit(PATTERN_NEST_LIMIT)
        .build()
        .map_err(|e| format!("not a valid regular expression: {}", one_line(&e)))
}

/// The regex crate's error in one line. A syntax error is printed over several lines (the
/// pattern, a caret line under the offending span, `error: ...`); keep the reason and the column.
fn one_line(e: &regex::Error) -> String {
    let text = match e {
        regex::Error::Syntax(text) => text,
        regex::Error::CompiledTooBig(limit) => {
            return format!(
                "it compiles to more than the {limit}-byte size limit; use smaller repetition counts or classes"
            )
        }
        other => return other.to_string(),
    };
    let lines: Vec<&str> = text.lines().collect();
    let reason = lines
        .iter()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(text.as_str());
    let column = lines
        .iter()
        .find(|l| l.trim_start().starts_with('^') && l.trim().chars().all(|c| c == '^'))
        .and_then(|l| l.find('^'))
        .map(|at| at.saturating_sub(4) + 1);
    match column {
        Some(c) => format!("{reason} (at character {c})"),
        None => reason.to_string(),
    }
}

/// Checks of a visible answer; every check given must hold.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Expect {
    /// Normalised answer equals this (see [`normalize`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Normalised answer equals one of these.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<String>>,
    /// Every one of these occurs in the answer (case-insensitive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contains_all: Option<Vec<String>>,
    /// At least one of these occurs in the answer (case-insensitive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contains_any: Option<Vec<String>>,
    /// The normalised answer starts with this (normalised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The normalised answer ends with this (normalised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// The trimmed answer matches this regular expression (see [`compile_pattern`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// A multiple-choice letter: the answer's chosen option (see [`chosen_letter`]) is this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    #[serde(skip)]
    compiled: Option<Regex>,
}

pub const EXPECT_FIELDS: &[&str] = &[
    "exact",
    "one_of",
    "contains_all",
    "contains_any",
    "prefix",
    "suffix",
    "pattern",
    "choice",
];

impl Expect {
    /// Reads an `expect` table; `extra` are further keys the caller handles (e.g. `tool_call`).
    pub fn parse(
        v: &Value,
        here: &Here,
        prefix: &str,
        extra: &[&str],
    ) -> Result<Expect, SuiteError> {
        let known: Vec<&str> = EXPECT_FIELDS.iter().chain(extra).copied().collect();
        let f = Fields::new(v, here, prefix, &known)?;
        let nonempty =
            |key: &str, list: Option<Vec<String>>| -> Result<Option<Vec<String>>, SuiteError> {
                match list {
                    Some(l) if l.is_empty() => Err(f.err(key, "must list at least one string")),
                    other => Ok(other),
                }
            };
        let mut e = Expect {
            exact: f.opt_str("exact")?.map(str::to_string),
            one_of: nonempty("one_of", f.opt_strings("one_of")?)?,
            contains_all: nonempty("contains_all", f.opt_strings("contains_all")?)?,
            contains_any: nonempty("contains_any", f.opt_strings("contains_any")?)?,
            prefix: f.opt_str("prefix")?.map(str::to_string),
            suffix: f.opt_str("suffix")?.map(str::to_string),
            pattern: f.opt_str("pattern")?.map(str::to_string),
            choice: f.opt_str("choice")?.map(str::to_string),
            compiled: None,
        };
        if let Some(p) = &e.pattern {
            e.compiled = Some(compile_pattern(p).map_err(|m| f.err("pattern", m))?);
        }
        if let Some(c) = &e.choice {
            let ok = c.chars().count() == 1 && c.chars().all(|c| c.is_ascii_alphabetic());
            if !ok {
                return Err(f.err(
                    "choice",
                    format!("must be one letter like \"B\", found {c:?}"),
                ));
            }
        }
        if e.is_empty() && extra.iter().all(|k| !f.map.contains_key(*k)) {
            return Err(here.err(
                prefix,
                format!("needs at least one check ({})", known.join(", ")),
            ));
        }
        Ok(e)
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_none()
            && self.one_of.is_none()
            && self.contains_all.is_none()
            && self.contains_any.is_none()
            && self.prefix.is_none()
            && self.suffix.is_none()
            && self.pattern.is_none()
            && self.choice.is_none()
    }

    /// Ok when every check holds; otherwise the first failed check, in words.
    pub fn check(&self, answer: &str) -> Result<(), String> {
        let n = normalize(answer);
        let lower = answer.to_lowercase();
        let shown = excerpt(answer, 120);
        if let Some(x) = &self.exact {
            if n != normalize(x) {
                return Err(format!("answered {shown:?}, expected exactly {x:?}"));
            }
        }
        if let Some(xs) = &self.one_of {
            if !xs.iter().any(|x| n == normalize(x)) {
                return Err(format!("answered {shown:?}, expected one of {xs:?}"));
            }
        }
        if let Some(xs) = &self.contains_all {
            let missing: Vec<&String> = xs
                .iter()
                .filter(|x| !lower.contains(&x.to_lowercase()))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "answered {shown:?}, which does not contain {missing:?}"
                ));
            }
        }
        if let Some(xs) = &self.contains_any {
            if !xs.iter().any(|x| lower.contains(&x.to_lowercase())) {
                return Err(format!("answered {shown:?}, which contains none of {xs:?}"));
            }
        }
        if let Some(x) = &self.prefix {
            if !n.starts_with(&normalize(x)) {
                return Err(format!(
                    "answered {shown:?}, expected it to start with {x:?}"
                ));
            }
        }
        if let Some(x) = &self.suffix {
            if !n.ends_with(&normalize(x)) {
                return Err(format!("answered {shown:?}, expected it to end with {x:?}"));
            }
        }
        if let Some(p) = &self.compiled {
            if !p.is_match(answer.trim()) {
                return Err(format!(
                    "answered {shown:?}, which does not match the pattern {:?}",
                    p.as_str()
                ));
            }
        }
        if let Some(c) = &self.choice {
            match chosen_letter(answer) {
                Some(l) if l.eq_ignore_ascii_case(&c.chars().next().unwrap_or(' ')) => {}
                Some(l) => return Err(format!("chose {l}, expected {c} (answered {shown:?})")),
                None => {
                    return Err(format!(
                        "answered {shown:?}, which names no choice letter (expected {c})"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// The option letter a multiple-choice answer picks: after trimming, an optional `answer:` or
/// `the answer is`, and wrappers like `(`, `*`, `"`, the first character must be a letter that is
/// not followed by another letter or digit (`B`, `B)`, `(B) Jupiter`, `**B.**`, `Answer: B`).
pub fn chosen_letter(answer: &str) -> Option<char> {
    let mut t = answer.trim().to_string();
    for lead in ["the answer is", "answer:", "answer is", "answer"] {
        if t.to_lowercase().starts_with(lead) {
            t = t[lead.len()..].trim().to_string();
            break;
        }
    }
    let t = t.trim_start_matches(['(', '[', '*', '"', '\'', '`', ' ', ':']);
    let mut chars = t.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic() {
        return None;
    }
    match chars.next() {
        Some(c) if c.is_alphanumeric() => None,
        _ => Some(first.to_ascii_uppercase()),
    }
}

/// At most `n` characters of `s`, with `…` when cut.
pub fn excerpt(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_string()
    }
}

/// A constraint on one argument value of an expected tool call.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ArgConstraint {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iequals: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// `false`: the argument must be absent. `true` (or any other constraint): present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
    #[serde(skip)]
    compiled: Option<Regex>,
}

pub const CONSTRAINT_FIELDS: &[&str] = &[
    "equals", "iequals", "one_of", "contains", "pattern", "min", "max", "present",
];

/// JSON equality with numbers compared by value (5 == 5.0).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

impl ArgConstraint {
    /// A bare value means `equals`; a table must use the constraint keywords.
    pub fn parse(v: &Value, here: &Here, field: &str) -> Result<ArgConstraint, SuiteError> {
        let Value::Object(map) = v else {
            return Ok(ArgConstraint {
                equals: Some(v.clone()),
                ..Default::default()
            });
        };
        if let Some(k) = map
            .keys()
            .find(|k| !CONSTRAINT_FIELDS.contains(&k.as_str()))
        {
            return Err(here.err(
                format!("{field}.{k}"),
                format!(
                    "unknown constraint (known: {}); to expect an object value write the nested argument as a dotted name (\"address.zip\") or use {{ equals = {{ ... }} }}",
                    CONSTRAINT_FIELDS.join(", ")
                ),
            ));
        }
        let f = Fields::of(map, here, field, CONSTRAINT_FIELDS)?;
        let mut c = ArgConstraint {
            equals: f.get("equals").cloned(),
            iequals: f.opt_str("iequals")?.map(str::to_string),
            one_of: f.opt_array("one_of")?.cloned(),
            contains: f.opt_str("contains")?.map(str::to_string),
            pattern: f.opt_str("pattern")?.map(str::to_string),
            min: f.opt_f64("min")?,
            max: f.opt_f64("max")?,
            present: match f.get("present") {
                None => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(v) => {
                    return Err(f.err(
                        "present",
                        format!("expected true or false, found {}", type_name(v)),
                    ))
                }
            },
            compiled: None,
        };
        if let Some(p) = &c.pattern {
            c.compiled = Some(compile_pattern(p).map_err(|m| f.err("pattern", m))?);
        }
        if map.is_empty() {
            return Err(here.err(
                field,
                "an empty constraint table; give a value or a constraint",
            ));
        }
        Ok(c)
    }

    /// Ok when `value` (None = the argument is absent) satisfies the constraint.
    pub fn check(&self, name: &str, value: Option<&Value>) -> Result<(), String> {
        let Some(v) = value else {
            if self.present == Some(false) {
                return Ok(());
            }
            let want = self
                .equals
                .as_ref()
                .map(|e| format!(" (expected {e})"))
                .unwrap_or_default();
            return Err(format!("missing argument: {name}{want}"));
        };
        if self.present == Some(false) {
            return Err(format!(
                "argument {name} is present ({v}), expected it absent"
            ));
        }
        if let Some(e) = &self.equals {
            if !json_eq(v, e) {
                return Err(format!("argument {name} is {v}, expected {e}"));
            }
        }
        let as_text = || match v {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        };
        if let Some(e) = &self.iequals {
            match as_text() {
                Some(s) if normalize(s) == normalize(e) => {}
                _ => {
                    return Err(format!(
                        "argument {name} is {v}, expected {e:?} (ignoring case)"
                    ))
                }
            }
        }
        if let Some(opts) = &self.one_of {
            if !opts.iter().any(|o| json_eq(o, v)) {
                return Err(format!(
                    "argument {name} is {v}, expected one of {}",
                    Value::Array(opts.clone())
                ));
            }
        }
        if let Some(e) = &self.contains {
            match as_text() {
                Some(s) if s.to_lowercase().contains(&e.to_lowercase()) => {}
                _ => {
                    return Err(format!(
                        "argument {name} is {v}, expected it to contain {e:?}"
                    ))
                }
            }
        }
        if let Some(p) = &self.compiled {
            if !as_text().is_some_and(|s| p.is_match(s)) {
                return Err(format!(
                    "argument {name} is {v}, which does not match the pattern {:?}",
                    p.as_str()
                ));
            }
        }
        if self.min.is_some() || self.max.is_some() {
            let Some(x) = v.as_f64() else {
                return Err(format!("argument {name} is {v}, expected a number"));
            };
            if self.min.is_some_and(|m| x < m) || self.max.is_some_and(|m| x > m) {
                return Err(format!(
                    "argument {name} is {v}, expected a number in [{}, {}]",
                    self.min.map_or("-inf".into(), |m| m.to_string()),
                    self.max.map_or("inf".into(), |m| m.to_string())
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalisation() {
        assert_eq!(normalize("  **Paris.**  "), "paris");
        assert_eq!(normalize("\"New   York\"!"), "new york");
        assert_eq!(words_only("The code is 4821."), "the code is 4821");
    }

    #[test]
    fn choice_letters() {
        for (a, l) in [
            ("B", Some('B')),
            ("b)", Some('B')),
            ("(B) Jupiter", Some('B')),
            ("**C.** because", Some('C')),
            ("Answer: D", Some('D')),
            ("The answer is A.", Some('A')),
            ("Jupiter", None),
            ("42", None),
        ] {
            assert_eq!(chosen_letter(a), l, "{a}");
        }
    }

    #[test]
    fn answer_checks() {
        let here = Here::new("f", "item");
        let e = Expect::parse(
            &json!({"one_of": ["Paris"], "pattern": "^[A-Z]"}),
            &here,
            "expect",
            &[],
        )
        .unwrap();
        assert!(e.check("Paris.").is_ok());
        assert!(e.check("paris").unwrap_err().contains("pattern"));
        assert!(e.check("London").unwrap_err().contains("one of"));
        let e = Expect::parse(
            &json!({"contains_all": ["18", "sunny"]}),
            &here,
            "expect",
            &[],
        )
        .unwrap();
        assert!(e.check("It is 18 C and Sunny").is_ok());
        assert!(e.check("18 C").unwrap_err().contains("sunny"));
        let err = Expect::parse(&json!({"exactly": "x"}), &here, "expect", &[]).unwrap_err();
        assert_eq!(err.field, "expect.exactly");
        assert!(Expect::parse(&json!({}), &here, "expect", &[]).is_err());
        let err = Expect::parse(&json!({"pattern": "(?=x)"}), &here, "expect", &[]).unwrap_err();
        assert_eq!(err.field, "expect.pattern");
        assert!(
            err.message.contains("not a valid regular expression"),
            "{}",
            err.message
        );
    }

    fn m(p: &str, t: &str) -> bool {
        compile_pattern(p).unwrap().is_match(t)
    }

    #[test]
    fn patterns_search_unless_anchored() {
        assert!(m("^[0-9]{5}$", "94103"));
        assert!(!m("^[0-9]{5}$", "9410"));
        assert!(!m("^[0-9]{5}$", "941034"));
        assert!(m("^\\d+(\\.\\d+)?$", "3.14"));
        assert!(!m("^\\d+(\\.\\d+)?$", "3."));
        assert!(m("(yes|no)", "I say no."));
        assert!(m("^(yes|no)$", "yes"));
        assert!(!m("^(yes|no)$", "yesno"));
        assert!(m("^a.c$", "abc"));
        assert!(m("^a.c$", "a\nc"), "`.` matches a newline");
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
        assert!(!m("^$", "\n"), "`$` is the end of the text, not of a line");
        assert!(m("^[-a]+$", "-a-"));
        assert!(m("^\\$\\d$", "$5"));
        assert!(m("^(a*)*$", "aaa"));
        assert!(m("^(a|)+b$", "aab"));
    }

    #[test]
    fn patterns_that_do_not_compile_are_refused_in_one_line() {
        for bad in [
            "(?=x)", "(ab", "ab)", "[ab", "\\1", "*a", "x{3,1}", "[z-a]", "\\",
        ] {
            let e = compile_pattern(bad).expect_err(bad);
            assert!(
                e.starts_with("not a valid regular expression: "),
                "{bad}: {e}"
            );
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        let e = compile_pattern("ab(?=x)").unwrap_err();
        assert!(e.contains("look-around"), "{e}");
        assert!(e.ends_with("(at character 3)"), "{e}");
        // Too large to compile within the size limit (Unicode \w is hundreds of ranges).
        let e = compile_pattern("\\w{1000}\\w{1000}\\w{1000}").unwrap_err();
        assert!(e.contains("1048576-byte size limit"), "{e}");
    }

    #[test]
    fn matching_is_linear_where_backtracking_was_exponential() {
        let p = compile_pattern("^(a|a)*(a|a)*(a|a)*(a|a)*b$").unwrap();
        assert!(!p.is_match(&"a".repeat(10_000)));
    }

    #[test]
    fn argument_constraints() {
        let here = Here::new("f", "case");
        let c = ArgConstraint::parse(&json!("94103"), &here, "zip").unwrap();
        assert!(c.check("zip", Some(&json!("94103"))).is_ok());
        assert_eq!(
            c.check("zip", Some(&json!("94104"))).unwrap_err(),
            "argument zip is \"94104\", expected \"94103\""
        );
        assert_eq!(
            c.check("zip", None).unwrap_err(),
            "missing argument: zip (expected \"94103\")"
        );
        let c = ArgConstraint::parse(&json!(5), &here, "days").unwrap();
        assert!(c.check("days", Some(&json!(5.0))).is_ok());
        let c = ArgConstraint::parse(&json!({"min": 1, "max": 14}), &here, "days").unwrap();
        assert!(c.check("days", Some(&json!(20))).is_err());
        let c = ArgConstraint::parse(&json!({"iequals": "paris"}), &here, "city").unwrap();
        assert!(c.check("city", Some(&json!(" Paris "))).is_ok());
        let e =
            ArgConstraint::parse(&json!({"city": "x"}), &here, "arguments.address").unwrap_err();
        assert_eq!(e.field, "arguments.address.city");
        assert!(e.message.contains("dotted"));
        let c = ArgConstraint::parse(&json!({"pattern": "^[0-9]{5}$"}), &here, "zip").unwrap();
        assert!(c.check("zip", Some(&json!("94103"))).is_ok());
        assert!(c
            .check("zip", Some(&json!(94103)))
            .unwrap_err()
            .contains("does not match the pattern"));
        let e = ArgConstraint::parse(&json!({"pattern": "[z-a]"}), &here, "zip").unwrap_err();
        assert_eq!(e.field, "zip.pattern");
    }
}
