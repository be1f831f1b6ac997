//! The floor: what any reader pays on this host to receive one streamed chunk.
//!
//! A bare loop (blocking `epoll_wait`, then `recvmsg` with the same receive stamps, no async
//! runtime, no HTTP or SSE parsing, no trace) drives the same engine with the same requests over
//! as many connections as the client opens. It naps before waiting under the same rule as the
//! client (`load::pace`: the read rate and the longest read lag of the last 10 ms, the lag taken
//! from the same kernel stamps), and its measured time, like the client's, runs from opening its
//! connections to closing them, so the two are compared on equal terms.
//! Its CPU per chunk is the kernel's share (loopback TCP, the ACK each read sends, wakeups) plus
//! almost nothing else, so `bakeoff selftest` can show how much of the client's CPU is its own.

use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use anyhow::{Context, Result};

/// CPU per chunk of the bare reader at one concurrency level.
pub struct Floor {
    pub chunks: u64,
    pub user_us_per_chunk: f64,
    pub sys_us_per_chunk: f64,
    /// Its waits and the naps before them (`load::pace`'s rule, as the client's runtime naps).
    pub waits: crate::load::pace::Waits,
}

/// Runs `waves` requests on each of `conns` connections (closed loop) and counts SSE events.
/// The n-th request sent is `requests[n mod len]`, as the client's load numbers them.
pub fn measure(authority: &str, requests: &[Vec<u8>], conns: usize, waves: u64) -> Result<Floor> {
    anyhow::ensure!(!requests.is_empty(), "floor reader: no request to send");
    let mut sent = 0usize;
    let mut next = || {
        let r = &requests[sent % requests.len()];
        sent += 1;
        r
    };
    let (u0, s0) = crate::clock::cpu_ns(libc::RUSAGE_THREAD);
    let mut streams = Vec::with_capacity(conns);
    for _ in 0..conns {
        let s = TcpStream::connect(authority)
            .with_context(|| format!("floor reader: cannot connect to {authority}"))?;
        s.set_nodelay(true)?;
        crate::netstamp::enable(&s);
        // Non-blocking: the loop reads until EAGAIN (edge-triggered epoll).
        s.set_nonblocking(true)?;
        streams.push(s);
    }
    // SAFETY: plain epoll calls on descriptors we own; events is a buffer we own.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    anyhow::ensure!(ep >= 0, "epoll_create1 failed");
    for (i, s) in streams.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
    }
    for s in &mut streams {
        s.write_all(next())?;
    }
    let mut left: Vec<u64> = vec![waves; conns];
    // The last bytes of each connection, so a "[DONE]" split across two reads is still seen.
    let mut tail: Vec<[u8; 8]> = vec![[0; 8]; conns];
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut chunks = 0u64;
    let mut running = conns;
    let deadline = crate::clock::mono_ns() + 300_000_000_000;
    // The nap rule's window, the client's: its reads and its longest read lag.
    let (mut window, mut reads, mut lag_ns) = (crate::load::pace::NapWindow::default(), 0u64, 0u64);
    while running > 0 {
        let now = crate::clock::mono_ns();
        anyhow::ensure!(now < deadline, "floor reader: the engine stopped answering");
        if let Some(d) = window.before_wait(now, reads, || std::mem::take(&mut lag_ns)) {
            std::thread::sleep(d);
        }
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 1000) };
        // One clock reading per round: the lag of a read is taken against the round's start
        // (a reader pays at least this much to know its lag).
        let round_mono = crate::clock::mono_ns();
        let offset = crate::clock::realtime_ns() - round_mono as i128;
        for ev in &events[..n.max(0) as usize] {
            let i = ev.u64 as usize;
            loop {
                buf.clear();
                let (n, stamp) = match crate::netstamp::recv_once(
                    streams[i].as_raw_fd(),
                    buf.spare_capacity_mut(),
                ) {
                    Ok(r) => r,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => anyhow::bail!("floor reader: read failed: {e}"),
                };
                anyhow::ensure!(n > 0, "floor reader: the engine closed a connection");
                reads += 1;
                if let Some(s) = stamp {
                    let at = s - offset;
                    if at <= round_mono as i128 {
                        lag_ns = lag_ns.max(round_mono - at as u64);
                    }
                }
                // SAFETY: recvmsg initialised n bytes.
                unsafe { buf.set_len(n) };
                chunks += memchr::memmem::find_iter(&buf, b"\n\n").count() as u64;
                // The previous read's last 8 bytes and this one's first 16, on the stack: the
                // floor must not pay for an allocation per read.
                let mut joined = [0u8; 24];
                let k = n.min(16);
                joined[..8].copy_from_slice(&tail[i]);
                joined[8..8 + k].copy_from_slice(&buf[..k]);
                let done = memchr::memmem::find(&buf, b"[DONE]").is_some()
                    || memchr::memmem::find(&joined[..8 + k], b"[DONE]").is_some();
                let k = n.min(8);
                tail[i] = [0; 8];
                tail[i][8 - k..].copy_from_slice(&buf[n - k..]);
                if done && left[i] > 0 {
                    left[i] -= 1;
                    if left[i] == 0 {
                        running -= 1;
                    } else {
                        streams[i].write_all(next())?;
                    }
                }
                if n < buf.capacity() {
                    break;
                }
            }
        }
    }
    unsafe { libc::close(ep) };
    drop(streams);
    let (u1, s1) = crate::clock::cpu_ns(libc::RUSAGE_THREAD);
    let per = |ns: u64| ns as f64 / 1e3 / chunks.max(1) as f64;
    Ok(Floor {
        chunks,
        user_us_per_chunk: per(u1 - u0),
        sys_us_per_chunk: per(s1 - s0),
        waits: window.waits,
    })
}
