//! Matched prompts: a prompt of exactly N tokens *of the endpoint's tokenizer*, checked against
//! the `usage.prompt_tokens` the endpoint itself reports.
//!
//! How (`build`):
//! 1. Pick a counter, in this order: a local `tokenizer.json` when the user gave one (an explicit
//!    `--tokenizer` wins), else the server's `/tokenize` when it has one (llama.cpp and vLLM
//!    shapes), else calibration against `usage.prompt_tokens` of real requests.
//! 2. Measure the template overhead (chat role markers, system prompt, BOS) with one real request
//!    (`max_tokens` 1, temperature 0): `usage.prompt_tokens` minus the counter's count of the content.
//! 3. Choose a nonce format whose length is the same for every request number (checked with the
//!    counter on several numbers), then search the number of filler words (interpolation with a
//!    bisection guard, re-counting the whole text each time) and, where one word would overshoot,
//!    append one-token pieces, until the content counts exactly N − overhead.
//! 4. Verify with a real request that `usage.prompt_tokens` is N; when it is not, move the target by
//!    the difference once and verify again; still off is an error naming the strategy.
//!
//! Every real sizing request carries the reserved request number [`SIZING_INDEX`], so the prefix
//! cache it leaves behind never holds a whole bench prompt.
//!
//! In calibration the counter *is* a real request, so the whole search stays within
//! [`CALIBRATION_BUDGET`] requests (typically 4–6) and its last request is the verification.
//!
//! Real sizing requests are `stream: false`. An endpoint that refuses that form on the first one
//! (or answers it without usage) is asked with streamed requests from then on, reading
//! `usage.prompt_tokens` from the usage chunk (`workload::streamed`); the record's notes say so.
//!
//! The search logic talks to the endpoint only through [`Backend`], so it is unit-tested with an
//! in-memory tokenizer; [`HttpBackend`] is the real one.

pub use super::backend::{tokenize_count, Backend, HttpBackend, SizingMode};
use super::filler::{self, NonceFormat, FINE_PIECES};
use super::Endpoint;
use crate::client::Target;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::Duration;

/// Largest `--prompt-tokens` accepted.
pub const MAX_TOKENS: u64 = 1_000_000;
/// Most real requests a calibration-only sizing may send before it gives up.
pub const CALIBRATION_BUDGET: u64 = 12;
/// Words of filler in the short probe that measures the overhead and checks the nonce.
const PROBE_WORDS: u64 = 8;
/// The request number every real sizing request carries. Real requests warm the server's prefix
/// cache, so they use numbers a bench never reaches (numbers wrap at 10^8): request 0 of the bench
/// must not find its whole prompt cached.
pub const SIZING_INDEX: u64 = 99_999_999;
/// Request numbers whose nonce must count the same as `SIZING_INDEX`, with a cheap counter
/// (`/tokenize` and local counts leave no trace in the server's cache).
const NONCE_CHECK: &[u64] = &[0, 1, 12_345_678];
/// The same check in calibration, where every count is a real request: one more reserved number.
const NONCE_CHECK_CALIBRATION: &[u64] = &[98_765_432];
/// The request number of the final full-length nonce check (tokenizer strategies only).
const NONCE_CHECK_LAST: u64 = 0;
/// Filler words never exceed this (a guard against a counter that stops growing).
const MAX_WORDS: u64 = 4 * MAX_TOKENS;
/// Characters of the prompt kept in the serialized record.
const EXCERPT_CHARS: usize = 80;

/// How the prompt's tokens were counted while it was sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// The server's own `/tokenize` endpoint.
    ServerTokenize,
    /// A local `tokenizer.json` (the `--tokenizer` option).
    LocalTokenizer,
    /// Real requests, reading `usage.prompt_tokens` (no tokenizer available).
    UsageCalibration,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::ServerTokenize => "server-tokenize",
            Strategy::LocalTokenizer => "local-tokenizer",
            Strategy::UsageCalibration => "usage-calibration",
        }
    }
}

