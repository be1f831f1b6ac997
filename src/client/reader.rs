//! The shared reader: one task reads every streaming response of a load, in the shape of the
//! bare reader the selftest measures as the floor (`cli::selftest_floor`).
//!
//! With hundreds of streams, a task per connection costs a task wakeup, a descent through its
//! futures and a timer poll for every chunk read. Here a load's connections stay in an `epoll`
//! set of the reader's own, registered as one source with the runtime, from their first
//! streamed request to their end (no `epoll_ctl` per request). Each request's task writes its
//! request on the socket the reader holds and sleeps until its response is complete (one wakeup
//! per request). At each wakeup the reader takes every ready socket and reads it until it is
//! empty, with the same kernel receive stamp per read (`netstamp::Round`), the same per-read
//! accounting and the same parsing (`response::Response`) as a connection read by its own task.
//! Reads go to one buffer of the reader's, warm in cache, and are parsed there; only the
//! unfinished end of an event is copied to its response's own buffer.
//! Stall and deadline watchdogs stay with each request's task, armed as `Conn::read_some` arms
//! them. Everything runs on the caller's runtime (the load's single client thread), except, for
//! a paced open loop (`Reader::start_paced`), the first write of each request: the send thread
//! (`client::pacer`) makes it at the request's time, before its job enters the slot.

use super::pacer::Pacer;
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
const READ_EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLET) as u32;
const WRITE_EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32;

/// One response in progress: its buffer, the parse state and the trace.
pub(super) struct Job {
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
    /// False when the request could not be written (`result` says why).
    pub sent: bool,
}

/// One connection the reader holds.
struct Slot {
    stream: std::net::TcpStream,
    /// The request in progress, if any.
    job: Option<Job>,
    result: Option<Result<Step, RequestError>>,
    waker: Option<Waker>,
    /// A write that found the socket full waits for room (EPOLLOUT is watched only then).
    want_write: bool,
    writable: bool,
    write_waker: Option<Waker>,
    /// The socket signalled while no response was being read (bytes or EOF after the last
    /// response, a server closing an idle connection): the next request reads it first, since
    /// an edge-triggered set reports it only once.
    idle_ready: bool,
}

impl Slot {
    fn wake(&mut self, out: &mut Vec<Waker>) {
        out.extend(self.waker.take());
        out.extend(self.write_waker.take());
    }
}

#[derive(Default)]
struct Slots {
    v: Vec<Option<Slot>>,
    free: Vec<usize>,
    io: ReadIo,
    /// Why the reader stopped (it reads nothing more); `None` while it runs.
    stopped: Option<String>,
}

/// What every read of the reader shares: the buffer it reads into and the round's accounting.
#[derive(Default)]
struct ReadIo {
    scratch: Vec<u8>,
    round: crate::netstamp::Round,
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

    fn remove(&mut self, k: usize) -> Option<Slot> {
        let s = self.v.get_mut(k)?.take()?;
        self.free.push(k);
        Some(s)
    }

