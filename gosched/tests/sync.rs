//! `gosched::sync`: mutual exclusion under load, the three kinds of callers on one
//! primitive, "parks the G, not the M", Go's fairness rules (mutex starvation
//! mode, writer-preferring RwLock, FIFO weighted semaphore), WaitGroup/Once/Cond
//! semantics, and cancel-safety of every pending future (manual poll + drop).
//!
//! Waits that would hang on a regression run under `within`, which fails the test
//! after a deadline instead.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::rt;
use gosched::sync::{Cond, Mutex, Once, RwLock, Semaphore, WaitGroup};
use gosched::Builder;

const DEADLINE: Duration = Duration::from_secs(30);

fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    common::within(what, DEADLINE, f)
}

/// Counts wake-ups, for manual polling.
#[derive(Default)]
struct CountWaker(AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counter() -> (Arc<CountWaker>, Waker) {
    let c = Arc::new(CountWaker::default());
    let w = Waker::from(c.clone());
    (c, w)
}

fn poll<F: Future + Unpin>(f: &mut F, w: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(w))
}

fn woken(c: &CountWaker) -> usize {
    c.0.load(SeqCst)
}

// ---- Mutex ------------------------------------------------------------------

/// Many goroutines on a 2-P runtime increment a plain counter with a widened
/// read-modify-write window; an `inside` flag catches two holders at once.
#[test]
fn mutex_mutual_exclusion_stress() {
    within("mutex stress", || {
        let rt = rt(2);
        const G: usize = 16;
        const N: usize = 5_000;
        let m = Arc::new(Mutex::new(0usize));
        let inside = Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = (0..G)
            .map(|i| {
                let (m, inside) = (m.clone(), inside.clone());
                rt.go(move || {
                    for k in 0..N {
                        let mut g = m.lock();
                        assert!(!inside.swap(true, SeqCst), "two holders at once");
                        let v = *g;
                        for _ in 0..(k % 8) {
                            std::hint::spin_loop();
                        }
                        *g = v + 1;
                        inside.store(false, SeqCst);
                        drop(g);
                        if (i + k) % 512 == 0 {
                            gosched::yield_now();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
        assert_eq!(*m.lock(), G * N);
    });
}

/// Goroutines, async tasks and plain threads on one Mutex; guards are held across
/// parking (goroutine yield, task yield) — they are not tied to an OS thread.
#[test]
fn mutex_mixed_callers() {
    within("mutex mixed", || {
        let rt = rt(2);
        const N: usize = 2_000;
        let m = Arc::new(Mutex::new(0usize));
        let mut gs = Vec::new();
        let mut ts = Vec::new();
        for _ in 0..4 {
            let m2 = m.clone();
            gs.push(rt.go(move || {
                for k in 0..N {
                    let mut g = m2.lock();
                    *g += 1;
                    if k % 100 == 0 {
                        gosched::yield_now(); // guard held across a reschedule
                    }
                }
            }));
            let m2 = m.clone();
            gs.push(rt.spawn(async move {
                for k in 0..N {
                    let mut g = m2.lock_async().await;
                    *g += 1;
                    if k % 100 == 0 {
                        gosched::task::yield_now().await;
                    }
                }
            }));
        }
        for _ in 0..2 {
            let m2 = m.clone();
            ts.push(std::thread::spawn(move || {
                for _ in 0..N {
                    *m2.lock() += 1;
                }
            }));
        }
        for h in gs {
            rt.block_on(h).unwrap();
        }
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 10 * N);
        let m = Arc::try_unwrap(m).unwrap();
        assert_eq!(m.into_inner(), 10 * N);
    });
}

#[test]
fn mutex_basics() {
    let mut m = Mutex::new(vec![1]);
    m.get_mut().push(2);
    {
        let g = m.try_lock().expect("free");
        assert!(m.is_locked());
        assert!(m.try_lock().is_none());
        assert_eq!(format!("{g:?}"), "[1, 2]");
        assert!(format!("{m:?}").contains("<locked>"));
    }
    assert!(!m.is_locked());
    assert!(format!("{m:?}").contains("[1, 2]"));
    static S: Mutex<u32> = Mutex::new(7);
    *S.lock() += 1;
    assert_eq!(*S.lock(), 8);
    // A guard can be dropped on another thread.
    let m = Arc::new(Mutex::new(0));
    let g = {
        let m = m.clone();
        std::thread::spawn(move || {
            let g = m.lock();
            drop(g);
        })
    };
    g.join().unwrap();
    assert_eq!(*m.lock(), 0);
}

/// Go's starvation mode, step by step with manual polls. The only use of time is
/// to make the waiter's wait exceed the 1 ms threshold.
#[test]
fn mutex_starvation_mode_hands_off_fifo() {
    let m = Mutex::new(0);
    let (wc, w) = counter();
    let g = m.lock();
    let mut waiter = m.lock_async();
    assert!(poll(&mut waiter, &w).is_pending());
    std::thread::sleep(Duration::from_millis(3));
    drop(g); // normal mode: wakes the waiter, which must compete
    assert_eq!(woken(&wc), 1);
    let g2 = m.try_lock().expect("a newcomer barges in normal mode");
    // The waiter lost after waiting > 1 ms: starvation mode, re-queued at the head.
    assert!(poll(&mut waiter, &w).is_pending());
    let (nc, nw) = counter();
    let mut newcomer = m.lock_async();
    drop(g2); // hand-off to the waiter: the mutex is never free for newcomers
    assert_eq!(woken(&wc), 2);
    assert!(
        m.try_lock().is_none(),
        "starvation mode: newcomers may not barge"
    );
    assert!(
        poll(&mut newcomer, &nw).is_pending(),
        "newcomer must queue behind"
    );
    let mut g3 = match poll(&mut waiter, &w) {
        Poll::Ready(g) => g,
        Poll::Pending => panic!("the hand-off did not make the waiter the owner"),
    };
    *g3 += 1;
    drop(g3); // last waiter: normal mode again
    assert_eq!(woken(&nc), 1);
    match poll(&mut newcomer, &nw) {
        Poll::Ready(g) => assert_eq!(*g, 1),
        Poll::Pending => panic!("newcomer not handed the lock"),
    }
    assert!(m.try_lock().is_some(), "back to normal mode, free");
}

/// Go's `TestMutexFairness`: a goroutine holds the lock for 100 µs (parked in a
/// sleep), unlocks and re-locks at once; another wants the lock 10 times. In
/// normal mode the woken waiter always finds the lock re-taken (the unlocker
/// re-locks in nanoseconds; the waiter has to be scheduled first) and goes back
/// to the head of the queue, forever. Starvation mode (a waiter that waited over
/// 1 ms) hands the lock over at the next unlock. (The sleeps make load; nothing
/// relies on them for ordering.)
#[test]
fn mutex_starving_waiter_gets_the_lock() {
    within("starvation", || {
        let rt = rt(2);
        let m = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let hammers: Vec<_> = (0..2)
            .map(|_| {
                let (m, stop) = (m.clone(), stop.clone());
                rt.go(move || {
                    let mut n = 0u64;
                    while !stop.load(Relaxed) {
                        let mut g = m.lock();
                        *g += 1;
                        n += 1;
                        gosched::time::sleep(Duration::from_micros(100));
                    }
                    n
                })
            })
            .collect();
        let m2 = m.clone();
        let waiter = rt.go(move || {
            for _ in 0..10 {
                gosched::time::sleep(Duration::from_micros(100));
                drop(m2.lock());
            }
        });
        rt.block_on(waiter).unwrap();
        stop.store(true, SeqCst);
        let total: u64 = hammers.into_iter().map(|h| rt.block_on(h).unwrap()).sum();
        assert_eq!(*m.lock(), total);
    });
}

/// On one P, two goroutines hammer the lock, each holding it across a yield; a
/// third wants it once. In normal mode the waiter never even gets woken: each
/// unlock wakes the queue head (a hammerer, re-queued at the head after losing
/// to the other hammerer's re-lock), so without starvation mode this test hits
/// its deadline. With it, the head waiter that waited > 1 ms is handed the lock
/// and the re-locking hammerer must queue behind the waiter — which gets the
/// lock next (FIFO).
#[test]
fn mutex_starvation_mode_rescues_a_waiter_from_two_hammers() {
    within("starvation on one P", || {
        let rt = Builder::new().procs(1).build().unwrap();
        let m = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let hammers: Vec<_> = (0..2)
            .map(|_| {
                let (m, stop) = (m.clone(), stop.clone());
                rt.go(move || {
                    while !stop.load(SeqCst) {
                        let mut g = m.lock();
                        *g += 1;
                        gosched::yield_now();
                    }
                })
            })
            .collect();
        let (m2, stop2) = (m.clone(), stop.clone());
        let waiter = rt.go(move || {
            let g = m2.lock();
            stop2.store(true, SeqCst);
            *g
        });
        let seen = rt.block_on(waiter).unwrap();
        for h in hammers {
            rt.block_on(h).unwrap();
        }
        assert!(seen > 0, "the hammers did run");
    });
}

/// On a 1-P runtime, goroutine B blocks on a primitive that goroutine A holds. If
/// B blocked the M, A could never run again to release it.
fn parks_g_not_m(what: &'static str, f: impl FnOnce() + Send + 'static) {
    within(what, move || {
        let rt = Builder::new().procs(1).build().unwrap();
        let h = rt.go(f);
        rt.block_on(h).unwrap();
    });
}

/// Spawn `b` (which sets its flag just before blocking) and yield until it ran.
/// With one P, seeing the flag means B has suspended: in the blocking call.
fn run_until_blocked(b: impl FnOnce() + Send + 'static) -> gosched::JoinHandle<()> {
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    let h = gosched::go(move || {
        s.store(true, SeqCst);
        b();
    });
    while !started.load(SeqCst) {
        gosched::yield_now();
    }
    h
}

#[test]
fn mutex_parks_the_goroutine_not_the_thread() {
    parks_g_not_m("mutex", || {
        let m = Arc::new(Mutex::new(0));
        let g = m.lock();
        let m2 = m.clone();
        let b = run_until_blocked(move || *m2.lock() += 1);
        assert!(!b.is_finished());
        drop(g);
        b.join().unwrap();
        assert_eq!(*m.lock(), 1);
    });
}

#[test]
fn rwlock_parks_the_goroutine_not_the_thread() {
    parks_g_not_m("rwlock", || {
        let l = Arc::new(RwLock::new(0));
        let w = l.write();
        let l2 = l.clone();
        let b = run_until_blocked(move || assert_eq!(*l2.read(), 0));
        drop(w);
        b.join().unwrap();
        let r = l.read();
        let l3 = l.clone();
        let c = run_until_blocked(move || *l3.write() += 1);
        drop(r);
        c.join().unwrap();
        assert_eq!(*l.read(), 1);
    });
}

#[test]
fn semaphore_parks_the_goroutine_not_the_thread() {
    parks_g_not_m("semaphore", || {
        let s = Arc::new(Semaphore::new(2));
        s.acquire(2);
        let s2 = s.clone();
        let b = run_until_blocked(move || s2.acquire(1));
        s.release(2);
        b.join().unwrap();
        assert_eq!(s.available(), 1);
    });
}

#[test]
fn waitgroup_once_cond_park_the_goroutine_not_the_thread() {
    parks_g_not_m("waitgroup", || {
        let wg = WaitGroup::new();
        wg.add(1);
        let wg2 = wg.clone();
        let b = run_until_blocked(move || wg2.wait());
        wg.done();
        b.join().unwrap();
    });
    parks_g_not_m("once", || {
        let once = Arc::new(Once::new());
        let o2 = once.clone();
        let ran = Arc::new(AtomicUsize::new(0));
        let r2 = ran.clone();
        once.call_once(|| {
            // While we run f, B calls call_once and must wait (parked).
            let b = run_until_blocked(move || {
                o2.call_once(|| {
                    r2.fetch_add(1, SeqCst);
                });
                assert!(o2.is_completed());
            });
            assert!(!b.is_finished());
            // Detach: B finishes once we return.
            drop(b);
        });
        assert_eq!(ran.load(SeqCst), 0);
    });
    parks_g_not_m("cond", || {
        let pair = Arc::new((Mutex::new(false), Cond::new()));
        let p2 = pair.clone();
        let b = run_until_blocked(move || {
            let mut g = p2.0.lock();
            while !*g {
                g = p2.1.wait(g);
            }
        });
        *pair.0.lock() = true;
        pair.1.signal();
        b.join().unwrap();
    });
}

/// Cancel safety: a woken waiter dropped before it competed passes the wake-up on.
#[test]
fn mutex_dropped_woken_waiter_passes_the_wakeup_on() {
    let m = Mutex::new(());
    let (c1, w1) = counter();
    let (c2, w2) = counter();
    let g = m.lock();
    let mut f1 = m.lock_async();
    let mut f2 = m.lock_async();
    assert!(poll(&mut f1, &w1).is_pending());
    assert!(poll(&mut f2, &w2).is_pending());
    drop(g);
    assert_eq!((woken(&c1), woken(&c2)), (1, 0));
    drop(f1);
    assert_eq!(woken(&c2), 1, "the wake-up died with the dropped future");
    assert!(poll(&mut f2, &w2).is_ready());
}

/// Cancel safety: ownership handed to a waiter (starvation mode) that is dropped
/// before it saw it goes to the next waiter; a queued waiter that is dropped
/// simply leaves.
#[test]
fn mutex_dropped_owner_by_handoff_passes_ownership_on() {
    let m = Mutex::new(0);
    let (c1, w1) = counter();
    let (c2, w2) = counter();
    let (c3, w3) = counter();
    let g = m.lock();
    let mut f1 = m.lock_async();
    assert!(poll(&mut f1, &w1).is_pending());
    std::thread::sleep(Duration::from_millis(3));
    drop(g);
    let g = m.try_lock().unwrap();
    assert!(poll(&mut f1, &w1).is_pending()); // starving now
    let mut f2 = m.lock_async();
    assert!(poll(&mut f2, &w2).is_pending());
    let mut f3 = m.lock_async();
    assert!(poll(&mut f3, &w3).is_pending());
    drop(f2); // queued: just leaves
    drop(g); // hand-off to f1
    assert_eq!(woken(&c1), 2);
    assert!(m.is_locked());
    drop(f1); // owned it: passes it on to f3
    assert_eq!(woken(&c3), 1);
    assert_eq!(woken(&c2), 0);
    match poll(&mut f3, &w3) {
        Poll::Ready(mut g) => *g += 1,
        Poll::Pending => panic!("ownership lost with the dropped future"),
    }
    assert_eq!(*m.try_lock().unwrap(), 1);
}

// ---- RwLock -------------------------------------------------------------------

/// Writers keep two fields equal; readers (goroutines, tasks, threads) check it.
#[test]
fn rwlock_mixed_callers() {
    within("rwlock mixed", || {
        let rt = rt(2);
        const N: usize = 1_000;
        let l = Arc::new(RwLock::new((0usize, 0usize)));
        let reads = Arc::new(AtomicUsize::new(0));
        let mut hs = Vec::new();
        let mut ts = Vec::new();
        for _ in 0..2 {
            let l2 = l.clone();
            hs.push(rt.go(move || {
                for k in 0..N {
                    let mut g = l2.write();
                    g.0 += 1;
                    if k % 50 == 0 {
                        gosched::yield_now();
                    }
                    g.1 += 1;
                }
            }));
            let l2 = l.clone();
            hs.push(rt.spawn(async move {
                for _ in 0..N {
                    let mut g = l2.write_async().await;
                    g.0 += 1;
                    g.1 += 1;
                }
            }));
            let (l2, r2) = (l.clone(), reads.clone());
            hs.push(rt.go(move || {
                for _ in 0..N {
                    let g = l2.read();
                    assert_eq!(g.0, g.1);
                    r2.fetch_add(1, Relaxed);
                }
            }));
            let (l2, r2) = (l.clone(), reads.clone());
            hs.push(rt.spawn(async move {
                for k in 0..N {
                    let g = l2.read_async().await;
                    assert_eq!(g.0, g.1);
                    if k % 50 == 0 {
                        gosched::task::yield_now().await;
                    }
                    r2.fetch_add(1, Relaxed);
                }
            }));
            let (l2, r2) = (l.clone(), reads.clone());
            ts.push(std::thread::spawn(move || {
                for k in 0..N {
                    if k % 2 == 0 {
                        let g = l2.read();
                        assert_eq!(g.0, g.1);
                        r2.fetch_add(1, Relaxed);
                    } else {
                        let mut g = l2.write();
                        g.0 += 1;
                        g.1 += 1;
                    }
                }
            }));
        }
        for h in hs {
            rt.block_on(h).unwrap();
        }
        for t in ts {
            t.join().unwrap();
        }
        let want = 2 * (2 * N) + 2 * (N / 2);
        assert_eq!(*l.read(), (want, want));
        assert_eq!(reads.load(SeqCst), 2 * (2 * N) + 2 * (N / 2));
    });
}

/// Readers overlap continuously (each holds its guard across a yield); a writer
/// must still get in: once it waits, new readers queue behind it.
#[test]
fn rwlock_writer_not_starved_by_readers() {
    within("writer starvation", || {
        let rt = rt(2);
        let l = Arc::new(RwLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let reading = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (l, stop, reading) = (l.clone(), stop.clone(), reading.clone());
                rt.go(move || {
                    let mut n = 0u64;
                    while !stop.load(Relaxed) {
                        let g = l.read();
                        reading.fetch_add(1, SeqCst);
                        gosched::yield_now();
                        n += *g;
                    }
                    n
                })
            })
            .collect();
        while reading.load(SeqCst) < 100 {
            std::thread::yield_now();
        }
        for _ in 0..10 {
            let l2 = l.clone();
            rt.block_on(rt.go(move || *l2.write() += 1)).unwrap();
        }
        stop.store(true, SeqCst);
        for r in readers {
            rt.block_on(r).unwrap();
        }
        assert_eq!(*l.read(), 10);
    });
}

/// Writers take turns continuously (each holds the lock across a yield); a
/// reader must still get in: a writer's unlock releases the queued readers first.
#[test]
fn rwlock_reader_not_starved_by_writers() {
    within("reader starvation", || {
        let rt = rt(2);
        let l = Arc::new(RwLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let writing = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (l, stop, writing) = (l.clone(), stop.clone(), writing.clone());
                rt.go(move || {
                    while !stop.load(Relaxed) {
                        let mut g = l.write();
                        writing.fetch_add(1, SeqCst);
                        gosched::yield_now();
                        *g += 1;
                    }
                })
            })
            .collect();
        while writing.load(SeqCst) < 100 {
            std::thread::yield_now();
        }
        for _ in 0..10 {
            let l2 = l.clone();
            rt.block_on(rt.go(move || *l2.read())).unwrap();
        }
        stop.store(true, SeqCst);
        for w in writers {
            rt.block_on(w).unwrap();
        }
    });
}

/// Go's order, step by step: a waiting writer blocks new readers; readers that
/// queued while a writer held the lock go before the next queued writer.
#[test]
fn rwlock_order_and_cancel_safety() {
    let l = RwLock::new(0);
    let w = Waker::noop();
    let r1 = l.read();
    let mut w1 = l.write_async();
    assert!(poll(&mut w1, w).is_pending());
    assert!(
        l.try_read().is_none(),
        "a waiting writer blocks new readers"
    );
    let mut r2 = l.read_async();
    assert!(poll(&mut r2, w).is_pending());
    drop(r1); // last reader out: the writer gets it
    let mut g1 = match poll(&mut w1, w) {
        Poll::Ready(g) => g,
        Poll::Pending => panic!("writer not granted"),
    };
    *g1 += 1;
    let mut w2 = l.write_async();
    assert!(poll(&mut w2, w).is_pending());
    let mut r3 = l.read_async();
    assert!(poll(&mut r3, w).is_pending());
    drop(g1); // readers queued meanwhile (r2, r3) go before w2
    let (Poll::Ready(g2), Poll::Ready(g3)) = (poll(&mut r2, w), poll(&mut r3, w)) else {
        panic!("queued readers not released by the writer's unlock");
    };
    assert_eq!((*g2, *g3), (1, 1));
    assert!(poll(&mut w2, w).is_pending());
    drop(g2);
    drop(g3);
    // w2 was granted; dropping it unpolled passes the lock on.
    drop(w2);
    assert!(
        l.try_write().is_some(),
        "write lock lost with a dropped future"
    );

    // A queued writer that is cancelled lets the readers queued behind it in.
    let r1 = l.read();
    let mut w3 = l.write_async();
    assert!(poll(&mut w3, w).is_pending());
    let (rc, rw) = counter();
    let mut r4 = l.read_async();
    assert!(poll(&mut r4, &rw).is_pending());
    drop(w3);
    assert_eq!(woken(&rc), 1);
    assert!(poll(&mut r4, &rw).is_ready());
    drop(r1);
    // A granted reader that is dropped unpolled releases its read lock.
    let g = l.write();
    let mut r5 = l.read_async();
    assert!(poll(&mut r5, w).is_pending());
    drop(g);
    drop(r5);
    assert!(
        l.try_write().is_some(),
        "read lock leaked by a dropped future"
    );
}

// ---- WaitGroup ------------------------------------------------------------------

#[test]
fn waitgroup_mixed_callers_and_waiters() {
    within("waitgroup", || {
        let rt = rt(2);
        let wg = WaitGroup::new();
        let n = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicBool::new(false));
        wg.add(6);
        let mut hs = Vec::new();
        for _ in 0..2 {
            let (wg2, n2, rel) = (wg.clone(), n.clone(), release.clone());
            hs.push(rt.go(move || {
                while !rel.load(SeqCst) {
                    gosched::yield_now();
                }
                n2.fetch_add(1, SeqCst);
                wg2.done();
            }));
            let (wg2, n2, rel) = (wg.clone(), n.clone(), release.clone());
            hs.push(rt.spawn(async move {
                while !rel.load(SeqCst) {
                    gosched::task::yield_now().await;
                }
                n2.fetch_add(1, SeqCst);
                wg2.done();
            }));
        }
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let (wg2, n2) = (wg.clone(), n.clone());
                std::thread::spawn(move || {
                    n2.fetch_add(1, SeqCst);
                    wg2.done();
                })
            })
            .collect();
        // Waiters of all three kinds; each must see all six increments.
        let (wg2, n2) = (wg.clone(), n.clone());
        let wg_go = rt.go(move || {
            wg2.wait();
            n2.load(SeqCst)
        });
        let (wg2, n2) = (wg.clone(), n.clone());
        let wg_task = rt.spawn(async move {
            wg2.wait_async().await;
            n2.load(SeqCst)
        });
        let (wg2, n2) = (wg.clone(), n.clone());
        let wg_thread = std::thread::spawn(move || {
            wg2.wait();
            n2.load(SeqCst)
        });
        release.store(true, SeqCst);
        assert_eq!(rt.block_on(wg_go).unwrap(), 6);
        assert_eq!(rt.block_on(wg_task).unwrap(), 6);
        assert_eq!(wg_thread.join().unwrap(), 6);
        for h in hs {
            rt.block_on(h).unwrap();
        }
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(wg.count(), 0);
        wg.wait(); // zero: returns at once
    });
}

