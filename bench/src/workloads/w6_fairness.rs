//! W6 fairness: `HOGS` units spin without ever calling the runtime, and one
//! ticker sleeps 1 ms at a time for `size` ms. Reported: the ticker's
//! lateness (how much longer than 1 ms each sleep took), p99 in ms; the
//! tick count, p50 and max beside it.
//!
//! Same method everywhere (and in `bench/go/w6_fairness.go`): the hogs are
//! spawned first, then the ticker; the ticker stops ticking once `size` ms
//! have passed since it started and reports its latenesses. A runtime that
//! never lets the ticker run (every worker held by a hog) would never
//! report: the main thread waits `size` ms plus a second, then stops the
//! hogs, and the ticks that came in within the window are what counts (a
//! starved ticker shows 0 ticks and a lateness of the whole window).
//!
//! Rows: `gosched-go` goroutine hogs and a goroutine ticker (the default
//! mode: a ticker homed on a hog's M waits for it, which the row shows);
//! `gosched-go-migrate` the same with goroutines free to move (Go's model);
//! `gosched-async` an async ticker beside goroutine hogs (default mode);
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
/// passed since `start`.
struct Ticks {
    start: Instant,
    window: Duration,
    late_ns: Vec<u64>,
}

impl Ticks {
    fn new(window: Duration) -> Self {
        Ticks {
            start: Instant::now(),
            window,
            late_ns: Vec::with_capacity(window.as_millis() as usize + 1),
        }
    }

    /// Whether to tick again.
    fn go_on(&self) -> bool {
        self.start.elapsed() < self.window
    }

    fn record(&mut self, slept_since: Instant) {
        let took = slept_since.elapsed();
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
    let ticker = rt.go(move || {
        let mut t = Ticks::new(window);
        while t.go_on() {
            let s = Instant::now();
            gosched::time::sleep(PERIOD);
            t.record(s);
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
    let ticker = rt.spawn(async move {
        let mut t = Ticks::new(window);
        while t.go_on() {
            let s = Instant::now();
            gosched::time::sleep_async(PERIOD).await;
            t.record(s);
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
    let ticker = rt.spawn(async move {
        let mut t = Ticks::new(window);
        while t.go_on() {
            let s = Instant::now();
            tokio::time::sleep(PERIOD).await;
            t.record(s);
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
    let ticker = rt.spawn(async move {
        let mut t = Ticks::new(window);
        while t.go_on() {
            let s = Instant::now();
            smol::Timer::after(PERIOD).await;
            t.record(s);
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
    let ticker = may::go!(move || {
        let mut t = Ticks::new(window);
        while t.go_on() {
            let s = Instant::now();
            may::coroutine::sleep(PERIOD);
            t.record(s);
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
