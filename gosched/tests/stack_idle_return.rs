//! Issue 25: after a burst of goroutines ends and the runtime idles, the
//! stack scavenger gives the burst's slabs back to the OS (`stack/mod.rs`,
//! "Scavenging"). At a quiet step (no stack left the pool for a period) it
//! empties the per-P stack caches of the idle Ps, whose stacks would
//! otherwise pin their slabs for as long as the Ps stay idle, and unmaps
//! every slab whose stacks are all free. Time is the subject: the scavenger
//! steps every 250 ms and does this at its second step; the test allows
//! 10 s (the target for RSS is 5 s) for a loaded 2-core machine.

use std::time::{Duration, Instant};

/// `n` goroutines on 64 KiB stacks, all parked at once, then released and
/// joined (a burst, as in `examples/burst_rss.rs`).
fn burst(rt: &gosched::Runtime, n: usize) {
    rt.block_on(rt.go(move || {
        let gate = gosched::chan::<()>(0);
        let wg = gosched::sync::WaitGroup::new();
        for _ in 0..n {
            let (gate, wg) = (gate.clone(), wg.clone());
            wg.add(1);
            // Detached: the wait group joins them.
            drop(gosched::Go::new().stack_size(64 * 1024).spawn(move || {
                let _ = gate.recv();
                wg.done();
            }));
        }
        while gosched::runtime::stats().parked < n {
            gosched::yield_now();
        }
        gate.close().unwrap();
        wg.wait();
    }))
    .unwrap();
}

#[test]
fn idle_caches_flushed_and_slabs_returned() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    burst(&rt, 20_000);
    let after_burst = rt.stats().stacks;
    // Slabs of 64, 128, ... stacks: several for 20,000.
    assert!(after_burst.slabs >= 5, "{after_burst:?}");
    let t = Instant::now();
    let st = loop {
        let st = rt.stats().stacks;
        // Nothing cached per P, nothing resident, and slabs unmapped. What
        // stays: the slab being carved (it has room left: the next burst
        // carves from it without a new map; its stacks are released) and
        // spares mapped for the burst's promises and never carved (address
        // space only).
        if st.in_use == 0 && st.free_resident == 0 && st.slabs < after_burst.slabs {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "after {:?}: {st:?} (at the end of the burst: {after_burst:?})",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "back in {:?}: {st:?} (at the end of the burst: {after_burst:?})",
        t.elapsed()
    );
    // The runtime still works: a second burst takes the released stacks
    // and carves new ones.
    burst(&rt, 12_000);
}

/// Runtime teardown drains the per-P caches without the scheduler lock
/// while a scavenger may be flushing the idle Ps' caches: the runtime is
/// dropped at times spread over the scavenger's steps (its quiet step
/// comes 500-750 ms after a burst ends), which must never crash or hang.
#[test]
fn shutdown_races_the_cache_flush() {
    for round in 0..10u64 {
        let rt = gosched::Builder::new().procs(2).build().unwrap();
        burst(&rt, 3_000);
        // The time is the subject: shut down around the scavenger's steps.
        std::thread::sleep(Duration::from_millis(300 + 61 * round));
        drop(rt);
    }
}
