//! `gosched::pool`: what every ants test asserts (ported to our API), ants'
//! regressions (#113, #146, #358, #374), fasthttp's WorkerPool tests, and the
//! extras (results, wait, cancellation, timeouts, async submit, stats).
//!
//! Tasks that must stay busy wait on a gosched channel, so "busy" is exact.
//! Sleeps appear only where time is the subject (expiry), with wide margins;
//! everything that could hang runs under `within`, which fails the test after
//! a deadline instead.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use gosched::chan::Chan;
use gosched::pool::{
    Builder, CancelToken, LoadBalancing, Logger, MultiPool, MultiPoolWithFunc, Pool, PoolError,
    PoolWithFunc, WorkerPool,
};

const DEADLINE: Duration = Duration::from_secs(60);

fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    common::within(what, DEADLINE, f)
}

/// Poll `cond` until it holds (time is the subject: purges, lazy exits), or
/// fail after `limit`.
fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A channel that keeps tasks busy until `release`.
fn gate() -> Chan<()> {
    gosched::chan::<()>(0)
}

fn busy(g: &Chan<()>) -> impl FnOnce() + Send + 'static {
    let g = g.clone();
    move || {
        let _ = g.recv();
    }
}

/// A logger that keeps what it is told.
#[derive(Clone, Default)]
struct Keep(Arc<Mutex<Vec<String>>>);

impl Logger for Keep {
    fn log(&self, msg: std::fmt::Arguments<'_>) {
        self.0.lock().unwrap().push(msg.to_string());
    }
}

// ---- The example: 0..999 through a cap-10 pool ---------------------------------

fn sum_through_pool(pool: &Pool) -> usize {
    let sum = Arc::new(AtomicUsize::new(0));
    for i in 0..1000 {
        let sum = Arc::clone(&sum);
        pool.submit(move || {
            sum.fetch_add(i, Relaxed);
        })
        .unwrap();
    }
    pool.wait();
    sum.load(Relaxed)
}

#[test]
fn example_sums_through_every_pool_kind() {
    within("example", || {
        let pool = Pool::new(10).unwrap();
        assert_eq!(sum_through_pool(&pool), 499_500);
        assert!(pool.running() <= 10);

        let sum = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&sum);
        let pf = PoolWithFunc::new(10, move |i: usize| {
            s.fetch_add(i, Relaxed);
        })
        .unwrap();
        for i in 0..1000 {
            pf.invoke(i).unwrap();
        }
        pf.wait();
        assert_eq!(sum.load(Relaxed), 499_500);

        for lb in [LoadBalancing::RoundRobin, LoadBalancing::LeastTasks] {
            let mp = MultiPool::new(10, 5, lb).unwrap();
            let sum = Arc::new(AtomicUsize::new(0));
            for i in 0..1000 {
                let sum = Arc::clone(&sum);
                mp.submit(move || {
                    sum.fetch_add(i, Relaxed);
                })
                .unwrap();
            }
            mp.wait();
            assert_eq!(sum.load(Relaxed), 499_500, "{lb:?}");

            let sum = Arc::new(AtomicUsize::new(0));
            let s = Arc::clone(&sum);
            let mpf = MultiPoolWithFunc::new(
                10,
                5,
                move |i: usize| {
                    s.fetch_add(i, Relaxed);
                },
                lb,
            )
            .unwrap();
            for i in 0..1000 {
                mpf.invoke(i).unwrap();
            }
            mpf.wait();
            assert_eq!(sum.load(Relaxed), 499_500, "{lb:?}");
        }
    });
}

// ---- Waiting submitters (TestAntsPoolWaitToGetWorker) -------------------------

#[test]
fn blocked_submitters_complete_every_task() {
    within("wait to get worker", || {
        for prealloc in [false, true] {
            let pool = Pool::builder()
                .capacity(50)
                .prealloc(prealloc)
                .build()
                .unwrap();
            let done = Arc::new(AtomicUsize::new(0));
            // Four submitters (plain threads and goroutines) race for 50 workers.
            let mut hs = Vec::new();
            for k in 0..4 {
                let pool = pool.clone();
                let done = Arc::clone(&done);
                let work = move || {
                    for _ in 0..5_000 {
                        let done = Arc::clone(&done);
                        pool.submit(move || {
                            gosched::yield_now();
                            done.fetch_add(1, Relaxed);
                        })
                        .unwrap();
                    }
                };
                if k % 2 == 0 {
                    hs.push(std::thread::spawn(work));
                } else {
                    let h = gosched::go(work);
                    hs.push(std::thread::spawn(move || h.join().unwrap()));
                }
            }
            for h in hs {
                h.join().unwrap();
            }
            pool.wait();
            assert_eq!(done.load(Relaxed), 20_000, "prealloc {prealloc}");
            assert!(pool.running() <= 50);
            let st = pool.stats();
            assert_eq!(st.submitted, 20_000);
            assert_eq!(st.completed, 20_000);
            assert!(
                st.waited > 0,
                "200 tasks per worker: submitters had to wait"
            );
        }
    });
}

// ---- Panics --------------------------------------------------------------------

#[test]
fn panic_handler_gets_each_panic_once_and_the_pool_goes_on() {
    within("panic handler", || {
        for prealloc in [false, true] {
            let caught = Arc::new(AtomicUsize::new(0));
            let c = Arc::clone(&caught);
            let pool = Pool::builder()
                .capacity(10)
                .prealloc(prealloc)
                .panic_handler(move |p| {
                    assert_eq!(p.downcast_ref::<&str>(), Some(&"Oops!"));
                    c.fetch_add(1, Relaxed);
                })
                .build()
                .unwrap();
            pool.submit(|| panic!("Oops!")).unwrap();
            pool.wait();
            assert_eq!(
                caught.load(Relaxed),
                1,
                "the handler ran before wait() returned"
            );
            // The worker survived and serves the next task.
            let (tx, rx) = mpsc::channel();
            pool.submit(move || tx.send(7).unwrap()).unwrap();
            assert_eq!(rx.recv().unwrap(), 7);
            pool.wait();
            assert_eq!(pool.running(), 1, "the panicking worker was reused");
            assert_eq!(pool.stats().panicked, 1);

            let c = Arc::clone(&caught);
            let pf = Builder::new()
                .capacity(10)
                .prealloc(prealloc)
                .panic_handler(move |_| {
                    c.fetch_add(1, Relaxed);
                })
                .build_with_func(|n: i32| {
                    if n < 0 {
                        panic!("negative");
                    }
                })
                .unwrap();
            pf.invoke(-1).unwrap();
            pf.wait();
            assert_eq!(caught.load(Relaxed), 2);
        }
    });
}

