//! A work set: the prompts of a dataset or synthetic workload, each with the prompt tokens the
//! endpoint must report for it (counted before anything is sent) and its output length. Request
//! `k` of a load uses item `k mod n` (its nonce line still goes first, unless prefix caching is
//! allowed), so every request records which item it sent.
//!
//! Dataset items are counted with the same counter as matched prompts: a local `tokenizer.json`
//! (`--tokenizer`), else the server's `/tokenize`; the template overhead (chat role markers, BOS)
//! is measured once per message shape (the roles in order) with one real request (`max_tokens`
//! 1, the reserved sizing request number). With no counter at all the expected counts are left
//! out and only the server's usage is recorded (the record says so).
//!
//! Synthetic prompts are matched prompts (`workload::prompt`), sized once per distinct length.

use super::dataset::{approx_tokens, Dataset, Item as DatasetItem, ItemInput, Message, OutputLen};
use super::filler::NonceFormat;
use super::prompt::{
    self, Backend, HttpBackend, MatchedPrompt, PromptSpec, SizingMode, SIZING_INDEX,
};
use super::request::{merge_extra, BodySpec, Precedence};
use super::synthetic::{Dist, INPUT_SALT, OUTPUT_SALT};
use super::Endpoint;
use crate::client::Target;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What an item sends.
#[derive(Debug, Clone)]
pub enum Content {
    Text(String),
    Messages(Vec<Message>),
    /// A sized prompt (synthetic lengths): its own nonce line.
    Matched(Arc<MatchedPrompt>),
}

/// One prompt of a work set.
#[derive(Debug, Clone)]
pub struct WorkItem {
    pub content: Content,
    /// `usage.prompt_tokens` the endpoint must report (None: no counter was available).
    pub expected_tokens: Option<u64>,
    /// Sent as `max_tokens` (None: the load's `--max-tokens`).
    pub max_tokens: Option<u64>,
    /// Where it came from, written on each request's line (dataset digest, index, id; or the
    /// synthetic draw).
    pub source: Value,
}

/// The prompts of a load.
#[derive(Debug, Clone)]
pub struct WorkSet {
    pub items: Vec<WorkItem>,
    /// The nonce line put before dataset texts (None: `--allow-prefix-cache`).
    pub nonce: Option<NonceFormat>,
    /// What the bench artifact keeps (the `prompt` record).
    pub record: Value,
}

impl WorkSet {
    /// The item of load request `k` (offset included).
    pub fn item(&self, k: u64) -> &WorkItem {
        &self.items[(k % self.items.len() as u64) as usize]
    }

    /// Puts the input of load request `k` (nonce number `number`) into `body`, and its
    /// `max_tokens` when the item has one; returns the expected prompt tokens.
    pub fn fill(
        &self,
        body: &mut Map<String, Value>,
        endpoint: Endpoint,
        k: u64,
        number: u64,
    ) -> Option<u64> {
        let item = self.item(k);
        if let Some(m) = item.max_tokens {
            body.insert("max_tokens".into(), json!(m));
        }
        put_input(body, endpoint, &item.content, self.nonce, number);
        item.expected_tokens
    }
}

impl WorkSet {
    /// The same items renumbered so that load request `k` (offset included) sends the item
    /// this set gives request `k - from + to`: a campaign step whose server request indices
    /// start at `from` sends items `to, to + 1, ...`, the same items on every arm.
    pub fn rotated(&self, from: u64, to: u64) -> WorkSet {
        let n = self.items.len() as u64;
        let shift = (to % n + n - from % n) % n;
        let items = (0..n)
            .map(|j| self.items[((j + shift) % n) as usize].clone())
            .collect();
        WorkSet {
            items,
            nonce: self.nonce,
            record: self.record.clone(),
        }
    }
}

