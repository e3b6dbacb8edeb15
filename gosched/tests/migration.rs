//! Goroutines move between OS threads (Ms) as in Go: a started goroutine is
//! stolen and handed off with its P, and resumes wherever it is run next;
//! one that holds `lock_os_thread` never changes thread, while the
//! goroutines it talks to keep moving.

mod common;

use common::OsThread as ThreadId;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

const GOROUTINES: usize = 200;
const ROUNDS: usize = 40;

/// 200 goroutines in pairs, each round: yield, a rendezvous with its partner,
/// a short sleep, a mutex; the thread id is compared before and after each.
/// Goroutine `i` holds `lock_os_thread` if `locked(i)`. Returns how many
/// blocking calls came back on another thread, in unlocked and in locked
/// goroutines.
fn thread_changes(rt: &gosched::Runtime, locked: impl Fn(usize) -> bool) -> (usize, usize) {
    let moved = Arc::new(AtomicUsize::new(0));
    let moved_locked = Arc::new(AtomicUsize::new(0));
    let lock = Arc::new(gosched::sync::Mutex::new(0u64));
    let handles: Vec<_> = (0..GOROUTINES / 2)
        .flat_map(|_| {
            let (a, b) = (gosched::chan::<usize>(0), gosched::chan::<usize>(0));
            [(a.clone(), b.clone(), true), (b, a, false)]
        })
        .enumerate()
        .map(|(g, (tx, rx, first))| {
            let locked = locked(g);
            let moved = if locked {
                moved_locked.clone()
            } else {
                moved.clone()
            };
            let lock = lock.clone();
            rt.go(move || {
                if locked {
                    gosched::runtime::lock_os_thread();
                }
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
                if locked {
                    gosched::runtime::unlock_os_thread();
                }
            })
        })
        .collect();
    for h in handles {
        rt.block_on(h).unwrap();
    }
    assert_eq!(*lock.lock(), (GOROUTINES * ROUNDS) as u64);
    (moved.load(Relaxed), moved_locked.load(Relaxed))
}

/// The default runtime moves started goroutines (with both Ps busy, some
/// blocking call comes back on another thread in a few runs).
#[test]
fn goroutines_change_thread() {
    let rt = common::rt(2);
    let moved: usize = (0..5).map(|_| thread_changes(&rt, |_| false).0).sum();
    assert!(moved > 0, "no goroutine ever moved in the default runtime");
}

/// One goroutine in ten holds `lock_os_thread`, paired with goroutines that
/// move: the locked ones never change thread, and the others still move
/// (the check of the locked ones can fail).
#[test]
fn locked_goroutines_keep_their_thread_among_moving_ones() {
    let rt = common::rt(2);
    let (mut moved, mut moved_locked) = (0, 0);
    for _ in 0..3 {
        let (m, l) = thread_changes(&rt, |g| g % 10 == 0);
        moved += m;
        moved_locked += l;
    }
    assert_eq!(
        moved_locked, 0,
        "a locked goroutine resumed on another thread"
    );
    assert!(
        moved > 0,
        "no unlocked goroutine ever moved: the check is broken"
    );
}
