//! Channel timers are heap entries, not tasks (issue 18, item 1): `after`,
//! `tick`, `Timer` and `after_func` do not count in `num_goroutine`, and a
//! timer nobody can receive from any more — dropped, or stopped — is freed at
//! once, not when its deadline passes (Go 1.23). Measured with a counting
//! global allocator: a million one-hour timers created and dropped leave the
//! process's heap where it was.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::*};
use std::sync::Mutex;
use std::time::Duration;

use common::rt;
use gosched::time::{after, tick, Timer};

/// Live heap bytes of the whole process.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const HOUR: Duration = Duration::from_secs(3600);
const N: usize = 1_000_000;
/// What may stay allocated after a million timers came and went: the heap's
/// few zombies and its vector's capacity, scheduler caches. A timer that
/// lived until its deadline would leave hundreds of bytes each (over 100 MiB).
const SLACK: isize = 1 << 20;

/// The counted heap is process-wide: one measurement at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `churn` in a goroutine of a fresh 2-P runtime, between two readings
/// of the live heap and of `num_goroutine`, and checks both came back.
fn assert_freed(what: &str, churn: impl FnOnce() + Send + 'static) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = rt(2);
    // Warm-up: the runtime's Ms, caches and heaps exist before the baseline.
    rt.block_on(rt.go(|| drop(after(HOUR)))).unwrap();
    let (live, tasks) = rt
        .block_on(rt.go(move || {
            let before = (LIVE.load(SeqCst), gosched::runtime::num_goroutine());
            churn();
            let after = (LIVE.load(SeqCst), gosched::runtime::num_goroutine());
            (after.0 - before.0, (before.1, after.1))
        }))
        .unwrap();
    assert_eq!(
        tasks.0, tasks.1,
        "{what}: num_goroutine went from {} to {}",
        tasks.0, tasks.1
    );
    assert!(
        live < SLACK,
        "{what}: {live} bytes still allocated after the timers were dropped"
    );
}

#[test]
fn a_million_dropped_afters_are_freed() {
    assert_freed("after(1 h)", || {
        for _ in 0..N {
            drop(std::hint::black_box(after(HOUR)));
        }
    });
}

#[test]
fn a_million_dropped_tickers_are_freed() {
    assert_freed("tick(1 h)", || {
        for _ in 0..N {
            drop(std::hint::black_box(tick(HOUR)));
        }
    });
}

#[test]
fn a_million_stopped_timers_are_freed() {
    assert_freed("Timer::new(1 h) + stop", || {
        for _ in 0..N {
            let t = Timer::new(HOUR);
            assert!(t.stop(), "a pending timer stops");
            drop(t);
        }
    });
}

/// An `after` that a receiver parked on (so its timer went on a heap: see
/// tests/time_lazy.rs) and then gave up on is freed too: the last handle's
/// drop stops the heap entry, whose zombie the heap then compacts.
#[test]
fn afters_waited_on_then_dropped_are_freed() {
    assert_freed("after(1 h) waited on for 1 µs, then dropped", || {
        for _ in 0..20_000 {
            let ch = after(HOUR);
            assert!(ch.recv_timeout(Duration::from_micros(1)).is_err());
        }
    });
}

/// Stops with no later add on that heap: the stoppers themselves compact it.
#[test]
fn timers_stopped_in_bulk_are_freed_without_later_timers() {
    assert_freed("100,000 pending Timers, then all stopped", || {
        let timers: Vec<Timer> = (0..100_000).map(|_| Timer::new(HOUR)).collect();
        for t in &timers {
            assert!(t.stop());
        }
        drop(timers);
    });
    assert_freed("100,000 pending afters, then all dropped", || {
        let chans: Vec<_> = (0..100_000).map(|_| after(HOUR)).collect();
        drop(chans);
    });
}

/// A channel whose receivers are gone but whose sender side lives on (split)
/// is freed too: only receiving handles keep a timer alive.
#[test]
fn after_kept_alive_only_by_receivers() {
    assert_freed("after(1 h) split, receiver dropped", || {
        let mut senders = Vec::new();
        for i in 0..N {
            let (tx, rx) = after(HOUR).split();
            drop(rx);
            if i % 1000 == 0 {
                senders.push(tx);
            }
        }
        drop(senders);
    });
    // And the timer still fires for a live receiver that split it.
    let rt = rt(2);
    let got = rt
        .block_on(rt.go(|| {
            let (tx, rx) = after(Duration::from_millis(1)).split();
            drop(tx);
            rx.recv()
        }))
        .unwrap();
    assert!(
        got.is_some(),
        "the timer's own sender keeps the channel open"
    );
}

#[test]
fn pending_timers_are_not_goroutines() {
    let rt = rt(2);
    let counts = rt
        .block_on(rt.go(|| {
            let before = gosched::runtime::num_goroutine();
            let a: Vec<_> = (0..1000).map(|_| after(HOUR)).collect();
            let t: Vec<_> = (0..1000).map(|_| tick(HOUR)).collect();
            let m: Vec<_> = (0..1000).map(|_| Timer::new(HOUR)).collect();
            let f: Vec<_> = (0..1000).map(|_| Timer::after_func(HOUR, || {})).collect();
            let during = gosched::runtime::num_goroutine();
            drop((a, t, m, f));
            (before, during)
        }))
        .unwrap();
    assert_eq!(
        counts.0, counts.1,
        "4,000 pending timers changed num_goroutine"
    );
}
