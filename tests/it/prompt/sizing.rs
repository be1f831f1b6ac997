//! Matched-prompt sizing against an in-memory endpoint: a toy tokenizer behind a fake `/tokenize`
//! and a fake `usage.prompt_tokens` that adds a chat template (or a BOS token).

use bakeoff::workload::filler::NonceFormat;
use bakeoff::workload::prompt::{
    build_with, Backend, LocalCounter, MatchedPrompt, Sizing, Strategy, CALIBRATION_BUDGET,
};
use bakeoff::workload::Endpoint;

#[derive(Clone, Copy)]
struct Toy {
    /// Letter runs of 3+ letters cost at least two tokens (forces the one-token fine pieces).
    two_token_words: bool,
    /// Equal neighbouring digits merge into one token (the nonce length then depends on the number).
    pair_digits: bool,
}

const PLAIN: Toy = Toy {
    two_token_words: false,
    pair_digits: false,
};

/// A toy BPE-ish count: a letter run (with one leading space) costs ceil(len/4) tokens, each digit,
/// punctuation mark, newline and lone space one.
fn toy_count(toy: Toy, text: &str) -> u64 {
    let c: Vec<char> = text.chars().collect();
    let mut n = 0u64;
    let mut i = 0;
    while i < c.len() {
        let start = i;
        if c[i] == ' ' && i + 1 < c.len() && c[i + 1].is_alphabetic() {
            i += 1;
        }
        if c[i].is_alphabetic() {
            let mut len = 0u64;
            while i < c.len() && c[i].is_alphabetic() {
                len += 1;
                i += 1;
            }
            let t = len.div_ceil(4);
            n += if toy.two_token_words && len >= 3 {
                t.max(2)
            } else {
                t
            };
            continue;
        }
        i = start;
        if c[i].is_ascii_digit() && toy.pair_digits && i + 1 < c.len() && c[i + 1] == c[i] {
            n += 1;
            i += 2;
            continue;
        }
        n += 1;
        i += 1;
    }
    n
}

struct Fake {
    toy: Toy,
    endpoint: Endpoint,
    tokenize: bool,
    /// Extra tokens the "server" adds to prompts of more than 200 content tokens (a template that
    /// is not additive), which only a real verification can see.
    long_extra: u64,
    /// Refuse an empty prompt (vLLM does on /v1/completions).
    refuse_empty: bool,
    usage_calls: u64,
    tokenize_calls: u64,
    /// The nonce number of every real request's prompt.
    usage_numbers: Vec<u64>,
}

impl Fake {
    fn new(endpoint: Endpoint, tokenize: bool) -> Fake {
        Fake {
            toy: PLAIN,
            endpoint,
            tokenize,
            long_extra: 0,
            refuse_empty: false,
            usage_calls: 0,
            tokenize_calls: 0,
            usage_numbers: Vec::new(),
        }
    }

    fn overhead(&self) -> u64 {
        match self.endpoint {
            Endpoint::Chat => 30,
            Endpoint::Completions => 1,
        }
    }

    /// What the fake endpoint reports as `usage.prompt_tokens` for `text`.
    fn reported(&self, text: &str) -> u64 {
        let c = toy_count(self.toy, text);
        c + self.overhead() + if c > 200 { self.long_extra } else { 0 }
    }
}

impl Backend for Fake {
    async fn tokenize(&mut self, text: &str) -> Result<Option<u64>, String> {
        self.tokenize_calls += 1;
        Ok(self.tokenize.then(|| toy_count(self.toy, text)))
    }

    async fn prompt_tokens(&mut self, text: &str) -> Result<u64, String> {
        self.usage_calls += 1;
        if let Some(rest) = text.strip_prefix("[bakeoff ") {
            let digits: String = rest
                .chars()
                .take_while(|c| *c != ']')
                .filter(|c| *c != ' ')
                .collect();
            self.usage_numbers.push(digits.parse().unwrap());
        }
        if std::env::var_os("FAKE_LOG").is_some() {
            let words = text.split(' ').count();
            eprintln!(
                "usage #{}: {} words -> {}",
                self.usage_calls,
                words,
                self.reported(text)
            );
        }
        if text.is_empty() && self.refuse_empty {
            return Err("HTTP 400: prompt cannot be empty".into());
        }
        Ok(self.reported(text))
    }
}