#[test]
fn panic_without_handler_is_logged_once_and_does_not_crash() {
    within("panic without handler", || {
        let log = Keep::default();
        let pool = Pool::builder()
            .capacity(2)
            .logger(log.clone())
            .build()
            .unwrap();
        pool.submit(|| panic!("boom")).unwrap();
        pool.wait();
        let lines = log.0.lock().unwrap().clone();
        assert_eq!(lines.len(), 1, "one line per panic: {lines:?}");
        assert!(lines[0].contains("boom"), "{lines:?}");
        assert_eq!(sum_through_pool(&pool), 499_500);
    });
}

/// ants #146: every worker panicked while submitters waited; they must not
/// stay stuck.
#[test]
fn panicking_workers_do_not_strand_blocked_submitters() {
    within("#146", || {
        let pool = Pool::builder()
            .capacity(2)
            .panic_handler(|_| {})
            .build()
            .unwrap();
        let g = gate();
        for _ in 0..2 {
            let g = g.clone();
            pool.submit(move || {
                let _ = g.recv();
                panic!("worker dies");
            })
            .unwrap();
        }
        let done = Arc::new(AtomicUsize::new(0));
        let mut subs = Vec::new();
        for _ in 0..4 {
            let pool = pool.clone();
            let done = Arc::clone(&done);
            subs.push(std::thread::spawn(move || {
                pool.submit(move || {
                    done.fetch_add(1, Relaxed);
                })
                .unwrap()
            }));
        }
        eventually("4 submitters blocked", DEADLINE, || pool.waiting() == 4);
        g.close().unwrap();
        for s in subs {
            s.join().unwrap();
        }
        pool.wait();
        assert_eq!(done.load(Relaxed), 4);
    });
}

// ---- Purge -----------------------------------------------------------------------

#[test]
fn idle_workers_are_purged_after_the_expiry() {
    within("purge", || {
        let expiry = Duration::from_millis(100);
        let pool = Pool::builder()
            .capacity(500)
            .expiry(expiry)
            .build()
            .unwrap();
        let g = gate();
        for _ in 0..500 {
            pool.submit(busy(&g)).unwrap();
        }
        assert_eq!(pool.running(), 500);
        assert_eq!(pool.free(), 0);
        g.close().unwrap();
        pool.wait();
        assert_eq!(pool.running(), 500, "idle workers stay until they expire");
        eventually("every idle worker purged", Duration::from_secs(20), || {
            pool.running() == 0
        });
        assert_eq!(pool.stats().purged, 500);
        // And the pool still works.
        assert_eq!(sum_through_pool(&pool), 499_500);

        let pf = Builder::new()
            .capacity(10)
            .prealloc(true)
            .expiry(expiry)
            .build_with_func(|_: ()| {})
            .unwrap();
        pf.invoke(()).unwrap();
        pf.wait();
        eventually("preallocated pool purged", Duration::from_secs(20), || {
            pf.running() == 0
        });
    });
}

#[test]
fn disable_purge_keeps_workers_resident() {
    within("disable purge", || {
        const N: usize = 8;
        let expiry = Duration::from_millis(50);
        let b = || {
            Builder::new()
                .capacity(N as isize)
                .disable_purge(true)
                .expiry(expiry)
        };
        // The same checks on both pool kinds (their methods share names).
        macro_rules! check {
            ($pool:expr, $submit:expr) => {{
                let pool = $pool;
                let g = gate();
                for _ in 0..N {
                    $submit(&pool, &g);
                }
                g.close().unwrap();
                pool.wait();
                // Time is the subject: 3x the expiry passes, nothing is purged.
                std::thread::sleep(expiry * 3);
                assert_eq!(pool.running(), N);
                assert_eq!(pool.free(), 0);
                pool.release_timeout(Duration::from_secs(10)).unwrap();
                assert_eq!(pool.running(), 0);
                assert_eq!(pool.free(), N as isize);
            }};
        }
        check!(b().build().unwrap(), |p: &Pool, g: &Chan<()>| p
            .submit(busy(g))
            .unwrap());
        check!(
            b().build_with_func(|g: Chan<()>| {
                let _ = g.recv();
            })
            .unwrap(),
            |p: &PoolWithFunc<Chan<()>>, g: &Chan<()>| p.invoke(g.clone()).unwrap()
        );
    });
}

// ---- Non-blocking and max blocking ---------------------------------------------------

#[test]
fn nonblocking_pool_refuses_when_full() {
    within("nonblocking", || {
        let pool = Pool::builder()
            .capacity(10)
            .nonblocking(true)
            .build()
            .unwrap();
        let g = gate();
        for _ in 0..10 {
            pool.submit(busy(&g)).unwrap();
        }
        assert_eq!(pool.submit(|| {}), Err(PoolError::Overload));
        assert_eq!(pool.try_submit(|| {}), Err(PoolError::Overload));
        assert_eq!(pool.waiting(), 0, "a non-blocking submit never waits");
        g.close().unwrap();
        pool.wait();
        pool.submit(|| {}).unwrap();
        assert_eq!(pool.stats().rejected, 2);

        let pf = Builder::new()
            .capacity(1)
            .nonblocking(true)
            .build_with_func(|g: Chan<()>| {
                let _ = g.recv();
            })
            .unwrap();
        let g = gate();
        pf.invoke(g.clone()).unwrap();
        assert_eq!(pf.invoke(g.clone()), Err(PoolError::Overload));
        g.close().unwrap();
        pf.wait();
        pf.invoke(g).unwrap();
    });
}

#[test]
fn max_blocking_refuses_the_submitter_beyond_the_limit() {
    within("max blocking", || {
        let pool = Pool::builder().capacity(1).max_blocking(1).build().unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let p = pool.clone();
        let blocked = std::thread::spawn(move || p.submit(|| {}));
        eventually("one submitter blocked", DEADLINE, || pool.waiting() == 1);
        let t = Instant::now();
        assert_eq!(pool.submit(|| {}), Err(PoolError::Overload));
        assert!(t.elapsed() < Duration::from_secs(5), "refused at once");
        g.close().unwrap();
        assert_eq!(
            blocked.join().unwrap(),
            Ok(()),
            "the blocked submit went through"
        );
        pool.wait();
    });
}

// ---- Release, reboot ------------------------------------------------------------------