    fn get(&mut self, k: usize) -> &mut Slot {
        self.v[k].as_mut().expect("a live slot")
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

    fn ctl(&self, op: libc::c_int, fd: RawFd, key: usize, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
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
/// clone is dropped (a connection it holds keeps a clone).
#[derive(Clone)]
pub struct Reader {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// The open loop's send thread, where the load paces its sends (`Reader::start_paced`).
    pacer: Option<Pacer>,
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

/// A connection held by a reader: its key there and its descriptor. Dropping it closes the
/// connection.
pub(super) struct Held {
    reader: Reader,
    key: usize,
    fd: RawFd,
}

impl Drop for Held {
    fn drop(&mut self) {
        let slot = self.reader.inner.shared.lock().remove(self.key);
        // Closing the socket takes it out of the epoll set.
        drop(slot);
    }
}

impl Held {
    /// Whether `r` is the reader holding this connection.
    pub(super) fn is(&self, r: &Reader) -> bool {
        Arc::ptr_eq(&self.reader.inner, &r.inner)
    }

    /// Takes the connection back from the reader (its response reading is over).
    pub(super) fn release(self) -> io::Result<std::net::TcpStream> {
        let sh = &self.reader.inner.shared;
        let slot = sh.lock().remove(self.key).expect("a held connection");
        let fd = slot.stream.as_raw_fd();
        let r = sh.ctl(libc::EPOLL_CTL_DEL, fd, self.key, 0);
        std::mem::forget(self);
        r.map(|()| slot.stream)
    }

    /// Writes `request` and reads its response to its end, an error, the stall limit or the
    /// time limit. The send time is stamped right before the write: `job.trace.send_ns`,
    /// `job.last_ns` and the response's start are set here. With `pace` (the reader's send
    /// thread and the request's intended time), that thread stamps and writes it at the time;
    /// bytes the server sends back before the job is in its slot wait there (`idle_ready`).
    pub(super) async fn run(
        &mut self,
        job: Job,
        request: &[u8],
        timeout: Duration,
        stall: Duration,
        pace: Option<(&Pacer, u64)>,
    ) -> Finished {
        let sh = &*self.reader.inner.shared;
        let key = self.key;
        if let Some(why) = sh.lock().stopped.clone() {
            return Finished {
                job,
                result: Err(RequestError::new(ErrorClass::Io, why)),
                sent: false,
            };
        }
        let paced = match pace {
            None => None,
            Some((p, at)) => match p.write_at(self.fd, request, at).await {
                Ok(s) => Some(s),
                Err(e) => {
                    return Finished {
                        job,
                        result: Err(RequestError::new(
                            ErrorClass::Io,
                            format!("could not send the request: {e}"),
                        )),
                        sent: false,
                    }
                }
            },
        };
        let send_ns;
        {
            let mut slots = sh.lock();
            if let Some(why) = &slots.stopped {
                let why = why.clone();
                return Finished {
                    job,
                    result: Err(RequestError::new(ErrorClass::Io, why)),
                    sent: false,
                };
            }
            let slot = slots.get(key);
            slot.result = None;
            let job = slot.job.insert(job);
            send_ns = paced.map_or_else(mono_ns, |s| s.send_ns);
            job.trace.send_ns = send_ns;
            job.last_ns = send_ns;
            job.resp.set_send(send_ns);
        }
        let mut guard = Active {
            shared: sh,
            key,
            fd: self.fd,
            live: true,
        };
        let rest = &request[paced.map_or(0, |s| s.written)..];
        if let Err(e) = guard.write(rest).await {
            let finished = guard.take(Err(RequestError::new(
                ErrorClass::Io,
                format!("could not send the request: {e}"),
            )));
            return Finished {
                sent: false,
                ..finished
            };
        }
        {
            let mut slots = sh.lock();
            let Slots { v, io, .. } = &mut *slots;
            let slot = v[key].as_mut().expect("a live slot");
            if slot.idle_ready && slot.result.is_none() {
                slot.idle_ready = false;
                if let Some(r) = drive(slot, io) {
                    slot.result = Some(r);
                }
                io.round.flush();
            }
        }
        let deadline_ns = send_ns + timeout.as_nanos() as u64;
        let stall_ns = stall.as_nanos() as u64;
        let mut watch = Box::pin(tokio::time::sleep(Duration::from_secs(3600)));
        let mut watch_at = 0u64;
        let verdict = std::future::poll_fn(|cx| {
            let mut slots = sh.lock();
            let slot = slots.get(key);
            if slot.result.is_some() {
                return Poll::Ready(None);
            }
            let last_ns = slot.job.as_ref().expect("a job in progress").last_ns;
            let now = mono_ns();
            if now >= deadline_ns {
                return Poll::Ready(Some(RequestError::new(
                    ErrorClass::Timeout,
                    "request exceeded its time limit",
                )));
            }
            if now >= last_ns.saturating_add(stall_ns) {
                return Poll::Ready(Some(RequestError::new(
                    ErrorClass::Stall,
                    format!("no bytes for {:.1} s (stall limit)", stall.as_secs_f64()),
                )));
            }
            match &slot.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => slot.waker = Some(cx.waker().clone()),
            }
            let fire = last_ns.saturating_add(stall_ns).min(deadline_ns);
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
            Poll::Pending
        })
        .await;
        match verdict {
            Some(e) => guard.take(Err(e)),
            None => guard.take_result(),
        }
    }
}

/// A request in progress on a held connection; if its task is dropped mid-way (a cancelled
/// load), the job is dropped and the connection left to its owner (who no longer reuses it).
struct Active<'a> {
    shared: &'a Shared,
    key: usize,
    fd: RawFd,
    live: bool,
}

impl Active<'_> {
    /// Writes all of `bytes`, waiting for room in the socket where it is full.
    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut off = 0;
        while off < bytes.len() {
            let rest = &bytes[off..];
            // SAFETY: send reads at most rest.len() bytes from a slice we hold; the descriptor
            // is the held socket, open while its slot lives.
            let n = unsafe {
                libc::send(
                    self.fd,
                    rest.as_ptr() as *const libc::c_void,
                    rest.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                off += n as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => self.writable().await?,
                _ => return Err(e),
            }
        }
        let mut slots = self.shared.lock();
        let slot = slots.get(self.key);
        if slot.want_write {
            slot.want_write = false;
            slot.writable = false;
            self.shared
                .ctl(libc::EPOLL_CTL_MOD, self.fd, self.key, READ_EVENTS)?;
        }
        Ok(())
    }

    /// Waits until the socket has room (or the response already ended).
    async fn writable(&mut self) -> io::Result<()> {
        {
            let mut slots = self.shared.lock();
            let slot = slots.get(self.key);
            if !slot.want_write {
                slot.want_write = true;
                slot.writable = false;
                // Re-arming reports the socket at once if it has room by now.
                self.shared
                    .ctl(libc::EPOLL_CTL_MOD, self.fd, self.key, WRITE_EVENTS)?;
            }
        }
        std::future::poll_fn(|cx| {
            let mut slots = self.shared.lock();
            let slot = slots.get(self.key);
            if slot.writable || slot.result.is_some() {
                slot.writable = false;
                return Poll::Ready(());
            }
            match &slot.write_waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => slot.write_waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await;
        let mut slots = self.shared.lock();
        match slots.get(self.key).result {
            // The response ended (an error answer before the whole request was read): stop.
            Some(_) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server answered before reading the whole request",
            )),
            None => Ok(()),
        }
    }

    /// Ends the job with `result` unless the reader already ended it.
    fn take(&mut self, result: Result<Step, RequestError>) -> Finished {
        {
            let mut slots = self.shared.lock();
            let slot = slots.get(self.key);
            if slot.result.is_none() {
                slot.result = Some(result);
            }
        }
        self.take_result()
    }

    fn take_result(&mut self) -> Finished {
        let mut slots = self.shared.lock();
        let slot = slots.get(self.key);
        self.live = false;
        slot.waker = None;
        slot.write_waker = None;
        Finished {
            job: slot.job.take().expect("a job in progress"),
            result: slot.result.take().expect("a result"),
            sent: true,
        }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        if self.live {
            let mut slots = self.shared.lock();
            if let Some(Some(slot)) = slots.v.get_mut(self.key) {
                slot.job = None;
                slot.result = None;
                slot.waker = None;
                slot.write_waker = None;
            }
        }
    }
}

impl Reader {
    /// Starts the reader task on the current tokio runtime (call from inside it).
    pub fn start() -> io::Result<Reader> {
        Reader::start_with(None)
    }

