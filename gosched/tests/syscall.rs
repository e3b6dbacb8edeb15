//! `gosched::syscall(f)`: the call runs in place, on the goroutine's own
//! thread (Go's `entersyscall`), and does not hold up the goroutines queued
//! on its P: a site known to block gives the P away first (Go's
//! `entersyscallblock`), others wait for sysmon to hand it off. `f` may
//! borrow the caller's stack and its panic comes back in the caller.

mod common;

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{mpsc, Arc};
use std::thread;

use common::OsThread as ThreadId;
use std::time::Duration;

/// On one P: goroutine A's call can only return once goroutine B, queued on
/// A's P, has run. The call runs on A's thread and the P goes to another M,
/// which runs B meanwhile; with the P kept, B could never run (the call
/// would time out).
#[test]
fn a_slow_call_does_not_strand_its_ps_other_goroutines() {
    let rt = common::rt(1);
    for _ in 0..20 {
        let (b_ran_tx, b_ran_rx) = mpsc::channel::<ThreadId>();
        let go_b = gosched::chan::<()>(0);
        let b_may_go = go_b.clone();
        let (a_thread, call_thread, b_thread) = rt
            .block_on(rt.go(move || {
                let started = gosched::chan::<()>(0);
                let s = started.clone();
                let b = gosched::go(move || {
                    s.send(()).unwrap();
                    b_may_go.recv().unwrap();
                    b_ran_tx.send(common::os_thread()).unwrap();
                });
                started.recv().unwrap(); // B runs on our one P, and parks
                let me = common::os_thread();
                let (call_thread, seen) = gosched::syscall(move || {
                    // Wake B from a plain thread, then wait for B to run.
                    let g = go_b.clone();
                    thread::spawn(move || g.send(()).unwrap());
                    let seen = b_ran_rx.recv_timeout(Duration::from_secs(10));
                    (common::os_thread(), seen)
                });
                b.join().unwrap();
                (me, call_thread, seen.expect("B never ran during A's call"))
            }))
            .unwrap();
        assert_eq!(call_thread, a_thread, "the call left A's thread");
        assert_ne!(b_thread, a_thread, "B ran on the thread inside the call");
    }
}

/// The call runs on the goroutine's thread; a panic in it leaves the P
/// usable; outside the runtime it is a plain call.
#[test]
fn a_call_runs_in_place() {
    let rt = common::rt(1);
    let same = rt
        .block_on(rt.go(|| {
            let me = common::os_thread();
            let same = gosched::syscall(common::os_thread) == me;
            let caught = std::panic::catch_unwind(|| gosched::syscall(|| panic!("in place")));
            assert!(caught.is_err());
            same && gosched::go(|| 5).join().unwrap() == 5
        }))
        .unwrap();
    assert!(same);
    // Outside the runtime: a plain call.
    assert_eq!(gosched::syscall(|| 7), 7);
    assert_eq!(gosched::syscall_local(|| 8), 8);
}

/// The call may borrow the goroutine's stack, mutably; its panic comes back
/// in the goroutine, with its payload.
#[test]
fn a_call_borrows_and_panics_through() {
    let rt = common::rt(2);
    let r = rt.block_on(rt.go(|| {
        let mut buf = vec![0u64; 1000];
        gosched::syscall(|| {
            for (i, x) in buf.iter_mut().enumerate() {
                *x = i as u64;
            }
        });
        let sum: u64 = buf.iter().sum();
        let caught = std::panic::catch_unwind(|| gosched::syscall(|| panic!("boom in the call")));
        (sum, caught)
    }));
    let (sum, caught) = r.unwrap();
    assert_eq!(sum, 999 * 1000 / 2);
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in the call"));
}