async fn size(
    fake: &mut Fake,
    local: Option<LocalCounter<'_>>,
    tokens: u64,
    nonce: bool,
) -> Result<MatchedPrompt, String> {
    let sizing = Sizing {
        endpoint: fake.endpoint,
        tokens,
        nonce,
    };
    build_with(fake, local, sizing).await
}

/// Every request number the bench might use reports exactly the target.
fn assert_matched(fake: &Fake, p: &MatchedPrompt, tokens: u64) {
    assert_eq!(p.target_tokens, tokens);
    assert_eq!(p.verified_prompt_tokens, tokens);
    for i in [
        0,
        1,
        2,
        9,
        10,
        99,
        777,
        12_345,
        99_999_999,
        100_000_000,
        u64::MAX,
    ] {
        assert_eq!(
            fake.reported(&p.text(i)),
            tokens,
            "request {i}, {:?}",
            p.strategy
        );
    }
    assert_eq!(
        p.content_tokens as i64 + p.template_overhead,
        p.verified_prompt_tokens as i64
    );
}

#[tokio::test]
async fn server_tokenize_hits_exact_counts() {
    for tokens in [46, 100, 1000, 4096, 12_345] {
        let mut fake = Fake::new(Endpoint::Chat, true);
        let p = size(&mut fake, None, tokens, true).await.unwrap();
        assert_eq!(p.strategy, Strategy::ServerTokenize);
        assert_matched(&fake, &p, tokens);
        assert_eq!(p.template_overhead, 30);
        assert_eq!(p.content_tokens, tokens - 30);
        // One request for the overhead, one to verify.
        assert_eq!(p.sizing_requests, 2, "N={tokens}");
        assert_eq!(fake.usage_calls, 2);
        assert_eq!(p.tokenize_requests, fake.tokenize_calls);
        assert!(
            p.tokenize_requests <= 20,
            "{} tokenize calls",
            p.tokenize_requests
        );
        assert_eq!(p.nonce_format, Some(NonceFormat::Compact));
        assert!(p.text(42).starts_with("[bakeoff 00000042]\n"));
        assert_eq!(p.adjustment, 0);
    }
}

#[tokio::test]
async fn real_sizing_requests_never_use_a_bench_request_number() {
    for tokenize in [true, false] {
        for toy in [
            PLAIN,
            Toy {
                two_token_words: true,
                pair_digits: true,
            },
        ] {
            let mut fake = Fake::new(Endpoint::Chat, tokenize);
            fake.toy = toy;
            fake.long_extra = 2;
            let p = size(&mut fake, None, 1001, true).await.unwrap();
            assert_matched(&fake, &p, 1001);
            assert!(!fake.usage_numbers.is_empty());
            assert!(
                fake.usage_numbers.iter().all(|&n| n >= 98_000_000),
                "{:?}",
                fake.usage_numbers
            );
            assert!(p.excerpt.starts_with("[bakeoff 0"), "{}", p.excerpt);
        }
    }
}

#[tokio::test]
async fn explicit_local_tokenizer_wins_over_server_tokenize() {
    let counter = |t: &str| -> Result<u64, String> { Ok(toy_count(PLAIN, t)) };
    let mut fake = Fake::new(Endpoint::Chat, true);
    let p = size(&mut fake, Some(&counter), 1000, true).await.unwrap();
    assert_eq!(p.strategy, Strategy::LocalTokenizer);
    assert_eq!(fake.tokenize_calls, 0);
    assert_eq!(p.tokenize_requests, 0);
    assert_eq!(fake.usage_calls, 2);
    assert_matched(&fake, &p, 1000);
}

