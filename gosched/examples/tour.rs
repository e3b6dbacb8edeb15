//! A short tour of gosched: goroutines and async tasks on one G-P-M scheduler.
//!
//!     cargo run --release --example tour

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    // A runtime with 2 Ps (Go's GOMAXPROCS). `gosched::go` outside any runtime
    // would use a global one sized by GOSCHED_MAXPROCS or the core count.
    let rt = gosched::Builder::new().procs(2).build().expect("runtime");
    println!(
        "gosched tour: {} Ps",
        rt.block_on(async { gosched::runtime::procs() })
    );

    // 1. A goroutine: a closure on its own small stack. join() waits for it.
    let h = rt.go(|| "hello from a goroutine");
    println!("1. {}", rt.block_on(h).unwrap());

    // 2. An async task on the same scheduler, awaiting a goroutine.
    let h = rt.spawn(async {
        let g = gosched::go(|| 6 * 7);
        format!(
            "an async task awaited a goroutine's result: {}",
            g.await.unwrap()
        )
    });
    println!("2. {}", rt.block_on(h).unwrap());

    // 3. A goroutine blocking on async code: block_on parks the goroutine, not its
    //    OS thread, so the same thread runs other goroutines meanwhile.
    let h = rt.go(|| {
        let t = Instant::now();
        gosched::block_on(async {
            gosched::time::sleep_async(Duration::from_millis(20)).await;
        });
        // Blocking-style sleep parks the goroutine too.
        gosched::time::sleep(Duration::from_millis(10));
        t.elapsed()
    });
    println!(
        "3. a goroutine blocked on an async sleep and a blocking sleep for {:?} without holding a thread",
        rt.block_on(h).unwrap()
    );

    // 4. 100,000 goroutines, each parked until released, then all woken.
    let n = 100_000;
    let t = Instant::now();
    let parked = Arc::new(AtomicUsize::new(0));
    let p2 = parked.clone();
    let total = rt
        .block_on(rt.go(move || {
            let gates: Vec<Gate> = (0..n).map(|_| Gate::default()).collect();
            let handles: Vec<_> = gates
                .iter()
                .map(|g| {
                    let (g, p) = (g.clone(), p2.clone());
                    gosched::go(move || {
                        p.fetch_add(1, Ordering::Relaxed);
                        gosched::block_on(g.wait()); // parks this goroutine
                        1u64
                    })
                })
                .collect();
            while p2.load(Ordering::Relaxed) < n {
                gosched::yield_now();
            }
            let live = gosched::runtime::num_goroutine();
            for g in &gates {
                g.open();
            }
            let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            (sum, live)
        }))
        .unwrap();
    println!(
        "4. {} goroutines parked at once ({} alive), woken and joined in {:?}",
        total.0,
        total.1,
        t.elapsed()
    );

    // 5. A panic stays inside its goroutine and comes back as a JoinError.
    let h = rt.go(|| -> u32 { panic!("something went wrong") });
    match rt.block_on(h) {
        Ok(_) => unreachable!(),
        Err(e) => println!("5. the goroutine panicked, the runtime carried on: {e}"),
    }
    // ... and the runtime still works.
    let h = rt.spawn(async { "6. still running after the panic" });
    println!("{}", rt.block_on(h).unwrap());

    // Dropping the runtime stops its threads and frees every stack.
    drop(rt);
    println!("done: the runtime shut down cleanly");
}

/// A one-shot gate (channels arrive with the next issue).
#[derive(Clone, Default)]
struct Gate(Arc<std::sync::Mutex<(bool, Option<std::task::Waker>)>>);

impl Gate {
    fn open(&self) {
        let w = {
            let mut g = self.0.lock().unwrap();
            g.0 = true;
            g.1.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
    fn wait(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            let mut g = self.0.lock().unwrap();
            if g.0 {
                std::task::Poll::Ready(())
            } else {
                g.1 = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
    }
}
