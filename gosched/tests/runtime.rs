//! Runtime behaviour: spawning, joining, panics, cancellation, shutdown.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

use common::{rt, DropCounter, Gate};

#[test]
fn goroutine_and_task_results() {
    let rt = rt(2);
    assert_eq!(rt.block_on(rt.go(|| 1 + 1)).unwrap(), 2);
    assert_eq!(rt.block_on(rt.spawn(async { "task" })).unwrap(), "task");
    // A goroutine blocking on an async task's handle, and a task awaiting a goroutine.
    let h = rt.go(|| gosched::spawn(async { 20 }).join().unwrap() + 22);
    assert_eq!(rt.block_on(h).unwrap(), 42);
    let h = rt.spawn(async { gosched::go(|| 7).await.unwrap() * 6 });
    assert_eq!(rt.block_on(h).unwrap(), 42);
}

#[test]
fn join_from_plain_thread_and_is_finished() {
    let rt = rt(2);
    let gate = Gate::new();
    let g2 = gate.clone();
    let h = rt.go(move || {
        gosched::block_on(g2.wait());
        5
    });
    assert!(!h.is_finished());
    let t = std::thread::spawn(move || h.join().unwrap());
    gate.open();
    assert_eq!(t.join().unwrap(), 5);
}

#[test]
fn panic_becomes_join_error_and_runtime_survives() {
    let rt = rt(2);
    for _ in 0..100 {
        let e = rt
            .block_on(rt.go(|| -> () { panic!("goroutine boom") }))
            .unwrap_err();
        assert!(e.is_panic() && !e.is_cancelled());
        assert_eq!(e.panic_message(), Some("goroutine boom"));
        let e = rt
            .block_on(rt.spawn(async { panic!("task {}", String::from("boom")) }))
            .unwrap_err();
        assert_eq!(e.panic_message(), Some("task boom"));
        let payload = e.into_panic();
        assert_eq!(payload.downcast_ref::<String>().unwrap(), "task boom");
    }
    // Still schedules on both Ps afterwards.
    let hs: Vec<_> = (0..100).map(|i| rt.go(move || i)).collect();
    let sum: i32 = hs.into_iter().map(|h| rt.block_on(h).unwrap()).sum();
    assert_eq!(sum, 4950);
}

#[test]
fn abort_cancels_pending_task_and_goroutine() {
    let rt = rt(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    let f = DropCounter(dropped.clone());
    let h = rt.spawn(async move {
        let _f = f;
        std::future::pending::<()>().await
    });
    h.abort();
    let e = rt.block_on(h).unwrap_err();
    assert!(e.is_cancelled());
    assert_eq!(dropped.load(SeqCst), 1);

    // A goroutine parked in block_on is unwound: its locals are dropped.
    let f = DropCounter(dropped.clone());
    let started = Gate::new();
    let s2 = started.clone();
    let h = rt.go(move || {
        let _f = f;
        s2.open();
        gosched::block_on(std::future::pending::<()>());
    });
    rt.block_on(started.wait());
    h.abort();
    assert!(rt.block_on(h).unwrap_err().is_cancelled());
    assert_eq!(dropped.load(SeqCst), 2);

    // Abort after completion changes nothing.
    let h = rt.spawn(async { 3 });
    while !h.is_finished() {
        std::thread::yield_now();
    }
    h.abort();
    assert_eq!(rt.block_on(h).unwrap(), 3);
}

#[test]
fn detached_output_is_dropped() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    for _ in 0..1000 {
        let d = DropCounter(drops.clone());
        drop(rt.spawn(async move { d }));
        let d = DropCounter(drops.clone());
        drop(rt.go(move || d));
    }
    // The runtime drop below completes or cancels everything; the values are
    // dropped either way, exactly once.
    drop(rt);
    assert_eq!(drops.load(SeqCst), 2000);
}

#[test]
fn nested_spawns() {
    let rt = rt(2);
    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let a = gosched::go(move || tree(depth - 1));
        let b = gosched::spawn(async move { gosched::go(move || tree(depth - 1)).await.unwrap() });
        a.join().unwrap() + b.join().unwrap()
    }
    assert_eq!(rt.block_on(rt.go(|| tree(12))).unwrap(), 1 << 12);
}

