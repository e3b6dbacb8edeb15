//! W13 churn (issue 25): `n` units each park on a channel of their own, all
//! are released (the channels closed), all are joined — one round. One
//! warm-up round, then [`ROUNDS`] timed rounds; reported in ms per round.
//!
//! What it measures: goroutines that are alive at the same time and then
//! end, so their stacks go back to the pool in a burst (W1's units end one
//! by one and share a few stacks). Same method in `bench/go/w13_churn.go`
//! (`sync.WaitGroup`, one `chan struct{}` per goroutine).
//!
//! W8 timers (`w8_sleep`) lives beside it: `n` units each sleep 10 ms.

use std::time::{Duration, Instant};

use super::{Impl, Sample};

/// Timed rounds after the warm-up round.
pub const ROUNDS: u64 = 3;

/// W8's sleep.
pub const SLEEP: Duration = Duration::from_millis(10);

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        Impl::Tokio => tokio_tasks(procs, n),
        Impl::Smol => smol_tasks(procs, n),
        Impl::May => may_coroutines(procs, n),
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

pub fn run_sleep(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        Impl::Tokio => tokio_sleep(procs, n),
        Impl::Smol => smol_sleep(procs, n),
        Impl::May => may_sleep(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go_sleep(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async_sleep(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let round = move || {
        let wg = gosched::sync::WaitGroup::new();
        let chans: Vec<_> = (0..n)
            .map(|_| {
                let c = gosched::chan::<()>(0);
                let (r, wg) = (c.clone(), wg.clone());
                wg.add(1);
                gosched::go(move || {
                    let _ = r.recv();
                    wg.done();
                });
                c
            })
            .collect();
        for c in &chans {
            c.close().expect("open");
        }
        wg.wait();
        n
    };
    rt.block_on(rt.go(round)).expect("warm-up");
    let t = Instant::now();
    let mut done = 0;
    for _ in 0..ROUNDS {
        done += rt.block_on(rt.go(round)).expect("round");
    }
    Sample::timed(t.elapsed(), done)
}

/// gosched async tasks, the round of the tokio and smol rows (their
/// runtimes have no unbuffered channel, so every async row parks on a
/// oneshot): a root task, on a worker, spawns the tasks, each parked on its
/// own `futures_channel::oneshot`, then drops the senders to release them
/// and awaits a countdown's signal. Until 2026-11-28 this row parked on
/// `gosched::chan(0)` and joined through a `WaitGroup`, and the peers
/// spawned from the main thread: the rows timed different things.
#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use futures_channel::oneshot;
    let rt = super::gosched_runtime(procs);
    let round = |rt: &gosched::Runtime| {
        rt.block_on(rt.spawn(async move {
            let (done_tx, done_rx) = oneshot::channel::<()>();
            let finished = Countdown::leak(n, done_tx);
            let senders: Vec<_> = (0..n)
                .map(|_| {
                    let (tx, rx) = oneshot::channel::<()>();
                    gosched::spawn(async move {
                        let _ = rx.await;
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    });
                    tx
                })
                .collect();
            drop(senders); // closes every channel
            done_rx.await.expect("done signal");
            finished.count()
        }))
        .expect("round")
    };
    round(&rt);
    let t = Instant::now();
    let mut done = 0;
    for _ in 0..ROUNDS {
        done += round(&rt);
    }
    Sample::timed(t.elapsed(), done)
}

#[cfg(feature = "gosched")]
fn gosched_go_sleep(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let done = rt
        .block_on(rt.go(move || {
            let wg = gosched::sync::WaitGroup::new();
            for _ in 0..n {
                let wg2 = wg.clone();
                wg.add(1);
                gosched::go(move || {
                    gosched::time::sleep(SLEEP);
                    wg2.done();
                });
            }
            wg.wait();
            n
        }))
        .expect("root");
    Sample::timed(t.elapsed(), done)
}

/// gosched async tasks each `sleep_async(10 ms)`, spawned by a root task on
/// a worker; a countdown signals the end (as the tokio and smol rows).
#[cfg(feature = "gosched")]
fn gosched_async_sleep(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use futures_channel::oneshot;
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let done = rt
        .block_on(rt.spawn(async move {
            let (done_tx, done_rx) = oneshot::channel::<()>();
            let finished = Countdown::leak(n, done_tx);
            for _ in 0..n {
                gosched::spawn(async move {
                    gosched::time::sleep_async(SLEEP).await;
                    if let Some(done) = finished.bump() {
                        let _ = done.send(());
                    }
                });
            }
            done_rx.await.expect("done signal");
            finished.count()
        }))
        .expect("root");
    Sample::timed(t.elapsed(), done)
}

/// tokio tasks: a root task, on a worker, spawns them, each parked on a
/// `tokio::sync::oneshot`, drops the senders to release them (a closed
/// channel) and awaits a countdown's signal. (Until 2026-11-28 the main
/// thread spawned them inside `rt.block_on`, through tokio's inject queue,
/// where every other row's root runs on a worker.)
fn tokio_tasks(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use tokio::sync::oneshot;
    let rt = super::tokio_runtime(procs);
    let round = |rt: &tokio::runtime::Runtime| {
        rt.block_on(rt.spawn(async move {
            let (done_tx, done_rx) = oneshot::channel::<()>();
            let finished = Countdown::leak(n, done_tx);
            let senders: Vec<_> = (0..n)
                .map(|_| {
                    let (tx, rx) = oneshot::channel::<()>();
                    tokio::spawn(async move {
                        let _ = rx.await;
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    });
                    tx
                })
                .collect();
            drop(senders); // closes every channel
            done_rx.await.expect("done signal");
            finished.count()
        }))
        .expect("round")
    };
    round(&rt);
    let t = Instant::now();
    let mut done = 0;
    for _ in 0..ROUNDS {
        done += round(&rt);
    }
    Sample::timed(t.elapsed(), done)
}

/// tokio tasks each `tokio::time::sleep(10 ms)`, spawned by a root task on
/// a worker; a countdown signals the end.
fn tokio_sleep(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use tokio::sync::oneshot;
    let rt = super::tokio_runtime(procs);
    let t = Instant::now();
    let done = rt
        .block_on(rt.spawn(async move {
            let (done_tx, done_rx) = oneshot::channel::<()>();
            let finished = Countdown::leak(n, done_tx);
            for _ in 0..n {
                tokio::spawn(async move {
                    tokio::time::sleep(SLEEP).await;
                    if let Some(done) = finished.bump() {
                        let _ = done.send(());
                    }
                });
            }
            done_rx.await.expect("done signal");
            finished.count()
        }))
        .expect("root");
    Sample::timed(t.elapsed(), done)
}

/// smol tasks, as tokio's row: a root task on a worker spawns them, each
/// parked on a `futures_channel::oneshot` (smol has none of its own) and
/// detached (a dropped smol `Task` would cancel its task), drops the
/// senders to release them and awaits a countdown's signal.
fn smol_tasks(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use futures_channel::oneshot;
    let rt = super::smol_runtime(procs);
    let round = |rt: &super::SmolRuntime| {
        rt.block_on(rt.spawn(async move {
            let (done_tx, done_rx) = oneshot::channel::<()>();
            let finished = Countdown::leak(n, done_tx);
            let senders: Vec<_> = (0..n)
                .map(|_| {
                    let (tx, rx) = oneshot::channel::<()>();
                    super::SMOL
                        .spawn(async move {
                            let _ = rx.await;
                            if let Some(done) = finished.bump() {
                                let _ = done.send(());
                            }
                        })
                        .detach();
                    tx
                })
                .collect();
            drop(senders); // closes every channel
            done_rx.await.expect("done signal");
            finished.count()
        }))
    };
    round(&rt);
    let t = Instant::now();
    let mut done = 0;
    for _ in 0..ROUNDS {
        done += round(&rt);
    }
    Sample::timed(t.elapsed(), done)
}

/// smol tasks each `smol::Timer::after(10 ms).await` (async-io's timers),
/// spawned by a root task on a worker as tokio's row; a countdown signals
/// the end.
fn smol_sleep(procs: usize, n: u64) -> Sample {
    use super::Countdown;
    use futures_channel::oneshot;
    let rt = super::smol_runtime(procs);
    let t = Instant::now();
    let done = rt.block_on(rt.spawn(async move {
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let finished = Countdown::leak(n, done_tx);
        for _ in 0..n {
            super::SMOL
                .spawn(async move {
                    smol::Timer::after(SLEEP).await;
                    if let Some(done) = finished.bump() {
                        let _ = done.send(());
                    }
                })
                .detach();
        }
        done_rx.await.expect("done signal");
        finished.count()
    }));
    Sample::timed(t.elapsed(), done)
}

/// may coroutines, each on a may mpsc channel of its own, released by
/// dropping the senders; a countdown instead of a WaitGroup (as tokio's).
fn may_coroutines(procs: usize, n: u64) -> Sample {
    use super::{panic_msg, Countdown};
    use may::sync::mpsc;
    super::may_init(procs);
    let round = || {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let finished = Countdown::leak(n, done_tx);
        let senders = may::go!(move || {
            (0..n)
                .map(|_| {
                    let (tx, rx) = mpsc::channel::<()>();
                    may::go!(move || {
                        let _ = rx.recv();
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    });
                    tx
                })
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap_or_else(|e| panic!("root coroutine: {}", panic_msg(&*e)));
        drop(senders); // closes every channel
        done_rx.recv().expect("done signal");
        finished.count()
    };
    round();
    let t = Instant::now();
    let mut done = 0;
    for _ in 0..ROUNDS {
        done += round();
    }
    Sample::timed(t.elapsed(), done)
}

/// may coroutines each sleeping `SLEEP` (may's coroutine sleep).
fn may_sleep(procs: usize, n: u64) -> Sample {
    use super::{panic_msg, Countdown};
    use may::sync::mpsc;
    super::may_init(procs);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let finished = Countdown::leak(n, done_tx);
    let t = Instant::now();
    may::go!(move || {
        for _ in 0..n {
            may::go!(move || {
                may::coroutine::sleep(SLEEP);
                if let Some(done) = finished.bump() {
                    let _ = done.send(());
                }
            });
        }
    })
    .join()
    .unwrap_or_else(|e| panic!("root coroutine: {}", panic_msg(&*e)));
    done_rx.recv().expect("done signal");
    Sample::timed(t.elapsed(), finished.count())
}