/// What a request line of load request `offset + t.index` adds (bench's `--requests-jsonl`
/// lines and a campaign timing step's `requests`, so one reader reads both): the source item,
/// the expected prompt tokens, those the server reported, and the `max_tokens` sent (None: the
/// load's own).
pub fn annotate(work: &WorkSet, offset: u64, t: &crate::client::Trace, line: &mut Value) {
    let item = work.item(offset + t.index);
    line["source"] = item.source.clone();
    line["expected_prompt_tokens"] = json!(item.expected_tokens);
    line["reported_prompt_tokens"] = json!(t.usage.as_ref().and_then(|u| u.prompt_tokens));
    line["sent_max_tokens"] = json!(item.max_tokens);
}

fn nonce_line(nonce: Option<NonceFormat>, number: u64) -> String {
    nonce.map(|f| f.line(number)).unwrap_or_default()
}

/// The input of `content` with the nonce line of `number` first.
fn put_input(
    body: &mut Map<String, Value>,
    endpoint: Endpoint,
    content: &Content,
    nonce: Option<NonceFormat>,
    number: u64,
) {
    match content {
        Content::Matched(m) => m.insert_input(body, number),
        Content::Text(t) => {
            super::request::insert_input(body, endpoint, nonce_line(nonce, number) + t)
        }
        Content::Messages(list) => {
            let msgs: Vec<Value> = list
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let c = if i == 0 {
                        nonce_line(nonce, number) + &m.content
                    } else {
                        m.content.clone()
                    };
                    json!({"role": m.role, "content": c})
                })
                .collect();
            body.insert("messages".into(), Value::Array(msgs));
        }
    }
}

/// Where and how to size.
#[derive(Debug, Clone)]
pub struct SizeCtx<'a> {
    pub target: &'a Target,
    pub model: &'a str,
    pub endpoint: Endpoint,
    pub tokenizer: Option<&'a Path>,
    pub api_key: Option<&'a str>,
    pub nonce: bool,
    pub timeout: Duration,
    pub extra_body: Option<&'a Map<String, Value>>,
}

impl<'a> SizeCtx<'a> {
    /// The matched prompt of `tokens` on this endpoint, sized with the same counter and body.
    pub fn spec(&self, tokens: u64) -> PromptSpec<'a> {
        PromptSpec {
            target: self.target,
            model: self.model,
            endpoint: self.endpoint,
            tokens,
            tokenizer: self.tokenizer,
            api_key: self.api_key,
            nonce: self.nonce,
            timeout: self.timeout,
            extra_body: self.extra_body,
        }
    }
}

/// Sampling and filters of a dataset.
#[derive(Debug, Clone, Default)]
pub struct DatasetOpts {
    /// `--dataset-sample`: take this many items (in a seeded order); all, in file order, when None.
    pub sample: Option<usize>,
    pub seed: u64,
    pub min_prompt_tokens: Option<u64>,
    pub max_prompt_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    /// `--max-tokens`: the output length of items that give none.
    pub default_max_tokens: u64,
}

enum Counter {
    Local(Box<tokenizers::Tokenizer>),
    Server,
    None,
}

struct Sizer<'a> {
    ctx: &'a SizeCtx<'a>,
    backend: HttpBackend<'a>,
    counter: Counter,
    tokenize_requests: u64,
    usage_requests: u64,
}

