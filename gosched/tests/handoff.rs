//! P hand-offs between Ms under churn: stress tests (ping-pong pairs that
//! start on different Ms, under `set_procs` changes, Ms retiring,
//! `lock_os_thread`, virtual time, shutdown during hand-offs, each with a
//! watchdog that dumps the goroutines if it hangs) and a ticker beside a
//! ping-pong pair on one P.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Spin (no runtime call) until `ready`.
fn spin_for(ready: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < until, "set-up stuck");
        std::hint::spin_loop();
    }
}

/// A watchdog: abort with a goroutine dump if `secs` pass.
struct Watchdog(Arc<AtomicBool>);
impl Watchdog {
    fn new(what: &'static str, secs: u64) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(secs);
            while Instant::now() < until {
                if d.load(SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!("WATCHDOG: {what} hung for {secs} s");
            let _ = gosched::runtime::dump_goroutines(&mut std::io::stderr());
            std::process::abort();
        });
        Watchdog(done)
    }
}
impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

/// Two goroutines A and B, each started on its own M (they spin until both
/// run), then `set_procs(1)`: they ping-pong on the one P. Meanwhile a
/// ticker goroutine sleeps 1 ms at a time. Returns (ticks in `run`,
/// exchanges in `run`), or None if they did not start apart.
fn split_pair_with_ticker(work: u64, run: Duration) -> Option<(u64, u64)> {
    let rt = common::rt(2);
    let out = rt
        .block_on(rt.go(move || {
            let done = Arc::new(AtomicBool::new(false));
            let count = Arc::new(AtomicU64::new(0));
            let ch = gosched::chan::<bool>(0);
            let up = Arc::new(AtomicUsize::new(0));
            let tids = gosched::chan::<common::OsThread>(2);
            let mut hs = Vec::new();
            for _ in 0..2 {
                let (done, count, ch, up, tids) = (
                    done.clone(),
                    count.clone(),
                    ch.clone(),
                    up.clone(),
                    tids.clone(),
                );
                hs.push(gosched::go(move || {
                    up.fetch_add(1, SeqCst);
                    spin_for(|| up.load(SeqCst) == 2);
                    tids.send(common::os_thread()).unwrap();
                    while ch.recv().is_some() {
                        if done.load(Relaxed) {
                            return;
                        }
                        let mut n = 0u64;
                        for _ in 0..work {
                            n = std::hint::black_box(n + 1);
                        }
                        let _ = n;
                        count.fetch_add(1, Relaxed);
                        if ch.send(true).is_err() {
                            return;
                        }
                    }
                }));
            }
            let (t1, t2) = (tids.recv().unwrap(), tids.recv().unwrap());
            let split = t1 != t2;
            let mut res = None;
            if split {
                gosched::runtime::set_procs(1);
                // The ticker starts after the resize, on 1 P.
                let d2 = done.clone();
                let ticker = gosched::go(move || {
                    let mut n = 0u64;
                    let end = Instant::now() + run;
                    while Instant::now() < end && !d2.load(Relaxed) {
                        gosched::time::sleep(Duration::from_millis(1));
                        n += 1;
                    }
                    n
                });
                let c0 = count.load(Relaxed);
                ch.send(true).unwrap();
                let ticks = ticker.join().unwrap();
                res = Some((ticks, count.load(Relaxed) - c0));
            }
            done.store(true, Relaxed);
            ch.close().unwrap();
            for h in hs {
                h.join().unwrap();
            }
            res
        }))
        .unwrap();
    drop(rt);
    out
}

/// Due timers on a P shared by a ping-pong pair that keeps `runnext` busy:
/// timers run at the top of every schedule (Go's `schedule`), so the 1 ms
/// ticker keeps ticking (alone it gets ~880 a second on a quiet 2-core
/// box). Each run must keep 100.
#[test]
fn timers_run_beside_a_split_ping_pong() {
    let _s = serial();
    let _w = Watchdog::new("timers_run_beside_a_split_ping_pong", 120);
    let mut runs = Vec::new();
    let mut setups = 0;
    while runs.len() < 3 && setups < 20 {
        setups += 1;
        if let Some(r) = split_pair_with_ticker(100, Duration::from_secs(1)) {
            runs.push(r);
        }
    }
    eprintln!("(ticks, exchanges) per run: {runs:?}");
    assert!(!runs.is_empty(), "no split");
    for &(ticks, _) in &runs {
        assert!(ticks >= 100, "ticker starved: (ticks, exchanges) {runs:?}");
    }
}

