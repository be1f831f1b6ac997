//! One monotonic clock for every interval (ARCHITECTURE.md invariant).
//!
//! We read CLOCK_MONOTONIC directly rather than `std::time::Instant` because the raw nanosecond
//! value is comparable across processes on the same host: the reference engine records emission
//! times in its own process and the client compares them with its arrival times.

/// Nanoseconds on CLOCK_MONOTONIC (same value in every process on this host).
#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) as u64
}

/// Nanoseconds on CLOCK_REALTIME (for converting the kernel's receive stamps; never intervals).
#[inline]
pub fn realtime_ns() -> i128 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[inline]
fn clock_ns(id: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; both clocks always exist on Linux.
    unsafe {
        libc::clock_gettime(id, &mut ts);
    }
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// (user, system) CPU time in ns of this process (`libc::RUSAGE_SELF`) or the calling thread
/// (`libc::RUSAGE_THREAD`). The sum is exact; the split may be tick-sampled by the kernel.
pub fn cpu_ns(who: libc::c_int) -> (u64, u64) {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Wall-clock anchor for labels only (RFC 3339, UTC, second precision).
pub fn wall_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Unix seconds, for `created` fields.
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

// Howard Hinnant's days-to-civil algorithm; avoids a date crate for one label.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Raise the open-file limit to the hard limit: a 1024-stream run needs a socket per stream.
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a);
        assert!(a > 0);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
    }
}
