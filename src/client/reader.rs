//! The shared reader: one task reads every streaming response of a load, in the shape of the
//! bare reader the selftest measures as the floor (`cli::selftest_floor`).
//!
//! With hundreds of streams, a task per connection costs a task wakeup, a descent through its
//! futures and a timer poll for every chunk read. Here each request's task writes its request,
//! hands the socket to the reader and sleeps until its response is complete (one wakeup per
//! request). The reader keeps the sockets in an `epoll` set of its own, registered as one source
//! with the runtime: at each wakeup it takes every ready socket and reads it until it is empty,
//! with the same kernel receive stamp per read (`netstamp::read_now`), the same per-read
//! accounting and the same parsing (`response::Response`) as a connection read by its own task.
//! Stall and deadline watchdogs stay with each request's task, armed as `Conn::read_some` arms
//! them. Everything runs on the caller's runtime (the load's single client thread).

use super::response::{Response, Step};
use super::trace::{ErrorClass, RequestError, Trace};
use crate::clock::mono_ns;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::oneshot;

/// Room made in a response buffer before each read (as `Conn` does).
const READ_CHUNK: usize = 16 * 1024;
/// Ready sockets taken per `epoll_wait`.
const EVENTS: usize = 1024;

/// One response in progress: the socket, its buffer, the parse state and the trace.
pub(super) struct Job {
    pub stream: std::net::TcpStream,
    pub buf: Vec<u8>,
    pub resp: Response,
    pub trace: Trace,
    /// Arrival of the last bytes (or the send time): the stall watchdog counts from here.
    pub last_ns: u64,
}

/// A job handed back: how its response ended (never [`Step::More`]).
pub(super) struct Finished {
    pub job: Job,
    pub result: Result<Step, RequestError>,
}

struct Slot {
    job: Job,
    result: Option<Result<Step, RequestError>>,
    waker: Option<Waker>,
}

#[derive(Default)]
struct Slots {
    v: Vec<Option<Slot>>,
    free: Vec<usize>,
}

impl Slots {
    fn insert(&mut self, s: Slot) -> usize {
        match self.free.pop() {
            Some(k) => {
                self.v[k] = Some(s);
                k
            }
            None => {
                self.v.push(Some(s));
                self.v.len() - 1
            }
        }
    }

    fn remove(&mut self, k: usize) -> Slot {
        let s = self.v[k].take().expect("a live slot");
        self.free.push(k);
        s
    }
}

struct Shared {
    ep: OwnedFd,
    slots: Mutex<Slots>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, key: usize) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: key as u64,
        };
        // SAFETY: epoll_ctl on our epoll descriptor and a socket the slot owns.
        if unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The shared reader of one load; clones share it, and the reader task ends when the last
/// clone is dropped.
#[derive(Clone)]
pub struct Reader {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    _stop: oneshot::Sender<()>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reader")
    }
}

/// The epoll descriptor as the runtime's I/O source (the descriptor itself is `Shared::ep`).
struct EpollFd(RawFd);

impl AsRawFd for EpollFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Reader {
    /// Starts the reader task on the current tokio runtime (call from inside it).
    pub fn start() -> io::Result<Reader> {
        // SAFETY: plain syscall; the descriptor is owned right away.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a fresh descriptor nobody else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        // SAFETY: the descriptor stays open, and the same, as long as the AsyncFd: `Shared` owns
        // it and the reader task, which holds both, drops the AsyncFd first.
        let afd =
            unsafe { AsyncFd::register_with_interest(EpollFd(ep.as_raw_fd()), Interest::READABLE) }
                .map_err(io::Error::from)?;
        let shared = Arc::new(Shared {
            ep,
            slots: Mutex::new(Slots::default()),
        });
        let (tx, rx) = oneshot::channel();
        tokio::spawn(run(shared.clone(), afd, rx));
        Ok(Reader {
            inner: Arc::new(Inner { shared, _stop: tx }),
        })
    }

