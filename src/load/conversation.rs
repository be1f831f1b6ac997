//! Structured workloads of a closed loop: multi-turn conversations and shared-prefix groups.
//!
//! Multi-turn: each closed-loop stream runs conversations one after another. Turn 1 is a fresh
//! user turn (its nonce line is the request's own number, so conversations never meet each
//! other's prompts in a prefix cache); turn k resends the whole history, the user turns and the
//! assistant's actual replies of turns 1..k−1, plus a new user turn, so the engine's prefix cache
//! can serve everything but the newest turn. After each reply the stream waits the think time
//! (outside any request's clock). A failed turn ends its conversation; the stream starts a new one.
//!
//! Open loop (`--rate`): each scheduled arrival starts a conversation, and one task runs its
//! turns one after another on one connection, with the think time between them; turn k of the
//! conversation of arrival a is request a·T + k − 1 (T turns per conversation).
//!
//! Both combine with a shared prefix: each conversation's first turn opens with its group's
//! shared prompt (the group of conversation c is chosen as a request's would be for index c), and
//! every later turn resends it as part of the history.
//!
//! Shared prefix: every request starts with one of G shared prompts (its group), followed by the
//! request's own part with its nonce line.

use super::{send, Prepared, Source, StreamState};
use crate::client::{Conn, Place, StreamOpts, Target, Trace};
use crate::workload::conversation::{History, Scripts, SharedPrefix, UserTurns};
use crate::workload::filler::nonce_number;
use crate::workload::filler::NonceFormat;
use crate::workload::request::insert_input;
use crate::workload::Endpoint;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The request source of a multi-turn load.
pub struct ConversationSource {
    pub target: Target,
    pub endpoint: Endpoint,
    pub base: Map<String, Value>,
    /// The text of each new user turn.
    pub turns: Arc<dyn UserTurns>,
    pub api_key: Option<String>,
    /// Added to the load's request index (as in `RequestSource`).
    pub offset: u64,
    /// Where the nonce numbers start (as in `RequestSource`).
    pub nonce_base: u64,
    /// Turns per conversation (at least 1).
    pub turns_per_conversation: u32,
    /// Pause between a reply and the next turn of its conversation.
    pub think: Duration,
    /// Each conversation opens with its group's shared prefix (`with_prefix`).
    pub prefix: Option<SharedPrefix>,
    /// Prompt tokens of a first turn with its prefix, when sized.
    pub first_turn_tokens: Option<u64>,
    /// Dataset conversations (`with_script`): conversation c replays script c mod n, its own
    /// user turns and output lengths in place of `turns`.
    pub script: Option<Arc<Scripts>>,
    script_nonce: bool,
    conversations: AtomicU64,
}

impl ConversationSource {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        target: Target,
        endpoint: Endpoint,
        base: Map<String, Value>,
        turns: Arc<dyn UserTurns>,
        api_key: Option<String>,
        offset: u64,
        nonce_base: u64,
        turns_per_conversation: u32,
        think: Duration,
    ) -> ConversationSource {
        ConversationSource {
            target,
            endpoint,
            base,
            turns,
            api_key,
            offset,
            nonce_base,
            turns_per_conversation: turns_per_conversation.max(1),
            think,
            prefix: None,
            first_turn_tokens: None,
            script: None,
            script_nonce: false,
            conversations: AtomicU64::new(0),
        }
    }

    /// Each conversation's first turn starts with its group's prefix; `tokens`: the prompt
    /// tokens of such a first turn (prefix and user turn), when sized.
    pub fn with_prefix(mut self, prefix: SharedPrefix, tokens: Option<u64>) -> Self {
        self.prefix = Some(prefix);
        self.first_turn_tokens = tokens;
        self
    }

    /// Each conversation replays a dataset conversation's user turns (with a nonce line before
    /// the first, when `nonce`).
    pub fn with_script(mut self, script: Arc<Scripts>, nonce: bool) -> Self {
        self.script = Some(script);
        self.script_nonce = nonce;
        self
    }

    /// Conversations started so far.
    pub fn conversations_started(&self) -> u64 {
        self.conversations.load(Ordering::Relaxed)
    }

    /// The next turn of the stream's conversation (a new conversation when there is none), as
    /// request `index`.
    fn prepare_turn(&self, state: &mut Conversation, index: u64) -> Prepared {
        if state.id.is_none() || state.history.len() >= self.turns_per_conversation as usize {
            let id = self.conversations.fetch_add(1, Ordering::Relaxed);
            state.id = Some(id);
            state.group = self.prefix.as_ref().map(|p| p.group(id));
            state.history = History::default();
            if let Some(s) = &self.script {
                state.history.set_preamble(s.of(id).preamble.clone());
            }
        }
        let number = nonce_number(self.nonce_base, self.offset + index);
        let k = state.history.len();
        let mut body = self.base.clone();
        let (text, tokens) = match (&self.script, state.id) {
            (Some(s), Some(id)) => {
                let c = s.of(id);
                if let Some(m) = c.max_tokens[k] {
                    body.insert("max_tokens".into(), m.into());
                }
                let line = if k == 0 && self.script_nonce {
                    NonceFormat::Compact.line(number)
                } else {
                    String::new()
                };
                (line + &c.turns[k], None)
            }
            _ => self.turns.turn(number),
        };
        let (text, tokens) = match (&self.prefix, state.group) {
            (Some(p), Some(g)) if state.history.is_empty() => {
                (p.text(g, &text), self.first_turn_tokens)
            }
            _ => (text, tokens),
        };
        state.history.push_user(text);
        state.history.insert(&mut body, self.endpoint);
        // Only a first turn is the sized prompt alone; later turns carry the history.
        let tokens = if state.history.len() == 1 {
            tokens
        } else {
            None
        };
        Prepared::post(
            &self.target,
            self.endpoint,
            self.api_key.as_deref(),
            &body,
            tokens,
        )
    }
}

