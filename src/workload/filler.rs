//! Deterministic filler text and the per-request nonce line of a matched prompt.
//!
//! The filler is a fixed pseudo-random sequence of common English words (seeded, identical on every
//! run and platform), so "the first `n` words" is a prefix-stable text whose token count grows by
//! about one token a word in most tokenizers. The nonce line puts the request number, at a fixed
//! width, at the very start of the prompt so no two requests share a cacheable prefix.

use serde::Serialize;

/// Common words that are a single token (with and without a leading space) in SmolLM2's and most
/// other modern BPE vocabularies. Counts are always re-measured; this only keeps searches short.
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "are", "with", "as", "his", "they",
    "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but", "what", "some",
    "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your", "how",
    "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about",
    "many", "then", "them", "write", "would", "like", "so", "these", "her", "long", "make",
    "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go", "come", "did",
    "number", "sound", "no", "most", "people", "my", "over", "know", "water", "than", "call",
    "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part",
    "take", "get", "place", "made", "live", "where", "after", "back", "little", "only", "round",
    "man", "year", "came", "show", "every", "good", "me", "give", "our", "under", "name", "very",
    "through", "just", "form", "great", "think", "say", "help", "low", "line", "turn", "cause",
    "much", "mean", "before", "move", "right", "boy", "old", "too", "same", "tell", "does", "set",
    "three", "want", "air", "well", "also", "play", "small", "end", "put", "home", "read", "hand",
    "large", "add", "even", "land", "here", "must", "big", "high", "such", "follow", "act", "why",
    "ask", "men", "change", "went", "light", "kind", "off", "need", "house", "picture", "try",
    "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth",
    "father", "head", "stand", "own", "page", "should", "country", "found", "answer", "school",
    "grow", "study", "still", "learn", "plant", "cover", "food", "sun", "four", "between", "state",
    "keep", "eye", "never", "last", "let", "thought", "city", "tree", "cross", "farm", "hard",
    "start", "might", "story", "far", "sea", "draw", "left", "late", "run", "while", "press",
    "close", "night", "real", "life", "few", "north", "open", "together", "next", "white",
    "children", "begin", "got", "walk", "example", "paper", "group", "always", "music", "those",
    "both", "mark", "often", "letter", "until", "mile", "river", "car", "feet", "care", "second",
    "book", "science", "eat", "room", "friend", "idea", "fish", "stop", "once", "base", "horse",
    "cut", "watch", "color", "face", "wood", "main", "enough", "plain", "girl", "usual", "young",
    "ready", "above", "ever", "red", "list", "though", "feel", "talk", "bird", "soon", "body",
    "dog", "family", "direct", "pose", "leave", "song", "measure", "door", "product", "black",
    "short", "class", "wind", "question", "complete", "ship", "area", "half", "rock", "order",
    "fire", "south", "problem", "piece", "pass",
];

/// Seed of the word sequence. Changing it changes every matched prompt: don't.
const SEED: u64 = 0x0bac_e0ff_5eed_0001;

/// Short pieces tried, in order, when the next filler word would overshoot the target by more than
/// the tokens still missing (a word of two or more tokens): nearly every tokenizer has each of
/// these as one token.
pub const FINE_PIECES: &[&str] = &[" a", " the", " and", " of", ".", ",", " I", " to", "!"];

/// Digits in the nonce; request numbers wrap modulo 10^8.
pub const NONCE_DIGITS: u32 = 8;
const NONCE_MODULUS: u64 = 10u64.pow(NONCE_DIGITS);

/// Request numbers a load may use: `0 .. NONCE_SPACE`. The numbers above it are reserved for the
/// sizing requests (`prompt::SIZING_INDEX` and the calibration check), whose prompts stay in the
/// server's prefix cache after sizing.
pub const NONCE_SPACE: u64 = 98_000_000;

/// A fresh random nonce base for one run (bench, selftest) or one campaign: two runs against the
/// same server start their request numbers at unrelated places, so a second run never finds the
/// first run's prompts in the server's prefix cache.
pub fn random_nonce_base() -> u64 {
    rand::random::<u64>() % NONCE_SPACE
}

/// The nonce base of a run given `--seed` (reproducible: the same seed, the same prompts).
pub fn nonce_base_from_seed(seed: u64) -> u64 {
    splitmix64(seed ^ 0x6e6f_6e63_655f_6261) % NONCE_SPACE
}

