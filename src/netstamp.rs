//! Reads stamped with the kernel's receive time.
//!
//! A timestamp taken in user space after `read()` returns says when the reader got round to the
//! socket, not when the bytes arrived: with hundreds of streams on two cores the difference is
//! milliseconds, and it is the measuring tool's own scheduling, not the engine's latency. The
//! kernel stamps every received segment as it is queued on the socket (`SO_TIMESTAMPNS`), and
//! `recvmsg` returns the stamp of the last segment it read. We convert it from CLOCK_REALTIME to
//! CLOCK_MONOTONIC with an offset sampled at the same read, so a busy reader still records when
//! the bytes arrived. Where the kernel gives no stamp, the read time is used instead.
//!
//! One read that returns several segments carries the last one's stamp: bytes that arrived
//! earlier in the same read are stamped no earlier than they arrived, never earlier.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::clock::{mono_ns, realtime_ns};

/// Reads that returned bytes with a kernel stamp, and without one (this process, all sockets).
static STAMPED: AtomicU64 = AtomicU64::new(0);
static UNSTAMPED: AtomicU64 = AtomicU64::new(0);
/// Longest delay between a stamped arrival and its read since the last [`take_max_lag_ns`].
static MAX_LAG_NS: AtomicU64 = AtomicU64::new(0);

/// Buckets of the read-lag histogram: bucket `i` counts stamped reads whose lag (read time minus
/// kernel arrival) was below `2^(i+1)` ns and at least `2^i` ns (bucket 0 also holds lags under
/// 1 ns); the last one holds everything longer.
pub const LAG_BUCKETS: usize = 40;
static LAG_HIST: [AtomicU64; LAG_BUCKETS] = [const { AtomicU64::new(0) }; LAG_BUCKETS];

/// The read-lag histogram so far in this process (see [`LAG_BUCKETS`]); a load diffs two.
pub fn lag_histogram() -> [u64; LAG_BUCKETS] {
    std::array::from_fn(|i| LAG_HIST[i].load(Relaxed))
}

fn lag_bucket(lag_ns: u64) -> usize {
    ((63 - lag_ns.max(1).leading_zeros()) as usize).min(LAG_BUCKETS - 1)
}

/// The longest read lag (read time minus kernel arrival) seen since the last call, and resets
/// it. A reader that keeps up sees microseconds; milliseconds mean it is falling behind.
pub fn take_max_lag_ns() -> u64 {
    MAX_LAG_NS.swap(0, Relaxed)
}

/// (reads stamped by the kernel, reads stamped with the read time) so far in this process.
/// The kernel turns stamping on a moment after the first socket asks (a deferred static key),
/// so the very first segments of a process may come without a stamp.
pub fn counts() -> (u64, u64) {
    (STAMPED.load(Relaxed), UNSTAMPED.load(Relaxed))
}

/// Asks the kernel to stamp received segments on this socket. False where it can't.
pub fn enable(stream: &impl AsRawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads an int we own for the socket we hold.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Turns the kernel's receive stamping on for this process before the first timed read, and
/// keeps it on. The first socket that asks only schedules the switch (a deferred static key), so
/// segments queued before that work runs carry no stamp: on a busy host a load's first reads
/// came unstamped and were disclosed as such. This holds one stamping UDP socket open for the
/// life of the process and sends itself datagrams on the loopback until one comes back stamped
/// (normally the first; at most about 200 ms). Returns whether stamping is on; idempotent.
pub fn prime() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let Ok(sock) = std::net::UdpSocket::bind("127.0.0.1:0") else {
            return false;
        };
        let Ok(me) = sock.local_addr() else {
            return false;
        };
        if !enable(&sock) {
            return false;
        }
        let mut spare = [std::mem::MaybeUninit::<u8>::uninit(); 8];
        for _ in 0..200 {
            if sock.send_to(b"stamp?", me).is_err() {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            // Drain what arrived; one stamped datagram is the proof.
            while let Ok((n, stamp)) = recv_once(sock.as_raw_fd(), &mut spare) {
                if n > 0 && stamp.is_some() {
                    // Held open on purpose: closing the last stamping socket could turn the
                    // key off again.
                    std::mem::forget(sock);
                    return true;
                }
            }
        }
        false
    })
}

