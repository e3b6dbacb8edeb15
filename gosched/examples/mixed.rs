//! Mixing the two worlds on one scheduler: an async library used from
//! goroutines (through `gosched::block_on`, which parks only the goroutine),
//! and blocking code used from async tasks (through `syscall_async`, which
//! runs it where it cannot hold up the other tasks).
//!
//!     cargo run --release --example mixed

use std::time::{Duration, Instant};

/// An "async library": waits for a timer, asks another task, answers.
mod lib {
    use std::time::Duration;

    pub async fn lookup(key: u64) -> u64 {
        gosched::time::sleep_async(Duration::from_millis(5)).await;
        let helper = gosched::spawn(async move { key * 10 });
        helper.await.expect("the helper task") + 1
    }
}

/// Blocking code: a std sleep standing in for a blocking driver or file I/O.
fn blocking_work(n: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(20));
    n * n
}

fn main() {
    let rt = gosched::Builder::new().procs(2).build().expect("runtime");
    let t = Instant::now();

    // 1. Goroutines call the async library with block_on: 100 of them at
    //    once, each parked (not its thread) while the library waits.
    let goroutines: Vec<_> = (0..100u64)
        .map(|k| rt.go(move || gosched::block_on(lib::lookup(k))))
        .collect();
    let sum: u64 = goroutines
        .into_iter()
        .map(|h| rt.block_on(h).unwrap())
        .sum();
    assert_eq!(sum, (0..100u64).map(|k| k * 10 + 1).sum::<u64>());
    let first = t.elapsed();

    // 2. Async tasks call blocking code through syscall_async: 8 calls of
    //    20 ms overlap on other threads while the tasks' Ps keep running a
    //    ticker task.
    let t2 = Instant::now();
    let ticker = rt.spawn(async {
        let mut ticks = 0;
        let deadline = Instant::now() + Duration::from_millis(30);
        while Instant::now() < deadline {
            gosched::time::sleep_async(Duration::from_millis(1)).await;
            ticks += 1;
        }
        ticks
    });
    let tasks: Vec<_> = (0..8u64)
        .map(|n| rt.spawn(async move { gosched::syscall_async(move || blocking_work(n)).await }))
        .collect();
    let squares: Vec<u64> = tasks.into_iter().map(|h| rt.block_on(h).unwrap()).collect();
    let ticks = rt.block_on(ticker).unwrap();
    assert_eq!(squares, (0..8u64).map(|n| n * n).collect::<Vec<_>>());
    assert!(
        ticks >= 3,
        "the ticker kept running beside the blocking calls ({ticks})"
    );
    println!(
        "mixed: 100 goroutines used an async library in {first:?}; 8 async tasks ran \
         20 ms blocking calls in {:?} (overlapped) while a 1 ms ticker ticked {ticks} times",
        t2.elapsed()
    );
}
