//! The open loop's send thread: writes each request at its intended time.
//!
//! A request sent by the client's runtime leaves when that one thread gets to it: after the
//! timer's wakeup reaches its epoll, after the chunks it is reading (hundreds of streams), after
//! a nap (`load::pace`), and after the engine's threads on the same cores let it run. On a trace
//! replay at 200 requests/s that put the arrival error's p99 at 3–10 ms. Here one thread of its
//! own, asleep between sends, does only this: it wakes [`SPIN`] before the earliest request's
//! time (a futex wait with 1 ns timer slack), spins to the time, stamps it and writes the
//! prebuilt request on the socket (non-blocking; what does not fit is written by the request's
//! task after). The request's task prepares everything before (body, connection, the reader's
//! hold) and waits for the stamp; the response is read as any other.
//!
//! So that its wakeup does not wait behind the engine's threads on the same cores, the thread
//! asks for real-time priority (SCHED_FIFO 1: allowed to root, CAP_SYS_NICE or an RLIMIT_RTPRIO)
//! and otherwise for a short EEVDF slice (unprivileged, Linux 6.12 on), which lets a wakeup
//! preempt a running thread sooner. It runs some tens of microseconds per request, so either
//! costs the host next to nothing; which one it got is reported ([`SendThread`]).

use crate::clock::mono_ns;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long before a request's time the thread stops sleeping and spins: about what a timer
/// wakeup takes on a busy 2-core VM, so the write leaves on time; a spin costs the CPU it lasts
/// (2 % of a core at 200 requests/s).
pub const SPIN: Duration = Duration::from_micros(100);
/// The EEVDF slice asked for without real-time priority: shorter than the default (0.7–3 ms)
/// so its wakeup preempts sooner, yet longer than a spin and a write, so it is not preempted
/// in the middle of them (a 0.1 ms slice was, measured: 27 preemptions in 150 sends).
const SLICE_NS: u64 = 400_000;

/// How the send thread got scheduled: `realtime` (SCHED_FIFO 1), `short-slice` (the EEVDF slice
/// [`SLICE_NS`]) or `default` (neither was allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendThread {
    Realtime,
    ShortSlice,
    Default,
}