#[test]
#[should_panic(expected = "sync: negative WaitGroup counter")]
fn waitgroup_negative_counter_panics() {
    WaitGroup::new().done();
}

#[test]
fn waitgroup_negative_add_panics_with_gos_message() {
    let wg = WaitGroup::new();
    wg.add(1);
    let err = catch_unwind(AssertUnwindSafe(|| wg.add(-2))).unwrap_err();
    assert_eq!(
        err.downcast_ref::<&str>().copied(),
        Some("sync: negative WaitGroup counter")
    );
}

/// `WaitGroup::go` (Go 1.25): done when the goroutine returns, even if it panics.
#[test]
fn waitgroup_go_counts_panicking_goroutines_done() {
    within("waitgroup go", || {
        let rt = rt(2);
        let n = Arc::new(AtomicUsize::new(0));
        let hs = rt.block_on(async {
            let wg = WaitGroup::new();
            let mut hs = Vec::new();
            for i in 0..20 {
                let n = n.clone();
                hs.push(wg.go(move || {
                    gosched::yield_now();
                    n.fetch_add(1, SeqCst);
                    if i % 5 == 0 {
                        panic!("boom {i}");
                    }
                }));
            }
            let n2 = n.clone();
            let t = wg.spawn(async move {
                n2.fetch_add(1, SeqCst);
            });
            wg.wait_async().await;
            assert_eq!(n.load(SeqCst), 21);
            t.await.unwrap();
            hs
        });
        let panicked = hs
            .into_iter()
            .map(|h| rt.block_on(h))
            .filter(|r| r.is_err())
            .count();
        assert_eq!(panicked, 4);
    });
}