/// A small xorshift for the stress tests.
fn rand(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// `pairs` ping-pong pairs of goroutines (placed by the scheduler, so many
/// split across Ms), each exchanging `rounds` messages with random short
/// sleeps, yields and spins between; `locked` pairs take `lock_os_thread`.
/// Meanwhile a controller resizes the Ps among 1..=3 every ~2 ms. Every
/// pair must finish every round.
fn pairs_under_churn(
    rt: &gosched::Runtime,
    pairs: usize,
    rounds: u64,
    locked: usize,
    resize: bool,
) {
    rt.block_on(rt.go(move || {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let ctl = gosched::go(move || {
            let mut seed = 0x1234_5678u64;
            let mut n = 0u64;
            while !s2.load(SeqCst) {
                if resize {
                    gosched::runtime::set_procs(1 + (rand(&mut seed) % 3) as usize);
                }
                gosched::time::sleep(Duration::from_micros(500 + rand(&mut seed) % 3000));
                n += 1;
            }
            gosched::runtime::set_procs(2);
            n
        });
        let mut hs = Vec::new();
        for i in 0..pairs {
            let ch = gosched::chan::<u64>(0);
            for side in 0..2u64 {
                let ch = ch.clone();
                let lock = i < locked && side == 0;
                hs.push(gosched::go(move || {
                    if lock {
                        gosched::runtime::lock_os_thread();
                    }
                    let mut seed = (i as u64 + 1) * 0x9E37_79B9 + side;
                    let mut got = 0u64;
                    if side == 0 {
                        ch.send(0).unwrap();
                    }
                    while let Some(v) = ch.recv() {
                        got += 1;
                        if v + 1 >= rounds {
                            if v + 1 == rounds {
                                let _ = ch.send(v + 1);
                            }
                            break;
                        }
                        match rand(&mut seed) % 8 {
                            0 => gosched::time::sleep(Duration::from_micros(rand(&mut seed) % 200)),
                            1 => gosched::yield_now(),
                            2 => {
                                let until =
                                    Instant::now() + Duration::from_micros(rand(&mut seed) % 50);
                                while Instant::now() < until {
                                    std::hint::spin_loop();
                                }
                            }
                            _ => {}
                        }
                        if ch.send(v + 1).is_err() {
                            break;
                        }
                    }
                    if lock {
                        gosched::runtime::unlock_os_thread();
                    }
                    got
                }));
            }
        }
        let mut total = 0;
        for h in hs {
            total += h.join().unwrap();
        }
        stop.store(true, SeqCst);
        ctl.join().unwrap();
        // Each message is received once; the last one may be received by
        // the side that then stops.
        assert!(total >= pairs as u64 * rounds, "lost messages: {total}");
    }))
    .unwrap();
}

#[test]
fn stress_pairs_resize_retire() {
    let _s = serial();
    let _w = Watchdog::new("stress_pairs_resize_retire", 240);
    for round in 0..6 {
        let rt = gosched::Builder::new()
            .procs(2)
            .max_procs(3)
            .thread_keep_alive(Some(Duration::from_millis(1)))
            .build()
            .unwrap();
        let t = Instant::now();
        pairs_under_churn(&rt, 6, 2_000, 1, true);
        eprintln!("round {round}: {:?}, threads {}", t.elapsed(), rt.threads());
        assert!(
            rt.shutdown_timeout(Duration::from_secs(20)),
            "shutdown stuck"
        );
    }
}

#[test]
fn stress_pairs_one_p() {
    let _s = serial();
    let _w = Watchdog::new("stress_pairs_one_p", 240);
    for round in 0..4 {
        let rt = gosched::Builder::new()
            .procs(2)
            .thread_keep_alive(Some(Duration::from_millis(1)))
            .build()
            .unwrap();
        // Split the pairs on 2 Ps, then run them on one.
        let t = Instant::now();
        rt.block_on(rt.go(|| gosched::runtime::set_procs(1)))
            .unwrap();
        pairs_under_churn(&rt, 4, 3_000, 0, false);
        eprintln!("round {round}: {:?}", t.elapsed());
        assert!(
            rt.shutdown_timeout(Duration::from_secs(20)),
            "shutdown stuck"
        );
    }
}

#[test]
fn stress_pairs_virtual_time() {
    let _s = serial();
    let _w = Watchdog::new("stress_pairs_virtual_time", 240);
    for round in 0..4 {
        let rt = gosched::Builder::new()
            .procs(2)
            .max_procs(3)
            .virtual_time(true)
            .build()
            .unwrap();
        let t = Instant::now();
        pairs_under_churn(&rt, 4, 2_000, 1, true);
        eprintln!("round {round}: {:?}", t.elapsed());
        assert!(
            rt.shutdown_timeout(Duration::from_secs(20)),
            "shutdown stuck"
        );
    }
}

/// Shut the runtime down while split pairs hand the P back and forth.
#[test]
fn stress_shutdown_mid_handoff() {
    let _s = serial();
    let _w = Watchdog::new("stress_shutdown_mid_handoff", 240);
    for _ in 0..30 {
        let rt = gosched::Builder::new().procs(2).build().unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        for i in 0..4 {
            let ch = gosched::chan::<u64>(0);
            for side in 0..2 {
                let (ch, started) = (ch.clone(), started.clone());
                drop(rt.go(move || {
                    started.fetch_add(1, SeqCst);
                    if side == 0 {
                        let _ = ch.send(0);
                    }
                    let mut seed = i as u64 * 7 + side + 1;
                    while let Some(v) = ch.recv() {
                        if rand(&mut seed) % 16 == 0 {
                            gosched::time::sleep(Duration::from_micros(50));
                        }
                        if ch.send(v + 1).is_err() {
                            return;
                        }
                    }
                }));
            }
        }
        rt.block_on(rt.go(|| {
            gosched::time::sleep(Duration::from_millis(2));
            gosched::runtime::set_procs(1);
            gosched::time::sleep(Duration::from_millis(5));
        }))
        .unwrap();
        assert!(
            rt.shutdown_timeout(Duration::from_secs(20)),
            "shutdown stuck"
        );
    }
}

/// Control: the 1 ms ticker alone on 1 P.
#[test]
fn control_ticker_alone() {
    let _s = serial();
    let rt = gosched::Builder::new().procs(1).build().unwrap();
    let n = rt
        .block_on(rt.go(|| {
            let end = Instant::now() + Duration::from_secs(1);
            let mut n = 0u64;
            while Instant::now() < end {
                gosched::time::sleep(Duration::from_millis(1));
                n += 1;
            }
            n
        }))
        .unwrap();
    eprintln!("ticker alone: {n}");
    assert!(
        n >= 100,
        "a 1 ms ticker alone on 1 P ticked {n} times in 1 s"
    );
}
