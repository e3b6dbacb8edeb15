//! T1 after-churn (issue 18): one unit creates `n` one-shot timer channels
//! of one hour (`gosched::time::after`, Go's `time.After`) and drops each at
//! once; reported as elapsed / n ns per timer, with the process's peak RSS.
//!
//! What it measures: the cost of a timer that is never waited for, and
//! whether an unreferenced timer is freed at once (Go ≥ 1.23) or lives until
//! it fires (then the peak RSS grows with `n`). Timed: spawning the unit
//! until it returns its count. Same method in `bench/go/t1_after.go`.

#[cfg(feature = "gosched")]
use std::time::{Duration, Instant};

use super::{Impl, Sample};

#[cfg(feature = "gosched")]
const HOUR: Duration = Duration::from_secs(3600);

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

/// In a goroutine.
#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let count = rt
        .block_on(rt.go(move || {
            let mut i = 0;
            while i < n {
                let c = gosched::time::after(HOUR);
                std::hint::black_box(&c);
                drop(c);
                i += 1;
            }
            i
        }))
        .expect("unit");
    Sample::timed(t.elapsed(), count)
}

/// In an async task.
#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let count = rt
        .block_on(rt.spawn(async move {
            let mut i = 0;
            while i < n {
                let c = gosched::time::after(HOUR);
                std::hint::black_box(&c);
                drop(c);
                i += 1;
            }
            i
        }))
        .expect("unit");
    Sample::timed(t.elapsed(), count)
}
