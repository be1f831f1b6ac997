//! Structured workloads built on the matched prompt: multi-turn conversations (each turn resends
//! the whole history, so the engine's prefix cache can serve it) and shared-prefix groups (every
//! request starts with one of G shared system prompts). A multi-turn conversation's user turns are
//! sized filler, or a dataset conversation's own user turns (`Scripts`), replayed one by one with
//! the model's actual replies in place of the dataset's.
//!
//! This module only composes texts and bodies; the per-stream driver that sends the turns and
//! feeds the replies back is `load::conversation`.

use super::request::insert_input;
use super::Endpoint;
use serde_json::{json, Map, Value};

/// Where the text of each new user turn comes from: sized filler today (the matched prompt, one
/// nonce number per turn), a dataset's items later.
pub trait UserTurns: Send + Sync {
    /// The text of a new user turn for request number `number`, and its exact prompt tokens when
    /// sent alone (a matched prompt's target), when known.
    fn turn(&self, number: u64) -> (String, Option<u64>);
}

/// Separates the turns of a completions transcript.
pub const TRANSCRIPT_SEPARATOR: &str = "\n\n";

/// One conversation's history: the user turns and the assistant's actual replies.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Messages before the first user turn (a dataset conversation's system prompt): (role, text).
    preamble: Vec<(String, String)>,
    /// (user text, the reply to it); the last turn's reply is `None` until it came back.
    turns: Vec<(String, Option<String>)>,
}

impl History {
    /// Turns so far (the one in flight included).
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// The messages that open the conversation, before its first user turn.
    pub fn set_preamble(&mut self, preamble: Vec<(String, String)>) {
        self.preamble = preamble;
    }

    /// Starts the next turn with this user text.
    pub fn push_user(&mut self, text: String) {
        self.turns.push((text, None));
    }

    /// The reply to the last user turn.
    pub fn push_reply(&mut self, reply: String) {
        if let Some(last) = self.turns.last_mut() {
            last.1 = Some(reply);
        }
    }

    /// Chat: `messages`, alternating user and assistant, ending with the newest user turn.
    pub fn messages(&self) -> Value {
        let mut v = Vec::with_capacity(self.preamble.len() + self.turns.len() * 2);
        for (role, text) in &self.preamble {
            v.push(json!({"role": role, "content": text}));
        }
        for (user, reply) in &self.turns {
            v.push(json!({"role": "user", "content": user}));
            if let Some(r) = reply {
                v.push(json!({"role": "assistant", "content": r}));
            }
        }
        Value::Array(v)
    }

    /// Completions: the concatenated transcript. Each reply continues its prompt verbatim (it is
    /// what the model generated after that text), turns are separated by a blank line, so turn
    /// k's prompt starts with exactly what the engine saw and produced in turn k−1.
    pub fn transcript(&self) -> String {
        let mut s = String::new();
        for (_, text) in &self.preamble {
            s.push_str(text);
            s.push_str(TRANSCRIPT_SEPARATOR);
        }
        for (i, (user, reply)) in self.turns.iter().enumerate() {
            if i > 0 {
                s.push_str(TRANSCRIPT_SEPARATOR);
            }
            s.push_str(user);
            if let Some(r) = reply {
                s.push_str(r);
            }
        }
        s
    }

    /// Puts the history into a request body (`messages` or `prompt`).
    pub fn insert(&self, body: &mut Map<String, Value>, endpoint: Endpoint) {
        match endpoint {
            Endpoint::Chat => {
                body.insert("messages".into(), self.messages());
            }
            Endpoint::Completions => insert_input(body, endpoint, self.transcript()),
        }
    }
}