    /// [`Reader::start`], with a send thread of its own: a request whose trace has an intended
    /// time is written by that thread at the time (`client::pacer`), not when its task runs.
    pub fn start_paced() -> io::Result<Reader> {
        Reader::start_with(Some(Pacer::start()?))
    }

    /// Whether requests with an intended time are written by the reader's send thread.
    pub fn is_paced(&self) -> bool {
        self.inner.pacer.is_some()
    }

    /// How the send thread got scheduled (`client::pacer::SendThread::name`), when there is one.
    pub fn send_thread(&self) -> Option<&'static str> {
        self.inner.pacer.as_ref()?.sched().map(|s| s.name())
    }

    /// The send thread, when the reader has one.
    pub(super) fn pacer(&self) -> Option<&Pacer> {
        self.inner.pacer.as_ref()
    }

    fn start_with(pacer: Option<Pacer>) -> io::Result<Reader> {
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
            inner: Arc::new(Inner {
                shared,
                pacer,
                _stop: tx,
            }),
        })
    }

    /// Takes a connection (non-blocking) into the reader's set, for as long as the returned
    /// [`Held`] lives. On failure the connection comes back with the error.
    pub(super) fn hold(
        &self,
        stream: std::net::TcpStream,
    ) -> Result<Held, (io::Error, std::net::TcpStream)> {
        let sh = &self.inner.shared;
        let fd = stream.as_raw_fd();
        let mut slots = sh.lock();
        let key = slots.insert(Slot {
            stream,
            job: None,
            result: None,
            waker: None,
            want_write: false,
            writable: false,
            write_waker: None,
            idle_ready: false,
        });
        if let Err(e) = sh.ctl(libc::EPOLL_CTL_ADD, fd, key, READ_EVENTS) {
            let slot = slots.remove(key).expect("just inserted");
            return Err((e, slot.stream));
        }
        Ok(Held {
            reader: self.clone(),
            key,
            fd,
        })
    }
}