#[tokio::test]
async fn calibration_stays_within_its_request_budget() {
    for tokens in [44, 45, 100, 1000, 4096, 12_345, 100_000, 1_000_000] {
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let mut fake = Fake::new(endpoint, false);
            let p = size(&mut fake, None, tokens, true).await.unwrap();
            assert_eq!(p.strategy, Strategy::UsageCalibration);
            assert_matched(&fake, &p, tokens);
            assert_eq!(p.template_overhead, fake.overhead() as i64);
            assert_eq!(p.sizing_requests, fake.usage_calls);
            assert!(
                p.sizing_requests <= 10,
                "N={tokens} {endpoint:?}: {} requests",
                p.sizing_requests
            );
            assert_eq!(fake.tokenize_calls, 1, "one probe of /tokenize, then none");
        }
    }
}

#[tokio::test]
async fn calibration_with_two_token_words_uses_fine_pieces_within_budget() {
    for tokens in [101, 1001, 4095] {
        let mut fake = Fake::new(Endpoint::Chat, false);
        fake.toy.two_token_words = true;
        let p = size(&mut fake, None, tokens, true).await.unwrap();
        assert_matched(&fake, &p, tokens);
        assert!(
            p.sizing_requests <= CALIBRATION_BUDGET,
            "{} requests",
            p.sizing_requests
        );
    }
}

#[tokio::test]
async fn completions_overhead_is_the_bos_token() {
    let mut fake = Fake::new(Endpoint::Completions, true);
    let p = size(&mut fake, None, 1000, true).await.unwrap();
    assert_eq!(p.template_overhead, 1);
    assert_eq!(p.content_tokens, 999);
    assert_matched(&fake, &p, 1000);
    assert_eq!(p.prompt_json(3), serde_json::Value::String(p.text(3)));
}

#[tokio::test]
async fn empty_prompt_refused_falls_back_to_a_one_token_probe() {
    let mut fake = Fake::new(Endpoint::Completions, false);
    fake.refuse_empty = true;
    let p = size(&mut fake, None, 500, true).await.unwrap();
    assert_matched(&fake, &p, 500);
    assert_eq!(p.template_overhead, 1);
    // The probe fallback, and what the server lacks (no /tokenize: calibration).
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(p.notes[0].contains("/tokenize"), "{:?}", p.notes);
    assert!(
        p.notes[1].contains("empty prompt was refused"),
        "{:?}",
        p.notes
    );
}

#[tokio::test]
async fn words_that_overshoot_are_finished_with_one_token_pieces() {
    let mut fake = Fake::new(Endpoint::Chat, true);
    fake.toy.two_token_words = true;
    let mut used_pieces = false;
    for tokens in [101, 102, 1001, 1002, 3333] {
        let p = size(&mut fake, None, tokens, true).await.unwrap();
        assert_matched(&fake, &p, tokens);
        used_pieces |= p.fine_pieces > 0;
    }
    assert!(used_pieces, "odd gaps need a one-token piece");
}

#[tokio::test]
async fn one_adjustment_fixes_a_template_that_is_not_additive() {
    for (strategy_tokenize, tokens) in [(true, 1000), (true, 250), (false, 1000)] {
        let mut fake = Fake::new(Endpoint::Chat, strategy_tokenize);
        fake.long_extra = 3;
        let p = size(&mut fake, None, tokens, true).await.unwrap();
        assert_matched(&fake, &p, tokens);
        if strategy_tokenize {
            assert_eq!(p.adjustment, -3);
            assert_eq!(p.sizing_requests, 3, "overhead, verify, re-verify");
            assert_eq!(p.template_overhead, 33);
        } else {
            assert_eq!(p.adjustment, 0, "calibration counts the real thing");
        }
    }
}

