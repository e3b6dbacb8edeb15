//! RSS after a burst (issue 25): 100,000 goroutines park at once, all are
//! released and joined, then the process idles; prints VmRSS before the
//! burst, at its peak, and every 500 ms for 6 s while the stack scavenger
//! returns the free stacks' pages.
//!
//! cargo run --release -p gosched --example burst_rss

use std::time::{Duration, Instant};

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    rt.block_on(rt.go(|| {})).unwrap();
    let before = rss_kb();
    let peak = rt
        .block_on(rt.go(|| {
            let wg = gosched::sync::WaitGroup::new();
            let chans: Vec<_> = (0..100_000)
                .map(|_| {
                    let c = gosched::chan::<()>(0);
                    let (r, wg) = (c.clone(), wg.clone());
                    wg.add(1);
                    gosched::go(move || {
                        let _ = r.recv();
                        wg.done();
                    });
                    c
                })
                .collect();
            let peak = rss_kb();
            for c in &chans {
                c.close().unwrap();
            }
            wg.wait();
            peak
        }))
        .unwrap();
    let t = Instant::now();
    println!(
        "before the burst: {} MiB; all parked: {} MiB",
        before / 1024,
        peak / 1024
    );
    while t.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(500));
        println!(
            "{:>5} ms after the burst: {} MiB",
            t.elapsed().as_millis(),
            rss_kb() / 1024
        );
    }
}