#[test]
fn waitgroup_dropped_waiter_is_removed() {
    let wg = WaitGroup::new();
    wg.add(1);
    let (c, w) = counter();
    let mut f1 = wg.wait_async();
    assert!(poll(&mut f1, &w).is_pending());
    let mut f2 = wg.wait_async();
    assert!(poll(&mut f2, &w).is_pending());
    drop(f1);
    wg.done();
    assert_eq!(woken(&c), 1);
    assert!(poll(&mut f2, &w).is_ready());
}

// ---- Once ---------------------------------------------------------------------

/// Many callers at once (goroutines, tasks, threads): `f` runs exactly once and
/// every caller returns only after it finished (its effect is visible).
#[test]
fn once_runs_exactly_once_under_contention() {
    within("once", || {
        let rt = rt(2);
        for _ in 0..20 {
            let once = Arc::new(Once::new());
            let runs = Arc::new(AtomicUsize::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let init = {
                let (runs, done) = (runs.clone(), done.clone());
                move || {
                    runs.fetch_add(1, SeqCst);
                    // Take a while, so that other callers arrive meanwhile (f may
                    // run in a goroutine, a task or a thread: no yield fits all).
                    for _ in 0..20_000 {
                        std::hint::spin_loop();
                    }
                    done.store(true, SeqCst);
                }
            };
            let mut hs = Vec::new();
            for _ in 0..8 {
                let (o, f, d) = (once.clone(), init.clone(), done.clone());
                hs.push(rt.go(move || {
                    o.call_once(f);
                    assert!(d.load(SeqCst), "returned before f finished");
                }));
                let (o, f, d) = (once.clone(), init.clone(), done.clone());
                hs.push(rt.spawn(async move {
                    o.call_once_async(|| async move { f() }).await;
                    assert!(d.load(SeqCst), "returned before f finished");
                }));
            }
            let ts: Vec<_> = (0..2)
                .map(|_| {
                    let (o, f, d) = (once.clone(), init.clone(), done.clone());
                    std::thread::spawn(move || {
                        o.call_once(f);
                        assert!(d.load(SeqCst), "returned before f finished");
                    })
                })
                .collect();
            for h in hs {
                rt.block_on(h).unwrap();
            }
            for t in ts {
                t.join().unwrap();
            }
            assert_eq!(runs.load(SeqCst), 1);
            assert!(once.is_completed());
        }
    });
}

/// Go: if `f` panics, `Do` considers it returned; `f` never runs again.
#[test]
fn once_panic_counts_as_done() {
    let once = Once::new();
    let r = catch_unwind(AssertUnwindSafe(|| {
        once.call_once(|| panic!("init failed"))
    }));
    assert!(r.is_err());
    assert!(once.is_completed());
    let mut ran = false;
    once.call_once(|| ran = true);
    assert!(!ran);
}

/// An async initialiser cancelled between polls does not complete the Once:
/// the next caller runs its own.
#[test]
fn once_async_cancelled_initialiser_resets() {
    let once = Once::new();
    let gate = common::Gate::new();
    {
        let mut f = pin!(once.call_once_async(|| gate.wait()));
        assert!(f
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        assert!(!once.is_completed());
    }
    assert!(!once.is_completed());
    let mut ran = 0;
    once.call_once(|| ran += 1);
    assert_eq!(ran, 1);
    assert!(once.is_completed());
}

// ---- Cond ---------------------------------------------------------------------

struct CondState {
    waiting: usize,
    tokens: usize,
    wakeups: usize,
}

fn queued(c: &Cond) -> String {
    format!("{c:?}")
}

/// `signal` wakes exactly one waiter, `broadcast` all the others: the total number
/// of returns from `wait` equals the number of waiters (a spurious or doubled
/// wake-up would make some waiter find no token and wait again, counting twice).
#[test]
fn cond_signal_and_broadcast_wake_exactly() {
    within("cond", || {
        let rt = rt(2);
        const W: usize = 6;
        let pair = Arc::new((
            Mutex::new(CondState {
                waiting: 0,
                tokens: 0,
                wakeups: 0,
            }),
            Cond::new(),
        ));
        let mut hs = Vec::new();
        for i in 0..W {
            let p = pair.clone();
            if i % 2 == 0 {
                hs.push(rt.go(move || {
                    let mut g = p.0.lock();
                    g.waiting += 1;
                    loop {
                        g = p.1.wait(g);
                        g.wakeups += 1;
                        if g.tokens > 0 {
                            g.tokens -= 1;
                            break;
                        }
                    }
                }));
            } else {
                hs.push(rt.spawn(async move {
                    let mut g = p.0.lock_async().await;
                    g.waiting += 1;
                    loop {
                        g = p.1.wait_async(g).await;
                        g.wakeups += 1;
                        if g.tokens > 0 {
                            g.tokens -= 1;
                            break;
                        }
                    }
                }));
            }
        }
        // A waiter counts itself under the mutex and queues before releasing it.
        while pair.0.lock().waiting < W {
            std::thread::yield_now();
        }
        assert_eq!(queued(&pair.1), format!("Cond {{ waiters: {W} }}"));
        {
            let mut g = pair.0.lock();
            g.tokens += 1;
            pair.1.signal();
        }
        assert_eq!(queued(&pair.1), format!("Cond {{ waiters: {} }}", W - 1));
        while pair.0.lock().wakeups < 1 {
            std::thread::yield_now();
        }
        {
            let mut g = pair.0.lock();
            g.tokens += W - 1;
            pair.1.broadcast();
        }
        assert_eq!(queued(&pair.1), "Cond { waiters: 0 }");
        for h in hs {
            rt.block_on(h).unwrap();
        }
        let g = pair.0.lock();
        assert_eq!((g.wakeups, g.tokens), (W, 0));
    });
}

/// A notified waiter that is dropped passes the signal on; a queued one leaves.
#[test]
fn cond_dropped_waiter_passes_the_signal_on() {
    let m = Mutex::new(());
    let c = Cond::new();
    let (c1, w1) = counter();
    let (c2, w2) = counter();
    let mut f1 = c.wait_async(m.lock());
    assert!(poll(&mut f1, &w1).is_pending());
    assert!(!m.is_locked(), "wait released the mutex");
    let mut f2 = c.wait_async(m.lock());
    assert!(poll(&mut f2, &w2).is_pending());
    c.signal();
    assert_eq!((woken(&c1), woken(&c2)), (1, 0));
    drop(f1);
    assert_eq!(woken(&c2), 1, "signal swallowed by a dropped waiter");
    let g = match poll(&mut f2, &w2) {
        Poll::Ready(g) => g,
        Poll::Pending => panic!("not re-locked"),
    };
    assert!(m.is_locked());
    drop(g);
    // A queued waiter that is dropped just leaves; the next signal finds no one.
    let mut f3 = c.wait_async(m.lock());
    assert!(poll(&mut f3, Waker::noop()).is_pending());
    drop(f3);
    assert_eq!(queued(&c), "Cond { waiters: 0 }");
}

// ---- Semaphore ------------------------------------------------------------------

/// x/sync's rule: a big waiter at the head is not overtaken by small ones.
#[test]
fn semaphore_weighted_fifo() {
    let s = Semaphore::new(10);
    let (ca, wa) = counter();
    let (cb, wb) = counter();
    s.acquire(8);
    let mut a = s.acquire_async(5);
    assert!(poll(&mut a, &wa).is_pending());
    let mut b = s.acquire_async(1);
    assert!(
        poll(&mut b, &wb).is_pending(),
        "1 fits, but must queue behind 5"
    );
    assert!(!s.try_acquire(1), "try_acquire must not jump the queue");
    s.release(4); // 6 free: a (5) then b (1)
    assert_eq!((woken(&ca), woken(&cb)), (1, 1));
    assert!(poll(&mut a, &wa).is_ready());
    assert!(poll(&mut b, &wb).is_ready());
    assert_eq!(s.available(), 0);
    s.release(10);
    assert_eq!(s.available(), 10);
    let p = s.acquire_permit(7);
    assert_eq!(p.num_permits(), 7);
    assert!(s.try_acquire_permit(4).is_none());
    drop(p);
    assert_eq!(s.available(), 10);
}

/// Cancel safety: a granted-but-dropped waiter gives its permits back to the next
/// ones; a dropped head waiter lets the smaller ones behind it in.
#[test]
fn semaphore_cancel_safety() {
    let s = Semaphore::new(4);
    let w = Waker::noop();
    s.acquire(4);
    let mut a = s.acquire_async(3);
    assert!(poll(&mut a, w).is_pending());
    let (cb, wb) = counter();
    let mut b = s.acquire_async(2);
    assert!(poll(&mut b, &wb).is_pending());
    s.release(3); // a granted (3 held by a, 1 by us)
    assert_eq!(woken(&cb), 0);
    drop(a); // gives back 3: b (2) fits
    assert_eq!(woken(&cb), 1);
    assert!(poll(&mut b, &wb).is_ready());
    assert_eq!(s.available(), 1);
    // Head waiter (4) dropped while queued: the one behind (1) fits now.
    let mut big = s.acquire_async(4);
    assert!(poll(&mut big, w).is_pending());
    let (cs, ws) = counter();
    let mut small = s.acquire_async(1);
    assert!(poll(&mut small, &ws).is_pending());
    drop(big);
    assert_eq!(woken(&cs), 1);
    assert!(poll(&mut small, &ws).is_ready());
    s.release(4);
    assert_eq!(s.available(), 4);
}

#[test]
#[should_panic(expected = "cannot acquire 5 permits from a semaphore of size 4")]
fn semaphore_acquire_more_than_size_panics() {
    Semaphore::new(4).acquire(5);
}

#[test]
#[should_panic(expected = "released 2 permits but only 1 are held")]
fn semaphore_release_more_than_held_panics() {
    let s = Semaphore::new(4);
    s.acquire(1);
    s.release(2);
}

/// Goroutines, tasks and threads with weights 1..=3 on a size-4 semaphore: the
/// weight in use never exceeds 4.
#[test]
fn semaphore_mixed_callers() {
    within("semaphore mixed", || {
        let rt = rt(2);
        const N: usize = 500;
        let s = Arc::new(Semaphore::new(4));
        let in_use = Arc::new(AtomicUsize::new(0));
        let check = |in_use: &AtomicUsize, n: usize| {
            let now = in_use.fetch_add(n, SeqCst) + n;
            assert!(now <= 4, "{now} permits in use");
            in_use.fetch_sub(n, SeqCst);
        };
        let mut hs = Vec::new();
        for i in 0..3 {
            let (s2, u) = (s.clone(), in_use.clone());
            hs.push(rt.go(move || {
                for k in 0..N {
                    let n = (i + k) % 3 + 1;
                    s2.acquire(n);
                    check(&u, n);
                    if k % 20 == 0 {
                        gosched::yield_now();
                    }
                    s2.release(n);
                }
            }));
            let (s2, u) = (s.clone(), in_use.clone());
            hs.push(rt.spawn(async move {
                for k in 0..N {
                    let n = (i + k + 1) % 3 + 1;
                    let p = s2.acquire_permit_async(n).await;
                    check(&u, n);
                    drop(p);
                }
            }));
        }
        let ts: Vec<_> = (0..2)
            .map(|i| {
                let (s2, u) = (s.clone(), in_use.clone());
                std::thread::spawn(move || {
                    for k in 0..N {
                        let n = (i + k) % 3 + 1;
                        let _p = s2.acquire_permit(n);
                        check(&u, n);
                    }
                })
            })
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(s.available(), 4);
    });
}

/// The blocking forms refuse to block an async task's M.
#[test]
fn blocking_forms_panic_inside_async_tasks() {
    let rt = rt(1);
    let m = Arc::new(Mutex::new(()));
    let g = m.lock();
    let m2 = m.clone();
    let r = rt.block_on(rt.spawn(async move {
        let _g = m2.lock();
    }));
    assert!(
        r.is_err(),
        "lock() inside an async task must panic, not block"
    );
    drop(g);
}

/// Guards are `Send` (not tied to an OS thread) and every future can be held by
/// a spawned task.
#[test]
fn types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Mutex<Vec<u8>>>();
    send_sync::<gosched::sync::MutexGuard<'static, Vec<u8>>>();
    send_sync::<RwLock<Vec<u8>>>();
    send_sync::<gosched::sync::RwLockReadGuard<'static, Vec<u8>>>();
    send_sync::<gosched::sync::RwLockWriteGuard<'static, Vec<u8>>>();
    send_sync::<WaitGroup>();
    send_sync::<Once>();
    send_sync::<Cond>();
    send_sync::<Semaphore>();
    send_sync::<gosched::sync::SemaphorePermit<'static>>();
    send::<gosched::sync::MutexLockFuture<'static, Vec<u8>>>();
    send::<gosched::sync::RwLockReadFuture<'static, Vec<u8>>>();
    send::<gosched::sync::RwLockWriteFuture<'static, Vec<u8>>>();
    send::<gosched::sync::CondWaitFuture<'static, 'static, Vec<u8>>>();
    send::<gosched::sync::SemaphoreAcquireFuture<'static>>();
    send::<gosched::sync::WaitGroupFuture<'static>>();
    // A `Mutex` of a `Send`-only type is still shareable (as std's).
    send_sync::<Mutex<std::cell::Cell<u8>>>();
}
