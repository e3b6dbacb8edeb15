//! W4 yield: `2 * procs` units each yield `n` times; reported as
//! elapsed / (2 * procs * n) ns per yield.
//!
//! Same method everywhere (and in `bench/go/w4_yield.go`): a root unit spawns
//! the yielders, each returns its loop count, the root joins them all and
//! sums the counts (the check). Timed: spawning the root until it returns.
//! The root itself is parked on a join while they yield, not yielding.

use std::time::Instant;

use super::{panic_msg, Impl, Sample};

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    let units = 2 * procs;
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, units, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, units, n),
        Impl::Tokio => tokio_tasks(procs, units, n),
        Impl::Smol => smol_tasks(procs, units, n),
        Impl::May => may_coroutines(procs, units, n),
        _ => unreachable!("{imp:?} is not built into this binary"),
    }
}

/// `gosched::yield_now()` in goroutines.
#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, units: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let total = rt
        .block_on(rt.go(move || {
            let hs: Vec<_> = (0..units)
                .map(|_| {
                    gosched::go(move || {
                        let mut i = 0;
                        while i < n {
                            gosched::yield_now();
                            i += 1;
                        }
                        i
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("yielder"))
                .sum::<u64>()
        }))
        .expect("root");
    Sample::timed(t.elapsed(), total)
}

/// `gosched::task::yield_now().await` in async tasks.
#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, units: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let total = rt
        .block_on(rt.spawn(async move {
            let hs: Vec<_> = (0..units)
                .map(|_| {
                    gosched::spawn(async move {
                        let mut i = 0;
                        while i < n {
                            gosched::task::yield_now().await;
                            i += 1;
                        }
                        i
                    })
                })
                .collect();
            let mut total = 0;
            for h in hs {
                total += h.await.expect("yielder");
            }
            total
        }))
        .expect("root");
    Sample::timed(t.elapsed(), total)
}

/// `tokio::task::yield_now().await` in tokio tasks.
fn tokio_tasks(procs: usize, units: usize, n: u64) -> Sample {
    let rt = super::tokio_runtime(procs);
    let t = Instant::now();
    let total = rt
        .block_on(rt.spawn(async move {
            let hs: Vec<_> = (0..units)
                .map(|_| {
                    tokio::spawn(async move {
                        let mut i = 0;
                        while i < n {
                            tokio::task::yield_now().await;
                            i += 1;
                        }
                        i
                    })
                })
                .collect();
            let mut total = 0;
            for h in hs {
                total += h.await.expect("yielder");
            }
            total
        }))
        .expect("root");
    Sample::timed(t.elapsed(), total)
}

/// `smol::future::yield_now().await` (futures-lite's: wakes itself and
/// returns `Pending` once) in smol tasks; the root awaits their `Task`s.
fn smol_tasks(procs: usize, units: usize, n: u64) -> Sample {
    let rt = super::smol_runtime(procs);
    let t = Instant::now();
    let total = rt.block_on(rt.spawn(async move {
        let hs: Vec<_> = (0..units)
            .map(|_| {
                super::SMOL.spawn(async move {
                    let mut i = 0;
                    while i < n {
                        smol::future::yield_now().await;
                        i += 1;
                    }
                    i
                })
            })
            .collect();
        let mut total = 0;
        for h in hs {
            total += h.await;
        }
        total
    }));
    Sample::timed(t.elapsed(), total)
}

/// `may::coroutine::yield_now()` in may coroutines.
fn may_coroutines(procs: usize, units: usize, n: u64) -> Sample {
    super::may_init(procs);
    let t = Instant::now();
    let total = may::go!(move || {
        let hs: Vec<_> = (0..units)
            .map(|_| {
                may::go!(move || {
                    let mut i = 0;
                    while i < n {
                        may::coroutine::yield_now();
                        i += 1;
                    }
                    i
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("yielder"))
            .sum::<u64>()
    })
    .join()
    .unwrap_or_else(|e| panic!("root coroutine: {}", panic_msg(&*e)));
    Sample::timed(t.elapsed(), total)
}
