//! A sleep of `d > 0` always parks, and a ticker faster than its reader drops ticks
//! instead of spinning: on one P, a goroutine looping on tiny sleeps (or reading a
//! 1 ns ticker) never keeps another goroutine from running (issue 18, item 2).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

use common::rt;

const LIMIT: Duration = Duration::from_secs(20);

/// Waits (on a plain thread) for `h`; `None` after `LIMIT`.
fn join_within<T: Send + 'static>(h: gosched::JoinHandle<T>) -> Option<T> {
    let done = gosched::chan::<T>(1);
    let d = done.clone();
    std::thread::spawn(move || {
        let _ = d.send(h.join().expect("goroutine failed"));
    });
    done.recv_timeout(LIMIT).ok()
}

/// Fail without hanging: a starved runtime has an M stuck in one poll, which
/// its drop would wait for, so it is leaked.
fn starved(rt: gosched::Runtime, what: &str) -> ! {
    std::mem::forget(rt);
    panic!("starved: {what} did not finish within {LIMIT:?}");
}

#[test]
fn tiny_sleep_loop_lets_the_rest_of_its_p_run() {
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let sleeps = Arc::new(AtomicU64::new(0));
    let (s, n) = (stop.clone(), sleeps.clone());
    let sleeper = rt.go(move || {
        while !s.load(Relaxed) {
            gosched::time::sleep(Duration::from_nanos(1));
            n.fetch_add(1, Relaxed);
        }
    });
    let st = stop.clone();
    let counter = rt.go(move || {
        let mut c = 0u64;
        for _ in 0..1_000 {
            c += 1;
            gosched::yield_now();
        }
        st.store(true, Relaxed);
        c
    });
    let Some(c) = join_within(counter) else {
        stop.store(true, Relaxed);
        starved(rt, "the counter beside a 1 ns sleep loop")
    };
    assert_eq!(c, 1_000);
    if join_within(sleeper).is_none() {
        starved(rt, "the sleep loop");
    }
    assert!(sleeps.load(Relaxed) > 0, "the sleeping goroutine never ran");
}

#[test]
fn async_tiny_sleep_loop_lets_the_rest_of_its_p_run() {
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let sleeper = rt.spawn(async move {
        let mut n = 0u64;
        while !s.load(Relaxed) {
            gosched::time::sleep_async(Duration::from_nanos(1)).await;
            n += 1;
        }
        n
    });
    let st = stop.clone();
    let counter = rt.spawn(async move {
        for _ in 0..1_000 {
            gosched::task::yield_now().await;
        }
        st.store(true, Relaxed);
    });
    if join_within(counter).is_none() {
        stop.store(true, Relaxed);
        starved(rt, "the task beside a 1 ns sleep_async loop");
    }
    match join_within(sleeper) {
        Some(n) => assert!(n > 0),
        None => starved(rt, "the sleep_async loop"),
    }
}

#[test]
fn nanosecond_ticker_drops_ticks_instead_of_spinning() {
    let rt = rt(1);
    let progress = Arc::new(AtomicU64::new(0));
    let p = progress.clone();
    let reader = rt.go(move || {
        let ticker = gosched::time::tick(Duration::from_nanos(1));
        let until = std::time::Instant::now() + Duration::from_millis(100);
        let mut ticks = 0u64;
        while std::time::Instant::now() < until {
            ticker.recv().expect("ticker channel open");
            ticks += 1;
        }
        ticks
    });
    let worker = rt.go(move || {
        for _ in 0..1_000 {
            p.fetch_add(1, Relaxed);
            gosched::yield_now();
        }
    });
    if join_within(worker).is_none() {
        starved(rt, "the goroutine beside a 1 ns ticker");
    }
    match join_within(reader) {
        Some(ticks) => assert!(ticks > 0),
        None => starved(rt, "the ticker's reader"),
    }
    assert_eq!(progress.load(Relaxed), 1_000);
}
