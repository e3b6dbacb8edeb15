//! `gosched::syscall(f)` under the thread rule: a slow call does not hold up
//! the goroutines homed on the caller's M (it is handed to a pool thread),
//! runs in place when nothing else is homed there, may borrow the caller's
//! stack, re-raises its panic, and a cancelled caller waits for it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{mpsc, Arc};
use std::thread;

use common::OsThread as ThreadId;
use std::time::Duration;

use common::pinned;

/// On one P: goroutine A's call can only return once goroutine B, homed on
/// the same M, has run. In place, B could never run (the one M is inside the
/// call) and the call would time out.
#[test]
fn a_slow_call_does_not_strand_its_ms_other_goroutines() {
    let rt = pinned(1);
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
                started.recv().unwrap(); // B is homed on this M now
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
        assert_ne!(call_thread, a_thread, "the call ran on A's M");
        assert_eq!(b_thread, a_thread, "B was not homed on A's M");
    }
}

/// Alone on its M, a goroutine's call runs in place (no hand-off cost).
#[test]
fn a_call_of_a_goroutine_alone_on_its_m_runs_in_place() {
    let rt = pinned(1);
    let same = rt
        .block_on(rt.go(|| {
            let me = common::os_thread();
            let same = gosched::syscall(common::os_thread) == me;
            // A panic in an in-place call leaves the P usable.
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
/// in the goroutine.
#[test]
fn a_handed_off_call_borrows_and_panics_through() {
    let rt = pinned(1);
    let r = rt.block_on(rt.go(|| {
        let (hold, keep) = (gosched::chan::<()>(0), gosched::chan::<()>(0));
        let (h, k) = (hold.clone(), keep.clone());
        let other = gosched::go(move || {
            h.send(()).unwrap();
            let _ = k.recv();
        });
        hold.recv().unwrap(); // `other` is homed here and stays while we call
        let mut buf = vec![0u64; 1000];
        let me = common::os_thread();
        let there = gosched::syscall(|| {
            for (i, x) in buf.iter_mut().enumerate() {
                *x = i as u64;
            }
            common::os_thread()
        });
        let sum: u64 = buf.iter().sum();
        let caught = std::panic::catch_unwind(|| gosched::syscall(|| panic!("boom in the call")));
        keep.close().unwrap();
        other.join().unwrap();
        (sum, there != me, caught)
    }));
    let (sum, moved, caught) = r.unwrap();
    assert_eq!(sum, 999 * 1000 / 2);
    assert!(
        moved,
        "with another goroutine homed here the call is handed off"
    );
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in the call"));
}

/// A runtime dropped while a goroutine waits for its handed-off call: the
/// cancellation waits for the call (which writes into the goroutine's stack)
/// before the stack is freed.
#[test]
fn cancelling_a_goroutine_waits_for_its_call() {
    let finished = Arc::new(AtomicBool::new(false));
    let handed_off = Arc::new(AtomicBool::new(false));
    let (in_call_tx, in_call_rx) = mpsc::channel::<()>();
    let rt = pinned(1);
    let (f, moved) = (finished.clone(), handed_off.clone());
    let h = rt.go(move || {
        let (park, started) = (gosched::chan::<()>(0), gosched::chan::<()>(0));
        let (p, s) = (park.clone(), started.clone());
        let _other = gosched::go(move || {
            s.send(()).unwrap();
            let _ = p.recv(); // until shutdown
        });
        started.recv().unwrap(); // `other` is homed here now
        let me = common::os_thread();
        let mut local = [0u8; 256];
        gosched::syscall(|| {
            moved.store(common::os_thread() != me, SeqCst);
            in_call_tx.send(()).unwrap();
            thread::sleep(Duration::from_millis(200));
            local.fill(7);
            f.store(true, SeqCst);
        });
        local[0]
    });
    in_call_rx.recv().unwrap();
    drop(h);
    drop(rt); // cancels the goroutine: must wait for the call
    assert!(handed_off.load(SeqCst), "the call was not handed off");
    assert!(
        finished.load(SeqCst),
        "the runtime was dropped before the call it cancelled had returned"
    );
}

/// A call site of fast calls is handed off while unmeasured, then runs in
/// place (the per-site average, `coro/syscall.rs`).
#[test]
fn a_site_of_fast_calls_learns_to_run_in_place() {
    let rt = pinned(1);
    let moved = rt
        .block_on(rt.go(|| {
            let (hold, keep) = (gosched::chan::<()>(0), gosched::chan::<()>(0));
            let (h, k) = (hold.clone(), keep.clone());
            let other = gosched::go(move || {
                h.send(()).unwrap();
                let _ = k.recv();
            });
            hold.recv().unwrap(); // `other` is homed here
            let me = common::os_thread();
            let moved: Vec<bool> = (0..20)
                .map(|_| gosched::syscall(common::os_thread) != me)
                .collect();
            keep.close().unwrap();
            other.join().unwrap();
            moved
        }))
        .unwrap();
    assert!(moved[0], "an unmeasured site is handed off: {moved:?}");
    assert!(!moved[19], "a site of fast calls runs in place: {moved:?}");
}

/// `syscall_async` from async tasks on one P: 8 calls of 200 ms run at
/// once on the blocking pool (all 8 are seen inside their calls together)
/// while the P runs another task meanwhile; a panic in the call reaches the
/// awaiting task.
#[test]
fn syscall_async_runs_calls_off_the_p() {
    use std::sync::atomic::AtomicUsize;
    let rt = pinned(1);
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
