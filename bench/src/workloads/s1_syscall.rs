//! S1/S2 blocking calls (issue 17): 100 units share `n` calls of
//! `gosched::syscall` (Go: a raw system call, which enters `entersyscall`).
//!
//! - S1: each call is `nanosleep(50 µs)`, a call that really blocks its
//!   thread. Reported: wall / n, ns per call. With calls on one thread per
//!   proc it is ~50 µs / procs; when blocked calls leave their proc to other
//!   work (Go's sysmon hand-off, gosched's hand-off to the blocking pool) many
//!   run at once.
//! - S2: each call is `getppid()`, a fast call: the fixed cost of a
//!   `syscall` (the hand-off, where there is one).
//!
//! Timed: spawning the units until the last finished. Same method in
//! `bench/go/s1_syscall.go` and `bench/go/s2_getppid.go`.

#[cfg(feature = "gosched")]
use std::time::{Duration, Instant};

use super::{Impl, Sample};

/// Units making the calls.
pub const UNITS: u64 = 100;

/// S1's call.
#[cfg(feature = "gosched")]
pub const SLEEP: Duration = Duration::from_micros(50);

pub fn run(imp: Impl, procs: usize, n: u64, slow: bool) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n, slow),
        _ => {
            let _ = (procs, n, slow);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

/// The blocking call itself.
#[cfg(feature = "gosched")]
fn call(slow: bool) -> u64 {
    if slow {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: SLEEP.as_nanos() as libc::c_long,
        };
        // SAFETY: a valid timespec; a null remainder pointer is allowed.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        1
    } else {
        // SAFETY: no preconditions.
        let p = unsafe { libc::getppid() };
        u64::from(p > 0)
    }
}

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64, slow: bool) -> Sample {
    let rt = super::gosched_runtime(procs);
    let per = n / UNITS;
    let t = Instant::now();
    let total = rt
        .block_on(rt.go(move || {
            let hs: Vec<_> = (0..UNITS)
                .map(|_| {
                    gosched::go(move || {
                        (0..per)
                            .map(|_| gosched::syscall(|| call(slow)))
                            .sum::<u64>()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("unit")).sum::<u64>()
        }))
        .expect("root");
    Sample::timed(t.elapsed(), total)
}
