//! Timers: sleep in goroutines, tasks and plain threads; idle runtimes sleep
//! until the next timer.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::rt;

#[test]
fn sleep_parks_goroutine_not_thread() {
    // One P: if sleep blocked the M, the second goroutine could not run meanwhile.
    let rt = rt(1);
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let t = Instant::now();
    let sleeper = rt.go(move || {
        gosched::time::sleep(Duration::from_millis(50));
        r2.load(SeqCst)
    });
    let r3 = ran.clone();
    let other = rt.go(move || {
        r3.fetch_add(1, SeqCst);
    });
    rt.block_on(other).unwrap();
    assert_eq!(rt.block_on(sleeper).unwrap(), 1);
    assert!(t.elapsed() >= Duration::from_millis(50));
}

#[test]
fn many_sleepers_all_wake() {
    let rt = rt(2);
    let t = Instant::now();
    let hs: Vec<_> = (0..10_000)
        .map(|i| {
            if i % 2 == 0 {
                rt.go(move || gosched::time::sleep(Duration::from_millis(10 + i % 7)))
            } else {
                rt.spawn(async move {
                    gosched::time::sleep_async(Duration::from_millis(10 + i % 7)).await
                })
            }
        })
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert!(t.elapsed() >= Duration::from_millis(10));
}

#[test]
fn sleep_async_on_plain_thread_block_on() {
    let rt = rt(2);
    let t = Instant::now();
    rt.block_on(gosched::time::sleep_async(Duration::from_millis(15)));
    assert!(t.elapsed() >= Duration::from_millis(15));
    // Plain-thread sleep.
    let t = Instant::now();
    gosched::time::sleep(Duration::from_millis(5));
    assert!(t.elapsed() >= Duration::from_millis(5));
}

#[test]
fn dropped_sleep_never_fires() {
    let rt = rt(2);
    let h = rt.spawn(async {
        let s = gosched::time::sleep_async(Duration::from_millis(5));
        let mut s = Box::pin(s);
        // Poll once so the timer is armed, then drop it.
        std::future::poll_fn(|cx| {
            let _ = s.as_mut().poll(cx);
            std::task::Poll::Ready(())
        })
        .await;
        drop(s);
        gosched::time::sleep_async(Duration::from_millis(20)).await;
        1
    });
    assert_eq!(rt.block_on(h).unwrap(), 1);
}

use std::future::Future;