#[tokio::test]
async fn a_wrong_local_tokenizer_is_reported_with_the_difference() {
    let chars = |t: &str| -> Result<u64, String> { Ok(t.len() as u64 / 3) };
    let mut fake = Fake::new(Endpoint::Chat, true);
    let e = size(&mut fake, Some(&chars), 1000, true).await.unwrap_err();
    assert!(e.contains("local-tokenizer"), "{e}");
    assert!(e.contains("after one adjustment"), "{e}");
    assert!(e.contains("--tokenizer"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

#[tokio::test]
async fn digits_that_merge_by_value_switch_to_a_spaced_nonce() {
    for tokenize in [true, false] {
        let mut fake = Fake::new(Endpoint::Chat, tokenize);
        fake.toy.pair_digits = true;
        let p = size(&mut fake, None, 800, true).await.unwrap();
        assert_eq!(p.nonce_format, Some(NonceFormat::Spaced));
        assert!(p.text(42).starts_with("[bakeoff 0 0 0 0 0 0 4 2]\n"));
        assert_matched(&fake, &p, 800);
    }
}

#[tokio::test]
async fn without_a_nonce_every_request_is_the_same_text() {
    let mut fake = Fake::new(Endpoint::Chat, true);
    let p = size(&mut fake, None, 1000, false).await.unwrap();
    assert!(!p.nonce);
    assert_eq!(p.nonce_format, None);
    assert_eq!(p.text(0), p.text(5));
    assert!(!p.text(0).contains("bakeoff"));
    assert_matched(&fake, &p, 1000);
    // The shortest possible prompt is now the bare template plus one word.
    let p = size(&mut fake, None, 31, false).await.unwrap();
    assert_matched(&fake, &p, 31);
}

#[tokio::test]
async fn limits_are_refused_with_what_to_use_instead() {
    let mut fake = Fake::new(Endpoint::Chat, true);
    let e = size(&mut fake, None, 0, true).await.unwrap_err();
    assert!(e.contains("--prompt-tokens"), "{e}");
    let e = size(&mut fake, None, 1_000_001, true).await.unwrap_err();
    assert!(e.contains("1,000,000"), "{e}");
    assert_eq!(
        fake.usage_calls + fake.tokenize_calls,
        0,
        "refused before any request"
    );

    // The template (30) plus the nonce line.
    let min = 30 + toy_count(PLAIN, "[bakeoff 00000000]\n");
    for tokenize in [true, false] {
        let mut fake = Fake::new(Endpoint::Chat, tokenize);
        let e = size(&mut fake, None, min - 1, true).await.unwrap_err();
        assert!(
            e.contains(&format!("use --prompt-tokens {min} or more")),
            "{e}"
        );
        assert!(e.contains("--allow-prefix-cache"), "{e}");
        let p = size(&mut fake, None, min, true).await.unwrap();
        assert_eq!(p.filler_words, 0);
        assert_matched(&fake, &p, min);
    }
}

#[tokio::test]
async fn the_record_serializes_without_the_prompt() {
    let mut fake = Fake::new(Endpoint::Chat, true);
    let p = size(&mut fake, None, 2000, true).await.unwrap();
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["strategy"], "server-tokenize");
    assert_eq!(v["endpoint"], "chat");
    assert_eq!(v["target_tokens"], 2000);
    assert_eq!(v["verified_prompt_tokens"], 2000);
    assert_eq!(v["template_overhead"], 30);
    assert_eq!(v["content_tokens"], 1970);
    assert_eq!(v["nonce_format"], "compact");
    assert!(v.get("body").is_none());
    let excerpt = v["excerpt"].as_str().unwrap();
    assert!(excerpt.starts_with("[bakeoff 00000000]") && excerpt.chars().count() <= 81);
    assert!(v.to_string().len() < 1000);

    let m = p.messages_json(7);
    assert_eq!(m[0]["role"], "user");
    assert_eq!(m[0]["content"], p.text(7));
    let mut body = serde_json::Map::new();
    p.insert_input(&mut body, 7);
    assert_eq!(body["messages"], m);
}

#[test]
fn endpoint_paths() {
    assert_eq!(Endpoint::Chat.path(), "/v1/chat/completions");
    assert_eq!(Endpoint::Completions.path(), "/v1/completions");
}