/// A runtime dropped while a goroutine is inside a call: the drop waits for
/// the call (which writes into the goroutine's stack), whose M then exits.
#[test]
fn dropping_the_runtime_waits_for_a_call_in_flight() {
    let finished = Arc::new(AtomicBool::new(false));
    let (in_call_tx, in_call_rx) = mpsc::channel::<()>();
    let rt = common::rt(1);
    let f = finished.clone();
    let h = rt.go(move || {
        let mut local = [0u8; 256];
        gosched::syscall(|| {
            in_call_tx.send(()).unwrap();
            thread::sleep(Duration::from_millis(200));
            local.fill(7);
            f.store(true, SeqCst);
        });
        local[0]
    });
    in_call_rx.recv().unwrap();
    drop(h);
    drop(rt);
    assert!(
        finished.load(SeqCst),
        "the runtime was dropped before the call in flight had returned"
    );
}

/// Hand-offs of the P that no retake explains: the calls that gave it away
/// first (and locked Ms, none here).
fn voluntary_handoffs(rt: &gosched::Runtime) -> u64 {
    rt.stats()
        .per_proc
        .iter()
        .map(|p| p.handoffs - p.user_retakes - p.syscall_retakes)
        .sum()
}

/// A call site never measured gives its P away before the call (it could
/// block for minutes); once its calls are known to be fast it keeps the P
/// (the per-site average, `coro/syscall.rs`).
#[test]
fn a_site_of_fast_calls_learns_to_keep_its_p() {
    let rt = common::rt(1);
    let before = voluntary_handoffs(&rt);
    let (tx, rx) = mpsc::channel::<()>();
    let (go_on_tx, go_on_rx) = mpsc::channel::<()>();
    let h = rt.go(move || {
        let call = || gosched::syscall(|| 1);
        call();
        tx.send(()).unwrap();
        go_on_rx.recv().unwrap();
        for _ in 0..20 {
            call();
        }
        tx.send(()).unwrap();
        go_on_rx.recv().unwrap();
        for _ in 0..20 {
            call();
        }
    });
    rx.recv().unwrap();
    let first = voluntary_handoffs(&rt) - before;
    go_on_tx.send(()).unwrap();
    rx.recv().unwrap();
    let learnt = voluntary_handoffs(&rt);
    go_on_tx.send(()).unwrap();
    rt.block_on(h).unwrap();
    let late = voluntary_handoffs(&rt) - learnt;
    assert!(first >= 1, "an unmeasured site kept its P");
    assert_eq!(late, 0, "a site of fast calls gave its P away");
}

/// `syscall_async` from async tasks on one P: 8 calls of 200 ms run at
/// once on the blocking pool (all 8 are seen inside their calls together)
/// while the P runs another task meanwhile; a panic in the call reaches the
/// awaiting task.
#[test]
fn syscall_async_runs_calls_off_the_p() {
    use std::sync::atomic::AtomicUsize;
    let rt = common::rt(1);
    let ran_meanwhile = Arc::new(AtomicBool::new(false));
    let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let rm = ran_meanwhile.clone();
    let (i2, m2) = (inside.clone(), most.clone());
    let total = rt
        .block_on(rt.spawn(async move {
            let calls: Vec<_> = (0..8u64)
                .map(|i| {
                    let (inside, most) = (i2.clone(), m2.clone());
                    gosched::spawn(gosched::syscall_async(move || {
                        let now = inside.fetch_add(1, SeqCst) + 1;
                        most.fetch_max(now, SeqCst);
                        // Wait (bounded) until all 8 are inside at once.
                        let until = std::time::Instant::now() + Duration::from_secs(10);
                        while inside.load(SeqCst) < 8 && std::time::Instant::now() < until {
                            thread::sleep(Duration::from_millis(1));
                        }
                        i
                    }))
                })
                .collect();
            let other = gosched::spawn(async move { rm.store(true, SeqCst) });
            other.await.unwrap();
            let mut sum = 0;
            for c in calls {
                sum += c.await.unwrap();
            }
            sum
        }))
        .unwrap();
    assert_eq!(total, (0..8).sum());
    assert!(ran_meanwhile.load(SeqCst));
    assert_eq!(most.load(SeqCst), 8, "the calls did not all run at once");
    let err = rt
        .block_on(rt.spawn(async {
            gosched::syscall_async(|| -> u32 { panic!("boom in a blocking call") }).await
        }))
        .unwrap_err();
    assert!(err.is_panic());
}
