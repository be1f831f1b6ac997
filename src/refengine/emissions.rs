//! Ground truth: when the engine wrote each SSE event, served at `GET /debug/emissions`.
//!
//! A request appends `(mono_ns, kind)` to its own vectors (no lock on the hot path) and moves the
//! record into the shared store when it ends. The store holds at most [`MAX_EVENTS`] events;
//! records beyond that are dropped whole and counted in `dropped` (events).

use std::sync::Mutex;

/// Cap on the stored events (all requests together).
pub const MAX_EVENTS: usize = 4 << 20;

/// What an SSE event (or a whole response) carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Role,
    Reasoning,
    Content,
    Tool,
    Finish,
    Usage,
    Done,
    Error,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Role => "role",
            Kind::Reasoning => "reasoning",
            Kind::Content => "content",
            Kind::Tool => "tool",
            Kind::Finish => "finish",
            Kind::Usage => "usage",
            Kind::Done => "done",
            Kind::Error => "error",
        }
    }
}

/// One response's timestamps (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub id: String,
    /// When the request's first bytes reached the socket (kernel receive stamp).
    pub recv_ns: u64,
    /// Just before the response head was written.
    pub head_ns: u64,
    /// Just before each event's write call.
    pub emit_ns: Vec<u64>,
    pub kinds: Vec<Kind>,
}

impl Record {
    pub fn new(id: String, recv_ns: u64) -> Record {
        Record {
            id,
            recv_ns,
            head_ns: 0,
            emit_ns: Vec::with_capacity(32),
            kinds: Vec::with_capacity(32),
        }
    }

    #[inline]
    pub fn push(&mut self, t: u64, kind: Kind) {
        self.emit_ns.push(t);
        self.kinds.push(kind);
    }
}

#[derive(Default)]
struct Store {
    records: Vec<Record>,
    events: usize,
    dropped: u64,
}

static STORE: Mutex<Store> = Mutex::new(Store {
    records: Vec::new(),
    events: 0,
    dropped: 0,
});

fn store() -> std::sync::MutexGuard<'static, Store> {
    STORE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Move a finished (or stalled, or cut) response's record into the store.
pub fn commit(rec: Record) {
    let mut s = store();
    let n = rec.emit_ns.len().max(1);
    if s.events + n > MAX_EVENTS {
        s.dropped += rec.emit_ns.len() as u64;
        return;
    }
    s.events += n;
    s.records.push(rec);
}

/// Forget every stored record (`DELETE /debug/emissions`).
pub fn clear() {
    let mut s = store();
    s.records = Vec::new();
    s.events = 0;
    s.dropped = 0;
}

/// The store as JSON:
/// `{"requests":[{"id":..,"recv_ns":..,"head_ns":..,"emit_ns":[..],"kinds":[..]}],"dropped":N}`.
pub fn to_json() -> String {
    let s = store();
    let mut o = String::with_capacity(64 + s.events * 24 + s.records.len() * 96);
    o.push_str("{\"requests\":[");
    for (i, r) in s.records.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str("{\"id\":");
        super::json::push_str(&mut o, &r.id);
        o.push_str(",\"recv_ns\":");
        o.push_str(&r.recv_ns.to_string());
        o.push_str(",\"head_ns\":");
        o.push_str(&r.head_ns.to_string());
        o.push_str(",\"emit_ns\":[");
        for (j, t) in r.emit_ns.iter().enumerate() {
            if j > 0 {
                o.push(',');
            }
            o.push_str(&t.to_string());
        }
        o.push_str("],\"kinds\":[");
        for (j, k) in r.kinds.iter().enumerate() {
            if j > 0 {
                o.push(',');
            }
            o.push('"');
            o.push_str(k.as_str());
            o.push('"');
        }
        o.push_str("]}");
    }
    o.push_str("],\"dropped\":");
    o.push_str(&s.dropped.to_string());
    o.push('}');
    o
}