#[test]
fn shutdown_with_parked_goroutines_does_not_hang() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..1000 {
        let (d, p) = (DropCounter(drops.clone()), parked.clone());
        handles.push(rt.go(move || {
            let _d = d;
            p.fetch_add(1, SeqCst);
            gosched::block_on(std::future::pending::<()>());
        }));
        let (d, p) = (DropCounter(drops.clone()), parked.clone());
        handles.push(rt.spawn(async move {
            let _d = d;
            p.fetch_add(1, SeqCst);
            std::future::pending::<()>().await;
        }));
    }
    // Everything has run once and parked.
    rt.block_on(async {
        while parked.load(SeqCst) < 2000 {
            gosched::task::yield_now().await;
        }
    });
    assert!(rt.shutdown_timeout(Duration::from_secs(30)));
    assert_eq!(
        drops.load(SeqCst),
        2000,
        "every parked G was cancelled and dropped"
    );
    for h in handles {
        assert!(h.is_finished());
        assert!(gosched::block_on(h).unwrap_err().is_cancelled());
    }
}

#[test]
fn spawn_after_shutdown_is_cancelled() {
    let rt = rt(1);
    let h = rt.spawn(std::future::pending::<()>());
    let inner = rt.block_on(rt.go(|| gosched::spawn(async { 1 }))).unwrap();
    drop(rt);
    assert!(gosched::block_on(h).unwrap_err().is_cancelled());
    // The inner task either ran or was cancelled; it never hangs.
    let _ = gosched::block_on(inner);
}

#[test]
fn global_runtime_and_introspection() {
    let h = gosched::go(gosched::runtime::procs);
    assert!(h.join().unwrap() >= 1);
    let gate = Gate::new();
    let g2 = gate.clone();
    let before = gosched::runtime::num_goroutine();
    let h = gosched::go(move || gosched::block_on(g2.wait()));
    assert!(gosched::runtime::num_goroutine() > before);
    gate.open();
    h.join().unwrap();
}

#[test]
fn names_ids_and_builder() {
    let rt = gosched::Builder::new()
        .procs(2)
        .stack_size(64 * 1024)
        .max_threads(16)
        .build()
        .unwrap();
    // Spawned from inside the runtime, so the free function uses `rt`.
    let h = rt
        .block_on(rt.go(|| {
            gosched::Go::new()
                .name("named")
                .stack_size(1 << 20)
                .spawn(|| 1)
        }))
        .unwrap();
    let id = h.id();
    assert_eq!(rt.block_on(h).unwrap(), 1);
    let h2 = rt.go(|| 2);
    assert_ne!(h2.id(), id);
    assert_eq!(rt.block_on(h2).unwrap(), 2);
    assert!(gosched::Builder::new().stack_size(1 << 40).build().is_err());
}

#[test]
#[should_panic(expected = "`.await`")]
fn block_on_inside_async_task_panics_clearly() {
    let rt = rt(1);
    let h = rt.spawn(async { gosched::block_on(async { 1 }) });
    if let Err(e) = rt.block_on(h) {
        std::panic::resume_unwind(e.into_panic());
    }
}

#[test]
fn num_goroutine_counts_live_goroutines_and_tasks() {
    let rt = rt(2);
    let count = || rt.block_on(async { gosched::runtime::num_goroutine() });
    assert_eq!(count(), 0);
    let gate = Gate::new();
    let hs: Vec<_> = (0..10)
        .map(|i| {
            let g = gate.clone();
            if i % 2 == 0 {
                rt.go(move || gosched::block_on(g.wait()))
            } else {
                rt.spawn(async move { g.wait().await })
            }
        })
        .collect();
    assert_eq!(count(), 10);
    gate.open();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert_eq!(count(), 0);
}

#[test]
fn syscall_runs_blocking_calls_and_keeps_scheduling() {
    let rt = rt(2);
    let hs: Vec<_> = (0..100)
        .map(|i| {
            rt.go(move || {
                let v = gosched::syscall(|| {
                    std::thread::sleep(Duration::from_micros(100));
                    i
                });
                // The P is usable again after the call: spawn and join.
                gosched::go(move || v * 2).join().unwrap()
            })
        })
        .collect();
    let sum: i32 = hs.into_iter().map(|h| rt.block_on(h).unwrap()).sum();
    assert_eq!(sum, 2 * 4950);
    // Outside the runtime it is a plain call.
    assert_eq!(gosched::syscall(|| 5), 5);
}