/// What to build and where to measure it.
#[derive(Debug, Clone)]
pub struct PromptSpec<'a> {
    pub target: &'a Target,
    /// The `model` field sent with every sizing request.
    pub model: &'a str,
    pub endpoint: Endpoint,
    /// `--prompt-tokens`: the `usage.prompt_tokens` every request must be reported with.
    pub tokens: u64,
    /// `--tokenizer`: the served model's `tokenizer.json`; when given it is the counter.
    pub tokenizer: Option<&'a Path>,
    pub api_key: Option<&'a str>,
    /// A per-request nonce line at the start (off with `--allow-prefix-cache`).
    pub nonce: bool,
    /// Limit for each sizing request.
    pub timeout: Duration,
    /// `--extra-body`: merged into the calibration request (fields sizing sets itself win), so
    /// options that change the rendered prompt, like `chat_template_kwargs`, are counted too.
    pub extra_body: Option<&'a serde_json::Map<String, Value>>,
}

/// A prompt sized to the endpoint's tokenizer. Serializes as the record the bench artifact keeps
/// (strategy, target, measured counts); the prompt itself is kept out, apart from a short excerpt.
#[derive(Debug, Clone, Serialize)]
pub struct MatchedPrompt {
    pub strategy: Strategy,
    pub endpoint: Endpoint,
    /// `--prompt-tokens`: what `usage.prompt_tokens` must be.
    pub target_tokens: u64,
    /// Tokens of the content (nonce line + filler) as the counter counts them.
    pub content_tokens: u64,
    /// `usage.prompt_tokens` minus `content_tokens`: the chat template (or BOS), measured.
    pub template_overhead: i64,
    /// `usage.prompt_tokens` the endpoint reported for the final prompt (request [`SIZING_INDEX`]).
    pub verified_prompt_tokens: u64,
    pub nonce: bool,
    /// How the nonce line is written; null without a nonce.
    pub nonce_format: Option<NonceFormat>,
    /// Filler words after the nonce line.
    pub filler_words: u64,
    /// One-token pieces appended after the words to land exactly on the target.
    pub fine_pieces: u64,
    /// Tokens the target moved by after the first verification (0 when none was needed).
    pub adjustment: i64,
    /// Real completion requests (`max_tokens` 1) spent sizing.
    pub sizing_requests: u64,
    /// `/tokenize` calls spent sizing.
    pub tokenize_requests: u64,
    /// The start of the prompt for request 0.
    pub excerpt: String,
    /// Anything measured in a less direct way than described above.
    pub notes: Vec<String>,
    #[serde(skip)]
    body: String,
}

impl MatchedPrompt {
    /// The content for request `index`: the nonce line (when on) and the filler. Every index has
    /// the same token count. Numbers wrap modulo 10^8; give each request of a server a different
    /// index below 98,000,000 (e.g. `repetition * requests + i`) to keep prefix caches cold: the
    /// sizing requests used 99,999,999 and 98,765,432.
    pub fn text(&self, index: u64) -> String {
        match self.nonce_format {
            Some(f) => {
                let mut s = f.line(index);
                s.push_str(&self.body);
                s
            }
            None => self.body.clone(),
        }
    }

    /// `messages` of a chat request: one user turn.
    pub fn messages_json(&self, index: u64) -> Value {
        json!([{ "role": "user", "content": self.text(index) }])
    }

    /// `prompt` of a completions request.
    pub fn prompt_json(&self, index: u64) -> Value {
        Value::String(self.text(index))
    }

    /// Puts `messages` (chat) or `prompt` (completions) into a request body.
    pub fn insert_input(&self, body: &mut serde_json::Map<String, Value>, index: u64) {
        super::request::insert_input(body, self.endpoint, self.text(index));
    }

    /// The filler after the nonce line (the same for every request).
    pub fn body(&self) -> &str {
        &self.body
    }
}

/// A local token counter (a loaded `tokenizer.json`, or a test double).
pub type LocalCounter<'a> = &'a (dyn Fn(&str) -> Result<u64, String> + Sync);

/// The sizing request, apart from where it goes.
#[derive(Debug, Clone, Copy)]
pub struct Sizing {
    pub endpoint: Endpoint,
    pub tokens: u64,
    pub nonce: bool,
}