impl Sizer<'_> {
    async fn count(&mut self, text: &str) -> Result<Option<u64>, String> {
        match &self.counter {
            Counter::Local(t) => t
                .encode_fast(text, false)
                .map(|e| Some(e.len() as u64))
                .map_err(|e| format!("the tokenizer could not encode a dataset prompt: {e}")),
            Counter::Server => {
                self.tokenize_requests += 1;
                match self.backend.tokenize(text).await? {
                    Some(n) => Ok(Some(n)),
                    None => Err("the server's /tokenize stopped answering while the dataset was being counted".into()),
                }
            }
            Counter::None => Ok(None),
        }
    }

    /// Content tokens of an input with the nonce line of `number`.
    async fn content_tokens(
        &mut self,
        input: &ItemInput,
        nonce: Option<NonceFormat>,
        number: u64,
    ) -> Result<Option<u64>, String> {
        let line = nonce_line(nonce, number);
        match input {
            ItemInput::Text(t) => self.count(&(line + t)).await,
            ItemInput::Messages(list) => {
                let mut total = 0;
                for (i, m) in list.iter().enumerate() {
                    let c = if i == 0 {
                        line.clone() + &m.content
                    } else {
                        m.content.clone()
                    };
                    match self.count(&c).await? {
                        Some(n) => total += n,
                        None => return Ok(None),
                    }
                }
                Ok(Some(total))
            }
        }
    }

    /// `usage.prompt_tokens` of one real request (`max_tokens` 1) with this input.
    async fn usage(
        &mut self,
        content: &Content,
        nonce: Option<NonceFormat>,
    ) -> Result<u64, String> {
        self.usage_requests += 1;
        let mut body = BodySpec {
            model: self.ctx.model,
            max_tokens: 1,
            ..Default::default()
        }
        .build();
        body.insert("temperature".into(), json!(0));
        put_input(&mut body, self.ctx.endpoint, content, nonce, SIZING_INDEX);
        if let Some(extra) = self.ctx.extra_body {
            merge_extra(&mut body, extra, Precedence::BodyWins);
        }
        let path = self.ctx.endpoint.path();
        let mut tries = 0;
        loop {
            let r = super::streamed::prompt_tokens(
                self.ctx.target,
                path,
                &body,
                self.ctx.api_key,
                self.ctx.timeout,
            )
            .await;
            match r {
                Ok(n) => return Ok(n),
                Err(super::streamed::Failure::Status(s, _)) if matches!(s, 500 | 502 | 503 | 504) && tries < 3 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(250 << tries)).await;
                }
                Err(e) => return Err(format!("{}{path}: a request measuring the template overhead of a dataset prompt failed: {e:?}", self.ctx.target)),
            }
        }
    }
}

impl<'a> Sizer<'a> {
    /// The counter for a dataset: `--tokenizer`, else the server's /tokenize when it answers a
    /// probe, else none (the note says so).
    async fn for_dataset(
        ctx: &'a SizeCtx<'a>,
        notes: &mut Vec<String>,
    ) -> Result<Sizer<'a>, String> {
        let counter = match ctx.tokenizer {
            Some(p) => Counter::Local(Box::new(prompt::load_tokenizer(p)?)),
            None => Counter::Server,
        };
        let mut s = Sizer {
            ctx,
            backend: HttpBackend {
                target: ctx.target,
                model: ctx.model,
                endpoint: ctx.endpoint,
                api_key: ctx.api_key,
                timeout: ctx.timeout,
                extra_body: ctx.extra_body,
                mode: SizingMode::default(),
                retried: Vec::new(),
            },
            counter,
            tokenize_requests: 0,
            usage_requests: 0,
        };
        if matches!(s.counter, Counter::Server) {
            s.tokenize_requests += 1;
            if s.backend.tokenize("[bakeoff probe] hello").await?.is_none() {
                s.counter = Counter::None;
                notes.push("no token counter: the server has no usable /tokenize and no --tokenizer was given, so the expected prompt tokens of the requests are not computed; the server's usage.prompt_tokens is recorded only (pass --tokenizer FILE to count them)".into());
            }
        }
        Ok(s)
    }
}

