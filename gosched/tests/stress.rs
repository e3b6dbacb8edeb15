//! Stress: many spawns with checked results, wakes from foreign threads while the
//! Ps steal, 100,000 parked goroutines.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;

use common::{rt, Gate};

#[test]
fn million_goroutines_results_checked() {
    let rt = rt(2);
    let n = 1_000_000;
    let sum = Arc::new(AtomicU64::new(0));
    let s2 = sum.clone();
    rt.block_on(rt.go(move || {
        // Keep handles in batches so every result is joined and checked.
        for chunk in 0..(n / 1000) {
            let hs: Vec<_> = (0..1000u64)
                .map(|i| {
                    let v = chunk as u64 * 1000 + i;
                    gosched::go(move || v * 2)
                })
                .collect();
            for (i, h) in hs.into_iter().enumerate() {
                let v = h.join().unwrap();
                assert_eq!(v, (chunk as u64 * 1000 + i as u64) * 2);
                s2.fetch_add(v, Relaxed);
            }
        }
    }))
    .unwrap();
    let n = n as u64;
    assert_eq!(sum.load(Relaxed), n * (n - 1));
}

#[test]
fn million_async_tasks_results_checked() {
    let rt = rt(2);
    let n = 1_000_000_u64;
    let total = rt
        .block_on(rt.spawn(async move {
            let mut total = 0u64;
            for chunk in 0..n / 1000 {
                let hs: Vec<_> = (0..1000u64)
                    .map(|i| gosched::spawn(async move { chunk * 1000 + i }))
                    .collect();
                for (i, h) in hs.into_iter().enumerate() {
                    let v = h.await.unwrap();
                    assert_eq!(v, chunk * 1000 + i as u64);
                    total += v;
                }
            }
            total
        }))
        .unwrap();
    assert_eq!(total, n * (n - 1) / 2);
}

#[test]
fn detached_spawn_storm_all_run() {
    let rt = rt(2);
    let n = 1_000_000;
    let count = Arc::new(AtomicUsize::new(0));
    let done = Gate::new();
    let (c, d) = (count.clone(), done.clone());
    rt.go(move || {
        for i in 0..n {
            let (c, d) = (c.clone(), d.clone());
            let bump = move || {
                if c.fetch_add(1, AcqRel) + 1 == n {
                    d.open();
                }
            };
            if i % 2 == 0 {
                gosched::go(bump);
            } else {
                gosched::spawn(async move { bump() });
            }
        }
    });
    rt.block_on(done.wait());
    assert_eq!(count.load(Acquire), n);
}

/// Tasks parked on gates that foreign OS threads open, while CPU-busy goroutines
/// keep both Ps working and stealing from each other.
#[test]
fn foreign_thread_wakes_while_ps_steal() {
    let rt = rt(2);
    let n = 200_000;
    let gates: Vec<Gate> = (0..n).map(|_| Gate::new()).collect();
    let woken = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(n);
    for (i, g) in gates.iter().enumerate() {
        let (g, w) = (g.clone(), woken.clone());
        handles.push(if i % 2 == 0 {
            rt.spawn(async move {
                g.wait().await;
                w.fetch_add(1, Relaxed);
            })
        } else {
            rt.go(move || {
                gosched::block_on(g.wait());
                w.fetch_add(1, Relaxed);
            })
        });
    }
    // Load: goroutines that spawn and yield, so runqs are non-empty and stolen from.
    let busy: Vec<_> = (0..8)
        .map(|_| {
            rt.go(|| {
                for _ in 0..200 {
                    let hs: Vec<_> = (0..50).map(|_| gosched::go(gosched::yield_now)).collect();
                    for h in hs {
                        h.join().unwrap();
                    }
                }
            })
        })
        .collect();
    let gates = Arc::new(gates);
    let openers: Vec<_> = (0..4)
        .map(|t| {
            let gates = gates.clone();
            std::thread::spawn(move || {
                for g in gates.iter().skip(t).step_by(4) {
                    g.open();
                }
            })
        })
        .collect();
    for o in openers {
        o.join().unwrap();
    }
    for h in busy {
        rt.block_on(h).unwrap();
    }
    for h in handles {
        rt.block_on(h).unwrap();
    }
    assert_eq!(woken.load(Relaxed), n);
}

#[test]
fn hundred_thousand_parked_goroutines_woken() {
    let rt = rt(2);
    let n = 100_000;
    let gates: Vec<Gate> = (0..n).map(|_| Gate::new()).collect();
    let parked = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = gates
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let (g, p) = (g.clone(), parked.clone());
            rt.go(move || {
                p.fetch_add(1, Relaxed);
                gosched::block_on(g.wait());
                i
            })
        })
        .collect();
    rt.block_on(async {
        while parked.load(Relaxed) < n {
            gosched::task::yield_now().await;
        }
    });
    assert!(rt_num(&rt) >= n, "every parked goroutine is counted");
    for g in &gates {
        g.open();
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(rt.block_on(h).unwrap(), i);
    }
}

fn rt_num(rt: &gosched::Runtime) -> usize {
    rt.block_on(async { gosched::runtime::num_goroutine() })
}

/// Many short runtimes: build, run, drop with work in flight. Nothing hangs,
/// nothing leaks a thread.
#[test]
fn runtime_churn() {
    for i in 0..50 {
        let rt = rt(2);
        let g = Gate::new();
        for _ in 0..100 {
            let g = g.clone();
            rt.go(move || gosched::block_on(g.wait()));
        }
        let h = rt.spawn(async move { i });
        assert_eq!(rt.block_on(h).unwrap(), i);
        drop(rt);
    }
}
