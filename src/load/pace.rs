//! Napping before the client's runtime parks, when reads come thick and fast.
//!
//! With hundreds of streams, chunks arrive a few microseconds apart and a runtime that parks
//! whenever it runs out of work is woken once per few chunks: on two cores each wakeup (a context
//! switch, an `epoll_wait`, the task wakeups) costs as much as reading the chunk. Because arrival
//! times come from the kernel's receive stamps (`crate::netstamp`), not from when we read, the
//! client can afford to let chunks gather for a moment and read them in one round. It naps only
//! above [`NAP_MIN_READ_RATE`] reads per second, for [`NAP`]: a stream would have to send two chunks
//! within one nap for their stamps to merge, i.e. run above 2,000 chunks per second on its own
//! while the whole client reads above 10,000 per second; below the rate nothing changes, so a
//! single stream is always read the moment it arrives. Nor does it nap while reads lag their
//! arrival by more than [`NAP_MAX_LAG`]: a client that is already behind (the machine is
//! saturated) must not give its CPU away, or chunks of one stream start to share a read.
//!
//! The cost is that a request sent from this thread may leave up to [`NAP`] later (the closed
//! loop's next request; open-loop sends record it as schedule lag).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::clock::mono_ns;

/// Reads per second above which the runtime naps before parking.
pub const NAP_MIN_READ_RATE: u64 = 10_000;
/// How long a nap lasts.
pub const NAP: Duration = Duration::from_micros(500);
/// No naps while the longest read lag of the last window exceeds this.
pub const NAP_MAX_LAG: Duration = Duration::from_millis(2);
/// The read rate is measured over windows at least this long.
const WINDOW_NS: u64 = 10_000_000;

static NAPS: AtomicU64 = AtomicU64::new(0);
static WAITS: AtomicU64 = AtomicU64::new(0);
static BELOW_RATE: AtomicU64 = AtomicU64::new(0);
static LAGGING: AtomicU64 = AtomicU64::new(0);

/// Naps taken so far in this process.
pub fn naps() -> u64 {
    NAPS.load(Relaxed)
}

/// The client runtime's waits so far in this process (see [`Waits`]).
pub fn waits() -> Waits {
    Waits {
        waits: WAITS.load(Relaxed),
        naps: NAPS.load(Relaxed),
        below_rate: BELOW_RATE.load(Relaxed),
        lagging: LAGGING.load(Relaxed),
    }
}

/// Whether to nap, given the last window's read rate (reads per second) and longest read lag.
pub fn nap_for(read_rate: u64, max_lag_ns: u64) -> Option<Duration> {
    (read_rate >= NAP_MIN_READ_RATE && max_lag_ns <= NAP_MAX_LAG.as_nanos() as u64).then_some(NAP)
}

/// How a reader's waits went under the nap rule: every wait, the naps before them, and the
/// waits without one because the read rate was below [`NAP_MIN_READ_RATE`] or (the rate above
/// it) the reads lagged more than [`NAP_MAX_LAG`]. `bakeoff selftest` shows the client's beside
/// the floor's, so a difference in naps can be traced to its rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Waits {
    pub waits: u64,
    pub naps: u64,
    pub below_rate: u64,
    pub lagging: u64,
}

impl std::ops::Sub for Waits {
    type Output = Waits;
    fn sub(self, o: Waits) -> Waits {
        Waits {
            waits: self.waits - o.waits,
            naps: self.naps - o.naps,
            below_rate: self.below_rate - o.below_rate,
            lagging: self.lagging - o.lagging,
        }
    }
}

/// The nap rule's state before each wait, the one both the client runtime's park hook and the
/// selftest's bare reader keep: the read rate and the longest read lag of the last window of at
/// least [`WINDOW_NS`], and the waits so far.
#[derive(Clone, Copy, Default)]
pub struct NapWindow {
    start_ns: u64,
    reads_at_start: u64,
    /// Read rate and longest read lag of the last full window.
    rate: u64,
    lag_ns: u64,
    pub waits: Waits,
}

