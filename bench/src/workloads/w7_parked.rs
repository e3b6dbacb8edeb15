//! W7 parked: `n` units each parked on its own one-shot channel; reported as
//! (VmRSS once all are parked - VmRSS before spawning) / n bytes per unit.
//!
//! Same method everywhere (and in `bench/go/w7_parked.go`):
//! - VmRSS is read after the runtime is up and warm, before anything else;
//! - a root unit makes `n` channels, spawns one unit per channel that bumps
//!   the `parked` counter right before parking on its receiver, and hands
//!   the `n` senders back (so the channels and the sender list are counted,
//!   as Go's `[]chan struct{}` is);
//! - the main thread polls `parked` until it is `n`, sleeps 100 ms so that
//!   the last ones are really asleep, reads VmRSS again;
//! - then it releases every unit; each bumps a [`Countdown`] on wake and the
//!   last one signals "done"; the check is that all `n` finished.
//!
//! Parking: gosched goroutines `gosched::block_on(rx)` and gosched async
//! tasks `rx.await` on a `futures_channel::oneshot` (the same channel as the
//! smol row's), tokio tasks `rx.await` on a `tokio::sync::oneshot`, smol tasks
//! `rx.await` on a `futures_channel::oneshot` (smol has no oneshot; the same
//! channel as gosched's async row), may coroutines
//! `rx.recv()` on a `may::sync::mpsc` channel, Go `<-ch` on a `chan struct{}`.
//! The elapsed time reported is spawning the root until all are parked.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{leak_counter, panic_msg, wait_for, Countdown, Impl, Sample};
use crate::procfs::status_kb;

const SETTLE: Duration = Duration::from_millis(100);

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, n),
        Impl::Tokio => tokio_tasks(procs, n),
        Impl::Smol => smol_tasks(procs, n),
        Impl::May => may_coroutines(procs, n),
        _ => unreachable!("{imp:?} is not built into this binary"),
    }
}

fn rss_kb() -> u64 {
    status_kb("VmRSS").expect("VmRSS in /proc/self/status")
}

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    use futures_channel::oneshot;
    let rt = super::gosched_runtime(procs);
    let parked = leak_counter();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let finished = Countdown::leak(n, done_tx);

    let before = rss_kb();
    let t = Instant::now();
    let senders = rt
        .block_on(rt.go(move || {
            (0..n)
                .map(|_| {
                    let (tx, rx) = oneshot::channel::<()>();
                    gosched::go(move || {
                        parked.fetch_add(1, Ordering::AcqRel);
                        gosched::block_on(rx).expect("release");
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    });
                    tx
                })
                .collect::<Vec<_>>()
        }))
        .expect("root");
    let all_parked = wait_for(parked, n, SETTLE);
    let after = rss_kb();

    for tx in senders {
        tx.send(()).expect("unit alive");
    }
    rt.block_on(done_rx).expect("done signal");
    sample(all_parked - t, finished.count(), before, after)
}

#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    use futures_channel::oneshot;
    let rt = super::gosched_runtime(procs);
    let parked = leak_counter();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let finished = Countdown::leak(n, done_tx);

    let before = rss_kb();
    let t = Instant::now();
    let senders = rt
        .block_on(rt.spawn(async move {
            (0..n)
                .map(|_| {
                    let (tx, rx) = oneshot::channel::<()>();
                    gosched::spawn(async move {
                        parked.fetch_add(1, Ordering::AcqRel);
                        rx.await.expect("release");
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    });
                    tx
                })
                .collect::<Vec<_>>()
        }))
        .expect("root");
    let all_parked = wait_for(parked, n, SETTLE);
    let after = rss_kb();

    for tx in senders {
        tx.send(()).expect("unit alive");
    }
    rt.block_on(done_rx).expect("done signal");
    sample(all_parked - t, finished.count(), before, after)
}

fn tokio_tasks(procs: usize, n: u64) -> Sample {
    use tokio::sync::oneshot;
    let rt = super::tokio_runtime(procs);
    let parked = leak_counter();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let finished = Countdown::leak(n, done_tx);

    let before = rss_kb();
    let t = Instant::now();
    let senders = rt
        .block_on(rt.spawn(async move {
            (0..n)
                .map(|_| {
                    let (tx, rx) = oneshot::channel::<()>();
                    tokio::spawn(async move {
                        parked.fetch_add(1, Ordering::AcqRel);
                        rx.await.expect("release");
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    });
                    tx
                })
                .collect::<Vec<_>>()
        }))
        .expect("root");
    let all_parked = wait_for(parked, n, SETTLE);
    let after = rss_kb();

    for tx in senders {
        tx.send(()).expect("unit alive");
    }
    rt.block_on(done_rx).expect("done signal");
    sample(all_parked - t, finished.count(), before, after)
}

/// tokio's row on the smol executor: each task parks on its own
/// `futures_channel::oneshot` (smol has no oneshot of its own); the tasks
/// are detached (a dropped smol `Task` would cancel its task).
fn smol_tasks(procs: usize, n: u64) -> Sample {
    use futures_channel::oneshot;
    let rt = super::smol_runtime(procs);
    let parked = leak_counter();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let finished = Countdown::leak(n, done_tx);

    let before = rss_kb();
    let t = Instant::now();
    let senders = rt.block_on(rt.spawn(async move {
        (0..n)
            .map(|_| {
                let (tx, rx) = oneshot::channel::<()>();
                super::SMOL
                    .spawn(async move {
                        parked.fetch_add(1, Ordering::AcqRel);
                        rx.await.expect("release");
                        if let Some(done) = finished.bump() {
                            let _ = done.send(());
                        }
                    })
                    .detach();
                tx
            })
            .collect::<Vec<_>>()
    }));
    let all_parked = wait_for(parked, n, SETTLE);
    let after = rss_kb();

    for tx in senders {
        tx.send(()).expect("unit alive");
    }
    rt.block_on(done_rx).expect("done signal");
    sample(all_parked - t, finished.count(), before, after)
}

fn may_coroutines(procs: usize, n: u64) -> Sample {
    use may::sync::mpsc;
    super::may_init(procs);
    let parked = leak_counter();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let finished = Countdown::leak(n, done_tx);

    let before = rss_kb();
    let t = Instant::now();
    let senders = may::go!(move || {
        (0..n)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<()>();
                may::go!(move || {
                    parked.fetch_add(1, Ordering::AcqRel);
                    rx.recv().expect("release");
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
    let all_parked = wait_for(parked, n, SETTLE);
    let after = rss_kb();

    for tx in senders {
        tx.send(()).expect("unit alive");
    }
    done_rx.recv().expect("done signal");
    sample(all_parked - t, finished.count(), before, after)
}

fn sample(to_park: Duration, finished: u64, before: u64, after: u64) -> Sample {
    Sample {
        elapsed_ns: to_park.as_nanos() as u64,
        result: finished,
        rss_before_kb: before,
        rss_after_kb: after,
        ..Sample::default()
    }
}
