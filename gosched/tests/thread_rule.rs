//! The thread rule (issue 17 §1): a goroutine stays on the OS thread (M) where
//! it first ran, across every kind of blocking call, with both Ps busy. It is
//! the default only where goroutines cannot be virtual threads, and
//! `Builder::pin_goroutines` asks for it elsewhere (these tests do:
//! `common::pinned`). Goroutines are placed across the Ms at their first
//! run, since after that they stay. Where goroutines are virtual threads,
//! they move by default, as in Go.

mod common;

use common::OsThread as ThreadId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

use common::pinned;

const GOROUTINES: usize = 200;
const ROUNDS: usize = 40;

/// 200 goroutines in pairs, each round: yield, a rendezvous with its partner,
/// a short sleep, a mutex; the thread id is compared before and after each.
/// Returns how many blocking calls came back on another thread.
fn thread_changes(rt: &gosched::Runtime) -> usize {
    let moved = Arc::new(AtomicUsize::new(0));
    let lock = Arc::new(gosched::sync::Mutex::new(0u64));
    let handles: Vec<_> = (0..GOROUTINES / 2)
        .flat_map(|_| {
            let (a, b) = (gosched::chan::<usize>(0), gosched::chan::<usize>(0));
            [(a.clone(), b.clone(), true), (b, a, false)]
        })
        .map(|(tx, rx, first)| {
            let (moved, lock) = (moved.clone(), lock.clone());
            rt.go(move || {
                let check = |before: ThreadId| {
                    if common::os_thread() != before {
                        moved.fetch_add(1, Relaxed);
                    }
                };
                for i in 0..ROUNDS {
                    let t = common::os_thread();
                    gosched::yield_now();
                    check(t);
                    let t = common::os_thread();
                    if first {
                        tx.send(i).unwrap();
                        assert_eq!(rx.recv(), Some(i));
                    } else {
                        assert_eq!(rx.recv(), Some(i));
                        tx.send(i).unwrap();
                    }
                    check(t);
                    let t = common::os_thread();
                    gosched::time::sleep(Duration::from_micros(50));
                    check(t);
                    let t = common::os_thread();
                    *lock.lock() += 1;
                    check(t);
                }
            })
        })
        .collect();
    for h in handles {
        rt.block_on(h).unwrap();
    }
    assert_eq!(*lock.lock(), (GOROUTINES * ROUNDS) as u64);
    moved.load(Relaxed)
}

#[test]
fn pinned_goroutines_never_change_thread() {
    let rt = pinned(2);
    assert_eq!(
        thread_changes(&rt),
        0,
        "a started goroutine resumed on another M"
    );
}

/// The check above can fail: with migration allowed, the same program moves.
#[test]
fn migrating_goroutines_do_change_thread() {
    // SAFETY: these goroutines hold no thread-local across a blocking call.
    let rt = unsafe { gosched::Builder::new().procs(2).migrate_goroutines(true) }
        .build()
        .unwrap();
    let moved: usize = (0..5).map(|_| thread_changes(&rt)).sum();
    assert!(
        moved > 0,
        "no goroutine ever moved: the detection is broken"
    );
}

/// Where goroutines are virtual threads, the default runtime moves them.
#[test]
fn goroutines_move_by_default_where_they_are_virtual_threads() {
    if gosched::runtime::virtual_threads().is_err() {
        return; // the thread rule is the default here
    }
    let rt = common::rt(2);
    let moved: usize = (0..5).map(|_| thread_changes(&rt)).sum();
    assert!(moved > 0, "no goroutine ever moved in the default runtime");
}