impl Source for ConversationSource {
    /// Outside the conversation drivers (a closed-loop stream, an open-loop arrival), with no
    /// history to keep: every request is a first turn.
    fn prepare(&self, index: u64) -> Prepared {
        self.prepare_turn(&mut Conversation::default(), index)
    }

    fn conversations(&self) -> Option<&ConversationSource> {
        Some(self)
    }
}

/// One stream's conversation in progress.
#[derive(Debug, Default)]
pub struct Conversation {
    id: Option<u64>,
    /// Its shared-prefix group, when the load has one.
    group: Option<u32>,
    history: History,
    /// The last turn came back: wait the think time before the next one.
    replied: bool,
}

/// After a reply, waits the think time before the stream's next turn (the worker checks the
/// deadline and the cancel flag again after it).
pub(super) async fn think(source: &ConversationSource, state: &mut StreamState) {
    let conv = &mut state.conversation;
    if conv.replied && !source.think.is_zero() {
        tokio::time::sleep(source.think).await;
    }
    conv.replied = false;
}

/// Sends the stream's next turn as request `index` and records the reply in its history (the
/// reply text is taken out of the trace: load runs keep no generated text).
pub(super) async fn turn(
    source: &ConversationSource,
    state: &mut StreamState,
    conn: &mut Option<Conn>,
    target: &Target,
    index: u64,
    warmup: bool,
    opts: &StreamOpts,
) -> Trace {
    let conv = &mut state.conversation;
    let prepared = source.prepare_turn(conv, index);
    let place = Place {
        conversation: conv.id,
        turn: Some(conv.history.len() as u32),
        prefix_group: conv.group,
    };
    let opts = StreamOpts {
        collect: true,
        ..opts.clone()
    };
    // The per-task read path: it keeps the reply text the next turn resends.
    let mut trace = send(conn, target, prepared, index, warmup, None, &opts, None).await;
    trace.place = Some(place);
    let reply = trace.output.take().map(|o| o.content);
    match (trace.ok(), reply) {
        (true, Some(r)) => {
            conv.history.push_reply(r);
            // The think time comes before a next turn only, not before a new conversation.
            conv.replied = conv.history.len() < source.turns_per_conversation as usize;
        }
        // A failed turn ends the conversation: the next request starts a new one.
        _ => conv.id = None,
    }
    trace
}

/// One open-loop arrival `(index, warm-up, intended start)`: a request, or with a multi-turn
/// source a whole conversation (`open_conversation`).
pub(super) async fn arrival(
    source: &dyn Source,
    conn: &mut Option<Conn>,
    target: &Target,
    (i, warmup, intended): (u64, bool, u64),
    opts: &StreamOpts,
    out: &tokio::sync::mpsc::UnboundedSender<Trace>,
    reader: Option<&crate::client::Reader>,
) -> Trace {
    match source.conversations() {
        Some(c) => open_conversation(c, conn, target, i, warmup, intended, opts, out).await,
        None => {
            super::one(
                conn,
                target,
                source,
                i,
                warmup,
                Some(intended),
                opts,
                reader,
            )
            .await
        }
    }
}