/// One `recvmsg` into `spare`; returns the byte count and the kernel's stamp (CLOCK_REALTIME ns).
pub(crate) fn recv_once(
    fd: libc::c_int,
    spare: &mut [std::mem::MaybeUninit<u8>],
) -> io::Result<(usize, Option<i128>)> {
    // u64 storage keeps the control buffer aligned for cmsghdr.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr() as *mut libc::c_void,
        iov_len: spare.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg writes at most iov_len bytes into `spare` and the control buffer.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* helpers walk the control buffer the kernel just filled, bounded by
    // msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                if ts.tv_sec > 0 {
                    stamp = Some(ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128);
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Converts a CLOCK_REALTIME stamp to CLOCK_MONOTONIC using an offset sampled now; returns the
/// read time itself when there is no stamp or the stamp is not plausible (a clock step).
/// Also returns whether the kernel's stamp was used, and the read time.
fn arrival(stamp: Option<i128>) -> (u64, bool, u64) {
    let real = realtime_ns();
    let mono = mono_ns();
    match stamp {
        Some(s) => match plausible(s - (real - mono as i128), mono) {
            Some(at) => (at, true, mono),
            None => (mono, false, mono),
        },
        None => (mono, false, mono),
    }
}

/// A kernel stamp converted to CLOCK_MONOTONIC (`at`), checked against the read time `mono`: a
/// segment that "arrived" after we read it, or more than a minute before, means the wall clock
/// stepped between the two, and the stamp is not used (`None`).
fn plausible(at: i128, mono: u64) -> Option<u64> {
    (at <= mono as i128 && at > mono as i128 - 60_000_000_000).then_some(at as u64)
}

/// Reads once into the spare capacity of `buf` (appending), waiting until bytes or EOF arrive.
/// Returns the byte count (0 at EOF) and when the bytes arrived, on CLOCK_MONOTONIC.
/// Cancel-safe: bytes are only consumed inside a single synchronous step.
pub async fn read(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<(usize, u64)> {
    if buf.capacity() == buf.len() {
        buf.reserve(4096);
    }
    let fd = stream.as_raw_fd();
    loop {
        // The stream's single reader slot, as tokio's own reads use: cheaper per read than
        // `readable()`, whose waiter is linked into and unlinked from a shared list every time.
        std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await?;
        let spare = buf.spare_capacity_mut();
        let room = spare.len();
        let mut short = None;
        let r = stream.try_io(Interest::READABLE, || {
            let (n, stamp) = recv_once(fd, spare)?;
            if n > 0 && n < room {
                // A read that did not fill the buffer emptied the socket: report it as
                // "would block" so tokio clears the readiness now (it does the same for its own
                // reads) instead of us paying one more recvmsg that returns EAGAIN.
                short = Some((n, stamp));
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok((n, stamp))
        });
        let (n, stamp) = match (r, short) {
            (_, Some(got)) => got,
            (Ok(got), None) => got,
            (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
            (Err(e), None) => return Err(e),
        };
        // SAFETY: recvmsg initialised the first n bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        return Ok((n, account(n, stamp)));
    }
}

/// The arrival time of a read of `n` bytes with the kernel's `stamp`, counted in the process's
/// read statistics (EOF, `n == 0`: the read time, not counted).
fn account(n: usize, stamp: Option<i128>) -> u64 {
    if n == 0 {
        return mono_ns();
    }
    let (at, kernel, read_at) = arrival(stamp);
    if kernel {
        STAMPED.fetch_add(1, Relaxed);
        MAX_LAG_NS.fetch_max(read_at - at, Relaxed);
        LAG_HIST[lag_bucket(read_at - at)].fetch_add(1, Relaxed);
    } else {
        UNSTAMPED.fetch_add(1, Relaxed);
    }
    at
}

/// Read accounting for the non-blocking reads of one reader round (`client::reader`): the
/// clock offset that converts kernel stamps is sampled at most once per millisecond instead of
/// at every read, and the process counters are updated once, by [`Round::flush`], instead of
/// three atomic updates per read. At hundreds of streams those were a measurable share of the
/// client's own CPU per chunk; the stamps it gives are those [`read`] gives.
pub struct Round {
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, and when (mono) it was sampled; 0: not yet.
    offset: i128,
    offset_at: u64,
    stamped: u64,
    unstamped: u64,
    max_lag: u64,
    hist: [u64; LAG_BUCKETS],
}

/// How long a sampled clock offset is used: the two clocks drift apart by at most the kernel's
/// slew rate (500 ppm), 0.5 µs per ms, and in practice by nanoseconds.
const OFFSET_TTL_NS: u64 = 1_000_000;

impl Default for Round {
    fn default() -> Self {
        Round {
            offset: 0,
            offset_at: 0,
            stamped: 0,
            unstamped: 0,
            max_lag: 0,
            hist: [0; LAG_BUCKETS],
        }
    }
}

impl Round {
    /// Reads once, without waiting, into the spare capacity of `buf` (appending; `buf` must
    /// have some). `Ok(None)`: nothing to read now. Otherwise the byte count (0 at EOF) and
    /// when the bytes arrived, on CLOCK_MONOTONIC.
    pub fn read_now(
        &mut self,
        fd: libc::c_int,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(usize, u64)>> {
        let (n, stamp) = loop {
            match recv_once(fd, buf.spare_capacity_mut()) {
                Ok(r) => break r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        // SAFETY: recvmsg initialised the first n bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        let mono = mono_ns();
        if n == 0 {
            return Ok(Some((0, mono)));
        }
        let Some(s) = stamp else {
            self.unstamped += 1;
            return Ok(Some((n, mono)));
        };
        if self.offset_at == 0 || mono.saturating_sub(self.offset_at) > OFFSET_TTL_NS {
            let real = realtime_ns();
            let now = mono_ns();
            self.offset = real - now as i128;
            self.offset_at = now;
        }
        // A stamp that is not plausible (a clock step): the read time is used, and the offset
        // sampled afresh next time.
        if let Some(at) = plausible(s - self.offset, mono) {
            self.stamped += 1;
            self.max_lag = self.max_lag.max(mono - at);
            self.hist[lag_bucket(mono - at)] += 1;
            Ok(Some((n, at)))
        } else {
            self.offset_at = 0;
            self.unstamped += 1;
            Ok(Some((n, mono)))
        }
    }

    /// Adds this round's reads to the process counters ([`counts`], [`take_max_lag_ns`],
    /// [`lag_histogram`]) and starts counting afresh (the clock offset is kept).
    pub fn flush(&mut self) {
        if self.stamped > 0 {
            STAMPED.fetch_add(self.stamped, Relaxed);
            MAX_LAG_NS.fetch_max(self.max_lag, Relaxed);
            for (i, h) in self.hist.iter_mut().enumerate() {
                if *h > 0 {
                    LAG_HIST[i].fetch_add(*h, Relaxed);
                    *h = 0;
                }
            }
        }
        if self.unstamped > 0 {
            UNSTAMPED.fetch_add(self.unstamped, Relaxed);
        }
        self.stamped = 0;
        self.unstamped = 0;
        self.max_lag = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prime_turns_stamping_on_before_the_first_read() {
        assert!(prime(), "a stamped loopback datagram within 200 ms");
        // A fresh socket's very first segment is stamped now.
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable(&b));
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        b.set_nonblocking(false).unwrap();
        let mut spare = [std::mem::MaybeUninit::<u8>::uninit(); 4];
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (n, stamp) = recv_once(b.as_raw_fd(), &mut spare).unwrap();
        assert_eq!(n, 1);
        assert!(
            stamp.is_some(),
            "the first datagram after prime() carries a kernel stamp"
        );
    }

    #[test]
    fn lag_buckets_are_powers_of_two() {
        assert_eq!(lag_bucket(0), 0);
        assert_eq!(lag_bucket(1), 0);
        assert_eq!(lag_bucket(2), 1);
        assert_eq!(lag_bucket(1023), 9);
        assert_eq!(lag_bucket(1024), 10);
        assert_eq!(lag_bucket(u64::MAX), LAG_BUCKETS - 1);
    }
    use tokio::io::AsyncWriteExt;

    /// A connected (client, server) pair on loopback.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        (c.unwrap(), s.unwrap().0)
    }

    #[tokio::test]
    async fn stamps_arrival_not_read_time() {
        let (c, mut s) = pair().await;
        assert!(enable(&c), "SO_TIMESTAMPNS is available on Linux");
        // The kernel switches stamping on through deferred work after the first request.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let before = mono_ns();
        s.write_all(b"first").await.unwrap();
        let after = mono_ns();
        // Read 30 ms later: the stamp must say when the bytes came, not when we read them.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut buf = Vec::with_capacity(64);
        let (n, at) = read(&c, &mut buf).await.unwrap();
        let read_at = mono_ns();
        assert_eq!(&buf[..n], b"first");
        assert!(
            at >= before.saturating_sub(100_000),
            "stamp {at} before the write {before}"
        );
        assert!(
            at <= after + 5_000_000,
            "stamp {} ms after the write",
            (at - after) / 1_000_000
        );
        assert!(
            read_at - at >= 25_000_000,
            "stamp is the read time, not the arrival"
        );

        // The next read waits for new bytes (readiness was cleared after the short read).
        let w = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            s.write_all(b"second").await.unwrap();
            s
        });
        let (n2, at2) = read(&c, &mut buf).await.unwrap();
        assert_eq!(&buf[n..n + n2], b"second");
        assert!(at2 > at);
        // EOF reads as 0 bytes.
        drop(w.await.unwrap());
        let (n3, _) = read(&c, &mut buf).await.unwrap();
        assert_eq!(n3, 0);
    }

    #[tokio::test]
    async fn without_stamps_the_read_time_is_used() {
        let (c, mut s) = pair().await;
        s.write_all(b"x").await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let t0 = mono_ns();
        let mut buf = Vec::new();
        let (n, at) = read(&c, &mut buf).await.unwrap();
        assert_eq!(n, 1);
        assert!(at >= t0);
    }
}