    /// Reads `job`'s response to its end, an error, the stall limit or `deadline_ns`.
    pub(super) async fn read(&self, job: Job, deadline_ns: u64, stall: Duration) -> Finished {
        let sh = &self.inner.shared;
        let fd = job.stream.as_raw_fd();
        let key = sh.lock().insert(Slot {
            job,
            result: None,
            waker: None,
        });
        if let Err(e) = sh.ctl(libc::EPOLL_CTL_ADD, fd, key) {
            let slot = sh.lock().remove(key);
            return Finished {
                job: slot.job,
                result: Err(RequestError::new(
                    ErrorClass::Io,
                    format!("cannot watch the connection: {e}"),
                )),
            };
        }
        let mut reg = Registered {
            shared: sh,
            key,
            live: true,
        };
        let stall_ns = stall.as_nanos() as u64;
        let mut watch = Box::pin(tokio::time::sleep(Duration::from_secs(3600)));
        let mut watch_at = 0u64;
        std::future::poll_fn(|cx| {
            let mut slots = sh.lock();
            let slot = slots.v[key].as_mut().expect("a live slot");
            let now = mono_ns();
            let verdict = if slot.result.is_some() {
                None
            } else if now >= deadline_ns {
                Some(RequestError::new(
                    ErrorClass::Timeout,
                    "request exceeded its time limit",
                ))
            } else if now >= slot.job.last_ns.saturating_add(stall_ns) {
                Some(RequestError::new(
                    ErrorClass::Stall,
                    format!("no bytes for {:.1} s (stall limit)", stall.as_secs_f64()),
                ))
            } else {
                match &slot.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => slot.waker = Some(cx.waker().clone()),
                }
                let fire = slot.job.last_ns.saturating_add(stall_ns).min(deadline_ns);
                drop(slots);
                // Re-armed only when it fired or must fire sooner: not per chunk.
                if watch_at <= now || watch_at > fire {
                    watch
                        .as_mut()
                        .reset(tokio::time::Instant::now() + Duration::from_nanos(fire - now));
                    watch_at = fire;
                }
                if watch.as_mut().poll(cx).is_ready() {
                    watch_at = 0;
                    cx.waker().wake_by_ref();
                }
                return Poll::Pending;
            };
            if let Some(e) = verdict {
                let _ = sh.ctl(libc::EPOLL_CTL_DEL, slot.job.stream.as_raw_fd(), key);
                slot.result = Some(Err(e));
            }
            let slot = slots.remove(key);
            reg.live = false;
            Poll::Ready(Finished {
                job: slot.job,
                result: slot.result.expect("a result"),
            })
        })
        .await
    }
}

/// Removes a request's slot if its task is dropped mid-response (a cancelled load).
struct Registered<'a> {
    shared: &'a Shared,
    key: usize,
    live: bool,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if self.live {
            let mut slots = self.shared.lock();
            let slot = slots.remove(self.key);
            if slot.result.is_none() {
                let _ = self
                    .shared
                    .ctl(libc::EPOLL_CTL_DEL, slot.job.stream.as_raw_fd(), self.key);
            }
        }
    }
}

/// Reads `job`'s socket until it is empty; `Some` when the response ended there.
fn drive(job: &mut Job) -> Option<Result<Step, RequestError>> {
    let fd = job.stream.as_raw_fd();
    loop {
        if job.buf.capacity() - job.buf.len() < READ_CHUNK {
            job.buf.reserve(READ_CHUNK);
        }
        let room = job.buf.capacity() - job.buf.len();
        match crate::netstamp::read_now(fd, &mut job.buf) {
            Ok(None) => return None,
            Err(e) => {
                return Some(Err(RequestError::new(
                    ErrorClass::Io,
                    format!("read failed: {e}"),
                )))
            }
            Ok(Some((0, _))) => return Some(job.resp.eof(&mut job.trace)),
            Ok(Some((n, at))) => {
                // Stamps of one socket never go backwards (clock-offset jitter).
                let t = at.max(job.last_ns);
                job.last_ns = t;
                job.resp.on_read(t, &mut job.trace);
                match job.resp.advance(&mut job.buf, t, &mut job.trace) {
                    Ok(Step::More) => {}
                    done => return Some(done),
                }
                // A read that did not fill the room emptied the socket: the next bytes raise a
                // new edge (the floor reads the same way).
                if n < room {
                    return None;
                }
            }
        }
    }
}

async fn run(sh: Arc<Shared>, afd: AsyncFd<EpollFd>, mut stop: oneshot::Receiver<()>) {
    let ep = sh.ep.as_raw_fd();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    let mut wake: Vec<Waker> = Vec::new();
    let why = loop {
        let mut guard = tokio::select! {
            biased;
            g = afd.readable() => match g {
                Ok(g) => g,
                Err(e) => break format!("the reader's poll failed: {e}"),
            },
            _ = &mut stop => break String::new(),
        };
        // SAFETY: epoll_wait fills at most EVENTS entries of a buffer we own; no waiting.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), EVENTS as i32, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break format!("the reader's epoll_wait failed: {e}");
        }
        let n = n as usize;
        if n < EVENTS {
            // Every ready socket was taken; a socket that gets bytes later raises a new edge.
            guard.clear_ready();
        }
        {
            let mut slots = sh.lock();
            for ev in &events[..n] {
                let key = ev.u64 as usize;
                let Some(Some(slot)) = slots.v.get_mut(key) else {
                    continue;
                };
                if slot.result.is_some() {
                    continue;
                }
                if let Some(r) = drive(&mut slot.job) {
                    let _ = sh.ctl(libc::EPOLL_CTL_DEL, slot.job.stream.as_raw_fd(), key);
                    slot.result = Some(r);
                    wake.extend(slot.waker.take());
                }
            }
        }
        for w in wake.drain(..) {
            w.wake();
        }
    };
    // Nobody may wait forever on a reader that stopped.
    drop(afd);
    let mut slots = sh.lock();
    for slot in slots.v.iter_mut().flatten() {
        if slot.result.is_none() {
            let msg = if why.is_empty() {
                "the load's reader stopped".to_string()
            } else {
                why.clone()
            };
            slot.result = Some(Err(RequestError::new(ErrorClass::Io, msg)));
            wake.extend(slot.waker.take());
        }
    }
    drop(slots);
    for w in wake {
        w.wake();
    }
}