/// A conversation replayed from a dataset item.
#[derive(Debug, Clone)]
pub struct Script {
    /// Messages before the first user turn (system prompts): (role, text).
    pub preamble: Vec<(String, String)>,
    /// The user turns replayed, in order (exactly the load's turns per conversation).
    pub turns: Vec<String>,
    /// Each turn's `max_tokens` (JSONL: the item's output length for every turn; ShareGPT: the
    /// length of the dataset's reply to that turn, about 4 characters a token; None: --max-tokens).
    pub max_tokens: Vec<Option<u64>>,
    /// Where it came from (dataset digest, item index, id), written on each turn's line.
    pub source: Value,
}

/// The dataset conversations of a multi-turn load: conversation c replays `conversations[c mod n]`.
#[derive(Debug, Clone)]
pub struct Scripts {
    pub conversations: Vec<Script>,
    /// What the bench artifact keeps (its `prompt` record).
    pub record: Value,
}

impl Scripts {
    /// The script of conversation `id`.
    pub fn of(&self, id: u64) -> &Script {
        &self.conversations[(id % self.conversations.len() as u64) as usize]
    }
}

/// How a dataset becomes the conversations of a multi-turn load.
#[derive(Debug, Clone)]
pub struct ScriptOpts {
    /// Turns per conversation: items with fewer user turns are left out, longer ones replay
    /// their first `turns`.
    pub turns: u32,
    /// Take this many conversations in a seeded order (None: all, in file order).
    pub sample: Option<usize>,
    pub seed: u64,
    /// `--max-tokens`: the output length of turns that give none.
    pub default_max_tokens: u64,
    /// A nonce line goes before each conversation's first user turn.
    pub nonce: bool,
}

/// The conversations of a dataset: each item's messages before its first user turn (system
/// prompts), then its user turns (a JSONL `messages` list's `user` messages, its `assistant`
/// messages dropped: the model's own replies take their place; a ShareGPT conversation's human
/// turns; a JSONL `prompt` is one user turn).
pub fn scripts(ds: &super::dataset::Dataset, o: &ScriptOpts) -> Result<Scripts, String> {
    use super::dataset::{approx_tokens, ItemInput, OutputLen};
    let want = o.turns as usize;
    let mut all = Vec::new();
    let mut most = 0usize;
    let mut short = 0usize;
    for it in &ds.items {
        let item_len = match &it.output {
            OutputLen::Unset => None,
            OutputLen::Tokens(n) => Some(*n),
            OutputLen::Reply(r) => Some(approx_tokens(r)),
        };
        let (preamble, turns, lens) = match &it.input {
            ItemInput::Text(t) => {
                let mut turns = vec![t.clone()];
                let mut lens = vec![item_len];
                for (u, r) in &it.later_turns {
                    turns.push(u.clone());
                    lens.push(r.as_deref().map(approx_tokens));
                }
                (Vec::new(), turns, lens)
            }
            ItemInput::Messages(list) => {
                let first = list.iter().position(|m| m.role == "user");
                let Some(first) = first else {
                    return Err(format!("{}: `messages` has no `user` message; a multi-turn replay sends each user message as a turn", it.at));
                };
                let mut turns = Vec::new();
                for (k, m) in list.iter().enumerate().skip(first) {
                    match m.role.as_str() {
                        "user" => turns.push(m.content.clone()),
                        "assistant" => {}
                        r => return Err(format!("{}: `messages[{k}]` has role `{r}` after the first user message; a multi-turn replay sends the user messages one by one with the model's own replies, so only `user` and `assistant` (dropped) may follow (put system messages first)", it.at)),
                    }
                }
                let pre = list[..first]
                    .iter()
                    .map(|m| (m.role.clone(), m.content.clone()))
                    .collect();
                let n = turns.len();
                (pre, turns, vec![item_len; n])
            }
        };
        most = most.max(turns.len());
        if turns.len() < want {
            short += 1;
            continue;
        }
        all.push(Script {
            preamble,
            turns: turns[..want].to_vec(),
            max_tokens: lens[..want]
                .iter()
                .map(|l| l.or(Some(o.default_max_tokens)))
                .collect(),
            source: json!({"dataset_sha256": ds.sha256, "item": it.index, "id": it.id}),
        });
    }
    if all.is_empty() {
        return Err(format!(
            "{}: no conversation has {want} user turns (the most any item has is {most}); use --multi-turn {most} or less, or a dataset of longer conversations (JSONL `messages` with several user messages, or ShareGPT conversations with several human turns)",
            ds.path.display()
        ));
    }
    let shuffle = o.sample.is_some();
    let mut conversations = Vec::new();
    if shuffle {
        // The dataset's seeded order, over the items that have enough turns.
        let keep: std::collections::HashMap<u64, usize> = all
            .iter()
            .enumerate()
            .map(|(k, s)| (s.source["item"].as_u64().unwrap_or(0), k))
            .collect();
        for i in ds.order(true, o.seed) {
            if let Some(&k) = keep.get(&(ds.items[i].index as u64)) {
                conversations.push(all[k].clone());
            }
        }
        conversations.truncate(o.sample.unwrap_or(usize::MAX));
    } else {
        conversations = all;
    }
    let mut notes = Vec::new();
    if short > 0 {
        notes.push(format!(
            "{short} of the file's {} items have fewer than {want} user turns and were left out",
            ds.items.len()
        ));
    }
    if let Some(n) = o.sample.filter(|&n| n > conversations.len()) {
        notes.push(format!("--dataset-sample {n} asked for more conversations than have {want} user turns: {} are used (conversations cycle through them)", conversations.len()));
    }
    let record = json!({
        "strategy": "dataset-conversations",
        "describe": format!("dataset {} ({} conversations of {want} user turns{}), replayed turn by turn with the model's replies; prompt tokens not counted in advance (each turn's prompt holds the replies): the server's usage is recorded", ds.path.display(), conversations.len(), if shuffle { format!(", seed {}", o.seed) } else { String::new() }),
        "dataset": ds.record(o.sample, shuffle, o.seed),
        "turns": want,
        "left_out_short": short,
        "nonce": o.nonce,
        "notes": notes,
        "conversations": conversations.iter().map(|c| json!({
            "source": c.source,
            "preamble_messages": c.preamble.len(),
            "max_tokens": c.max_tokens,
        })).collect::<Vec<_>>(),
    });
    Ok(Scripts {
        conversations,
        record,
    })
}