impl Sizer<'_> {
    /// The nonce line: a format whose token count does not depend on the request number (when
    /// counted; uncounted, the compact one).
    async fn dataset_nonce(
        &mut self,
        ds: &Dataset,
        counted: bool,
    ) -> Result<Option<NonceFormat>, String> {
        if !self.ctx.nonce || !counted {
            return Ok(self.ctx.nonce.then_some(NonceFormat::Compact));
        }
        let first = &ds.items[0].input;
        for f in [NonceFormat::Compact, NonceFormat::Spaced] {
            let mut counts = Vec::new();
            for n in [SIZING_INDEX, 0, 1, 12_345_678] {
                counts.push(self.content_tokens(first, Some(f), n).await?);
            }
            if counts.iter().all(|c| *c == counts[0]) {
                return Ok(Some(f));
            }
        }
        Err(format!("{}: the endpoint's tokenizer gives the request nonce line a different length for different request numbers, so the prompt counts could not be exact; pass --allow-prefix-cache to send the dataset without a nonce", ds.items[0].at))
    }

    /// An item's expected prompt tokens: its counted content plus the template overhead of its
    /// message shape (measured once per shape by one real request); None uncounted.
    async fn expected_tokens(
        &mut self,
        it: &DatasetItem,
        content: &Content,
        nonce: Option<NonceFormat>,
        overhead: &mut BTreeMap<String, i64>,
    ) -> Result<Option<u64>, String> {
        let Some(c) = self.content_tokens(&it.input, nonce, SIZING_INDEX).await? else {
            return Ok(None);
        };
        let shape = match &it.input {
            ItemInput::Text(_) => "text".to_string(),
            ItemInput::Messages(m) => m
                .iter()
                .map(|m| m.role.as_str())
                .collect::<Vec<_>>()
                .join(","),
        };
        let o = match overhead.get(&shape) {
            Some(o) => *o,
            None => {
                let u = self
                    .usage(content, nonce)
                    .await
                    .map_err(|e| format!("{}: {e}", it.at))?;
                let o = u as i64 - c as i64;
                overhead.insert(shape, o);
                o
            }
        };
        Ok(Some((c as i64 + o).max(0) as u64))
    }

    /// An item's output length: its own, the reply's counted tokens (approximated from its
    /// characters when uncounted: `approximated` counts those), else the default.
    async fn output_tokens(
        &mut self,
        it: &DatasetItem,
        default_max_tokens: u64,
        approximated: &mut usize,
    ) -> Result<u64, String> {
        Ok(match &it.output {
            OutputLen::Unset => default_max_tokens,
            OutputLen::Tokens(n) => *n,
            OutputLen::Reply(r) => match self.count(r).await? {
                Some(n) => n.max(1),
                None => {
                    *approximated += 1;
                    approx_tokens(r)
                }
            },
        })
    }
}

/// Which filter drops an item (0: below the minimum prompt, 1: above the maximum prompt, 2: too
/// many output tokens), None when it passes.
fn dropped_by(opts: &DatasetOpts, expected: Option<u64>, output: u64) -> Option<usize> {
    if let (Some(min), Some(e)) = (opts.min_prompt_tokens, expected) {
        if e < min {
            return Some(0);
        }
    }
    if let (Some(max), Some(e)) = (opts.max_prompt_tokens, expected) {
        if e > max {
            return Some(1);
        }
    }
    if opts.max_output_tokens.is_some_and(|max| output > max) {
        return Some(2);
    }
    None
}

/// The refusals before anything is counted: prompt filters with no counter, a `messages` item
/// for the completions endpoint.
fn dataset_refusals(
    ds: &Dataset,
    opts: &DatasetOpts,
    ctx: &SizeCtx<'_>,
    counted: bool,
) -> Result<(), String> {
    if !counted && (opts.min_prompt_tokens.is_some() || opts.max_prompt_tokens.is_some()) {
        return Err("--dataset-min-prompt-tokens / --dataset-max-prompt-tokens need a token counter, and the server has no usable /tokenize; pass --tokenizer FILE (the served model's tokenizer.json) or drop the filters".into());
    }
    if let Some(bad) = ds
        .items
        .iter()
        .find(|i| matches!(i.input, ItemInput::Messages(_)))
        .filter(|_| ctx.endpoint == Endpoint::Completions)
    {
        return Err(format!("{}: a `messages` item cannot go to --endpoint completions (it takes one prompt text); use --endpoint chat, or give `prompt` instead", bad.at));
    }
    Ok(())
}

