//! User code the scheduler calls outside any poll must not take an M down
//! (issue 17, §4): a `Waker` that panics when a task completes (its
//! JoinHandle's waker) or when a timer fires is caught and reported; the
//! runtime keeps running everything else and drops cleanly.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::rt;

/// A waker whose wake panics (a buggy foreign executor).
struct Bomb;

impl Wake for Bomb {
    fn wake(self: Arc<Self>) {
        panic!("bomb waker");
    }
}

const LIMIT: Duration = Duration::from_secs(20);

/// The runtime still runs goroutines: 100 spawned from a goroutine, all
/// joined. Fails (instead of hanging) if nothing runs within `LIMIT`.
fn still_works(rt: &gosched::Runtime, what: &str) {
    let (tx, rx) = mpsc::channel();
    let h = rt.go(|| {
        (0..100)
            .map(|i| gosched::go(move || i))
            .map(|h| h.join().unwrap())
            .sum::<u64>()
    });
    std::thread::spawn(move || {
        let _ = tx.send(h.join());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(r) => assert_eq!(r.unwrap(), 4950),
        Err(_) => panic!("{what}: the runtime stopped running goroutines"),
    }
}

/// Runs `body` on its own thread; fails if it has not finished within
/// `LIMIT` (a dead M would otherwise hang the test: the thread is leaked).
fn within(what: &'static str, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for {LIMIT:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: failed (see above)"),
    }
}

#[test]
fn panicking_join_waker_is_caught() {
    within("join waker", join_waker_body);
}

fn join_waker_body() {
    // One P: if its M died, nothing would run any more.
    let rt = rt(1);
    let gate = gosched::chan::<()>(0);
    let g = gate.clone();
    let mut h = rt.go(move || {
        g.recv();
        7
    });
    let bomb = Waker::from(Arc::new(Bomb));
    assert!(Pin::new(&mut h)
        .poll(&mut Context::from_waker(&bomb))
        .is_pending());
    // The goroutine completes on an M, which wakes the bomb.
    gate.send(()).unwrap();
    still_works(&rt, "after a JoinHandle's waker panicked");
    let noop = Waker::noop();
    let out = loop {
        if let Poll::Ready(r) = Pin::new(&mut h).poll(&mut Context::from_waker(noop)) {
            break r;
        }
        std::thread::yield_now();
    };
    assert_eq!(out.unwrap(), 7, "the output survives its waker's panic");
    drop(rt); // returns: no M is lost
}

#[test]
fn panicking_timer_waker_is_caught() {
    within("timer waker", timer_waker_body);
}

fn timer_waker_body() {
    let rt = rt(1);
    rt.block_on(rt.go(|| {
        let bomb = Waker::from(Arc::new(Bomb));
        let mut s = gosched::time::sleep_async(Duration::from_millis(1));
        // Armed with the bomb as its waker; it fires while we sleep.
        assert!(Pin::new(&mut s)
            .poll(&mut Context::from_waker(&bomb))
            .is_pending());
        gosched::time::sleep(Duration::from_millis(20));
        assert!(Pin::new(&mut s)
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_ready());
    }))
    .unwrap();
    still_works(&rt, "after a timer's waker panicked");
    // A channel timer whose receiver's waker panics.
    rt.block_on(rt.go(|| {
        let bomb = Waker::from(Arc::new(Bomb));
        let ch = gosched::time::after(Duration::from_millis(1));
        let mut recv = Box::pin(ch.recv_async());
        assert!(recv
            .as_mut()
            .poll(&mut Context::from_waker(&bomb))
            .is_pending());
        gosched::time::sleep(Duration::from_millis(20));
        assert!(matches!(
            recv.as_mut().poll(&mut Context::from_waker(Waker::noop())),
            Poll::Ready(Some(_))
        ));
    }))
    .unwrap();
    still_works(&rt, "after a channel timer's receiver waker panicked");
    drop(rt);
}