/// The request number written into the nonce line of the load's request `index`, starting at
/// `base`; wraps inside [`NONCE_SPACE`], so it never reaches the sizing requests' numbers.
pub fn nonce_number(base: u64, index: u64) -> u64 {
    (base % NONCE_SPACE + index % NONCE_SPACE) % NONCE_SPACE
}

/// The `i`-th filler word.
pub fn word(i: u64) -> &'static str {
    WORDS[(splitmix64(SEED ^ i) % WORDS.len() as u64) as usize]
}

/// The first `n` filler words, separated by single spaces.
pub fn words(n: u64) -> String {
    let mut s = String::with_capacity(n as usize * 6);
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(word(i));
    }
    s
}

/// A filler word of at most four letters picked by `key`: one token in the reference engine's
/// tokenizer (runs of up to four alphanumerics) and, written after a space, in most BPE
/// vocabularies, so a text of `n` such words after spaces is `n` tokens and texts joined at a
/// space keep their tokens (the trace replay's blocks, `workload::trace`).
pub fn short_word(key: u64) -> &'static str {
    static SHORT: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let list = SHORT.get_or_init(|| WORDS.iter().copied().filter(|w| w.len() <= 4).collect());
    list[(splitmix64(SEED ^ key) % list.len() as u64) as usize]
}

/// The mixing function behind the filler's word choices (also keys the trace's blocks).
pub fn mix(z: u64) -> u64 {
    splitmix64(z)
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How the request number is written in the nonce line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NonceFormat {
    /// `[bakeoff 00000042]`: digits at a fixed width. Same length for every number in tokenizers
    /// that split digits one by one (Llama 2, Mistral, Qwen, SmolLM) or in groups of three (Llama 3,
    /// cl100k).
    Compact,
    /// `[bakeoff 0 0 0 0 0 0 4 2]`: one digit a word, for tokenizers that merge digit runs by value.
    Spaced,
}

impl NonceFormat {
    /// The nonce line (with its newline) for request `index`.
    pub fn line(self, index: u64) -> String {
        let n = index % NONCE_MODULUS;
        match self {
            NonceFormat::Compact => {
                format!("[bakeoff {n:0width$}]\n", width = NONCE_DIGITS as usize)
            }
            NonceFormat::Spaced => {
                let digits = format!("{n:0width$}", width = NONCE_DIGITS as usize);
                let mut s = String::from("[bakeoff");
                for d in digits.chars() {
                    s.push(' ');
                    s.push(d);
                }
                s.push_str("]\n");
                s
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_deterministic_and_prefix_stable() {
        let a = words(50);
        let b = words(51);
        assert!(b.starts_with(&a));
        assert_eq!(a.split(' ').count(), 50);
        assert_eq!(words(0), "");
        // Pinned: the sequence must never change between versions.
        assert_eq!(words(3), format!("{} {} {}", word(0), word(1), word(2)));
    }

    #[test]
    fn nonce_numbers_stay_below_the_reserved_sizing_numbers() {
        assert_eq!(nonce_number(0, 7), 7);
        assert_eq!(nonce_number(NONCE_SPACE - 1, 1), 0);
        assert_eq!(nonce_number(5, NONCE_SPACE + 2), 7);
        for _ in 0..100 {
            let b = random_nonce_base();
            assert!(b < NONCE_SPACE);
            assert!(nonce_number(b, u64::MAX) < NONCE_SPACE);
        }
        // Seeded bases reproduce; different seeds and random bases differ.
        assert_eq!(nonce_base_from_seed(3), nonce_base_from_seed(3));
        assert_ne!(nonce_base_from_seed(3), nonce_base_from_seed(4));
        assert!(nonce_base_from_seed(0) < NONCE_SPACE);
        let draws: std::collections::HashSet<u64> = (0..50).map(|_| random_nonce_base()).collect();
        assert!(draws.len() > 45, "random bases repeat: {draws:?}");
    }

    #[test]
    fn nonce_lines_have_a_fixed_width() {
        assert_eq!(NonceFormat::Compact.line(42), "[bakeoff 00000042]\n");
        assert_eq!(
            NonceFormat::Compact.line(100_000_003),
            "[bakeoff 00000003]\n"
        );
        assert_eq!(NonceFormat::Spaced.line(42), "[bakeoff 0 0 0 0 0 0 4 2]\n");
        let len = NonceFormat::Compact.line(0).len();
        assert!([1, 99_999_999, 12_345_678]
            .iter()
            .all(|&i| NonceFormat::Compact.line(i).len() == len));
    }
}
