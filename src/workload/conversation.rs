//! Structured workloads built on the matched prompt: multi-turn conversations (each turn resends
//! the whole history, so the engine's prefix cache can serve it) and shared-prefix groups (every
//! request starts with one of G shared system prompts).
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
        let mut v = Vec::with_capacity(self.turns.len() * 2);
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
