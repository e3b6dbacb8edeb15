//! W10 blocking calls beside CPU work: `procs` CPU-bound units do work in
//! chunks (about 20 µs each, then a yield: a cooperative compute loop) for
//! `size` ms, first alone (the baseline), then beside `CALLERS` units that
//! loop on a blocking 50 ms call (`nanosleep`) made the runtime's way.
//! Reported: the chunks done beside the callers as a percentage of the
//! baseline (higher is better; 100 = the blocking calls cost nothing).
//!
//! The blocking call, per runtime: gosched `syscall(f)` (in place; a call
//! site known to be slow gives its P away first, else sysmon retakes it), Go a raw `syscall.Nanosleep`
//! (entersyscall; sysmon retakes the P), tokio `block_in_place` (the worker
//! hands its queue to a new one), may a plain blocking call (may has no
//! hand-off: the worker is blocked). Same method in `bench/go/w10_syscall.go`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Impl, Sample};

/// Units making blocking calls in the second phase.
pub const CALLERS: usize = 4;
/// Each blocking call.
pub const CALL: Duration = Duration::from_millis(50);
/// xorshift rounds per chunk (about 20 µs here).
const CHUNK: u32 = 20_000;

pub fn run(imp: Impl, procs: usize, ms: u64) -> Sample {
    let phase = Duration::from_millis(ms);
    let (base, beside) = match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => (
            gosched_go(procs, phase, 0),
            gosched_go(procs, phase, CALLERS),
        ),
        Impl::Tokio => (
            tokio_tasks(procs, phase, 0),
            tokio_tasks(procs, phase, CALLERS),
        ),
        Impl::May => {
            super::may_init(procs);
            (
                may_coroutines(phase, procs, 0),
                may_coroutines(phase, procs, CALLERS),
            )
        }
        _ => {
            let _ = (procs, phase);
            unreachable!("{imp:?} is not built into this binary")
        }
    };
    Sample::ratio(phase * 2, base, beside)
}

/// One chunk of CPU work.
fn chunk(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..CHUNK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// The blocking call.
fn blocking_call() {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: CALL.as_nanos() as libc::c_long,
    };
    // SAFETY: a valid timespec; a null remainder pointer is allowed.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// Shared state of one phase: the chunk count and the stop flag.
#[derive(Default)]
struct Phase {
    chunks: AtomicU64,
    stop: AtomicBool,
}

impl Phase {
    /// Run for `d`, then stop everyone; returns the chunks done.
    fn time(&self, d: Duration) -> u64 {
        let t = Instant::now();
        std::thread::sleep(d);
        let n = self.chunks.load(Relaxed);
        self.stop.store(true, Relaxed);
        // Rate over exactly `d` (the sleep may overshoot).
        (n as f64 * d.as_secs_f64() / t.elapsed().as_secs_f64()) as u64
    }
}

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, phase: Duration, callers: usize) -> u64 {
    let rt = super::gosched_runtime(procs);
    let st = Arc::new(Phase::default());
    let mut hs = Vec::new();
    for _ in 0..callers {
        let s = st.clone();
        hs.push(rt.go(move || {
            while !s.stop.load(Relaxed) {
                gosched::syscall(blocking_call);
            }
        }));
    }
    for i in 0..procs {
        let s = st.clone();
        hs.push(rt.go(move || {
            let mut x = i as u64;
            while !s.stop.load(Relaxed) {
                x = chunk(x);
                s.chunks.fetch_add(1, Relaxed);
                gosched::yield_now();
            }
        }));
    }
    let n = st.time(phase);
    for h in hs {
        rt.block_on(h).expect("unit");
    }
    n
}

fn tokio_tasks(procs: usize, phase: Duration, callers: usize) -> u64 {
    let rt = super::tokio_runtime(procs);
    let st = Arc::new(Phase::default());
    let mut hs = Vec::new();
    for _ in 0..callers {
        let s = st.clone();
        hs.push(rt.spawn(async move {
            while !s.stop.load(Relaxed) {
                tokio::task::block_in_place(blocking_call);
            }
        }));
    }
    for i in 0..procs {
        let s = st.clone();
        hs.push(rt.spawn(async move {
            let mut x = i as u64;
            while !s.stop.load(Relaxed) {
                x = chunk(x);
                s.chunks.fetch_add(1, Relaxed);
                tokio::task::yield_now().await;
            }
        }));
    }
    let n = st.time(phase);
    rt.block_on(async {
        for h in hs {
            h.await.expect("unit");
        }
    });
    n
}

fn may_coroutines(phase: Duration, procs: usize, callers: usize) -> u64 {
    let st = Arc::new(Phase::default());
    let mut hs = Vec::new();
    for _ in 0..callers {
        let s = st.clone();
        hs.push(may::go!(move || {
            while !s.stop.load(Relaxed) {
                blocking_call();
            }
        }));
    }
    for i in 0..procs {
        let s = st.clone();
        hs.push(may::go!(move || {
            let mut x = i as u64;
            while !s.stop.load(Relaxed) {
                x = chunk(x);
                s.chunks.fetch_add(1, Relaxed);
                may::coroutine::yield_now();
            }
        }));
    }
    let n = st.time(phase);
    for h in hs {
        h.join().expect("unit");
    }
    n
}