/// Builds the matched prompt for `spec` against its endpoint.
pub async fn build(spec: &PromptSpec<'_>) -> Result<MatchedPrompt, String> {
    check_tokens(spec.tokens)?;
    let tokenizer = spec.tokenizer.map(load_tokenizer).transpose()?;
    let local = tokenizer.as_ref().map(|tok| {
        move |text: &str| -> Result<u64, String> {
            tok.encode_fast(text, false)
                .map(|e| e.len() as u64)
                .map_err(|e| format!("the tokenizer could not encode the prompt: {e}"))
        }
    });
    let mut backend = HttpBackend {
        target: spec.target,
        model: spec.model,
        endpoint: spec.endpoint,
        api_key: spec.api_key,
        timeout: spec.timeout,
        extra_body: spec.extra_body,
        mode: SizingMode::default(),
        retried: Vec::new(),
    };
    let sizing = Sizing {
        endpoint: spec.endpoint,
        tokens: spec.tokens,
        nonce: spec.nonce,
    };
    let local_ref = local.as_ref().map(|f| f as LocalCounter<'_>);
    build_with(&mut backend, local_ref, sizing).await
}

/// Loads a `tokenizer.json` for counting: no truncation or padding, whatever the file says.
pub fn load_tokenizer(path: &Path) -> Result<tokenizers::Tokenizer, String> {
    let mut tok = tokenizers::Tokenizer::from_file(path).map_err(|e| {
        format!(
            "--tokenizer {}: could not load it as a Hugging Face tokenizer.json ({e}); pass the served model's tokenizer.json, or leave --tokenizer out",
            path.display()
        )
    })?;
    tok.with_truncation(None)
        .map_err(|e| format!("--tokenizer {}: {e}", path.display()))?;
    tok.with_padding(None);
    Ok(tok)
}

fn check_tokens(tokens: u64) -> Result<(), String> {
    if tokens == 0 {
        return Err("--prompt-tokens must be at least 1".into());
    }
    if tokens > MAX_TOKENS {
        return Err(format!(
            "--prompt-tokens {tokens} is above the limit of 1,000,000 tokens; use a smaller prompt"
        ));
    }
    Ok(())
}

/// Builds the matched prompt with any backend: the whole method, without I/O of its own.
pub async fn build_with<B: Backend>(
    backend: &mut B,
    local: Option<LocalCounter<'_>>,
    sizing: Sizing,
) -> Result<MatchedPrompt, String> {
    check_tokens(sizing.tokens)?;
    let mut s = Sizer {
        backend,
        counter: local.map_or(Counter::Usage, Counter::Local),
        endpoint: sizing.endpoint,
        nonce: sizing.nonce.then_some(NonceFormat::Compact),
        cache: HashMap::new(),
        usage_requests: 0,
        tokenize_requests: 0,
        notes: Vec::new(),
    };
    s.size(sizing.tokens).await
}

#[derive(Clone, Copy)]
enum Counter<'a> {
    Server,
    Local(LocalCounter<'a>),
    /// Counts are `usage.prompt_tokens` of real requests (template included).
    Usage,
}

impl Counter<'_> {
    fn strategy(&self) -> Strategy {
        match self {
            Counter::Server => Strategy::ServerTokenize,
            Counter::Local(_) => Strategy::LocalTokenizer,
            Counter::Usage => Strategy::UsageCalibration,
        }
    }
}

enum FitError {
    /// Even the content without filler counts `min` (in the counter's units).
    TooSmall {
        min: u64,
    },
    Other(String),
}

impl From<String> for FitError {
    fn from(s: String) -> Self {
        FitError::Other(s)
    }
}

struct Sizer<'a, 'b, B> {
    backend: &'a mut B,
    counter: Counter<'b>,
    endpoint: Endpoint,
    nonce: Option<NonceFormat>,
    /// Counts by hash of the counted text (the counter is deterministic).
    cache: HashMap<u64, u64>,
    usage_requests: u64,
    tokenize_requests: u64,
    notes: Vec<String>,
}

