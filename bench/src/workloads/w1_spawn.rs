//! W1 spawn: spawn `n` trivial units that each bump a shared atomic; wait for
//! all of them.
//!
//! Same method in every implementation (and in `bench/go/w1_spawn.go`):
//! - a root unit, itself running on a worker (as Go's main goroutine does),
//!   spawns the `n` units in a loop and keeps no handle (a dropped handle
//!   detaches);
//! - each unit does one `fetch_add` on the shared counter ([`Countdown`]);
//!   the unit that makes it reach `n` sends the one-shot "done" signal;
//! - the root waits on that signal. Timed: from spawning the root until the
//!   root has returned.

use std::time::Instant;

use super::{panic_msg, Countdown, Impl, Sample};

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedThreads => gosched_from_a_thread(procs, n),
        Impl::Tokio => tokio_tasks(procs, n),
        Impl::Smol => smol_tasks(procs, n),
        Impl::May => may_coroutines(procs, n),
        _ => unreachable!("{imp:?} is not built into this binary"),
    }
}

/// gosched goroutines; the root goroutine parks on a futures oneshot.
#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let c = Countdown::leak(n, tx);
    let t = Instant::now();
    rt.block_on(rt.go(move || {
        for _ in 0..n {
            gosched::go(move || {
                if let Some(tx) = c.bump() {
                    let _ = tx.send(());
                }
            });
        }
        gosched::block_on(rx).expect("done signal");
    }))
    .expect("root goroutine");
    Sample::timed(t.elapsed(), c.count())
}

/// gosched async tasks; the root task awaits a futures oneshot.
#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let c = Countdown::leak(n, tx);
    let t = Instant::now();
    rt.block_on(rt.spawn(async move {
        for _ in 0..n {
            gosched::spawn(async move {
                if let Some(tx) = c.bump() {
                    let _ = tx.send(());
                }
            });
        }
        rx.await.expect("done signal");
    }))
    .expect("root task");
    Sample::timed(t.elapsed(), c.count())
}

/// gosched goroutines spawned by a plain thread (issue 25's plain-thread
/// spawn row): the driver's own thread is the root, outside the runtime, so
/// every `go` is P-less (the global queue); it then waits on the oneshot.
/// Races Go's W1, whose root is a goroutine.
#[cfg(feature = "gosched")]
fn gosched_from_a_thread(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let c = Countdown::leak(n, tx);
    let t = Instant::now();
    for _ in 0..n {
        drop(rt.go(move || {
            if let Some(tx) = c.bump() {
                let _ = tx.send(());
            }
        }));
    }
    rt.block_on(rx).expect("done signal");
    Sample::timed(t.elapsed(), c.count())
}

/// tokio tasks; the root task awaits a tokio oneshot.
fn tokio_tasks(procs: usize, n: u64) -> Sample {
    let rt = super::tokio_runtime(procs);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let c = Countdown::leak(n, tx);
    let t = Instant::now();
    rt.block_on(rt.spawn(async move {
        for _ in 0..n {
            tokio::spawn(async move {
                if let Some(tx) = c.bump() {
                    let _ = tx.send(());
                }
            });
        }
        rx.await.expect("done signal");
    }))
    .expect("root task");
    Sample::timed(t.elapsed(), c.count())
}

/// smol tasks (as tokio's row): the root task spawns `n` tasks onto the
/// executor and detaches them (a dropped smol `Task` would cancel its task;
/// a dropped tokio `JoinHandle` detaches), then awaits a futures oneshot
/// (smol has no oneshot of its own; gosched-async's row awaits the same).
fn smol_tasks(procs: usize, n: u64) -> Sample {
    let rt = super::smol_runtime(procs);
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let c = Countdown::leak(n, tx);
    let t = Instant::now();
    rt.block_on(rt.spawn(async move {
        for _ in 0..n {
            super::SMOL
                .spawn(async move {
                    if let Some(tx) = c.bump() {
                        let _ = tx.send(());
                    }
                })
                .detach();
        }
        rx.await.expect("done signal");
    }));
    Sample::timed(t.elapsed(), c.count())
}

/// may coroutines; the root coroutine blocks on a may mpsc channel.
fn may_coroutines(procs: usize, n: u64) -> Sample {
    super::may_init(procs);
    let (tx, rx) = may::sync::mpsc::channel::<()>();
    let c = Countdown::leak(n, tx);
    let t = Instant::now();
    may::go!(move || {
        for _ in 0..n {
            may::go!(move || {
                if let Some(tx) = c.bump() {
                    let _ = tx.send(());
                }
            });
        }
        rx.recv().expect("done signal");
    })
    .join()
    .unwrap_or_else(|e| panic!("root coroutine: {}", panic_msg(&*e)));
    Sample::timed(t.elapsed(), c.count())
}