/// One goroutine spawns 1,000 long-lived goroutines: where they first run is
/// where they stay, so the Ms must share them (each within ±20% of its share).
#[test]
fn long_lived_goroutines_are_spread_over_the_ms() {
    const N: usize = 1000;
    let rt = pinned(2);
    let placed = rt
        .block_on(rt.go(|| {
            let started = gosched::chan::<ThreadId>(N);
            let release = gosched::chan::<()>(0);
            let hs: Vec<_> = (0..N)
                .map(|_| {
                    let (s, r) = (started.clone(), release.clone());
                    gosched::go(move || {
                        s.send(common::os_thread()).unwrap();
                        let _ = r.recv(); // long-lived: parked until the end
                    })
                })
                .collect();
            let mut per_m = HashMap::<ThreadId, usize>::new();
            for _ in 0..N {
                *per_m.entry(started.recv().unwrap()).or_default() += 1;
            }
            release.close().unwrap();
            for h in hs {
                h.join().unwrap();
            }
            per_m
        }))
        .unwrap();
    let counts: Vec<usize> = placed.values().copied().collect();
    eprintln!("goroutines per M: {counts:?}");
    assert_eq!(counts.len(), 2, "not both Ms got goroutines: {counts:?}");
    for c in counts {
        assert!((400..=600).contains(&c), "uneven placement: {placed:?}");
    }
}

/// A goroutine that keeps yielding (back onto its own M's queue) must not
/// starve the goroutines sent to that M from elsewhere (placed there, or
/// readied by another M): the spawner below waits, yielding, for 20,000
/// goroutines to start; placement sends some of them to its M's inbox.
/// (An earlier version drained the inbox only once the local queue was
/// empty, which it never was: this ran for minutes.)
#[test]
fn a_yield_loop_does_not_starve_its_ms_inbox() {
    const N: usize = 20_000;
    let rt = pinned(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let h = rt.go(|| {
        let started = Arc::new(AtomicUsize::new(0));
        let gate = gosched::chan::<()>(0);
        let hs: Vec<_> = (0..N)
            .map(|_| {
                let (s, g) = (started.clone(), gate.clone());
                gosched::go(move || {
                    s.fetch_add(1, Relaxed);
                    let _ = g.recv();
                })
            })
            .collect();
        while started.load(Relaxed) < N {
            gosched::yield_now();
        }
        gate.close().unwrap();
        for h in hs {
            h.join().unwrap();
        }
    });
    std::thread::spawn(move || {
        let _ = tx.send(h.join());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(r) => r.unwrap(),
        Err(_) => {
            std::mem::forget(rt);
            panic!("the spawner's yield loop starved the goroutines it waits for");
        }
    }
}

/// Dropping the runtime cancels parked goroutines; each one's stack unwinds
/// (its destructors run) on the thread it ran on, not on the dropping thread:
/// the unwinding runs the goroutine's own frames, which may hold thread-local
/// addresses of that thread.
#[test]
fn shutdown_unwinds_each_goroutine_on_its_own_thread() {
    struct OnDrop {
        ran_on: ThreadId,
        wrong: Arc<AtomicUsize>,
        dropped: Arc<AtomicUsize>,
    }
    impl Drop for OnDrop {
        fn drop(&mut self) {
            if common::os_thread() != self.ran_on {
                self.wrong.fetch_add(1, Relaxed);
            }
            self.dropped.fetch_add(1, Relaxed);
        }
    }
    const N: usize = 200;
    for _ in 0..5 {
        let rt = pinned(2);
        let (wrong, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let parked = gosched::chan::<()>(N);
        let never = gosched::chan::<()>(0);
        for i in 0..N {
            let (wrong, dropped, parked, never) = (
                wrong.clone(),
                dropped.clone(),
                parked.clone(),
                never.clone(),
            );
            rt.go(move || {
                let _guard = OnDrop {
                    ran_on: common::os_thread(),
                    wrong,
                    dropped,
                };
                if i % 2 == 0 {
                    gosched::yield_now(); // some park after a yield
                }
                parked.send(()).unwrap();
                let _ = never.recv(); // parked until shutdown
            });
        }
        for _ in 0..N {
            rt.block_on(parked.recv_async()).unwrap();
        }
        drop(rt);
        assert_eq!(dropped.load(Relaxed), N, "every goroutine was cancelled");
        assert_eq!(
            wrong.load(Relaxed),
            0,
            "goroutines unwound on a thread other than their own"
        );
    }
}