/// Counts, filters and samples a dataset into a work set.
pub async fn size_dataset(
    ds: &Dataset,
    opts: &DatasetOpts,
    ctx: &SizeCtx<'_>,
) -> Result<WorkSet, String> {
    let name = ds.path.display().to_string();
    let mut notes: Vec<String> = Vec::new();
    let mut s = Sizer::for_dataset(ctx, &mut notes).await?;
    let counted = !matches!(s.counter, Counter::None);
    dataset_refusals(ds, opts, ctx, counted)?;
    let nonce = s.dataset_nonce(ds, counted).await?;

    let shuffle = opts.sample.is_some();
    let order = ds.order(shuffle, opts.seed);
    let want = opts.sample.unwrap_or(ds.items.len());
    let mut overhead: BTreeMap<String, i64> = BTreeMap::new();
    let mut dropped = [0usize; 3];
    let mut considered = 0usize;
    let mut items = Vec::new();
    let mut listed = Vec::new();
    let mut approximated = 0usize;
    for &k in &order {
        if items.len() >= want {
            break;
        }
        let it = &ds.items[k];
        considered += 1;
        let content = match &it.input {
            ItemInput::Text(t) => Content::Text(t.clone()),
            ItemInput::Messages(m) => Content::Messages(m.clone()),
        };
        let expected = s
            .expected_tokens(it, &content, nonce, &mut overhead)
            .await?;
        let output = s
            .output_tokens(it, opts.default_max_tokens, &mut approximated)
            .await?;
        if let Some(f) = dropped_by(opts, expected, output) {
            dropped[f] += 1;
            continue;
        }
        let source = json!({
            "dataset_sha256": ds.sha256,
            "item": it.index,
            "id": it.id,
        });
        listed.push(json!({"item": it.index, "id": it.id, "at": it.at, "prompt_tokens": expected, "output_tokens": output}));
        items.push(WorkItem {
            content,
            expected_tokens: expected,
            max_tokens: Some(output),
            source,
        });
    }
    if items.is_empty() {
        return Err(format!(
            "{name}: no item left after the filters: of {considered} considered, {} were shorter than --dataset-min-prompt-tokens {}, {} longer than --dataset-max-prompt-tokens {}, {} had more output tokens than --dataset-max-output-tokens {}; widen the filters",
            dropped[0], opt(opts.min_prompt_tokens), dropped[1], opt(opts.max_prompt_tokens), dropped[2], opt(opts.max_output_tokens)
        ));
    }
    if items.len() < want {
        notes.push(format!("--dataset-sample {want} asked for more items than passed the filters: {} of the file's {} items were used (requests cycle through them)", items.len(), ds.items.len()));
    }
    if approximated > 0 {
        notes.push(format!("the output length of {approximated} ShareGPT items is an approximation (about 4 characters a token of the reply), as no token counter was available"));
    }
    notes.extend(s.backend.take_notes());
    let counter = match s.counter {
        Counter::Local(_) => "local-tokenizer",
        Counter::Server => "server-tokenize",
        Counter::None => "none",
    };
    let mut drawn = ds.record(opts.sample, shuffle, opts.seed);
    drawn["considered"] = json!(considered);
    drawn["filters"] = json!({
        "min_prompt_tokens": opts.min_prompt_tokens,
        "max_prompt_tokens": opts.max_prompt_tokens,
        "max_output_tokens": opts.max_output_tokens,
    });
    drawn["dropped"] = json!({
        "below_min_prompt_tokens": dropped[0],
        "above_max_prompt_tokens": dropped[1],
        "above_max_output_tokens": dropped[2],
    });
    let record = json!({
        "strategy": "dataset",
        "describe": format!("dataset {} ({} items{}), counted by {counter}", ds.path.display(), items.len(), if shuffle { format!(", seed {}", opts.seed) } else { String::new() }),
        "dataset": drawn,
        "counter": counter,
        "nonce": nonce.is_some(),
        "nonce_format": nonce,
        "template_overhead": overhead,
        "sizing_requests": s.usage_requests,
        "tokenize_requests": s.tokenize_requests,
        "notes": notes,
        "items": listed,
    });
    Ok(WorkSet {
        items,
        nonce,
        record,
    })
}