impl SendThread {
    pub fn name(self) -> &'static str {
        match self {
            SendThread::Realtime => "realtime",
            SendThread::ShortSlice => "short-slice",
            SendThread::Default => "default",
        }
    }

    /// The one a name stands for (a client step's file read back by the controller).
    pub fn named(name: &str) -> Option<SendThread> {
        [
            SendThread::Realtime,
            SendThread::ShortSlice,
            SendThread::Default,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// The stamp and the bytes a paced write put on the socket.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    /// CLOCK_MONOTONIC ns right before the write (the request's `send_ns`).
    pub send_ns: u64,
    /// Bytes written; the rest is the caller's to write.
    pub written: usize,
}

struct Ticket {
    at_ns: u64,
    seq: u64,
    /// A duplicate of the connection's descriptor: the socket stays open (and its number not
    /// reused) until the ticket is gone, whatever happens to the connection meanwhile.
    fd: OwnedFd,
    bytes: Vec<u8>,
    done: oneshot::Sender<io::Result<Sent>>,
}

impl PartialEq for Ticket {
    fn eq(&self, o: &Self) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl Eq for Ticket {}
impl PartialOrd for Ticket {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ticket {
    /// Reversed: the heap's top is the earliest time (the first queued among equal times).
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at_ns, o.seq).cmp(&(self.at_ns, self.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Ticket>,
    seq: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
    /// What [`tune_thread`] got (set before the thread takes its first ticket).
    sched: OnceLock<SendThread>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A load's send thread; clones share it, and the thread ends when the last clone is dropped.
#[derive(Clone)]
pub struct Pacer {
    inner: Arc<Owner>,
}

/// Stops the thread when the last [`Pacer`] goes.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.lock().stop = true;
        self.0.cv.notify_one();
    }
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pacer")
    }
}

impl Pacer {
    /// Starts the send thread.
    pub fn start() -> io::Result<Pacer> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::Builder::new()
            .name("bakeoff-pacer".into())
            .spawn(move || {
                let _ = s.sched.set(tune_thread());
                run(&s)
            })?;
        Ok(Pacer {
            inner: Arc::new(Owner(shared)),
        })
    }

    /// How the thread got scheduled (`None` until it started).
    pub fn sched(&self) -> Option<SendThread> {
        self.inner.0.sched.get().copied()
    }

    /// Writes `bytes` on socket `fd` at `at_ns` (CLOCK_MONOTONIC; at once when that has passed),
    /// as much as the socket takes without blocking. The caller keeps `fd` open until this
    /// resolves or is dropped; a dropped wait's request is not sent.
    pub(super) async fn write_at(&self, fd: RawFd, bytes: &[u8], at_ns: u64) -> io::Result<Sent> {
        // SAFETY: `fd` is open (the caller's connection); the duplicate is ours.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(dup) };
        let (tx, rx) = oneshot::channel();
        {
            let sh = &self.inner.0;
            let mut q = sh.lock();
            q.seq += 1;
            let seq = q.seq;
            let earliest = q.heap.peek().is_none_or(|t| at_ns < t.at_ns);
            q.heap.push(Ticket {
                at_ns,
                seq,
                fd,
                bytes: bytes.to_vec(),
                done: tx,
            });
            if earliest {
                sh.cv.notify_one();
            }
        }
        rx.await
            .unwrap_or_else(|_| Err(io::Error::other("the send thread stopped")))
    }
}

/// The thread's loop: sleep until [`SPIN`] before the earliest ticket, spin to its time, write.
fn run(sh: &Shared) {
    let spin = SPIN.as_nanos() as u64;
    loop {
        let ticket = {
            let mut q = sh.lock();
            loop {
                if q.stop {
                    return;
                }
                let Some(next) = q.heap.peek() else {
                    q = sh.cv.wait(q).unwrap_or_else(|p| p.into_inner());
                    continue;
                };
                let now = mono_ns();
                if next.at_ns > now + spin {
                    let nap = Duration::from_nanos(next.at_ns - spin - now);
                    q = sh
                        .cv
                        .wait_timeout(q, nap)
                        .map(|(q, _)| q)
                        .unwrap_or_else(|p| p.into_inner().0);
                    continue;
                }
                break q.heap.pop().expect("peeked above");
            }
        };
        // A request whose task is gone (a cancelled load) is not sent.
        if ticket.done.is_closed() {
            continue;
        }
        while mono_ns() < ticket.at_ns {
            std::hint::spin_loop();
        }
        let r = write_now(ticket.fd.as_raw_fd(), &ticket.bytes);
        let _ = ticket.done.send(r);
    }
}

/// Stamps and writes what the socket takes now.
fn write_now(fd: RawFd, bytes: &[u8]) -> io::Result<Sent> {
    loop {
        let send_ns = mono_ns();
        // SAFETY: send reads at most bytes.len() bytes from a slice we hold, on our descriptor.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(Sent {
                send_ns,
                written: n as usize,
            });
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            // A full socket: nothing left yet; the caller writes it all, stamped now.
            io::ErrorKind::WouldBlock => {
                return Ok(Sent {
                    send_ns,
                    written: 0,
                })
            }
            _ => return Err(e),
        }
    }
}

/// Real-time priority where allowed, else a short slice (best effort: an older kernel refuses
/// the slice and the thread keeps the default); and 1 ns timer slack either way, so the
/// futex timeout is not deferred by the default 50 µs.
fn tune_thread() -> SendThread {
    // SAFETY: prctl on the calling thread with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let fifo = libc::sched_param { sched_priority: 1 };
    // SAFETY: this thread (0), a valid policy and a param we hold.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } == 0 {
        return SendThread::Realtime;
    }
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: SLICE_NS,
        deadline: 0,
        period: 0,
    };
    // SAFETY: sched_setattr(0 = this thread, a sched_attr of the size it states, no flags).
    match unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } {
        0 => SendThread::ShortSlice,
        _ => SendThread::Default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::io::Read;

    #[tokio::test]
    async fn writes_at_the_time_in_time_order_and_skips_dropped_waits() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let p = Pacer::start().unwrap();
        let t0 = mono_ns() + 20_000_000;
        // Queued out of order: the later one first.
        let (b, a) = tokio::join!(
            p.write_at(c.as_raw_fd(), b"bb", t0 + 2_000_000),
            p.write_at(c.as_raw_fd(), b"a", t0)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.send_ns >= t0 && b.send_ns >= t0 + 2_000_000,
            "{a:?} {b:?}"
        );
        assert_eq!((a.written, b.written), (1, 2));
        // A wait dropped before its time sends nothing: queued (polled once), then dropped.
        let mut gone = Box::pin(p.write_at(c.as_raw_fd(), b"X", mono_ns() + 30_000_000));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(gone.as_mut().poll(&mut cx).is_pending());
        drop(gone);
        p.write_at(c.as_raw_fd(), b"c", 0).await.unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abbc");
        // Past the dropped one's time: nothing more came.
        std::thread::sleep(Duration::from_millis(50));
        s.set_nonblocking(true).unwrap();
        let late = s.read(&mut got);
        assert!(late.is_err(), "a dropped wait was sent: {late:?}");
    }
}