/// Runs the conversation of open-loop arrival `arrival` (scheduled at `intended`): its turns one
/// after another on `conn`, with the think time between them, as requests `arrival·T + k`.
/// Every turn's trace but the last goes to `out` as it completes; the last is returned (a failed
/// turn ends the conversation and is the last). Only the first turn carries the intended start:
/// the later ones start when the conversation is ready for them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn open_conversation(
    source: &ConversationSource,
    conn: &mut Option<Conn>,
    target: &Target,
    arrival: u64,
    warmup: bool,
    intended: u64,
    opts: &StreamOpts,
    out: &tokio::sync::mpsc::UnboundedSender<Trace>,
) -> Trace {
    let per = source.turns_per_conversation as u64;
    let mut state = StreamState::default();
    let mut k = 0;
    loop {
        think(source, &mut state).await;
        let mut t = turn(
            source,
            &mut state,
            conn,
            target,
            arrival * per + k,
            warmup,
            opts,
        )
        .await;
        if k == 0 {
            t.intended_ns = Some(intended);
        }
        k += 1;
        if !t.ok() || k >= per {
            return t;
        }
        if let Err(e) = out.send(t) {
            return e.0;
        }
    }
}

/// The request source of a shared-prefix load: request `index` is the prompt of its group's
/// shared prefix followed by the request's own part (`rest`, with its nonce line).
pub struct PrefixSource {
    pub target: Target,
    pub endpoint: Endpoint,
    pub base: Map<String, Value>,
    pub prefix: SharedPrefix,
    /// The per-request part (a matched prompt of the prompt size minus the prefix).
    pub rest: Arc<dyn UserTurns>,
    /// Prompt tokens of every whole request (prefix + rest), when sized.
    pub prompt_tokens: Option<u64>,
    pub api_key: Option<String>,
    pub offset: u64,
    pub nonce_base: u64,
}

impl Source for PrefixSource {
    fn prepare(&self, index: u64) -> Prepared {
        let number = nonce_number(self.nonce_base, self.offset + index);
        let (rest, _) = self.rest.turn(number);
        let text = self.prefix.text(self.prefix.group(index), &rest);
        let mut body = self.base.clone();
        insert_input(&mut body, self.endpoint, text);
        Prepared::post(
            &self.target,
            self.endpoint,
            self.api_key.as_deref(),
            &body,
            self.prompt_tokens,
        )
    }

    fn place(&self, index: u64) -> Option<Place> {
        Some(Place {
            prefix_group: Some(self.prefix.group(index)),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::conversation::GroupOrder;

    struct Words;
    impl UserTurns for Words {
        fn turn(&self, number: u64) -> (String, Option<u64>) {
            (format!("[n {number}] hello"), Some(5))
        }
    }

    fn body(p: &Prepared) -> Value {
        let s = String::from_utf8(p.bytes.clone()).unwrap();
        serde_json::from_str(s.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    }

    #[test]
    fn turns_grow_the_history_and_conversations_restart() {
        let src = ConversationSource::new(
            Target::parse("http://127.0.0.1:9").unwrap(),
            Endpoint::Chat,
            Map::new(),
            Arc::new(Words),
            None,
            0,
            100,
            2,
            Duration::ZERO,
        );
        let mut c = Conversation::default();
        let p1 = src.prepare_turn(&mut c, 0);
        assert_eq!(p1.prompt_tokens, Some(5));
        assert_eq!(body(&p1)["messages"].as_array().unwrap().len(), 1);
        c.history.push_reply(" reply one".into());
        let p2 = src.prepare_turn(&mut c, 1);
        assert_eq!(
            p2.prompt_tokens, None,
            "a later turn is not the sized prompt"
        );
        let m = body(&p2)["messages"].clone();
        assert_eq!(m[0]["content"], "[n 100] hello");
        assert_eq!(m[1]["role"], "assistant");
        assert_eq!(m[1]["content"], " reply one");
        assert_eq!(m[2]["content"], "[n 101] hello");
        assert_eq!(c.id, Some(0));
        // Two turns done: the third request opens conversation 1.
        c.history.push_reply(" two".into());
        let p3 = src.prepare_turn(&mut c, 2);
        assert_eq!(c.id, Some(1));
        assert_eq!(body(&p3)["messages"].as_array().unwrap().len(), 1);
        assert_eq!(src.conversations_started(), 2);
    }

    #[test]
    fn prefixed_requests_start_with_their_groups_prompt() {
        let src = PrefixSource {
            target: Target::parse("http://127.0.0.1:9").unwrap(),
            endpoint: Endpoint::Completions,
            base: Map::new(),
            prefix: SharedPrefix {
                prefixes: vec!["SYS0\n".into(), "SYS1\n".into()],
                order: GroupOrder::RoundRobin,
            },
            rest: Arc::new(Words),
            prompt_tokens: Some(9),
            api_key: None,
            offset: 0,
            nonce_base: 0,
        };
        assert_eq!(body(&src.prepare(3))["prompt"], "SYS1\n[n 3] hello");
        assert_eq!(src.prepare(3).prompt_tokens, Some(9));
        assert_eq!(src.place(4).unwrap().prefix_group, Some(0));
    }
}
