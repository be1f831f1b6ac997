//! The open loop's send timer. Tokio's timer wheel ticks in whole milliseconds, so a request
//! whose start time is awaited with `sleep_until` leaves up to a millisecond late (about 1.2 ms
//! at the median, measured on a trace replay). This timer is a one-shot `timerfd` armed at the
//! start time on CLOCK_MONOTONIC (the clock the intended and actual sends are stamped on), with
//! nanosecond resolution, woken through the runtime's epoll like any socket.

use crate::clock::mono_ns;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The timerfd's number, as the runtime's registration holds it.
struct TimerFd(RawFd);

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A reusable timer for one task's successive waits.
pub struct SendTimer {
    // Declared first: deregistered before `_owned` closes the descriptor.
    fd: AsyncFd<TimerFd>,
    _owned: OwnedFd,
}

impl SendTimer {
    /// A timerfd on CLOCK_MONOTONIC, registered with the current runtime.
    pub fn new() -> io::Result<SendTimer> {
        // SAFETY: plain syscall; the descriptor is owned right away.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the descriptor stays open, and the same, as long as the AsyncFd: `_owned`
        // closes it, and the fields drop in order, the registration first.
        let afd = unsafe { AsyncFd::register_with_interest(TimerFd(fd), Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(SendTimer {
            fd: afd,
            _owned: owned,
        })
    }

    /// Resolves at `at_ns` on CLOCK_MONOTONIC (at once when that has passed).
    pub async fn until(&self, at_ns: u64) -> io::Result<()> {
        if mono_ns() >= at_ns {
            return Ok(());
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
            },
        };
        let fd = self.fd.get_ref().as_raw_fd();
        // SAFETY: `fd` is our open timerfd; `spec` outlives the call; no old value is asked for.
        let r = unsafe {
            libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into an 8-byte buffer from our timerfd.
            let n = unsafe { libc::read(fd, expirations.as_mut_ptr().cast(), 8) };
            if n == 8 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
            ready.clear_ready();
        }
    }
}

/// Waits until `at_ns` (CLOCK_MONOTONIC) on `timer`, or, without one (or if it fails), on
/// tokio's millisecond timer until `fallback`.
pub async fn wait_until(timer: Option<&SendTimer>, at_ns: u64, fallback: tokio::time::Instant) {
    if let Some(t) = timer {
        if t.until(at_ns).await.is_ok() {
            return;
        }
    }
    tokio::time::sleep_until(fallback).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_at_the_time_not_at_the_next_millisecond() {
        let t = SendTimer::new().unwrap();
        let mut late = Vec::new();
        for i in 1..=20u64 {
            // Start times between milliseconds, where tokio's wheel would round up.
            let at = mono_ns() + 300_000 + i * 17_000;
            t.until(at).await.unwrap();
            let now = mono_ns();
            assert!(now >= at, "woke {} ns early", at - now);
            late.push(now - at);
        }
        late.sort_unstable();
        // Loose (a loaded CI host): the median wake is well under tokio's 1 ms tick.
        assert!(late[10] < 700_000, "median lateness {} ns", late[10]);
        // A time already passed resolves at once.
        t.until(mono_ns() - 1).await.unwrap();
    }
}
