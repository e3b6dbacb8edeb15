//! W9 pool: `n` tasks (1,000,000) that each sleep 10 ms, run through a
//! goroutine pool of capacity [`CAP`] (50,000), against plain goroutines and
//! ants. W9t: the same pools' submit throughput.
//!
//! The method is ants' own benchmark (`ants_benchmark_test.go`: `RunTimes =
//! 1e6`, `PoolCap = 5e4`, `demoFunc` sleeps 10 ms, the pool built with
//! `WithExpiryDuration(10 s)` before the clock starts), here and in the Go
//! twins `bench/go/w9_pool.go` (plain goroutines) and `bench/go/w9_ants.go`
//! (ants, vendored in `bench/third_party/gopath`):
//!
//! - W9 (`BenchmarkAntsPool`, `BenchmarkGoroutines`): a root unit builds the
//!   pool, then submits the `n` tasks and waits until every one has finished.
//!   Timed: from the first submit until the wait returns. gosched-pool:
//!   `Pool` with `submit`, then `pool.wait()`; gosched-pool-func:
//!   `PoolWithFunc<u32>` with `invoke`; gosched-go: `gosched::go` per task
//!   and a `WaitGroup`; tokio: a task per task behind a `Semaphore` of
//!   [`CAP`] permits (`acquire_owned` before the spawn, the permit dropped
//!   when the sleep ends), a countdown signals the end.
//! - W9t (`BenchmarkAntsPoolThroughput`, `BenchmarkGoroutinesThroughput`):
//!   the root submits `n` tasks that each sleep 10 ms. Timed: the submit loop
//!   only, reported per submit (ants' ns/op is the whole loop of 1e6);
//!   nothing waits for the tasks (ants' benchmark does not either; the
//!   process exits). A submit parks while all [`CAP`] workers are busy, so a
//!   pool's loop takes at least `n / CAP × 10 ms` (200 ms for 1,000,000).
//! - W9p (`BenchmarkParallelAntsPoolThroughput`; no pool:
//!   `go demoFunc()` from as many submitters): the root starts the clock,
//!   spawns [`submitters`]`(procs)` = procs × [`SUBMITTERS_PER_PROC`] units
//!   that share the one pool (gosched-pool: clones of it) and each submit
//!   their [`share`] of the `n` tasks (the first `n % P` one more), each
//!   returning its count of accepted submits; the root joins them all and
//!   sums. Timed: until the last submitter has returned, reported per
//!   submit (as ants' ns/op there: `b.RunParallel` shares `b.N` among its
//!   goroutines). ants' `RunParallel` runs `GOMAXPROCS` × parallelism
//!   goroutines (parallelism 1 unless `SetParallelism`); we take 4 per proc,
//!   so that submitters outnumber Ps. Nothing waits for the tasks, as in W9t.
//! - W9s (no ants benchmark; the pool's own cost per task): the root starts
//!   the clock, spawns [`submitters`]`(procs)` units that share one pool of
//!   [`saturated_cap`]`(procs)` workers (half as many as submitters, so
//!   that submitters queue for workers) and each submit their [`share`] of
//!   `n` empty tasks; timed until every task has finished (gosched:
//!   `pool.wait()` after joining the submitters; ants: a `sync.WaitGroup`
//!   that each task marks done). The pool's expiry is [`EXPIRY`] as above.
//!
//! The gosched pools are built as ants' benchmark builds its pool: capacity
//! [`CAP`], idle workers expire after [`EXPIRY`] (ants' default is 1 s; its
//! benchmark uses 10 s, and so do we).

use std::time::{Duration, Instant};

use super::{Impl, Sample};

/// The pool's capacity (ants' `PoolCap`).
pub const CAP: usize = 50_000;

/// Each task's sleep (ants' `BenchParam` ms).
pub const SLEEP: Duration = Duration::from_millis(10);

/// Idle workers' expiry (ants' benchmark `DefaultExpiredTime`).
#[cfg(feature = "gosched")]
pub const EXPIRY: Duration = Duration::from_secs(10);

/// W9p: submitters per proc (`b.SetParallelism(4)` in ants' terms).
pub const SUBMITTERS_PER_PROC: usize = 4;

/// W9s: workers per proc.
pub const SATURATED_WORKERS_PER_PROC: usize = 2;

/// W9s: the pool's capacity at `procs`.
pub fn saturated_cap(procs: usize) -> usize {
    procs.max(1) * SATURATED_WORKERS_PER_PROC
}

/// W9p: how many submitters run at once at `procs`.
pub fn submitters(procs: usize) -> usize {
    procs.max(1) * SUBMITTERS_PER_PROC
}