#[test]
fn reboot_reopens_a_released_pool() {
    within("reboot", || {
        for prealloc in [false, true] {
            // ants #358: Reboot of a preallocated pool.
            let pool = Pool::builder()
                .capacity(10)
                .prealloc(prealloc)
                .build()
                .unwrap();
            pool.reboot().unwrap(); // on an open pool: nothing
            assert_eq!(sum_through_pool(&pool), 499_500);
            pool.release_timeout(Duration::from_secs(10)).unwrap();
            assert!(pool.is_closed());
            assert_eq!(pool.submit(|| {}), Err(PoolError::Closed));
            assert_eq!(
                pool.release_timeout(Duration::from_secs(1)),
                Err(PoolError::Closed),
                "a second release_timeout says it is closed"
            );
            pool.reboot().unwrap();
            assert!(!pool.is_closed());
            assert_eq!(sum_through_pool(&pool), 499_500, "prealloc {prealloc}");
        }
        let pf = PoolWithFunc::new(10, |_: u8| {}).unwrap();
        pf.release_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(pf.invoke(1), Err(PoolError::Closed));
        pf.reboot().unwrap();
        pf.invoke(1).unwrap();
        pf.wait();
    });
}

#[test]
fn release_unblocks_waiting_submitters() {
    within("release while submitters wait", || {
        let pool = Pool::new(1).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let mut subs = Vec::new();
        for k in 0..2 {
            let pool = pool.clone();
            let work = move || {
                let mut last = Ok(());
                for _ in 0..30 {
                    last = pool.submit(|| {});
                    if last.is_err() {
                        break;
                    }
                }
                last
            };
            if k == 0 {
                subs.push(std::thread::spawn(work));
            } else {
                let h = gosched::go(work);
                subs.push(std::thread::spawn(move || h.join().unwrap()));
            }
        }
        eventually("both submitters blocked", DEADLINE, || pool.waiting() == 2);
        pool.release();
        for s in subs {
            assert_eq!(s.join().unwrap(), Err(PoolError::Closed));
        }
        assert_eq!(pool.waiting(), 0);
        g.close().unwrap();
    });
}

#[test]
fn release_timeout_waits_for_busy_workers_or_times_out() {
    within("release timeout", || {
        let pool = Pool::new(10).unwrap();
        for _ in 0..5 {
            pool.submit(|| gosched::time::sleep(Duration::from_millis(100)))
                .unwrap();
        }
        pool.release_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            pool.running(),
            0,
            "every worker exited (ants #113: none went back idle)"
        );

        let pool = Pool::new(10).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        assert_eq!(
            pool.release_timeout(Duration::from_millis(50)),
            Err(PoolError::Timeout)
        );
        g.close().unwrap();
        eventually("the busy worker exits after its task", DEADLINE, || {
            pool.running() == 0
        });
    });
}

#[test]
fn dropping_the_pool_releases_its_workers() {
    within("drop", || {
        let rt = common::rt(2);
        let live = rt.block_on(async {
            let before = gosched::runtime::num_goroutine();
            {
                let pool = Pool::builder()
                    .capacity(8)
                    .disable_purge(true)
                    .build()
                    .unwrap();
                let g = gate();
                for _ in 0..8 {
                    pool.submit_async(busy(&g)).await.unwrap();
                }
                g.close().unwrap();
                pool.wait_async().await;
                assert_eq!(pool.running(), 8);
            }
            (before, gosched::runtime::num_goroutine())
        });
        let (before, _) = live;
        eventually("the 8 workers exited", DEADLINE, || {
            rt.stats().live <= before
        });
    });
}

/// A runtime shut down under a pool: its workers are unwound (not caught
/// as task panics, which would keep them looping on a dead runtime), and the
/// pool's accounts stay right.
#[test]
fn runtime_shutdown_unwinds_workers_without_reporting_a_panic() {
    within("shutdown under a pool", || {
        let log = Keep::default();
        let rt = common::rt(2);
        let g = gate();
        let pool = rt.block_on({
            let log = log.clone();
            let g = g.clone();
            async move {
                let pool = Pool::builder().capacity(4).logger(log).build().unwrap();
                for _ in 0..4 {
                    pool.submit_async(busy(&g)).await.unwrap();
                }
                pool
            }
        });
        assert_eq!(pool.running(), 4);
        assert!(
            rt.shutdown_timeout(Duration::from_secs(20)),
            "the runtime shut down"
        );
        assert_eq!(log.0.lock().unwrap().len(), 0, "no task panic was reported");
        assert_eq!(
            pool.running(),
            0,
            "the unwound workers gave their slots back"
        );
        pool.wait(); // the unwound tasks count as finished
        pool.release_timeout(Duration::from_secs(5)).unwrap();
        drop(g);
    });
}

// ---- Unlimited pools ---------------------------------------------------------------------

#[test]
fn unlimited_pool_allows_nested_submits() {
    within("infinite pool", || {
        let pool = Pool::new(-1).unwrap();
        let g = gate();
        let (tx, rx) = mpsc::channel();
        let inner = pool.clone();
        let g2 = g.clone();
        pool.submit(move || {
            inner.submit(busy(&g2)).unwrap();
            tx.send(()).unwrap();
            let _ = g2.recv();
        })
        .unwrap();
        rx.recv().unwrap();
        assert_eq!(pool.running(), 2);
        assert_eq!(pool.free(), -1);
        assert_eq!(pool.cap(), -1);
        pool.tune(10);
        assert_eq!(pool.cap(), -1, "tune does not limit an unlimited pool");
        g.close().unwrap();
        pool.wait();
        assert_eq!(
            Pool::builder().capacity(-1).prealloc(true).build().err(),
            Some(PoolError::InvalidPreAllocSize)
        );
    });
}

// ---- Tune ----------------------------------------------------------------------------------

#[test]
fn tune_up_lets_blocked_submitters_through() {
    within("tune scale up", || {
        let pool = Pool::new(2).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        pool.submit(busy(&g)).unwrap();
        pool.tune(3);
        assert_eq!(pool.cap(), 3);
        pool.submit(busy(&g)).unwrap();
        assert_eq!(pool.running(), 3);
        let mut subs = Vec::new();
        for _ in 0..5 {
            let pool = pool.clone();
            let g = g.clone();
            subs.push(std::thread::spawn(move || pool.submit(busy(&g))));
        }
        eventually("five submitters blocked", DEADLINE, || pool.waiting() == 5);
        pool.tune(8);
        for s in subs {
            s.join().unwrap().unwrap();
        }
        assert_eq!(pool.running(), 8);
        assert_eq!(pool.waiting(), 0);
        g.close().unwrap();
        pool.wait();
        // A preallocated pool cannot be tuned.
        let pre = Pool::builder().capacity(4).prealloc(true).build().unwrap();
        pre.tune(8);
        assert_eq!(pre.cap(), 4);
    });
}

