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
    timed_rounds(|| rt.block_on(rt.go(round)).expect("round"))
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

// ---- the async rows: one program for gosched, tokio and smol ----------------------
//
// A root task, on a worker, spawns the units; each unit bumps a countdown
// whose last bump sends a oneshot the root awaits. W13's units park on a
// oneshot of their own, released when the root drops the senders (neither
// tokio nor smol has an unbuffered channel); W8's sleep. Until 2026-11-28
// tokio's rows spawned from the main thread inside `rt.block_on`, through
// its inject queue, against the rule that every root runs on a worker, and
// gosched's W13 async row parked on `chan(0)` joined by a `WaitGroup`.

/// The oneshot channel an async row parks its units on and signals the
/// end with.
trait Oneshot: 'static {
    /// `signal` sends; dropping it releases the receiver.
    type Tx: Send + 'static;
    /// Ready once sent to or released.
    type Rx: std::future::Future<Output = Result<(), Self::Closed>> + Send + 'static;
    type Closed: std::fmt::Debug;
    fn channel() -> (Self::Tx, Self::Rx);
    fn signal(tx: Self::Tx);
}

/// `futures_channel::oneshot`: gosched's async row and smol's (smol has
/// none of its own).
struct FuturesOneshot;

impl Oneshot for FuturesOneshot {
    type Tx = futures_channel::oneshot::Sender<()>;
    type Rx = futures_channel::oneshot::Receiver<()>;
    type Closed = futures_channel::oneshot::Canceled;
    fn channel() -> (Self::Tx, Self::Rx) {
        futures_channel::oneshot::channel()
    }
    fn signal(tx: Self::Tx) {
        let _ = tx.send(());
    }
}

/// `tokio::sync::oneshot`: tokio's row.
struct TokioOneshot;

impl Oneshot for TokioOneshot {
    type Tx = tokio::sync::oneshot::Sender<()>;
    type Rx = tokio::sync::oneshot::Receiver<()>;
    type Closed = tokio::sync::oneshot::error::RecvError;
    fn channel() -> (Self::Tx, Self::Rx) {
        tokio::sync::oneshot::channel()
    }
    fn signal(tx: Self::Tx) {
        let _ = tx.send(());
    }
}

/// What the async rows need of a runtime, called from inside its tasks.
trait AsyncUnits: 'static {
    type Oneshot: Oneshot;
    /// Spawn a detached unit.
    fn spawn(unit: impl std::future::Future<Output = ()> + Send + 'static);
    fn sleep(d: Duration) -> impl std::future::Future<Output = ()> + Send;
}

/// One W13 round (the root task's body): `n` units parked, all released,
/// all ended; the count of ended units.
async fn churn_round<R: AsyncUnits>(n: u64) -> u64 {
    let (done_tx, done_rx) = R::Oneshot::channel();
    let finished = super::Countdown::leak(n, done_tx);
    let senders: Vec<_> = (0..n)
        .map(|_| {
            let (tx, rx) = R::Oneshot::channel();
            R::spawn(async move {
                let _ = rx.await;
                if let Some(done) = finished.bump() {
                    R::Oneshot::signal(done);
                }
            });
            tx
        })
        .collect();
    drop(senders); // closes every channel
    done_rx.await.expect("done signal");
    finished.count()
}

/// W8 (the root task's body): `n` units each sleep [`SLEEP`]; the count of
/// ended units.
async fn sleep_all<R: AsyncUnits>(n: u64) -> u64 {
    let (done_tx, done_rx) = R::Oneshot::channel();
    let finished = super::Countdown::leak(n, done_tx);
    for _ in 0..n {
        R::spawn(async move {
            R::sleep(SLEEP).await;
            if let Some(done) = finished.bump() {
                R::Oneshot::signal(done);
            }
        });
    }
    done_rx.await.expect("done signal");
    finished.count()
}

/// A warm-up round, then [`ROUNDS`] timed rounds of `round` (which runs
/// one round as a root task and returns its count).
fn timed_rounds(mut round: impl FnMut() -> u64) -> Sample {
    round();
    let t = Instant::now();
    let mut done = 0;
    for _ in 0..ROUNDS {
        done += round();
    }
    Sample::timed(t.elapsed(), done)
}

/// gosched async tasks, `time::sleep_async`.
#[cfg(feature = "gosched")]
struct GoschedTasks;

#[cfg(feature = "gosched")]
impl AsyncUnits for GoschedTasks {
    type Oneshot = FuturesOneshot;
    fn spawn(unit: impl std::future::Future<Output = ()> + Send + 'static) {
        gosched::spawn(unit);
    }
    fn sleep(d: Duration) -> impl std::future::Future<Output = ()> + Send {
        gosched::time::sleep_async(d)
    }
}

/// tokio tasks, `tokio::time::sleep`.
struct TokioTasks;

impl AsyncUnits for TokioTasks {
    type Oneshot = TokioOneshot;
    fn spawn(unit: impl std::future::Future<Output = ()> + Send + 'static) {
        tokio::spawn(unit);
    }
    fn sleep(d: Duration) -> impl std::future::Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
}

/// smol tasks (detached: a dropped smol `Task` would cancel its task),
/// async-io's `smol::Timer::after`.
struct SmolTasks;

impl AsyncUnits for SmolTasks {
    type Oneshot = FuturesOneshot;
    fn spawn(unit: impl std::future::Future<Output = ()> + Send + 'static) {
        super::SMOL.spawn(unit).detach();
    }
    async fn sleep(d: Duration) {
        smol::Timer::after(d).await;
    }
}

#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    timed_rounds(|| {
        rt.block_on(rt.spawn(churn_round::<GoschedTasks>(n)))
            .expect("round")
    })
}

#[cfg(feature = "gosched")]
fn gosched_async_sleep(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let done = rt
        .block_on(rt.spawn(sleep_all::<GoschedTasks>(n)))
        .expect("root");
    Sample::timed(t.elapsed(), done)
}

fn tokio_tasks(procs: usize, n: u64) -> Sample {
    let rt = super::tokio_runtime(procs);
    timed_rounds(|| {
        rt.block_on(rt.spawn(churn_round::<TokioTasks>(n)))
            .expect("round")
    })
}

fn tokio_sleep(procs: usize, n: u64) -> Sample {
    let rt = super::tokio_runtime(procs);
    let t = Instant::now();
    let done = rt
        .block_on(rt.spawn(sleep_all::<TokioTasks>(n)))
        .expect("root");
    Sample::timed(t.elapsed(), done)
}

fn smol_tasks(procs: usize, n: u64) -> Sample {
    let rt = super::smol_runtime(procs);
    timed_rounds(|| rt.block_on(rt.spawn(churn_round::<SmolTasks>(n))))
}

fn smol_sleep(procs: usize, n: u64) -> Sample {
    let rt = super::smol_runtime(procs);
    let t = Instant::now();
    let done = rt.block_on(rt.spawn(sleep_all::<SmolTasks>(n)));
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
    timed_rounds(round)
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