fn opt(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or("(unset)".into())
}

/// Synthetic lengths: `pool` draws of the input and output distributions from `seed`; each
/// distinct input length sized once as a matched prompt (exact: verified against usage).
/// Without an input distribution every prompt is `prompt_tokens` long.
pub async fn size_synthetic(
    input: Option<Dist>,
    output: Option<Dist>,
    prompt_tokens: u64,
    pool: usize,
    seed: u64,
    ctx: &SizeCtx<'_>,
    mut progress: impl FnMut(usize, usize, u64),
) -> Result<WorkSet, String> {
    let ins = match input {
        Some(d) => d.draws(pool, seed, INPUT_SALT),
        None => vec![prompt_tokens; pool],
    };
    let outs = output.map(|d| d.draws(pool, seed, OUTPUT_SALT));
    let mut distinct: Vec<u64> = ins.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let mut sized: HashMap<u64, Arc<MatchedPrompt>> = HashMap::new();
    let (mut sizing, mut tokenize) = (0, 0);
    let mut strategies = Vec::new();
    let mut notes = Vec::new();
    for (i, &len) in distinct.iter().enumerate() {
        progress(i, distinct.len(), len);
        let m = prompt::build(&ctx.spec(len))
        .await
        .map_err(|e| match input {
            Some(_) => format!("--input-tokens-dist drew a prompt of {len} tokens that could not be sized: {e} (raise the distribution's lower end)"),
            None => e,
        })?;
        sizing += m.sizing_requests;
        tokenize += m.tokenize_requests;
        if !strategies.contains(&m.strategy.as_str()) {
            strategies.push(m.strategy.as_str());
        }
        for n in &m.notes {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
        sized.insert(len, Arc::new(m));
    }
    let items: Vec<WorkItem> = ins
        .iter()
        .enumerate()
        .map(|(k, &len)| WorkItem {
            content: Content::Matched(sized[&len].clone()),
            expected_tokens: Some(len),
            max_tokens: outs.as_ref().map(|o| o[k]),
            source: json!({"synthetic": k, "input_tokens": len, "output_tokens": outs.as_ref().map(|o| o[k])}),
        })
        .collect();
    let record = json!({
        "strategy": "synthetic",
        "describe": format!("synthetic lengths (input {}, output {}; seed {seed}), sized by {}",
            input.map(|d| format!("{d:?}")).unwrap_or(format!("fixed {prompt_tokens}")),
            output.map(|d| format!("{d:?}")).unwrap_or("--max-tokens".into()),
            strategies.join("+")),
        "input_tokens_dist": input,
        "output_tokens_dist": output,
        "seed": seed,
        "pool": pool,
        "distinct_input_lengths": distinct.len(),
        "sized_by": strategies,
        "sizing_requests": sizing,
        "tokenize_requests": tokenize,
        "nonce": ctx.nonce,
        "notes": notes,
        "input_tokens": ins,
        "output_tokens": outs,
    });
    Ok(WorkSet {
        items,
        nonce: None,
        record,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: usize) -> WorkSet {
        WorkSet {
            items: (0..n)
                .map(|i| WorkItem {
                    content: Content::Text(format!("item {i}")),
                    expected_tokens: Some(i as u64),
                    max_tokens: None,
                    source: json!({ "item": i }),
                })
                .collect(),
            nonce: None,
            record: Value::Null,
        }
    }

    #[test]
    fn a_rotated_set_gives_request_from_plus_i_the_item_to_plus_i() {
        let w = set(7);
        for (from, to) in [(0, 0), (1000, 0), (1003, 4), (5, 12), (98_000_000, 6)] {
            let r = w.rotated(from, to);
            for i in 0..20u64 {
                assert_eq!(
                    r.item(from + i).source,
                    w.item(to + i).source,
                    "from {from} to {to}, request {i}"
                );
            }
        }
    }
}