/// ants #374: `running` exceeded `cap` when submits raced with tune. Both
/// Ps busy: submitters on goroutines and threads, a tuner flipping the cap.
#[test]
fn running_never_exceeds_cap_while_tune_races() {
    within("#374", || {
        const HI: usize = 12;
        let pool = Pool::new(4).unwrap();
        let concurrent = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tuner = {
            let pool = pool.clone();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut big = false;
                while !stop.load(Relaxed) {
                    pool.tune(if big { HI as isize } else { 4 });
                    big = !big;
                    assert!(pool.running() <= HI, "running {} > {HI}", pool.running());
                    std::thread::yield_now();
                }
            })
        };
        let mut subs = Vec::new();
        for k in 0..4 {
            let pool = pool.clone();
            let concurrent = Arc::clone(&concurrent);
            let peak = Arc::clone(&peak);
            let work = move || {
                for _ in 0..3_000 {
                    let concurrent = Arc::clone(&concurrent);
                    let peak = Arc::clone(&peak);
                    pool.submit(move || {
                        let now = concurrent.fetch_add(1, SeqCst) + 1;
                        peak.fetch_max(now, SeqCst);
                        gosched::yield_now();
                        concurrent.fetch_sub(1, SeqCst);
                    })
                    .unwrap();
                }
            };
            if k % 2 == 0 {
                subs.push(std::thread::spawn(work));
            } else {
                let h = gosched::go(work);
                subs.push(std::thread::spawn(move || h.join().unwrap()));
            }
        }
        for s in subs {
            s.join().unwrap();
        }
        stop.store(true, Relaxed);
        tuner.join().unwrap();
        pool.wait();
        assert!(
            peak.load(SeqCst) <= HI,
            "peak {} tasks at once",
            peak.load(SeqCst)
        );
        assert!(pool.running() <= HI);
        assert_eq!(pool.stats().completed, 12_000);
    });
}

// ---- Errors ----------------------------------------------------------------------------------

#[test]
fn error_sweep() {
    within("error sweep", || {
        for cap in [10, -1] {
            assert_eq!(
                Pool::builder()
                    .capacity(cap)
                    .expiry_secs(-1.0)
                    .build()
                    .err(),
                Some(PoolError::InvalidExpiry)
            );
            assert_eq!(
                Builder::new()
                    .capacity(cap)
                    .expiry_secs(-1.0)
                    .build_with_func(|_: u8| {})
                    .err(),
                Some(PoolError::InvalidExpiry)
            );
            // Allowed when the purge is off (ants' rule).
            assert!(Pool::builder()
                .capacity(cap)
                .expiry_secs(-1.0)
                .disable_purge(true)
                .build()
                .is_ok());
        }
        assert_eq!(
            Builder::new()
                .capacity(10)
                .build_with_optional_func::<u8, fn(u8)>(None)
                .err(),
            Some(PoolError::LackPoolFunc)
        );
        // Every error has a message that says what to do.
        for e in [
            PoolError::Closed,
            PoolError::Overload,
            PoolError::Timeout,
            PoolError::Cancelled,
            PoolError::InvalidExpiry,
            PoolError::LackPoolFunc,
            PoolError::InvalidPreAllocSize,
            PoolError::InvalidPoolIndex,
            PoolError::InvalidLoadBalancingStrategy,
            PoolError::InvalidMultiPoolSize,
        ] {
            assert!(e.to_string().len() > 10, "{e:?}");
        }
        // Many submits with tune going up and down, on every kind.
        let pool = Pool::new(10).unwrap();
        let pre = Pool::builder().capacity(10).prealloc(true).build().unwrap();
        let pf = PoolWithFunc::new(10, |_: usize| {}).unwrap();
        let n = Arc::new(AtomicUsize::new(0));
        for i in 0..20_000usize {
            let n1 = Arc::clone(&n);
            pool.submit(move || {
                n1.fetch_add(1, Relaxed);
            })
            .unwrap();
            let n2 = Arc::clone(&n);
            pre.submit(move || {
                n2.fetch_add(1, Relaxed);
            })
            .unwrap();
            pf.invoke(i).unwrap();
            if i % 1000 == 0 {
                let c = if i % 2000 == 0 { 20 } else { 5 };
                pool.tune(c);
                pre.tune(c);
                pf.tune(c);
            }
        }
        pool.wait();
        pre.wait();
        pf.wait();
        assert_eq!(n.load(Relaxed), 40_000);
        pool.release();
        assert_eq!(pool.submit(|| {}), Err(PoolError::Closed));
    });
}

// ---- MultiPool -----------------------------------------------------------------------------

#[test]
fn multi_pool_constructor_errors() {
    assert_eq!(
        MultiPool::new(-1, 10, LoadBalancing::RoundRobin).err(),
        Some(PoolError::InvalidMultiPoolSize)
    );
    assert_eq!(
        LoadBalancing::try_from(8).err(),
        Some(PoolError::InvalidLoadBalancingStrategy)
    );
    assert_eq!(
        MultiPool::with_builder(
            10,
            Builder::new().capacity(5).expiry_secs(-1.0),
            LoadBalancing::RoundRobin
        )
        .err(),
        Some(PoolError::InvalidExpiry)
    );
    assert_eq!(
        MultiPoolWithFunc::new(0, 10, |_: u8| {}, LoadBalancing::LeastTasks).err(),
        Some(PoolError::InvalidMultiPoolSize)
    );
}