/// W9p: the submits of submitter `i` of `p`, `n` in all (the first `n % p`
/// submitters take one more).
#[cfg(any(feature = "gosched", test))]
pub fn share(n: u64, p: usize, i: usize) -> u64 {
    let p = p as u64;
    n / p + u64::from((i as u64) < n % p)
}

/// W9: submit `n` sleeping tasks and wait for all.
pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedPool => gosched_pool(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedPoolFunc => gosched_pool_func(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n),
        Impl::Tokio => tokio_semaphore(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

/// W9t: time `n` submits of a sleeping task.
pub fn run_throughput(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedPool => gosched_pool_throughput(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go_throughput(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

/// W9p: `n` submits of a sleeping task from [`submitters`] units at once.
pub fn run_parallel(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedPool => gosched_pool_parallel(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go_parallel(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

/// W9s: `n` empty tasks from [`submitters`] units through a pool of
/// [`saturated_cap`] workers.
pub fn run_saturated(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedPool => gosched_pool_saturated(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

#[cfg(feature = "gosched")]
fn pool_builder() -> gosched::pool::Builder {
    gosched::pool::Pool::builder()
        .capacity(CAP as isize)
        .expiry(EXPIRY)
}

/// Run `f` as the root goroutine of a fresh runtime with `procs` Ps (the
/// runtime is shut down after it: tasks still asleep are unwound).
#[cfg(feature = "gosched")]
fn in_root<T: Send + 'static>(procs: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    let rt = super::gosched_runtime(procs);
    rt.block_on(rt.go(f)).expect("root goroutine")
}

/// `k` submits of a 10 ms sleep to `pool`; how many it took.
#[cfg(feature = "gosched")]
fn submit_sleeps(pool: &gosched::pool::Pool, k: u64) -> u64 {
    (0..k)
        .filter(|_| pool.submit(|| gosched::time::sleep(SLEEP)).is_ok())
        .count() as u64
}

/// `gosched::pool::Pool`: the root goroutine submits, then `pool.wait()`.
#[cfg(feature = "gosched")]
fn gosched_pool(procs: usize, n: u64) -> Sample {
    let (elapsed, done) = in_root(procs, move || {
        let pool = pool_builder().build().expect("pool");
        let t = Instant::now();
        let ok = submit_sleeps(&pool, n);
        wait_all(&pool, t, ok)
    });
    Sample::timed(elapsed, done)
}

/// After the submits: wait for every task; the time since `t` and the
/// tasks completed (checked against the `ok` submits).
#[cfg(feature = "gosched")]
fn wait_all(pool: &gosched::pool::Pool, t: Instant, ok: u64) -> (Duration, u64) {
    pool.wait();
    let elapsed = t.elapsed();
    let completed = pool.stats().completed;
    assert_eq!(completed, ok, "tasks completed vs submitted");
    (elapsed, completed)
}

/// `gosched::pool::PoolWithFunc<u32>`: the root goroutine invokes, then
/// `pool.wait()`.
#[cfg(feature = "gosched")]
fn gosched_pool_func(procs: usize, n: u64) -> Sample {
    let (elapsed, done) = in_root(procs, move || {
        let pool = pool_builder()
            .build_with_func(|_: u32| gosched::time::sleep(SLEEP))
            .expect("pool");
        let t = Instant::now();
        let ok = (0..n).filter(|&i| pool.invoke(i as u32).is_ok()).count() as u64;
        pool.wait();
        let elapsed = t.elapsed();
        let completed = pool.stats().completed;
        assert_eq!(completed, ok, "tasks completed vs invoked");
        (elapsed, completed)
    });
    Sample::timed(elapsed, done)
}

/// Plain goroutines, one per task, joined with a `WaitGroup` (no handles
/// kept: a million `JoinHandle`s would count in the peak RSS).
#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    let (elapsed, done) = in_root(procs, move || {
        let wg = gosched::sync::WaitGroup::new();
        let t = Instant::now();
        wg.add(n as isize);
        for _ in 0..n {
            let wg = wg.clone();
            gosched::go(move || {
                gosched::time::sleep(SLEEP);
                wg.done();
            });
        }
        wg.wait();
        (t.elapsed(), n)
    });
    Sample::timed(elapsed, done)
}

/// tokio tasks behind a `Semaphore` of [`CAP`] permits; the root task takes
/// a permit before each spawn, the task drops it when its sleep ends, and a
/// countdown signals the root when the last task has finished.
fn tokio_semaphore(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use std::sync::Arc;
    use tokio::sync::{oneshot, Semaphore};
    let rt = super::tokio_runtime(procs);
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let finished = Countdown::leak(n, done_tx);
    let sem = Arc::new(Semaphore::new(CAP));
    let elapsed = rt
        .block_on(rt.spawn(async move {
            let t = Instant::now();
            for _ in 0..n {
                let permit = Arc::clone(&sem).acquire_owned().await.expect("open");
                tokio::spawn(async move {
                    tokio::time::sleep(SLEEP).await;
                    drop(permit);
                    if let Some(done) = finished.bump() {
                        let _ = done.send(());
                    }
                });
            }
            done_rx.await.expect("done signal");
            t.elapsed()
        }))
        .expect("root task");
    Sample::timed(elapsed, finished.count())
}

/// W9t, `gosched::pool::Pool`: `n` submits of a 10 ms sleep, timed. The
/// tasks still run when the pool is dropped (released); the runtime's
/// shutdown unwinds the workers still asleep.
#[cfg(feature = "gosched")]
fn gosched_pool_throughput(procs: usize, n: u64) -> Sample {
    let (elapsed, ok) = in_root(procs, move || {
        let pool = pool_builder().build().expect("pool");
        let t = Instant::now();
        let ok = submit_sleeps(&pool, n);
        (t.elapsed(), ok)
    });
    Sample::timed(elapsed, ok)
}

/// W9t, plain goroutines: `n` spawns of a 10 ms sleep, timed.
#[cfg(feature = "gosched")]
fn gosched_go_throughput(procs: usize, n: u64) -> Sample {
    let elapsed = in_root(procs, move || {
        let t = Instant::now();
        for _ in 0..n {
            gosched::go(|| gosched::time::sleep(SLEEP));
        }
        t.elapsed()
    });
    Sample::timed(elapsed, n)
}

/// W9p, `gosched::pool::Pool`: [`submitters`] goroutines, each with a clone
/// of the one pool, submit their [`share`] of `n` 10 ms sleeps; timed until
/// the root has joined them all (the tasks still run, as in W9t).
#[cfg(feature = "gosched")]
fn gosched_pool_parallel(procs: usize, n: u64) -> Sample {
    let p = submitters(procs);
    let (elapsed, ok) = in_root(procs, move || {
        let pool = pool_builder().build().expect("pool");
        let t = Instant::now();
        let hs: Vec<_> = (0..p)
            .map(|i| {
                let pool = pool.clone();
                gosched::go(move || submit_sleeps(&pool, share(n, p, i)))
            })
            .collect();
        let ok: u64 = hs.into_iter().map(|h| h.join().expect("submitter")).sum();
        (t.elapsed(), ok)
    });
    Sample::timed(elapsed, ok)
}

/// W9s, `gosched::pool::Pool`: [`submitters`] goroutines share a pool of
/// [`saturated_cap`] workers and submit their [`share`] of `n` empty tasks;
/// timed until the root has joined them and `pool.wait()` returned.
#[cfg(feature = "gosched")]
fn gosched_pool_saturated(procs: usize, n: u64) -> Sample {
    let p = submitters(procs);
    let (elapsed, done) = in_root(procs, move || {
        let pool = gosched::pool::Pool::builder()
            .capacity(saturated_cap(procs) as isize)
            .expiry(EXPIRY)
            .build()
            .expect("pool");
        let t = Instant::now();
        let hs: Vec<_> = (0..p)
            .map(|i| {
                let pool = pool.clone();
                gosched::go(move || {
                    (0..share(n, p, i))
                        .filter(|_| pool.submit(|| {}).is_ok())
                        .count() as u64
                })
            })
            .collect();
        let ok: u64 = hs.into_iter().map(|h| h.join().expect("submitter")).sum();
        wait_all(&pool, t, ok)
    });
    Sample::timed(elapsed, done)
}

/// W9p, plain goroutines: [`submitters`] goroutines each spawn their
/// [`share`] of `n` goroutines that sleep 10 ms; timed until the root has
/// joined the submitters.
#[cfg(feature = "gosched")]
fn gosched_go_parallel(procs: usize, n: u64) -> Sample {
    let p = submitters(procs);
    let (elapsed, spawned) = in_root(procs, move || {
        let t = Instant::now();
        let hs: Vec<_> = (0..p)
            .map(|i| {
                gosched::go(move || {
                    let k = share(n, p, i);
                    for _ in 0..k {
                        gosched::go(|| gosched::time::sleep(SLEEP));
                    }
                    k
                })
            })
            .collect();
        let spawned: u64 = hs.into_iter().map(|h| h.join().expect("submitter")).sum();
        (t.elapsed(), spawned)
    });
    Sample::timed(elapsed, spawned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_n() {
        assert_eq!(submitters(2), 8);
        assert_eq!(share(1_000_000, 8, 0), 125_000);
        let (n, p) = (1_000_003, 12);
        assert_eq!((0..p).map(|i| share(n, p, i)).sum::<u64>(), n);
        assert_eq!((share(n, p, 6), share(n, p, 7)), (83_334, 83_333));
    }
}