/// A cancelled goroutine whose destructor blocks: the block happens on the OS
/// thread (the stack is being unwound), and the process survives.
#[test]
fn cancelled_goroutine_destructor_may_block() {
    struct BlockInDrop(Arc<AtomicUsize>);
    impl Drop for BlockInDrop {
        fn drop(&mut self) {
            gosched::time::sleep(Duration::from_millis(1));
            gosched::yield_now();
            self.0.fetch_add(1, SeqCst);
        }
    }
    let rt = rt(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    let started = Gate::new();
    let (s2, d2) = (started.clone(), dropped.clone());
    let h = rt.go(move || {
        let _guard = BlockInDrop(d2);
        s2.open();
        gosched::block_on(std::future::pending::<()>());
    });
    rt.block_on(started.wait());
    h.abort();
    assert!(rt.block_on(h).unwrap_err().is_cancelled());
    assert_eq!(dropped.load(SeqCst), 1);
    // And at shutdown.
    let (s3, d3) = (Gate::new(), dropped.clone());
    let s4 = s3.clone();
    rt.go(move || {
        let _guard = BlockInDrop(d3);
        s4.open();
        gosched::block_on(std::future::pending::<()>());
    });
    rt.block_on(s3.wait());
    drop(rt);
    assert_eq!(dropped.load(SeqCst), 2);
}

/// A G readied into `runnext` by a goroutine that then keeps its P busy (no
/// runtime call, no park) still runs, on the other P: the readier's M cannot
/// run it, so sysmon's runnext watch (or Go's `wakep`) must send an M to steal it.
/// Readied both ways: by a channel hand-off to a parked receiver (`try_send` on
/// a cap-0 channel succeeds only then) and by `go`. Without that M the readier
/// would spin to its deadline and the assertion says what went wrong.
#[test]
fn readied_goroutine_runs_while_its_readier_keeps_the_p() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    let runtime = rt(2);
    for round in 0..300 {
        let by_send = round % 3 == 0;
        let rt = &runtime;
        let ran = Arc::new(AtomicBool::new(false));
        let tx = gosched::chan::<()>(0);
        let rx = tx.clone();
        let flag = ran.clone();
        let receiver = rt.go(move || {
            rx.recv().expect("sender closed early");
            if by_send {
                flag.store(true, SeqCst);
            }
        });
        let readier = rt.go(move || {
            // Give the other M time to run out of work and park, so that no
            // spinning M is around to notice the readied G by chance (the
            // assertion holds either way; this only picks the harder case).
            let settle = Instant::now() + Duration::from_millis(2);
            while Instant::now() < settle {
                std::hint::spin_loop();
            }
            if by_send {
                // Wait until the receiver is parked, then ready it.
                while tx.try_send(()).is_err() {
                    gosched::yield_now();
                }
            } else {
                // A new G goes to this P's runnext, like a readied one.
                let flag = ran.clone();
                gosched::go(move || flag.store(true, SeqCst));
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while !ran.load(SeqCst) {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: a goroutine readied into runnext never ran while its \
                     readier kept the P busy"
                );
                std::hint::spin_loop();
            }
            if !by_send {
                tx.send(()).expect("receiver is alive");
            }
        });
        rt.block_on(readier).unwrap();
        rt.block_on(receiver).unwrap();
    }
}

/// A runtime dropped inside a goroutine of another cancels its goroutines on
/// that foreign M: their stacks go back to their own pool, not to the M's
/// runtime (issue 17 §4; before, B's next goroutine ran on A's stack and B's
/// drop panicked "stack freed to a pool that did not allocate it").
#[test]
fn runtime_dropped_inside_another_keeps_its_stacks() {
    let a = rt(1);
    let b = rt(1);
    let (started, gate) = (gosched::chan::<()>(0), gosched::chan::<()>(0));
    let (s, g) = (started.clone(), gate.clone());
    let _parked = a.go(move || {
        s.send(()).unwrap();
        let _ = g.recv(); // parked here when A is dropped
    });
    started.recv().unwrap();
    b.block_on(b.go(move || drop(a))).unwrap();
    let sum = b
        .block_on(b.go(|| {
            (0..200u64)
                .map(|i| gosched::go(move || i))
                .map(|h| h.join().unwrap())
                .sum::<u64>()
        }))
        .unwrap();
    assert_eq!(sum, 199 * 200 / 2);
    drop(b); // must not panic
    drop(gate);
}