#[test]
fn multi_pool_counts_release_and_reboot() {
    within("multi pool", || {
        for lb in [LoadBalancing::RoundRobin, LoadBalancing::LeastTasks] {
            let mp = MultiPool::new(10, 5, lb).unwrap();
            for round in 0..2 {
                let g = gate();
                for _ in 0..50 {
                    mp.submit(busy(&g)).unwrap();
                }
                assert_eq!(mp.waiting(), 0, "{lb:?} round {round}");
                assert_eq!(mp.running(), 50);
                assert_eq!(mp.free(), 0);
                assert_eq!(mp.cap(), 50);
                for i in 0..10 {
                    assert_eq!(mp.running_by_index(i), Ok(5), "{lb:?} sub-pool {i}");
                    assert_eq!(mp.free_by_index(i), Ok(0));
                    assert_eq!(mp.waiting_by_index(i), Ok(0));
                }
                assert_eq!(mp.running_by_index(10), Err(PoolError::InvalidPoolIndex));
                assert_eq!(mp.free_by_index(11), Err(PoolError::InvalidPoolIndex));
                assert_eq!(
                    mp.waiting_by_index(usize::MAX),
                    Err(PoolError::InvalidPoolIndex)
                );
                g.close().unwrap();
                mp.release_timeout(Duration::from_secs(10)).unwrap();
                assert_eq!(
                    mp.release_timeout(Duration::from_secs(1)),
                    Err(PoolError::Closed)
                );
                assert_eq!(mp.submit(|| {}), Err(PoolError::Closed));
                assert!(mp.is_closed());
                mp.reboot().unwrap();
                assert!(!mp.is_closed());
            }
        }
        // With a function.
        let g = gate();
        let mpf = MultiPoolWithFunc::new(
            10,
            5,
            |g: Chan<()>| {
                let _ = g.recv();
            },
            LoadBalancing::RoundRobin,
        )
        .unwrap();
        for _ in 0..50 {
            mpf.invoke(g.clone()).unwrap();
        }
        assert_eq!(mpf.running(), 50);
        for i in 0..10 {
            assert_eq!(mpf.running_by_index(i), Ok(5));
        }
        g.close().unwrap();
        mpf.release_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(mpf.invoke(g), Err(PoolError::Closed));
    });
}

#[test]
fn multi_pool_round_robin_retries_an_overloaded_sub_pool() {
    within("round robin retry", || {
        let b = Builder::new().capacity(2).nonblocking(true);
        let mp = MultiPool::with_builder(2, b, LoadBalancing::RoundRobin).unwrap();
        let g = gate();
        mp.submit(busy(&g)).unwrap(); // sub-pool 0: the first pick
        assert_eq!(
            mp.running_by_index(0),
            Ok(1),
            "round robin starts at sub-pool 0"
        );
        mp.submit(|| {}).unwrap(); // sub-pool 1, done at once
        eventually("sub-pool 1's worker idle", DEADLINE, || {
            mp.stats().idle == 1
        });
        mp.submit(busy(&g)).unwrap(); // sub-pool 0, now full
        mp.submit(busy(&g)).unwrap(); // sub-pool 1, its idle worker
        assert_eq!(mp.running_by_index(0), Ok(2));
        assert_eq!(mp.running_by_index(1), Ok(1));
        // Sub-pool 0 again: full, so the submit retries on the least busy.
        mp.submit(busy(&g)).unwrap();
        assert_eq!(
            mp.running_by_index(1),
            Ok(2),
            "the retry went to sub-pool 1"
        );
        // Both full: the retry fails too.
        assert_eq!(mp.submit(|| {}), Err(PoolError::Overload));
        g.close().unwrap();
        mp.wait();
    });
}

// ---- Beyond ants -------------------------------------------------------------------------------

#[test]
fn submit_with_result_returns_values_and_panics() {
    within("results", || {
        let caught = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&caught);
        let pool = Pool::builder()
            .capacity(4)
            .panic_handler(move |_| {
                c.fetch_add(1, Relaxed);
            })
            .build()
            .unwrap();
        let hs: Vec<_> = (0..100u64)
            .map(|i| pool.submit_with_result(move || i * i).unwrap())
            .collect();
        let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, (0..100u64).map(|i| i * i).sum::<u64>());

        let h = pool
            .submit_with_result(|| -> u8 { panic!("in a result task") })
            .unwrap();
        let err = h.join().unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.panic_message(), Some("in a result task"));
        pool.wait();
        assert_eq!(
            caught.load(Relaxed),
            0,
            "the panic went to the handle, not the handler"
        );
        assert_eq!(pool.stats().panicked, 1);

        // A future on a pooled goroutine.
        let h = pool
            .submit_task(async {
                gosched::time::sleep_async(Duration::from_millis(1)).await;
                41 + 1
            })
            .unwrap();
        assert_eq!(h.join().unwrap(), 42);
    });
}

#[test]
fn wait_returns_only_when_every_task_has_finished() {
    within("wait", || {
        let pool = Pool::new(3).unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..30 {
            let done = Arc::clone(&done);
            pool.submit(move || {
                gosched::time::sleep(Duration::from_millis(2));
                done.fetch_add(1, SeqCst);
            })
            .unwrap();
        }
        pool.wait();
        assert_eq!(done.load(SeqCst), 30);
        // Waiting on an idle pool returns at once.
        pool.wait();
    });
}

#[test]
fn cancel_token_stops_a_blocked_submitter() {
    within("cancel blocked", || {
        let pool = Pool::new(1).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let token = CancelToken::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let (p, t, r) = (pool.clone(), token.clone(), Arc::clone(&ran));
        let sub = std::thread::spawn(move || {
            p.submit_with_cancel(
                move || {
                    r.fetch_add(1, Relaxed);
                },
                &t,
            )
        });
        eventually("submitter blocked", DEADLINE, || pool.waiting() == 1);
        token.cancel();
        assert_eq!(sub.join().unwrap(), Err(PoolError::Cancelled));
        assert_eq!(pool.waiting(), 0);
        // A token that has fired refuses at once.
        assert_eq!(
            pool.submit_with_cancel(|| {}, &token),
            Err(PoolError::Cancelled)
        );
        g.close().unwrap();
        pool.wait();
        assert_eq!(ran.load(Relaxed), 0);
        assert_eq!(pool.stats().cancelled, 2);
        // The pool is whole: the cancelled waiter gave nothing away.
        assert_eq!(sum_through_pool(&pool), 499_500);
    });
}

#[test]
fn cancel_token_skips_a_task_not_yet_started() {
    within("cancel before start", || {
        // One proc: the worker spawned for the task cannot start before the
        // submitting goroutine blocks, so the cancel lands in between.
        let rt = common::rt(1);
        rt.block_on(async {
            let h = gosched::go(|| {
                let pool = Pool::new(4).unwrap();
                let token = CancelToken::new();
                let h = pool.submit_with_result_cancel(|| 5, &token).unwrap();
                token.cancel();
                let r = h.join();
                pool.wait();
                (r.map_err(|e| e.is_cancelled()), pool.stats().cancelled)
            });
            assert_eq!(h.await.unwrap(), (Err(true), 1));
        });
    });
}

