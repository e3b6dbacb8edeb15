//! `runtime::lock_os_thread` (Go's `LockOSThread`): a goroutine that keeps
//! its thread across blocking calls, and a locked thread that runs nothing
//! else.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread;

use common::OsThread as ThreadId;

use gosched::runtime::{lock_os_thread, unlock_os_thread};

fn migrating(procs: usize) -> gosched::Builder {
    gosched::Builder::new().procs(procs)
}

/// 1,000 blocking calls of every kind from one goroutine, with another
/// goroutine keeping the other P busy and handing it values.
fn blocking_calls_keep_thread(rt: &gosched::Runtime, lock: bool) -> bool {
    rt.block_on(rt.go(move || {
        if lock {
            lock_os_thread();
        }
        let me = common::os_thread();
        let ch = gosched::chan::<u32>(0);
        let tx = ch.clone();
        let feeder = gosched::go(move || {
            for i in 0..500 {
                tx.send(i).unwrap();
                gosched::yield_now();
            }
        });
        let m = gosched::sync::Mutex::new(0u32);
        let mut same = true;
        for i in 0..1000 {
            match i % 4 {
                0 => {
                    ch.recv().unwrap();
                }
                1 => gosched::yield_now(),
                2 => gosched::time::sleep(std::time::Duration::from_micros(1)),
                _ => {
                    ch.recv().unwrap();
                    *m.lock() += 1;
                }
            }
            same &= common::os_thread() == me;
        }
        feeder.join().unwrap();
        if lock {
            unlock_os_thread();
        }
        same
    }))
    .unwrap()
}

/// In a runtime whose goroutines may move, a locked goroutine does not.
#[test]
fn locked_goroutine_keeps_its_thread_across_blocking_calls() {
    let rt = migrating(2).build().unwrap();
    assert!(blocking_calls_keep_thread(&rt, true));
}

/// The check can fail: without the lock, in the migrating runtime, the
/// goroutine does move (at least once in a few tries).
#[test]
fn unlocked_goroutines_do_move_when_migrating() {
    let rt = migrating(2).build().unwrap();
    let moved = (0..20).any(|_| !blocking_calls_keep_thread(&rt, false));
    assert!(
        moved,
        "a migrating goroutine never changed thread: the test proves nothing"
    );
}

/// While a goroutine holds the lock, its thread runs no other task: 2,000
/// goroutines and tasks spawned meanwhile from a plain thread all run on
/// other threads, though the locked goroutine parks again and again.
#[test]
fn a_locked_thread_runs_nothing_else() {
    for rt in [common::rt(2), migrating(2).build().unwrap()] {
        let locked_thread: Arc<Mutex<Option<ThreadId>>> = Arc::default();
        let (go_on, stop) = (gosched::chan::<()>(0), Arc::new(AtomicBool::new(false)));
        let lt = locked_thread.clone();
        let (g2, s2) = (go_on.clone(), stop.clone());
        let locker = rt.go(move || {
            lock_os_thread();
            *lt.lock().unwrap() = Some(common::os_thread());
            g2.send(()).unwrap();
            // Park and wake repeatedly until told to stop.
            while !s2.load(SeqCst) {
                gosched::time::sleep(std::time::Duration::from_micros(50));
            }
            unlock_os_thread();
        });
        rt.block_on(go_on.recv_async()).unwrap();
        let locked = locked_thread.lock().unwrap().unwrap();
        let seen: Arc<Mutex<HashSet<ThreadId>>> = Arc::default();
        let mut hs = Vec::new();
        for i in 0..2000 {
            let s = seen.clone();
            if i % 2 == 0 {
                hs.push(rt.go(move || {
                    s.lock().unwrap().insert(common::os_thread());
                }));
            } else {
                hs.push(rt.spawn(async move {
                    s.lock().unwrap().insert(common::os_thread());
                }));
            }
        }
        for h in hs {
            rt.block_on(h).unwrap();
        }
        stop.store(true, SeqCst);
        rt.block_on(locker).unwrap();
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        assert!(
            !seen.contains(&locked),
            "a task ran on the locked thread ({} threads seen)",
            seen.len()
        );
    }
}