/// How requests are assigned to shared-prefix groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOrder {
    /// Group = request index mod G.
    RoundRobin,
    /// A seeded pseudo-random group per request index (the same seed, the same groups).
    Random { seed: u64 },
}

/// G shared system prompts of the same token count; each request starts with one of them.
#[derive(Debug, Clone)]
pub struct SharedPrefix {
    /// The prefix text of each group (each ends with a newline, before the request's own part).
    pub prefixes: Vec<String>,
    pub order: GroupOrder,
}

impl SharedPrefix {
    /// The group of request `index`.
    pub fn group(&self, index: u64) -> u32 {
        let g = self.prefixes.len().max(1) as u64;
        match self.order {
            GroupOrder::RoundRobin => (index % g) as u32,
            GroupOrder::Random { seed } => {
                (splitmix64(seed ^ index.wrapping_mul(0x9e37)) % g) as u32
            }
        }
    }

    /// The prompt of a request of `group` whose own part is `rest`.
    pub fn text(&self, group: u32, rest: &str) -> String {
        let p = &self.prefixes[group as usize];
        let mut s = String::with_capacity(p.len() + rest.len());
        s.push_str(p);
        s.push_str(rest);
        s
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(items: Vec<super::super::dataset::Item>) -> super::super::dataset::Dataset {
        super::super::dataset::Dataset {
            path: "d.jsonl".into(),
            sha256: "ab".into(),
            format: super::super::dataset::Format::Jsonl,
            items,
            skipped: 0,
        }
    }

    fn opts(turns: u32) -> ScriptOpts {
        ScriptOpts {
            turns,
            sample: None,
            seed: 0,
            default_max_tokens: 9,
            nonce: true,
        }
    }

    #[test]
    fn dataset_conversations_keep_the_preamble_and_the_user_turns() {
        let items = super::super::dataset::parse_jsonl(
            "d.jsonl",
            concat!(
                r#"{"id": "a", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "u2"}, {"role": "user", "content": "u3"}], "output_tokens": 5}"#,
                "\n",
                r#"{"id": "b", "prompt": "only one turn"}"#,
                "\n",
            ),
        )
        .unwrap();
        let s = scripts(&dataset(items.clone()), &opts(2)).unwrap();
        assert_eq!(s.conversations.len(), 1, "the one-turn item is left out");
        let c = s.of(7);
        assert_eq!(c.preamble, vec![("system".to_string(), "S".to_string())]);
        assert_eq!(
            c.turns,
            ["u1", "u2"],
            "the first 2 user turns; assistant dropped"
        );
        assert_eq!(c.max_tokens, [Some(5), Some(5)]);
        assert_eq!(c.source["id"], "a");
        assert_eq!(s.record["left_out_short"], 1);
        // A one-turn replay takes both items; the prompt item's length is --max-tokens.
        let one = scripts(&dataset(items.clone()), &opts(1)).unwrap();
        assert_eq!(one.conversations.len(), 2);
        assert_eq!(one.conversations[1].max_tokens, [Some(9)]);
        let e = scripts(&dataset(items), &opts(4)).unwrap_err();
        assert!(
            e.contains("no conversation has 4 user turns (the most any item has is 3)"),
            "{e}"
        );
        let bad = super::super::dataset::parse_jsonl(
            "d.jsonl",
            r#"{"messages": [{"role": "user", "content": "u1"}, {"role": "system", "content": "late"}]}"#,
        )
        .unwrap();
        let e = scripts(&dataset(bad), &opts(1)).unwrap_err();
        assert!(
            e.contains("d.jsonl:1: `messages[1]` has role `system` after the first user message"),
            "{e}"
        );
    }

    #[test]
    fn the_preamble_opens_the_history() {
        let mut h = History::default();
        h.set_preamble(vec![("system".into(), "S".into())]);
        h.push_user("u1".into());
        assert_eq!(
            h.messages(),
            json!([{"role":"system","content":"S"},{"role":"user","content":"u1"}])
        );
        assert_eq!(h.transcript(), "S\n\nu1");
    }

    #[test]
    fn history_resends_every_turn_and_reply() {
        let mut h = History::default();
        h.push_user("u1".into());
        h.push_reply(" a1".into());
        h.push_user("u2".into());
        assert_eq!(
            h.messages(),
            json!([{"role":"user","content":"u1"},{"role":"assistant","content":" a1"},{"role":"user","content":"u2"}])
        );
        assert_eq!(h.transcript(), "u1 a1\n\nu2");
        let mut body = Map::new();
        h.insert(&mut body, Endpoint::Completions);
        assert_eq!(body["prompt"], "u1 a1\n\nu2");
    }

    #[test]
    fn groups_round_robin_or_seeded() {
        let p = SharedPrefix {
            prefixes: vec!["A\n".into(), "B\n".into(), "C\n".into()],
            order: GroupOrder::RoundRobin,
        };
        assert_eq!(
            (0..6).map(|i| p.group(i)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2]
        );
        assert_eq!(p.text(1, "rest"), "B\nrest");
        let r = SharedPrefix {
            order: GroupOrder::Random { seed: 7 },
            ..p.clone()
        };
        let a: Vec<u32> = (0..300).map(|i| r.group(i)).collect();
        assert_eq!(a, (0..300).map(|i| r.group(i)).collect::<Vec<_>>());
        for g in 0..3 {
            let n = a.iter().filter(|&&x| x == g).count();
            assert!((60..140).contains(&n), "group {g}: {n} of 300");
        }
    }
}