#[test]
fn submit_timeout_gives_up_and_leaves_nothing_behind() {
    within("submit timeout", || {
        let pool = Pool::new(1).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let t = Instant::now();
        assert_eq!(
            pool.submit_timeout(|| {}, Duration::from_millis(30)),
            Err(PoolError::Timeout)
        );
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert_eq!(pool.waiting(), 0);
        assert_eq!(pool.stats().timed_out, 1);
        g.close().unwrap();
        pool.wait();
        pool.submit_timeout(|| {}, Duration::from_secs(10)).unwrap();
        pool.wait();
        let pf = PoolWithFunc::new(1, |g: Chan<()>| {
            let _ = g.recv();
        })
        .unwrap();
        let g = gate();
        pf.invoke(g.clone()).unwrap();
        assert_eq!(
            pf.invoke_timeout(g.clone(), Duration::from_millis(10)),
            Err(PoolError::Timeout)
        );
        g.close().unwrap();
    });
}

/// Blocked submitters offer their tasks, and a reverting worker takes the
/// head one's and runs it itself. A timeout or a cancel racing that take
/// must come out one way or the other, never both: a submit that returned
/// `Ok` ran its task (or skipped it, cancelled, and counted it), one that
/// returned an error did not run it, and nothing ran twice. Workers are few
/// and tasks short, so nearly every submit waits and many timeouts land
/// while a worker takes the task.
#[test]
fn timeouts_and_cancels_racing_a_take_lose_nothing_and_run_nothing_twice() {
    within("offers racing timeouts and cancels", || {
        const SUBMITTERS: usize = 8;
        const EACH: usize = 1_500;
        let pool = Pool::new(2).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..SUBMITTERS)
            .map(|s| {
                let (pool, ran) = (pool.clone(), Arc::clone(&ran));
                gosched::go(move || {
                    let (mut ok, mut timed_out, mut cancelled) = (0, 0, 0);
                    for i in 0..EACH {
                        let r = Arc::clone(&ran);
                        let task = move || {
                            r.fetch_add(1, Relaxed);
                            for _ in 0..50 {
                                std::hint::spin_loop();
                            }
                        };
                        let res = if (s + i) % 2 == 0 {
                            // 0-19 µs: about a task's length.
                            let d = Duration::from_micros(((s * 7 + i * 13) % 20) as u64);
                            pool.submit_timeout(task, d)
                        } else {
                            // Cancelled by a goroutine racing this submit.
                            let token = CancelToken::new();
                            let t = token.clone();
                            gosched::go(move || t.cancel());
                            pool.submit_with_cancel(task, &token)
                        };
                        match res {
                            Ok(()) => ok += 1,
                            Err(PoolError::Timeout) => timed_out += 1,
                            Err(PoolError::Cancelled) => cancelled += 1,
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                    }
                    (ok, timed_out, cancelled)
                })
            })
            .collect();
        let (mut ok, mut timed_out, mut refused) = (0, 0, 0);
        for h in hs {
            let (o, t, c) = h.join().unwrap();
            ok += o;
            timed_out += t;
            refused += c;
        }
        pool.wait();
        let s = pool.stats();
        assert_eq!(ok + timed_out + refused, SUBMITTERS * EACH);
        assert_eq!(
            s.submitted as usize, ok,
            "every Ok was submitted, nothing else"
        );
        assert_eq!(s.timed_out as usize, timed_out);
        // `cancelled` counts refused submits and accepted tasks skipped
        // because their token fired before a worker started them.
        let skipped = s.cancelled as usize - refused;
        assert_eq!(
            ran.load(Relaxed) + skipped,
            ok,
            "each accepted task ran or was skipped, exactly once"
        );
        assert_eq!(s.completed as usize, ran.load(Relaxed));
        assert!(ok > 0 && timed_out + refused > 0, "both outcomes happened");
        assert_eq!(pool.waiting(), 0);
    });
}

/// "Spawning no faster than workers start" (pool/core.rs): with one P, a
/// goroutine submitting tasks that park would otherwise spawn a worker per
/// submit until the cap, none of them started (it holds the only P); held
/// back, it lets them start, they come back after their sleep and are reused,
/// and far fewer workers ever exist.
#[test]
fn a_submitter_does_not_spawn_far_ahead_of_workers_that_park() {
    within("spawn throttle", || {
        const CAP: usize = 4_000;
        let rt = gosched::Builder::new().procs(1).build().unwrap();
        let (running, completed) = rt
            .block_on(rt.go(|| {
                let pool = Pool::new(CAP as isize).unwrap();
                for _ in 0..3 * CAP {
                    pool.submit(|| gosched::time::sleep(Duration::from_millis(5)))
                        .unwrap();
                }
                pool.wait();
                (pool.running(), pool.stats().completed)
            }))
            .unwrap();
        assert_eq!(completed, 3 * CAP as u64);
        assert!(
            running < CAP * 3 / 4,
            "{running} workers for {CAP} at most: spawned ahead of starting"
        );
    });
}

/// ... but a pool whose tasks compute without parking does not hold its
/// submitter back: starting those workers sooner would not bring them back
/// sooner, and the submitter would wait for a round of them per yield.
#[test]
fn a_submitter_of_computing_tasks_is_not_held_back() {
    within("no throttle for computing tasks", || {
        const N: usize = 500;
        let rt = gosched::Builder::new().procs(1).build().unwrap();
        let done_before_return = rt
            .block_on(rt.go(|| {
                let pool = Pool::new(N as isize).unwrap();
                let done = Arc::new(AtomicUsize::new(0));
                for _ in 0..N {
                    let d = Arc::clone(&done);
                    pool.submit(move || {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(200) {
                            std::hint::spin_loop();
                        }
                        d.fetch_add(1, Relaxed);
                    })
                    .unwrap();
                }
                let before = done.load(Relaxed);
                pool.wait();
                assert_eq!(done.load(Relaxed), N);
                before
            }))
            .unwrap();
        // Until the first task finishes the pool assumes parking tasks (one
        // round of about 17 runs); held back throughout, nearly all N would
        // have run before the loop returned.
        assert!(
            done_before_return < N / 5,
            "{done_before_return} of {N} tasks ran while their submitter submitted"
        );
    });
}