impl NapWindow {
    /// Called before a wait at `now` with the reads so far: closes the window when it is long
    /// enough (taking its longest lag from `take_lag`), then says how long to nap, if at all.
    pub fn before_wait(
        &mut self,
        now: u64,
        reads: u64,
        take_lag: impl FnOnce() -> u64,
    ) -> Option<Duration> {
        let dt = now.saturating_sub(self.start_ns);
        if dt >= WINDOW_NS {
            self.rate = reads.saturating_sub(self.reads_at_start) * 1_000_000_000 / dt;
            self.lag_ns = take_lag();
            self.start_ns = now;
            self.reads_at_start = reads;
        }
        self.waits.waits += 1;
        let nap = nap_for(self.rate, self.lag_ns);
        match nap {
            Some(_) => self.waits.naps += 1,
            None if self.rate < NAP_MIN_READ_RATE => self.waits.below_rate += 1,
            None => self.waits.lagging += 1,
        }
        nap
    }
}

thread_local! {
    static WINDOW: Cell<NapWindow> = const {
        Cell::new(NapWindow {
            start_ns: 0,
            reads_at_start: 0,
            rate: 0,
            lag_ns: 0,
            waits: Waits { waits: 0, naps: 0, below_rate: 0, lagging: 0 },
        })
    };
}

/// The runtime's park hook: measure the read rate, nap when it is high.
pub fn before_park() {
    let now = mono_ns();
    let (stamped, unstamped) = crate::netstamp::counts();
    let (nap, before, after) = WINDOW.with(|cell| {
        let mut w = cell.get();
        let before = w.waits;
        let nap = w.before_wait(now, stamped + unstamped, crate::netstamp::take_max_lag_ns);
        cell.set(w);
        (nap, before, w.waits)
    });
    let d = after - before;
    WAITS.fetch_add(d.waits, Relaxed);
    BELOW_RATE.fetch_add(d.below_rate, Relaxed);
    LAGGING.fetch_add(d.lagging, Relaxed);
    if let Some(d) = nap {
        NAPS.fetch_add(1, Relaxed);
        std::thread::sleep(d);
    }
}

/// The single-threaded runtime every load-generating command uses (bench, run, selftest, gate).
pub fn client_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(before_park)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naps_only_above_the_read_rate() {
        assert_eq!(nap_for(0, 0), None);
        assert_eq!(nap_for(NAP_MIN_READ_RATE - 1, 0), None);
        assert_eq!(nap_for(NAP_MIN_READ_RATE, 0), Some(NAP));
        assert_eq!(nap_for(100_000, 500_000), Some(NAP));
    }

    #[test]
    fn the_window_counts_each_wait_and_why_it_had_no_nap() {
        let mut w = NapWindow::default();
        let ms = 1_000_000u64;
        // The first window is still open: no rate yet.
        assert_eq!(w.before_wait(5 * ms, 0, || 0), None);
        // 200 reads over 20 ms (10,000/s), lag 1 ms: naps until the next window closes.
        assert_eq!(w.before_wait(20 * ms, 200, || ms), Some(NAP));
        assert_eq!(
            w.before_wait(25 * ms, 250, || panic!("window open")),
            Some(NAP)
        );
        // 10 ms later, 300 more reads but a 3 ms lag: no nap, lagging.
        assert_eq!(w.before_wait(30 * ms, 500, || 3 * ms), None);
        // Then a slow window: below the rate.
        assert_eq!(w.before_wait(40 * ms, 510, || 0), None);
        assert_eq!(
            w.waits,
            Waits {
                waits: 5,
                naps: 2,
                below_rate: 2,
                lagging: 1
            }
        );
    }

    #[test]
    fn no_naps_while_reads_lag() {
        let lag = NAP_MAX_LAG.as_nanos() as u64;
        assert_eq!(nap_for(100_000, lag), Some(NAP));
        assert_eq!(nap_for(100_000, lag + 1), None);
    }

    #[test]
    fn a_single_stream_never_naps() {
        // One stream at 100 chunks/s through the real hook: the runtime parks between chunks
        // and must not nap (its reads are far below the rate).
        let rt = client_runtime().unwrap();
        let before = naps();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let (c, s) = tokio::join!(tokio::net::TcpStream::connect(addr), l.accept());
            let c = c.unwrap();
            let (mut s, _) = s.unwrap();
            let w = tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                for _ in 0..20 {
                    s.write_all(b"data: x\n\n").await.unwrap();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            let mut buf = Vec::with_capacity(1024);
            let mut got = 0;
            while got < 20 * 9 {
                let (n, _) = crate::netstamp::read(&c, &mut buf).await.unwrap();
                got += n;
            }
            w.await.unwrap();
        });
        assert_eq!(naps(), before, "a 100-read/s stream made the runtime nap");
    }
}