/// Nested locks need as many unlocks; a goroutine that ends locked frees
/// its thread for other work.
#[test]
fn nesting_and_ending_locked() {
    let rt = common::rt(1);
    // On one P: a goroutine ends while locked; the thread runs others after.
    let t = rt
        .block_on(rt.go(|| {
            lock_os_thread();
            lock_os_thread();
            unlock_os_thread();
            common::os_thread()
        }))
        .unwrap();
    let after: Vec<_> = (0..50).map(|_| rt.go(common::os_thread)).collect();
    let ids: Vec<_> = after.into_iter().map(|h| rt.block_on(h).unwrap()).collect();
    assert_eq!(ids.len(), 50);
    // One P, one M most likely: the freed thread runs them; in any case
    // they all ran (nothing waits for a lock that is gone).
    let _ = t;
    // Outside goroutines it is a no-op.
    lock_os_thread();
    unlock_os_thread();
    unlock_os_thread();
}

/// In an async task it panics with what to do instead.
#[test]
fn lock_os_thread_in_a_task_panics() {
    let rt = common::rt(1);
    let err = rt
        .block_on(rt.spawn(async { lock_os_thread() }))
        .unwrap_err();
    assert!(err.is_panic());
}

gosched::goroutine_local! {
    static COUNTER: std::cell::Cell<u64> = std::cell::Cell::new(0);
    static DROPS: DropMark = DropMark;
}

/// Counts drops of goroutine-local values.
static DROPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
struct DropMark;
impl Drop for DropMark {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
    }
}

/// Each goroutine sees its own value across blocking calls, whatever thread
/// it resumes on (here: a migrating runtime, 200 goroutines, both Ps busy);
/// the values are dropped with their goroutines.
#[test]
fn goroutine_locals_are_per_goroutine() {
    let rt = migrating(2).build().unwrap();
    let before = DROPPED.load(SeqCst);
    let hs: Vec<_> = (0..200u64)
        .map(|i| {
            rt.go(move || {
                DROPS.with(|_| ());
                for k in 0..50 {
                    COUNTER.with(|c| c.set(c.get() + i));
                    if k % 3 == 0 {
                        gosched::yield_now();
                    } else {
                        gosched::time::sleep(std::time::Duration::from_micros(10));
                    }
                }
                COUNTER.with(|c| c.get())
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        assert_eq!(rt.block_on(h).unwrap(), 50 * i as u64);
    }
    assert_eq!(DROPPED.load(SeqCst) - before, 200);
    // Outside goroutines: the thread's own slot.
    COUNTER.with(|c| c.set(7));
    assert_eq!(COUNTER.with(|c| c.get()), 7);
    assert_eq!(
        thread::spawn(|| COUNTER.with(|c| c.get())).join().unwrap(),
        0
    );
}

/// Runs `f` on a helper thread; fails (instead of hanging) if it takes more
/// than `secs`.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("hung: did not finish in time")
}

/// A locked goroutine spins (yielding) until a goroutine it spawned has
/// run: the spawned one is movable work on the locked M's P, which must
/// reach another M (on one P: the locked M hands its P over).
#[test]
fn a_locked_goroutine_does_not_starve_its_ps_queue() {
    for procs in [1, 2] {
        within(20, move || {
            let rt = common::rt(procs);
            rt.block_on(rt.go(|| {
                lock_os_thread();
                let ch = gosched::chan::<u32>(1);
                let tx = ch.clone();
                let _h = gosched::go(move || tx.send(1).unwrap());
                while ch.try_recv().is_err() {
                    gosched::yield_now();
                }
                unlock_os_thread();
            }))
            .unwrap();
        });
    }
}

/// Dropping the runtime while a locked goroutine is parked does not hang
/// (the locked M parks on no list; shutdown wakes every M).
#[test]
fn shutdown_with_a_parked_locked_goroutine() {
    within(20, || {
        let rt = common::rt(2);
        let ch = gosched::chan::<u32>(0);
        let started = gosched::chan::<()>(0);
        let st = started.clone();
        let rx = ch.clone();
        rt.go(move || {
            lock_os_thread();
            st.send(()).unwrap();
            let _ = rx.recv();
        });
        rt.block_on(started.recv_async()).unwrap();
        drop(rt);
        drop(ch);
    });
}