#[test]
fn async_submitters_back_pressure_without_blocking_their_thread() {
    within("async submit", || {
        let rt = common::rt(2);
        let n = rt.block_on(async {
            let pool = Pool::new(2).unwrap();
            let done = Arc::new(AtomicUsize::new(0));
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let pool = pool.clone();
                let done = Arc::clone(&done);
                tasks.push(gosched::spawn(async move {
                    for _ in 0..50 {
                        let done = Arc::clone(&done);
                        pool.submit_async(move || {
                            gosched::time::sleep(Duration::from_micros(200));
                            done.fetch_add(1, Relaxed);
                        })
                        .await
                        .unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            pool.wait_async().await;
            assert!(pool.stats().waited > 0, "the async submitters had to wait");
            let h = pool.submit_task_async(async { 9 }).await.unwrap();
            assert_eq!(h.await.unwrap(), 9);
            let pf = PoolWithFunc::new(1, |_: u8| {}).unwrap();
            pf.invoke_async(1).await.unwrap();
            pf.wait_async().await;
            done.load(Relaxed)
        });
        assert_eq!(n, 400);
    });
}

#[test]
fn dropped_async_submit_passes_its_grant_on() {
    within("cancel-safe async submit", || {
        let rt = common::rt(2);
        rt.block_on(async {
            let pool = Pool::new(1).unwrap();
            let g = gate();
            pool.submit_async(busy(&g)).await.unwrap();
            // A submit that times out while queued (dropped future).
            let r =
                gosched::time::timeout(Duration::from_millis(20), pool.submit_async(|| {})).await;
            assert!(r.is_err());
            assert_eq!(pool.waiting(), 0);
            g.close().unwrap();
            pool.wait_async().await;
            // The worker came back: a submit gets it without waiting.
            pool.submit_async(|| {}).await.unwrap();
            pool.wait_async().await;
            assert_eq!(pool.running(), 1);
        });
    });
}

#[test]
fn a_submit_dropped_after_its_grant_gives_the_worker_back() {
    within("grant passed back", || {
        use std::future::Future;
        use std::task::{Context, Waker};
        let pool = Pool::new(1).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        {
            let mut fut = std::pin::pin!(pool.submit_async(move || {
                r.fetch_add(1, Relaxed);
            }));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            assert_eq!(pool.waiting(), 1);
            g.close().unwrap();
            // The finishing worker is handed to the queued submit...
            eventually("worker handed over", DEADLINE, || pool.waiting() == 0);
            // ... which is dropped without being polled again.
        }
        pool.wait();
        assert_eq!(ran.load(Relaxed), 0);
        assert_eq!(pool.stats().idle, 1, "the worker came back to the pool");
        assert_eq!(pool.running(), 1);
        pool.try_submit(|| {}).unwrap();
        pool.wait();
    });
}

#[test]
fn stats_add_up() {
    within("stats", || {
        let pool = Pool::builder()
            .capacity(2)
            .panic_handler(|_| {})
            .build()
            .unwrap();
        for i in 0..10 {
            pool.submit(move || {
                if i == 3 {
                    panic!("three");
                }
            })
            .unwrap();
        }
        pool.wait();
        let s = pool.stats();
        assert_eq!(s.submitted, 10);
        assert_eq!(s.completed, 10);
        assert_eq!(s.panicked, 1);
        assert_eq!(s.rejected, 0);
        assert!(s.running <= 2);
        assert_eq!(s.waiting, 0);
        assert_eq!(s.idle, s.running, "after wait every worker is idle");
        assert!(s.wait_p50 <= s.wait_p99);
    });
}

// ---- fasthttp's WorkerPool ---------------------------------------------------------------------

#[test]
fn worker_pool_start_stop_serial_and_concurrent() {
    within("start/stop", || {
        let wp = WorkerPool::new(|_: ()| {});
        for _ in 0..10 {
            wp.start().unwrap();
            assert!(wp.is_started());
            wp.stop();
            assert!(!wp.is_started());
        }
        let mut hs = Vec::new();
        for _ in 0..10 {
            hs.push(std::thread::spawn(|| {
                let wp = WorkerPool::new(|_: ()| {});
                wp.start().unwrap();
                assert!(wp.serve(()));
                wp.stop();
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
    });
}

#[test]
fn worker_pool_serves_up_to_max_workers_then_refuses() {
    within("max workers", || {
        for concurrent in [false, true] {
            let g = gate();
            let served = Arc::new(AtomicUsize::new(0));
            let s = Arc::clone(&served);
            let wp = WorkerPool::builder(move |g: Chan<()>| {
                let _ = g.recv();
                s.fetch_add(1, Relaxed);
            })
            .max_workers(10)
            .build();
            wp.start().unwrap();
            if concurrent {
                let hs: Vec<_> = (0..10)
                    .map(|_| {
                        let wp = wp.clone();
                        let g = g.clone();
                        std::thread::spawn(move || assert!(wp.serve(g)))
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
            } else {
                for _ in 0..10 {
                    assert!(wp.serve(g.clone()));
                }
            }
            for _ in 0..5 {
                let item = g.clone();
                assert!(wp.try_serve(item).is_err(), "worker pool must be full");
            }
            assert_eq!(wp.workers_count(), 10);
            g.close().unwrap();
            eventually("all 10 served", DEADLINE, || served.load(Relaxed) == 10);
            wp.stop();
            assert!(!wp.serve(g), "stopped");
        }
    });
}

#[test]
fn worker_pool_cleans_idle_workers() {
    within("cleaner", || {
        let wp = WorkerPool::builder(|_: u32| {})
            .max_idle_worker_duration(Duration::from_millis(50))
            .build();
        wp.start().unwrap();
        for i in 0..20 {
            assert!(wp.serve(i));
        }
        eventually("idle workers cleaned", Duration::from_secs(20), || {
            wp.workers_count() == 0
        });
        wp.stop();
    });
}

// ---- Regressions from the review of the first version -------------------------------------

/// A waker whose `wake` (run by the pool's worker inside its "task
/// finished" step, between going back to the pool and waiting on its
/// mailbox) signals, then blocks until told to go on: it holds a worker in
/// that gap, deterministically.
struct Holding {
    entered: Mutex<Option<mpsc::Sender<()>>>,
    go_on: Mutex<mpsc::Receiver<()>>,
}

impl std::task::Wake for Holding {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(tx) = self.entered.lock().unwrap().take() {
            let _ = tx.send(());
            let _ = self.go_on.lock().unwrap().recv();
        }
    }
}

/// A worker held in the gap (see `Holding`).
struct Held<'a> {
    /// Receives once the worker is held.
    entered: mpsc::Receiver<()>,
    /// Lets it go on.
    go_on: mpsc::Sender<()>,
    _wait: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>,
}

/// Hold the pool's next finishing worker in the gap.
fn hold_next_worker(pool: &Pool) -> Held<'_> {
    use std::future::Future;
    let (entered_tx, entered) = mpsc::channel();
    let (go_on, go_rx) = mpsc::channel();
    let waker = std::task::Waker::from(Arc::new(Holding {
        entered: Mutex::new(Some(entered_tx)),
        go_on: Mutex::new(go_rx),
    }));
    let mut w: std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> =
        Box::pin(pool.wait_async());
    assert!(w
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker))
        .is_pending());
    Held {
        entered,
        go_on,
        _wait: w,
    }
}

/// On one proc, an async submit handed a worker that has not reached its
/// mailbox yet, then dropped: the worker must come back and nothing stay in
/// flight. (With a rendezvous mailbox the send waited, and the drop lost the
/// worker.)
#[test]
fn granted_async_submit_dropped_before_the_worker_waits_loses_nothing() {
    within("one-proc async hand-off", || {
        use std::future::Future;
        use std::task::{Context, Waker};
        let rt = common::rt(1);
        let pool = rt.block_on(async { Pool::new(1) }).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let mut fut = Box::pin(pool.submit_async(move || {
            r.fetch_add(1, Relaxed);
        }));
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        let held = hold_next_worker(&pool);
        g.close().unwrap();
        held.entered.recv().unwrap();
        // Granted the held worker: the hand-off completes at once.
        let r = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(r, std::task::Poll::Ready(Ok(()))), "{r:?}");
        drop(fut);
        held.go_on.send(()).unwrap();
        pool.wait();
        assert_eq!(ran.load(Relaxed), 1);
        assert_eq!(pool.stats().idle, 1);
        pool.try_submit(|| {}).unwrap();
        pool.wait();
        drop(rt);
    });
}

/// `try_submit` from an async task on one proc, to a worker that has not
/// reached its mailbox: never waits (it panicked: a blocking send in a task).
#[test]
fn try_submit_from_an_async_task_never_waits() {
    within("try_submit in a task", || {
        let rt = common::rt(1);
        let pool = rt.block_on(async { Pool::new(1) }).unwrap();
        let g = gate();
        pool.submit(busy(&g)).unwrap();
        let held = hold_next_worker(&pool);
        g.close().unwrap();
        held.entered.recv().unwrap();
        assert_eq!(pool.stats().idle, 1);
        let p = pool.clone();
        let h = rt.spawn(async move { p.try_submit(|| {}) });
        assert_eq!(rt.block_on(h).unwrap(), Ok(()));
        held.go_on.send(()).unwrap();
        pool.wait();
        drop(rt);
    });
}

/// A worker unwound while idle by its runtime's shutdown leaves the idle
/// queue: the next task goes to a live worker and runs.
#[test]
fn a_worker_unwound_while_idle_is_not_handed_work() {
    within("dead idle worker", || {
        let pool = Pool::new(2).unwrap();
        let rt = common::rt(2);
        let p = pool.clone();
        rt.block_on(rt.go(move || p.submit(|| {}).unwrap()))
            .unwrap();
        pool.wait();
        assert_eq!(pool.stats().idle, 1);
        drop(rt); // unwinds the idle worker, parked on its mailbox
        assert_eq!(pool.running(), 0);
        assert_eq!(pool.stats().idle, 0, "the dead worker left the idle queue");
        let (tx, rx) = mpsc::channel();
        pool.submit(move || tx.send(()).unwrap()).unwrap();
        rx.recv().unwrap();
        pool.wait();
    });
}

/// `reboot` racing `release`: every release stops the purge goroutine it
/// sees, so a later `release_timeout` never waits for a leaked one.
#[test]
fn reboot_racing_release_leaks_no_purge_goroutine() {
    within("reboot vs release", || {
        let pool = Pool::builder()
            .capacity(1)
            .expiry(Duration::from_secs(5))
            .build()
            .unwrap();
        for i in 0..2_000u32 {
            pool.release();
            let b = Arc::new(std::sync::Barrier::new(2));
            let (p1, b1) = (pool.clone(), Arc::clone(&b));
            let t1 = std::thread::spawn(move || {
                b1.wait();
                p1.reboot().unwrap();
            });
            let (p2, b2) = (pool.clone(), b);
            let t2 = std::thread::spawn(move || {
                b2.wait();
                for _ in 0..(i % 64) {
                    std::hint::spin_loop();
                }
                p2.release();
            });
            t1.join().unwrap();
            t2.join().unwrap();
            pool.reboot().unwrap();
            pool.release_timeout(Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("iteration {i}: {e}: a purge goroutine leaked"));
            pool.reboot().unwrap();
        }
    });
}

/// `Duration::MAX` means "for ever" in every gosched API: no overflow panic.
#[test]
fn duration_max_timeouts_do_not_panic() {
    within("Duration::MAX", || {
        let pool = Pool::new(1).unwrap();
        pool.submit_timeout(|| {}, Duration::MAX).unwrap();
        let pf = PoolWithFunc::new(1, |_: u8| {}).unwrap();
        pf.invoke_timeout(1, Duration::MAX).unwrap();
        pool.wait();
        pf.wait();
        let mp = MultiPool::new(2, 1, LoadBalancing::RoundRobin).unwrap();
        mp.release_timeout(Duration::MAX).unwrap();
    });
}

/// A panic handler parked when its runtime shuts down is unwound, not
/// reported as a panicking handler (the worker then blocked the dropping
/// thread in its mailbox receive).
#[test]
fn runtime_drop_while_the_panic_handler_is_parked() {
    within("parked panic handler", || {
        let (tx, rx) = mpsc::channel::<()>();
        let tx = Mutex::new(tx);
        let log = Keep::default();
        let pool = Pool::builder()
            .capacity(1)
            .disable_purge(true)
            .logger(log.clone())
            .panic_handler(move |_| {
                tx.lock().unwrap().send(()).unwrap();
                gosched::time::sleep(Duration::from_secs(3600));
            })
            .build()
            .unwrap();
        let rt = common::rt(2);
        let p = pool.clone();
        rt.block_on(rt.go(move || p.submit(|| panic!("boom")).unwrap()))
            .unwrap();
        rx.recv().unwrap(); // the handler is asleep
        drop(rt);
        assert_eq!(
            log.0.lock().unwrap().len(),
            0,
            "{:?}",
            log.0.lock().unwrap()
        );
        assert_eq!(pool.running(), 0);
        pool.wait();
    });
}
