//! The little the reference engine knows: sums of two integers, whether an integer is prime, and a
//! short fixed table of facts — enough to answer the built-in quality suite
//! (`suites/quality.toml`) so `bakeoff gate` with its default checks and the shipped example
//! campaigns can pass on a reference engine. A question it does not know gets no answer here
//! (the engine then says `I don't know.` or writes filler). docs/reference-engine.md lists it.

/// Facts: every keyword (lowercase) must appear in the question; the answer is the value, or,
/// when the question lists lettered options (`A) Mars B) Jupiter ...`), the letter of the option
/// that names the value.
const FACTS: &[(&[&str], &str)] = &[
    (&["capital", "france"], "Paris"),
    (&["largest", "planet"], "Jupiter"),
    (&["second world war", "end"], "1945"),
    (&["primary colo", "light"], "red, green, blue"),
];

/// The answer to `user` (the last user message), when the engine knows it.
pub fn answer(user: &str) -> Option<String> {
    let lower = user.to_ascii_lowercase();
    if let Some(a) = arithmetic(&lower) {
        return Some(a);
    }
    if let Some(a) = prime(&lower) {
        return Some(a);
    }
    let (_, value) = FACTS
        .iter()
        .find(|(keys, _)| keys.iter().all(|k| lower.contains(k)))?;
    Some(choice_letter(user, value).unwrap_or_else(|| value.to_string()))
}

/// `What is A + B?` (also `-`, `*`, `x`) over integers.
fn arithmetic(lower: &str) -> Option<String> {
    const Q: &str = "what is ";
    let i = lower.find(Q)?;
    let rest = &lower[i + Q.len()..];
    let expr = &rest[..rest.find('?')?];
    let mut it = expr.split_whitespace();
    let a: i64 = it.next()?.parse().ok()?;
    let op = it.next()?;
    let b: i64 = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    let v = match op {
        "+" | "plus" => a.checked_add(b)?,
        "-" | "minus" => a.checked_sub(b)?,
        "*" | "x" | "times" => a.checked_mul(b)?,
        _ => return None,
    };
    Some(v.to_string())
}

/// `Is N a prime number?` → `yes` / `no`.
fn prime(lower: &str) -> Option<String> {
    const Q: &str = "is ";
    let i = lower.find(Q)?;
    let rest = &lower[i + Q.len()..];
    let (n, tail) = rest.split_once(' ')?;
    if !tail.starts_with("a prime") {
        return None;
    }
    let n: u64 = n.parse().ok()?;
    let is_prime = n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d));
    Some(if is_prime { "yes" } else { "no" }.to_string())
}

/// The letter of the option naming `value` in `A) x B) y ...`, if the question lists options.
fn choice_letter(user: &str, value: &str) -> Option<String> {
    let b = user.as_bytes();
    let mut opts: Vec<(char, usize)> = Vec::new();
    for i in 0..b.len().saturating_sub(1) {
        let starts = i == 0 || b[i - 1] == b' ';
        if starts && b[i].is_ascii_uppercase() && b[i + 1] == b')' {
            opts.push((b[i] as char, i + 2));
        }
    }
    if opts.len() < 2 {
        return None;
    }
    for (k, (letter, start)) in opts.iter().enumerate() {
        let end = opts.get(k + 1).map(|o| o.1 - 2).unwrap_or(user.len());
        let text = user[*start..end].trim().trim_end_matches('.');
        if text.eq_ignore_ascii_case(value) {
            return Some(letter.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_built_in_quality_suite_and_nothing_else() {
        let q = |s: &str| answer(s);
        assert_eq!(
            q("What is 17 + 25? Answer with the number only.").as_deref(),
            Some("42")
        );
        assert_eq!(q("What is 6 * 7?").as_deref(), Some("42"));
        assert_eq!(
            q("What is the capital of France? Answer with one word.").as_deref(),
            Some("Paris")
        );
        assert_eq!(
            q("Which planet is the largest in the Solar System? A) Mars B) Jupiter C) Venus D) Mercury. Answer with the letter only.").as_deref(),
            Some("B")
        );
        assert_eq!(
            q("In which year did the Second World War end? Answer with the four-digit year only.")
                .as_deref(),
            Some("1945")
        );
        assert_eq!(
            q("Name the three primary colors of light, separated by commas.").as_deref(),
            Some("red, green, blue")
        );
        assert_eq!(
            q("Is 7 a prime number? Answer yes or no.").as_deref(),
            Some("yes")
        );
        assert_eq!(q("Is 9 a prime number?").as_deref(), Some("no"));
        assert_eq!(q("What is the colour?"), None);
        assert_eq!(q("What is the capital of Peru?"), None);
        assert_eq!(q("Hello"), None);
    }

    #[test]
    fn every_item_of_the_built_in_suite_is_known() {
        let suite: toml::Table = include_str!("../../suites/quality.toml").parse().unwrap();
        for item in suite["items"].as_array().unwrap() {
            let prompt = item["prompt"].as_str().unwrap();
            if item.get("tools").is_some() || prompt.starts_with("Reply with exactly") {
                continue; // answered by the tool-call and smoke rules
            }
            assert!(answer(prompt).is_some(), "{prompt}");
        }
    }
}
