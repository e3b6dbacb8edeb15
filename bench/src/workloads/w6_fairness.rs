//! W6 fairness: `HOGS` units spin without ever calling the runtime, and one
//! ticker sleeps 1 ms at a time for `size` ms. Reported: the ticker's
//! lateness (how much longer than 1 ms each sleep took), p99 in ms; the
//! tick count, p50 and max beside it.
//!
//! Same method everywhere (and in `bench/go/w6_fairness.go`,
//! `bench/java/W6Fairness.java`): the hogs are spawned first, then the
//! ticker; the window starts when the ticker is spawned (not when it first
//! runs), and the ticker stops once `size` ms of it have passed and reports
//! its latenesses. A runtime that never lets the ticker run (every worker
//! held by a hog) would never report: the main thread waits `size` ms plus
//! a second, then stops the hogs, and the ticks that came in within the
//! window are what counts (a starved ticker shows 0 ticks and a lateness of
//! the whole wait).
//!
//! Lateness: a tick is late by the time since the previous tick (or, for
//! the first, since the spawn) beyond one period; p99 of that is the
//! figure, the tick count, p50 and max beside it. Before 2026-11-28 the
//! Rust and Go tickers counted their window from their first run, so a
//! ticker starved until the hogs stopped then ticked a whole window and
//! reported a p99 of about 1 ms (tokio's and may's rows: 474 and 907 ticks,
//! p99 1.2 and 0.2 ms, max 2,000 ms); Java's program already counted from
//! the spawn.
//!
//! Rows: `gosched-go` goroutine hogs and a goroutine ticker;
//! `gosched-async` an async ticker beside goroutine hogs;
//! tokio tasks; smol tasks (`smol::Timer::after`); may coroutines
//! (`may::coroutine::sleep`); Go.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Impl, Sample};

/// Units that spin.
pub const HOGS: usize = 4;
/// The ticker's period.
pub const PERIOD: Duration = Duration::from_millis(1);

pub fn run(imp: Impl, procs: usize, ms: u64) -> Sample {
    let window = Duration::from_millis(ms);
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, window),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async_ticker(procs, window),
        Impl::Tokio => tokio_tasks(procs, window),
        Impl::Smol => smol_tasks(procs, window),
        Impl::May => may_coroutines(procs, window),
        _ => {
            let _ = (procs, window);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

/// A hog: spins on `stop`, doing a little arithmetic, never calling the
/// runtime.
fn hog(stop: &AtomicBool) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while !stop.load(Relaxed) {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
    }
    x
}

/// The ticker's bookkeeping: one lateness per tick, until `window` has
/// passed since `start` (the ticker's spawn).
struct Ticks {
    start: Instant,
    window: Duration,
    /// The previous tick, or the spawn.
    last: Instant,
    late_ns: Vec<u64>,
}

impl Ticks {
    /// At the ticker's spawn, on the spawning thread.
    fn new(window: Duration) -> Self {
        let start = Instant::now();
        Ticks {
            start,
            window,
            last: start,
            late_ns: Vec::with_capacity(window.as_millis() as usize + 1),
        }
    }

    /// Whether to tick again.
    fn go_on(&self) -> bool {
        self.start.elapsed() < self.window
    }

    /// A tick came: its lateness is the time since the previous one (or
    /// the spawn) beyond one period.
    fn tick(&mut self) {
        let now = Instant::now();
        let took = now - self.last;
        self.last = now;
        self.late_ns
            .push(took.saturating_sub(PERIOD).as_nanos() as u64);
    }
}

/// Waits for the ticker's report (`window` + 1 s), then stops the hogs; a
/// starved ticker reports once the hogs stop, and then only its ticks
/// within the window count.
fn finish(rx: mpsc::Receiver<Vec<u64>>, stop: &AtomicBool, window: Duration) -> Sample {
    let got = rx.recv_timeout(window + Duration::from_secs(1));
    stop.store(true, Relaxed);
    let (ticks, late) = match got {
        Ok(v) => (v.len() as u64, v),
        Err(_) => {
            // Starved: whatever it managed, plus the wait so far as the
            // lateness of the tick it never made.
            let mut v = rx.recv().unwrap_or_default();
            let ticks = v.len() as u64;
            v.push((window + Duration::from_secs(1)).as_nanos() as u64);
            (ticks, v)
        }
    };
    Sample::latencies(window, ticks, late)
}

