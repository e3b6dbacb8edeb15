//! Whole-slab return (`stack/mod.rs`; written by a review of it):
//! bursts of goroutines race the scavenger's sweep (which unmaps slabs and
//! hands their slab-table entries to new slabs), and a stack overflow on a
//! slab mapped after others were returned is still reported (the overflow
//! registry follows the reuse). Every mode runs in a child process so that
//! `GOSCHED_STACK_GUARD` can be set per run.

mod common;

use std::time::{Duration, Instant};

const CHILD_ENV: &str = "GOSCHED_TEST_SLAB_RETURN_CHILD";

/// Fills a local buffer with a pattern, yields (so other goroutines reuse
/// the P and the pool meanwhile), recurses, and checks the buffer is intact.
#[inline(never)]
fn fill_and_check(tag: u64, depth: u32, gate: &gosched::Chan<()>) -> u64 {
    let mut buf = [0u64; 64];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = tag.wrapping_mul(31).wrapping_add(i as u64 + depth as u64);
    }
    let buf = std::hint::black_box(buf);
    let below = if depth > 0 {
        fill_and_check(tag, depth - 1, gate)
    } else {
        // Parked with its stack filled: the burst is alive at once.
        let _ = gate.recv();
        0
    };
    for (i, b) in buf.iter().enumerate() {
        assert_eq!(
            *b,
            tag.wrapping_mul(31).wrapping_add(i as u64 + depth as u64),
            "stack memory changed under a live goroutine (tag {tag}, depth {depth})"
        );
    }
    below + buf[3]
}

fn slabs(rt: &gosched::Runtime) -> usize {
    rt.stats().stacks.slabs
}

#[test]
fn bursts_race_the_sweep_child() {
    if std::env::var_os(CHILD_ENV).as_deref() != Some("race".as_ref()) {
        return;
    }
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let sizes = [64 * 1024, 128 * 1024, 256 * 1024];
    let mut peak = 0;
    let t = Instant::now();
    for round in 0..14u64 {
        let n = 1500 + (round as usize % 3) * 1000;
        let sum = rt
            .block_on(rt.go(move || {
                let gate = gosched::chan::<()>(0);
                let hs: Vec<_> = (0..n)
                    .map(|i| {
                        let size = sizes[(i + round as usize) % sizes.len()];
                        let gate = gate.clone();
                        gosched::Go::new()
                            .stack_size(size)
                            .spawn(move || fill_and_check(round * 1_000_000 + i as u64, 8, &gate))
                    })
                    .collect();
                while gosched::runtime::stats().parked < n {
                    gosched::yield_now();
                }
                gate.close().unwrap();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            }))
            .unwrap();
        std::hint::black_box(sum);
        peak = peak.max(slabs(&rt));
        eprintln!("race: round {round} {:?}", rt.stats().stacks);
        // Idle for 0..1.25 s: sometimes the next burst starts while the
        // scavenger is stepping or sweeping (unmapping slabs).
        std::thread::sleep(Duration::from_millis(250 * (round % 6) + 37 * (round % 3)));
    }
    // Let the scavenger finish: slabs go back.
    std::thread::sleep(Duration::from_secs(3));
    let after = slabs(&rt);
    eprintln!("race: after idling {:?}", rt.stats().stacks);
    eprintln!(
        "race: peak {peak} slabs, {after} after idling ({:?})",
        t.elapsed()
    );
    // As above: per-P caches can pin every slab; only warn.
    if after >= peak {
        eprintln!("race: no slab went back: {after} of {peak}");
    }
    // The pool still works after the returns.
    let n = rt
        .block_on(rt.go(|| {
            let gate = gosched::chan::<()>(0);
            let hs: Vec<_> = (0..3000)
                .map(|i| {
                    let gate = gate.clone();
                    gosched::go(move || fill_and_check(i, 8, &gate))
                })
                .collect();
            while gosched::runtime::stats().parked < 3000 {
                gosched::yield_now();
            }
            gate.close().unwrap();
            let mut joined = 0;
            for h in hs {
                h.join().unwrap();
                joined += 1;
            }
            joined
        }))
        .unwrap();
    assert_eq!(n, 3000);
    eprintln!("race: ok");
}

#[test]
fn overflow_after_slab_reuse_child() {
    if std::env::var_os(CHILD_ENV).as_deref() != Some("overflow".as_ref()) {
        return;
    }
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let burst = |rt: &gosched::Runtime, park: bool| {
        rt.block_on(rt.go(move || {
            let c = gosched::chan::<()>(0);
            let hs: Vec<_> = (0..6000)
                .map(|_| {
                    let r = c.clone();
                    gosched::Go::new().stack_size(64 * 1024).spawn(move || {
                        if park {
                            let _ = r.recv();
                        }
                    })
                })
                .collect();
            (c, hs)
        }))
        .unwrap()
    };
    let (c, hs) = burst(&rt, true);
    while rt.stats().parked < 6000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let peak = slabs(&rt);
    c.close().unwrap();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    let low = slabs(&rt);
    eprintln!("overflow: after idling {:?}", rt.stats().stacks);
    eprintln!("overflow: {peak} slabs at the peak, {low} after idling");
    // Per-P caches may hold a stack of every slab (they pin it): then no
    // slab goes back and the reuse below is not exercised, which is a
    // finding of the review, not a failure of this test.
    if low >= peak {
        eprintln!("overflow: no slab went back (per-P caches pin them)");
    }
    // New slabs reuse the returned entries; then a goroutine overflows.
    let (_c2, _hs2) = burst(&rt, true);
    let go = gosched::Go::new()
        .name("after-slab-reuse")
        .stack_size(64 * 1024);
    common::overflow_in(&rt, go);
}

fn run(mode: &str, guard: Option<&str>) -> std::process::Output {
    let name = match mode {
        "race" => "bursts_race_the_sweep_child",
        _ => "overflow_after_slab_reuse_child",
    };
    let mut vars = vec![];
    if let Some(g) = guard {
        vars.push(("GOSCHED_STACK_GUARD", g));
    }
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .envs(vars.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn bursts_race_the_sweep() {
    for guard in [None, Some("madvise"), Some("mprotect")] {
        let out = run("race", guard);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.contains("race: ok"),
            "{guard:?}: {:?}\n{stderr}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        eprintln!(
            "{guard:?}: {}",
            stderr.lines().find(|l| l.contains("peak")).unwrap_or("")
        );
    }
}

#[test]
fn overflow_after_slab_reuse_is_reported() {
    for guard in [None, Some("mprotect")] {
        let out = run("overflow", guard);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{guard:?}: child must die: {stderr}");
        assert!(
            stderr.contains("goroutine stack overflow") && stderr.contains("after-slab-reuse"),
            "{guard:?}: {stderr}"
        );
        assert!(
            stderr.contains("guard page 0x"),
            "{guard:?}: the slab registry must know the reused slab: {stderr}"
        );
    }
}
