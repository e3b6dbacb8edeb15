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

    // 4. Channels connect all three kinds of callers: a goroutine sends on an
    //    unbuffered (rendezvous) channel, an async task receives and forwards,
    //    and this plain thread collects.
    let (nums, doubled) = (gosched::chan::<u64>(0), gosched::chan::<u64>(16));
    let tx = nums.clone();
    rt.go(move || {
        for i in 1..=10 {
            tx.send(i).unwrap(); // parks the goroutine until the task takes it
        }
        tx.close().unwrap();
    });
    let (rx, out) = (nums.clone(), doubled.clone());
    rt.spawn(async move {
        while let Some(v) = rx.recv_async().await {
            out.send_async(v * 2).await.unwrap();
        }
        out.close().unwrap();
    });
    let sum: u64 = doubled.iter().sum();
    println!(
        "4. goroutine -> channel -> async task -> channel -> thread: sum of doubled 1..=10 = {sum}"
    );

    // 5. 100,000 goroutines, each parked until released, then all woken.
    let n = 100_000;
    let t = Instant::now();
    let parked = Arc::new(AtomicUsize::new(0));
    let p2 = parked.clone();
    let total = rt
        .block_on(rt.go(move || {
            // Each goroutine parks on its own channel, as in Go.
            let gates: Vec<gosched::Chan<()>> = (0..n).map(|_| gosched::chan(0)).collect();
            let handles: Vec<_> = gates
                .iter()
                .map(|g| {
                    let (g, p) = (g.clone(), p2.clone());
                    gosched::go(move || {
                        p.fetch_add(1, Ordering::Relaxed);
                        g.recv(); // parks this goroutine until the channel closes
                        1u64
                    })
                })
                .collect();
            while p2.load(Ordering::Relaxed) < n {
                gosched::yield_now();
            }
            let live = gosched::runtime::num_goroutine();
            for g in &gates {
                g.close().unwrap();
            }
            let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            (sum, live)
        }))
        .unwrap();
    println!(
        "5. {} goroutines parked at once ({} alive), woken and joined in {:?}",
        total.0,
        total.1,
        t.elapsed()
    );

    // 6. select! over worker results, a ticker and a deadline; a WaitGroup says
    // when the workers are done and a gosched Mutex (parks the G, not the
    // thread) collects who finished.
    let report = rt
        .block_on(rt.go(|| {
            let results = gosched::chan::<u64>(0);
            let wg = gosched::sync::WaitGroup::new();
            let seen = std::sync::Arc::new(gosched::sync::Mutex::new(Vec::new()));
            for id in 0..4u64 {
                let (results, seen) = (results.clone(), seen.clone());
                wg.go(move || {
                    results.send(id * id).unwrap();
                    seen.lock().push(id);
                });
            }
            let tick = gosched::time::tick(Duration::from_millis(1));
            let (mut sum, mut got, mut ticks) = (0, 0, 0);
            while got < 4 {
                gosched::select! {
                    recv(results) -> v => { sum += v.unwrap(); got += 1; }
                    recv(tick.chan()) -> _ => ticks += 1,
                    after(Duration::from_secs(5)) => panic!("the workers are stuck"),
                }
            }
            wg.wait();
            let done = seen.lock().len();
            format!(
                "6. select! took {got} results (sum of squares {sum}) between {ticks} ticks; \
                 the WaitGroup saw {done} workers finish"
            )
        }))
        .unwrap();
    println!("{report}");

    // 7. A panic stays inside its goroutine and comes back as a JoinError.
    let h = rt.go(|| -> u32 { panic!("something went wrong") });
    match rt.block_on(h) {
        Ok(_) => unreachable!(),
        Err(e) => println!("7. the goroutine panicked, the runtime carried on: {e}"),
    }
    // ... and the runtime still works.
    let h = rt.spawn(async { "8. still running after the panic" });
    println!("{}", rt.block_on(h).unwrap());

    // 9. A goroutine pool (ants' model): 10,000 tasks on at most 8 reused
    // goroutines; submit parks the submitter while all 8 are busy.
    let line = rt
        .block_on(rt.go(|| {
            let pool = gosched::pool::Pool::new(8).unwrap();
            let sum = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            for i in 0..10_000u64 {
                let sum = sum.clone();
                pool.submit(move || {
                    sum.fetch_add(i, std::sync::atomic::Ordering::Relaxed);
                })
                .unwrap();
            }
            pool.wait();
            let squared = pool.submit_with_result(|| 12 * 12).unwrap().join().unwrap();
            let s = pool.stats();
            format!(
                "9. a pool of 8 ran {} tasks (sum {}) on {} goroutines; a result came back: {squared}",
                s.completed,
                sum.load(std::sync::atomic::Ordering::Relaxed),
                s.running
            )
        }))
        .unwrap();
    println!("{line}");

    // Dropping the runtime stops its threads and frees every stack.
    drop(rt);
    println!("done: the runtime shut down cleanly");
}