/// `Runtime::block_on` inside a goroutine of another runtime would run the
/// future (and its `go`/`spawn`) on the caller's runtime: it panics instead,
/// saying what to do. On its own runtime it just blocks the goroutine.
#[test]
fn block_on_inside_another_runtimes_goroutine_panics_clearly() {
    let a = Arc::new(rt(1));
    let b = rt(1);
    let a2 = a.clone();
    let msg = b
        .block_on(b.go(move || {
            let err =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a2.block_on(async { 1 })))
                    .expect_err("block_on of another runtime inside a goroutine must panic");
            err.downcast_ref::<String>()
                .cloned()
                .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        }))
        .unwrap();
    assert!(
        msg.contains("another runtime") && msg.contains("rt.spawn"),
        "{msg}"
    );
    let a3 = a.clone();
    assert_eq!(
        a.block_on(a.go(move || a3.block_on(async { 2 }))).unwrap(),
        2
    );
}

/// `yield_now` goes to the back of the local queue (Go's goyield) but keeps
/// the fairness of Go's Gosched within the 1/61 rule: on 1 P, with a second
/// goroutine keeping the local queue busy, a task spawned from a plain thread
/// (into the global queue) runs within about 61 yields of the yielder.
#[test]
fn yield_lets_the_global_queue_run() {
    use std::sync::atomic::AtomicBool;
    {
        let rt = rt(1);
        for _ in 0..20 {
            let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
            let flag = Arc::new(AtomicBool::new(false));
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            let busy = rt.go(move || {
                while !s2.load(SeqCst) {
                    gosched::yield_now();
                }
            });
            let f = flag.clone();
            let spawned = Arc::new(AtomicBool::new(false));
            let sp = spawned.clone();
            let yielder = rt.go(move || {
                started_tx.send(()).unwrap();
                // Count the yields from when the global task exists.
                let mut yields = 0u64;
                while !f.load(SeqCst) {
                    let counting = sp.load(SeqCst);
                    gosched::yield_now();
                    if counting {
                        yields += 1;
                    }
                    assert!(yields < 100_000, "the global queue never ran");
                }
                yields
            });
            started_rx.recv().unwrap();
            let f = flag.clone();
            let _global = rt.spawn(async move { f.store(true, SeqCst) });
            spawned.store(true, SeqCst);
            let yields = rt.block_on(yielder).unwrap();
            stop.store(true, SeqCst);
            rt.block_on(busy).unwrap();
            assert!(
                yields <= 2 * 61 + 8,
                "{yields} yields before the global task ran"
            );
        }
    }
}

/// Goroutines queued first keep their turn (`runq.rs`, "Seniors"): a root
/// spawns 8 spawners, which go to the global queue and other Ps' rings, and
/// each spawns 20,000 goroutines without yielding. Every spawner starts
/// before half of all those goroutines have started, in each of 3 rounds, in
/// the default and the migrating mode (without the seniors both failed in 3
/// of 3 runs).
/// Before, a spawner taken from the global queue in a refill by a P whose
/// running spawner kept spawning went back to the queue's tail with the next
/// overflow of that P's ring, and started after most of them (W9p's slow
/// mode: half a second late at the benchmark's size).
#[test]
fn spawners_queued_first_start_before_what_others_spawned() {
    spawners_start_before_half(rt(2), "default");
}

fn spawners_start_before_half(rt: gosched::Runtime, mode: &str) {
    const SPAWNERS: usize = 8;
    const EACH: usize = 20_000;
    for round in 0..3 {
        let started = Arc::new(AtomicUsize::new(0));
        let s = started.clone();
        let seen = rt
            .block_on(rt.go(move || {
                let hs: Vec<_> = (0..SPAWNERS)
                    .map(|_| {
                        let s = s.clone();
                        gosched::go(move || {
                            let at = s.load(SeqCst);
                            for _ in 0..EACH {
                                let s = s.clone();
                                gosched::go(move || {
                                    s.fetch_add(1, SeqCst);
                                });
                            }
                            at
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>()
            }))
            .unwrap();
        // Each spawner saw how many of the others' goroutines had started
        // when it began.
        for (i, at) in seen.iter().enumerate() {
            assert!(
                *at < SPAWNERS * EACH / 2,
                "{mode} mode, round {round}: spawner {i} started after {at} of {} goroutines: {seen:?}",
                SPAWNERS * EACH
            );
        }
    }
}
