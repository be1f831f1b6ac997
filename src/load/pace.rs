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

/// Naps taken so far in this process.
pub fn naps() -> u64 {
    NAPS.load(Relaxed)
}

/// Whether to nap, given the last window's read rate (reads per second) and longest read lag.
pub fn nap_for(read_rate: u64, max_lag_ns: u64) -> Option<Duration> {
    (read_rate >= NAP_MIN_READ_RATE && max_lag_ns <= NAP_MAX_LAG.as_nanos() as u64).then_some(NAP)
}

#[derive(Clone, Copy, Default)]
struct Window {
    start_ns: u64,
    reads_at_start: u64,
    /// Read rate and longest read lag of the last full window.
    rate: u64,
    lag_ns: u64,
}

thread_local! {
    static WINDOW: Cell<Window> = const {
        Cell::new(Window { start_ns: 0, reads_at_start: 0, rate: 0, lag_ns: 0 })
    };
}

/// The runtime's park hook: measure the read rate, nap when it is high.
pub fn before_park() {
    let now = mono_ns();
    let (stamped, unstamped) = crate::netstamp::counts();
    let reads = stamped + unstamped;
    let w = WINDOW.with(|cell| {
        let mut w = cell.get();
        let dt = now.saturating_sub(w.start_ns);
        if dt >= WINDOW_NS {
            w.rate = reads.saturating_sub(w.reads_at_start) * 1_000_000_000 / dt;
            w.lag_ns = crate::netstamp::take_max_lag_ns();
            w.start_ns = now;
            w.reads_at_start = reads;
            cell.set(w);
        }
        w
    });
    if let Some(d) = nap_for(w.rate, w.lag_ns) {
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