/// Reads `slot`'s socket until it is empty; `Some` when the response ended there.
///
/// A read goes to the shared `io.scratch` buffer, unless bytes of an unfinished event wait in
/// the job's own buffer (then the read is appended there, as `Conn` reads). What the parse
/// leaves of a scratch read (the start of an event the next read completes, or bytes after the
/// response's end) is moved to the job's buffer.
fn drive(slot: &mut Slot, io: &mut ReadIo) -> Option<Result<Step, RequestError>> {
    let fd = slot.stream.as_raw_fd();
    let job = slot.job.as_mut()?;
    loop {
        let own = !job.buf.is_empty();
        let buf = if own {
            &mut job.buf
        } else {
            io.scratch.clear();
            &mut io.scratch
        };
        if buf.capacity() - buf.len() < READ_CHUNK {
            buf.reserve(READ_CHUNK);
        }
        let room = buf.capacity() - buf.len();
        match io.round.read_now(fd, buf) {
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
                let step = job.resp.advance(buf, t, &mut job.trace);
                if !own && !io.scratch.is_empty() {
                    job.buf.extend_from_slice(&io.scratch);
                }
                match step {
                    Ok(Step::More) => {}
                    done => {
                        // The next request reads the socket first, always: bytes may be left
                        // (a full read ended the response), or the server's FIN may have come
                        // with the response's last bytes, on the edge this read consumed (a
                        // server that closes a kept-alive connection after some requests).
                        slot.idle_ready = true;
                        return Some(done);
                    }
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
            let Slots { v, io, .. } = &mut *slots;
            for ev in &events[..n] {
                let Some(Some(slot)) = v.get_mut(ev.u64 as usize) else {
                    continue;
                };
                if slot.want_write && ev.events & libc::EPOLLOUT as u32 != 0 {
                    slot.writable = true;
                    wake.extend(slot.write_waker.take());
                }
                if slot.job.is_none() || slot.result.is_some() {
                    slot.idle_ready = true;
                    continue;
                }
                slot.idle_ready = false;
                if let Some(r) = drive(slot, io) {
                    slot.result = Some(r);
                    slot.wake(&mut wake);
                }
            }
            io.round.flush();
        }
        for w in wake.drain(..) {
            w.wake();
        }
    };
    // Nobody may wait forever on a reader that stopped.
    drop(afd);
    let why = if why.is_empty() {
        "the load's reader stopped".to_string()
    } else {
        why
    };
    let mut slots = sh.lock();
    for slot in slots.v.iter_mut().flatten() {
        if slot.job.is_some() && slot.result.is_none() {
            slot.result = Some(Err(RequestError::new(ErrorClass::Io, why.clone())));
            slot.wake(&mut wake);
        }
    }
    slots.stopped = Some(why);
    drop(slots);
    for w in wake {
        w.wake();
    }
}