/// `HOGS` goroutine hogs on `rt`.
#[cfg(feature = "gosched")]
fn goroutine_hogs(rt: &gosched::Runtime, stop: &Arc<AtomicBool>) -> Vec<gosched::JoinHandle<u64>> {
    (0..HOGS)
        .map(|_| {
            let s = stop.clone();
            rt.go(move || hog(&s))
        })
        .collect()
}

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, window: Duration) -> Sample {
    let rt = super::gosched_runtime(procs);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs = goroutine_hogs(&rt, &stop);
    let (tx, rx) = mpsc::channel();
    let mut t = Ticks::new(window);
    let ticker = rt.go(move || {
        while t.go_on() {
            gosched::time::sleep(PERIOD);
            t.tick();
        }
        let _ = tx.send(t.late_ns);
    });
    let sample = finish(rx, &stop, window);
    for h in hogs {
        rt.block_on(h).expect("hog");
    }
    rt.block_on(ticker).expect("ticker");
    sample
}

/// An async ticker beside goroutine hogs (default mode).
#[cfg(feature = "gosched")]
fn gosched_async_ticker(procs: usize, window: Duration) -> Sample {
    let rt = super::gosched_runtime(procs);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs = goroutine_hogs(&rt, &stop);
    let (tx, rx) = mpsc::channel();
    let mut t = Ticks::new(window);
    let ticker = rt.spawn(async move {
        while t.go_on() {
            gosched::time::sleep_async(PERIOD).await;
            t.tick();
        }
        let _ = tx.send(t.late_ns);
    });
    let sample = finish(rx, &stop, window);
    for h in hogs {
        rt.block_on(h).expect("hog");
    }
    rt.block_on(ticker).expect("ticker");
    sample
}

fn tokio_tasks(procs: usize, window: Duration) -> Sample {
    let rt = super::tokio_runtime(procs);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let s = stop.clone();
            rt.spawn(async move { hog(&s) })
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    let mut t = Ticks::new(window);
    let ticker = rt.spawn(async move {
        while t.go_on() {
            tokio::time::sleep(PERIOD).await;
            t.tick();
        }
        let _ = tx.send(t.late_ns);
    });
    let sample = finish(rx, &stop, window);
    rt.block_on(async {
        for h in hogs {
            h.await.expect("hog");
        }
        ticker.await.expect("ticker");
    });
    sample
}

/// tokio's row on the smol executor: hog tasks, then a ticker task that
/// sleeps with `smol::Timer::after(1 ms)`; their `Task`s awaited at the end.
fn smol_tasks(procs: usize, window: Duration) -> Sample {
    let rt = super::smol_runtime(procs);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let s = stop.clone();
            rt.spawn(async move { hog(&s) })
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    let mut t = Ticks::new(window);
    let ticker = rt.spawn(async move {
        while t.go_on() {
            smol::Timer::after(PERIOD).await;
            t.tick();
        }
        let _ = tx.send(t.late_ns);
    });
    let sample = finish(rx, &stop, window);
    rt.block_on(async {
        for h in hogs {
            h.await;
        }
        ticker.await;
    });
    sample
}

fn may_coroutines(procs: usize, window: Duration) -> Sample {
    super::may_init(procs);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let s = stop.clone();
            may::go!(move || hog(&s))
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    let mut t = Ticks::new(window);
    let ticker = may::go!(move || {
        while t.go_on() {
            may::coroutine::sleep(PERIOD);
            t.tick();
        }
        let _ = tx.send(t.late_ns);
    });
    let sample = finish(rx, &stop, window);
    for h in hogs {
        h.join().expect("hog");
    }
    ticker.join().expect("ticker");
    sample
}