fn key(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl<B: Backend> Sizer<'_, '_, B> {
    fn content(&self, index: u64, body: &str) -> String {
        match self.nonce {
            Some(f) => f.line(index) + body,
            None => body.to_string(),
        }
    }

    fn calibrating(&self) -> bool {
        matches!(self.counter, Counter::Usage)
    }

    /// One real request; in calibration, within the budget.
    async fn usage(&mut self, text: &str) -> Result<u64, String> {
        if self.calibrating() && self.usage_requests >= CALIBRATION_BUDGET {
            return Err(format!(
                "calibrating against usage.prompt_tokens took more than {CALIBRATION_BUDGET} requests without reaching the exact count; pass --tokenizer FILE (the served model's tokenizer.json)"
            ));
        }
        self.usage_requests += 1;
        self.backend.prompt_tokens(text).await
    }

    /// The counter's count of `text` (content tokens; the whole prompt in calibration).
    async fn count(&mut self, text: &str) -> Result<u64, String> {
        let k = key(text);
        if let Some(&n) = self.cache.get(&k) {
            return Ok(n);
        }
        let n = match self.counter {
            Counter::Server => {
                self.tokenize_requests += 1;
                self.backend.tokenize(text).await?.ok_or_else(|| {
                    "the server's /tokenize stopped answering while the prompt was being sized"
                        .to_string()
                })?
            }
            Counter::Local(f) => f(text)?,
            Counter::Usage => self.usage(text).await?,
        };
        self.cache.insert(k, n);
        Ok(n)
    }

    /// 1. The counter: an explicit tokenizer wins, then the server's /tokenize, then usage.
    async fn choose_counter(&mut self, probe_body: &str) -> Result<(), String> {
        if !matches!(self.counter, Counter::Local(_)) {
            let probe = self.content(SIZING_INDEX, probe_body);
            self.tokenize_requests += 1;
            match self.backend.tokenize(&probe).await? {
                Some(n) => {
                    self.counter = Counter::Server;
                    self.cache.insert(key(&probe), n);
                }
                None => {
                    self.counter = Counter::Usage;
                    self.notes.push(
                    "the server has no usable /tokenize (llama.cpp or vLLM form), so the prompt was sized by calibrating against usage.prompt_tokens".into(),
                );
                }
            }
        }
        Ok(())
    }

    /// 2. The template overhead, measured with one real request.
    async fn template_overhead(&mut self, probe_body: &str) -> Result<i64, String> {
        Ok(if self.calibrating() {
            match self.usage("").await {
                Ok(u) => {
                    self.cache.insert(key(""), u);
                    u as i64
                }
                Err(e) => {
                    let u = self.usage("a").await.map_err(|e2| {
                    format!("sizing the prompt by calibration failed: an empty prompt got {e}; the prompt \"a\" got {e2}")
                })?;
                    self.notes.push(format!(
                    "template overhead estimated as usage.prompt_tokens of the prompt \"a\" minus 1 (an empty prompt was refused: {e})"
                ));
                    u as i64 - 1
                }
            }
        } else {
            let probe = self.content(SIZING_INDEX, probe_body);
            let c = self.count(&probe).await?;
            let u = self.usage(&probe).await?;
            u as i64 - c as i64
        })
    }

    /// 3a. A nonce whose length does not depend on the request number.
    async fn choose_nonce(&mut self, probe_body: &str, strategy: Strategy) -> Result<(), String> {
        if self.nonce.is_some() {
            let indices = if self.calibrating() {
                NONCE_CHECK_CALIBRATION
            } else {
                NONCE_CHECK
            };
            let mut chosen = None;
            let mut seen = Vec::new();
            for format in [NonceFormat::Compact, NonceFormat::Spaced] {
                self.nonce = Some(format);
                let mut counts = Vec::new();
                for &i in std::iter::once(&SIZING_INDEX).chain(indices) {
                    let text = self.content(i, probe_body);
                    counts.push(self.count(&text).await?);
                }
                if counts.iter().all(|&c| c == counts[0]) {
                    chosen = Some(format);
                    break;
                }
                seen.push(counts);
            }
            if chosen.is_none() {
                return Err(format!(
                "the endpoint's tokenizer ({}) gives the request nonce a different length for different request numbers (counts {seen:?} for numbers {indices:?}), so prompts could not all be the same size; pass --allow-prefix-cache to send them without a nonce",
                strategy.as_str()
            ));
            }
        }
        Ok(())
    }

    /// The sized prompt's content tokens; a full-length prompt must count the same for another
    /// request number, too.
    async fn content_tokens_of(
        &mut self,
        body: &str,
        tokens: u64,
        overhead: i64,
        strategy: Strategy,
    ) -> Result<u64, String> {
        Ok(if self.calibrating() {
            (tokens as i64 - overhead).max(0) as u64
        } else {
            let c0 = self.count(&self.content(SIZING_INDEX, body)).await?;
            if self.nonce.is_some() {
                let last = self.content(NONCE_CHECK_LAST, body);
                let c1 = self.count(&last).await?;
                if c1 != c0 {
                    return Err(format!(
                    "the endpoint's tokenizer ({}) counts request {NONCE_CHECK_LAST} of the prompt as {c1} tokens and request {SIZING_INDEX} as {c0}; pass --allow-prefix-cache to send prompts without a nonce",
                    strategy.as_str()
                ));
                }
            }
            c0
        })
    }

    async fn size(&mut self, tokens: u64) -> Result<MatchedPrompt, String> {
        let probe_body = filler::words(PROBE_WORDS);

        self.choose_counter(&probe_body).await?;
        let strategy = self.counter.strategy();

        let overhead = self.template_overhead(&probe_body).await?;

        self.choose_nonce(&probe_body, strategy).await?;

        // 3b. The content, sized to the target.
        let goal_for = |adjust: i64| -> i64 {
            if strategy == Strategy::UsageCalibration {
                tokens as i64 + adjust
            } else {
                tokens as i64 - overhead + adjust
            }
        };
        let calibrating = self.calibrating();
        let nonce_on = self.nonce.is_some();
        let what = self.endpoint.as_str();
        let too_small = |min: u64| -> String {
            let min_total = if calibrating {
                min as i64
            } else {
                min as i64 + overhead
            };
            let (nonce, drop) = if nonce_on {
                (
                    ", plus the request nonce line",
                    ", or --allow-prefix-cache to drop the nonce",
                )
            } else {
                ("", "")
            };
            format!(
                "--prompt-tokens {tokens} is too small: the shortest matched prompt on this endpoint is {min_total} tokens (a {what} template overhead of {overhead}{nonce}); use --prompt-tokens {min_total} or more{drop}"
            )
        };
        let probe_point = {
            let text = self.content(SIZING_INDEX, &probe_body);
            (PROBE_WORDS, self.count(&text).await?)
        };
        let mut adjustment = 0i64;
        let goal = goal_for(0);
        let (mut body, mut words, mut pieces) = match self.fit(goal, probe_point).await {
            Ok(r) => r,
            Err(FitError::TooSmall { min }) => return Err(too_small(min)),
            Err(FitError::Other(e)) => return Err(e),
        };

        // 4. Verification with a real request (in calibration the last count was that request).
        let mut verified = if self.calibrating() {
            self.count(&self.content(SIZING_INDEX, &body)).await?
        } else {
            self.usage(&self.content(SIZING_INDEX, &body)).await?
        };
        if verified != tokens {
            let d = verified as i64 - tokens as i64;
            adjustment = -d;
            let first = verified;
            (body, words, pieces) = match self.fit(goal_for(adjustment), probe_point).await {
                Ok(r) => r,
                Err(FitError::TooSmall { .. }) => {
                    return Err(format!(
                        "the endpoint reported {first} prompt tokens for a prompt sized to {tokens} with {} (off by {d:+}), and a prompt {d} tokens shorter is below the shortest possible one; use a larger --prompt-tokens",
                        strategy.as_str()
                    ))
                }
                Err(FitError::Other(e)) => return Err(e),
            };
            verified = self.usage(&self.content(SIZING_INDEX, &body)).await?;
            if verified != tokens {
                let hint = match strategy {
                    Strategy::LocalTokenizer => "is --tokenizer the tokenizer.json of the served model? Without --tokenizer bakeoff uses the server's /tokenize or calibrates against usage.prompt_tokens",
                    Strategy::ServerTokenize => "the server's /tokenize disagrees with its own usage.prompt_tokens; pass --tokenizer FILE (the served model's tokenizer.json)",
                    Strategy::UsageCalibration => "the endpoint's usage.prompt_tokens is not stable for the same prompt",
                };
                return Err(format!(
                    "the endpoint reported {verified} prompt tokens for a {} prompt sized to {tokens} with {} (first {first}, then off by {:+} after one adjustment of {adjustment:+}); {hint}",
                    self.endpoint.as_str(),
                    strategy.as_str(),
                    verified as i64 - tokens as i64
                ));
            }
        }

        let content_tokens = self
            .content_tokens_of(&body, tokens, overhead, strategy)
            .await?;

        Ok(MatchedPrompt {
            strategy,
            endpoint: self.endpoint,
            target_tokens: tokens,
            content_tokens,
            template_overhead: verified as i64 - content_tokens as i64,
            verified_prompt_tokens: verified,
            nonce: self.nonce.is_some(),
            nonce_format: self.nonce,
            filler_words: words,
            fine_pieces: pieces,
            adjustment,
            sizing_requests: self.usage_requests,
            tokenize_requests: self.tokenize_requests,
            excerpt: excerpt_of(&self.content(0, &body)),
            notes: {
                let mut n = std::mem::take(&mut self.notes);
                n.extend(self.backend.take_notes());
                n
            },
            body,
        })
    }

    /// Finds a body (filler words, then one-token pieces when needed) whose content counts exactly
    /// `goal`. `known` is one measured point (words, count) to start from.
    async fn fit(&mut self, goal: i64, known: (u64, u64)) -> Result<(String, u64, u64), FitError> {
        if goal < 0 {
            let min = self.count(&self.content(SIZING_INDEX, "")).await?;
            return Err(FitError::TooSmall { min });
        }
        let goal = goal as u64;
        // lo: the largest word count known to count below the goal; hi: the smallest above it.
        let mut lo: Option<(u64, u64)> = None;
        let mut hi: Option<(u64, u64)> = None;
        let (kw, kc) = known;
        if kc == goal {
            return Ok((filler::words(kw), kw, 0));
        } else if kc < goal {
            lo = Some(known);
        } else {
            hi = Some(known);
        }
        if lo.is_none() {
            let c0 = self.count(&self.content(SIZING_INDEX, "")).await?;
            if c0 == goal {
                return Ok((String::new(), 0, 0));
            }
            if c0 > goal {
                return Err(FitError::TooSmall { min: c0 });
            }
            lo = Some((0, c0));
        }
        // The two latest measurements: their secant predicts the next word count.
        let mut previous: Option<(u64, u64)> = (lo != Some(known)).then_some(known);
        let mut latest: (u64, u64) = lo.expect("set above");
        let mut last_side = None;
        let mut same_side = 0u32;
        loop {
            let (lw, lc) = lo.expect("set above");
            // Tokens a word near `latest` (one until two points tell otherwise).
            let rate = match previous {
                Some(p) if p.0 != latest.0 && p.1 != latest.1 => {
                    (latest.1 as f64 - p.1 as f64) / (latest.0 as f64 - p.0 as f64)
                }
                _ => 1.0,
            }
            .max(0.05);
            let w = match hi {
                None => {
                    let step = ((goal - lc) as f64 / rate).ceil() as u64;
                    lw + step.max(1)
                }
                Some((hw, _)) => {
                    if hw <= lw + 1 {
                        break;
                    }
                    let g = if same_side >= 3 {
                        lw + (hw - lw) / 2
                    } else {
                        let step = (goal as f64 - latest.1 as f64) / rate;
                        (latest.0 as f64 + step).round().max(0.0) as u64
                    };
                    g.clamp(lw + 1, hw - 1)
                }
            };
            if w > MAX_WORDS {
                return Err(FitError::Other(format!(
                    "the prompt did not reach {goal} tokens with {MAX_WORDS} filler words ({} counts {lc} at {lw} words); is the counter working?",
                    self.counter.strategy().as_str()
                )));
            }
            let text = self.content(SIZING_INDEX, &filler::words(w));
            let c = self.count(&text).await?;
            if c == goal {
                return Ok((filler::words(w), w, 0));
            }
            let side_hi = c > goal;
            if side_hi {
                hi = Some((w, c));
            } else {
                lo = Some((w, c));
            }
            previous = Some(latest);
            latest = (w, c);
            if last_side == Some(side_hi) {
                same_side += 1;
            } else {
                same_side = 1;
            }
            last_side = Some(side_hi);
        }

        // The next word would overshoot: append one-token pieces to the largest body below.
        let (lw, lc) = lo.expect("set above");
        let mut body = filler::words(lw);
        let mut cur = lc;
        let mut pieces = 0u64;
        'grow: while cur < goal {
            for piece in FINE_PIECES {
                let candidate = format!("{body}{piece}");
                let c = self.count(&self.content(SIZING_INDEX, &candidate)).await?;
                if c == goal {
                    return Ok((candidate, lw, pieces + 1));
                }
                if c > cur && c < goal {
                    body = candidate;
                    cur = c;
                    pieces += 1;
                    continue 'grow;
                }
            }
            return Err(FitError::Other(format!(
                "could not size the prompt to exactly {goal} tokens with {}: {lc} tokens at {lw} words, and every one-token piece tried overshoots from {cur}",
                self.counter.strategy().as_str()
            )));
        }
        Ok((body, lw, pieces))
    }
}

fn excerpt_of(text: &str) -> String {
    if text.chars().count() > EXCERPT_CHARS {
        format!("{}…", text.chars().take(EXCERPT_CHARS).collect::<String>())
    } else {
        text.to_string()
    }
}
