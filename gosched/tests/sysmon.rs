//! sysmon: Ps are handed off from long polls and slow in-place syscalls, long
//! time slices are asked to yield, and a `runnext` ping-pong pair shares its
//! P. Generous bounds: these test that the hand-off happens, not its speed
//! (W6 and W10 in `bench/` measure that).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::rt;

/// The hog tests each fill both cores for seconds; run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn migrating(procs: usize) -> gosched::Runtime {
    common::rt(procs)
}

/// Spins until `stop`, making no runtime call.
fn spin_until(stop: &AtomicBool) -> u64 {
    let mut n = 0u64;
    while !stop.load(Relaxed) {
        n = n.wrapping_add(1);
        std::hint::spin_loop();
    }
    n
}

const HOGS: usize = 4;
const RUN: Duration = Duration::from_secs(2);
const MIN_TICKS: u64 = 200;

enum Kind {
    Goroutine,
    Task,
}

/// procs 2: `HOGS` hogs that never make a runtime call, and a ticker that
/// sleeps 1 ms at a time for `RUN`. Returns the ticks.
fn ticks_beside_hogs(rt: &gosched::Runtime, hogs: Kind, ticker: Kind) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let mut hog_handles = Vec::new();
    for _ in 0..HOGS {
        let s = stop.clone();
        hog_handles.push(match hogs {
            Kind::Goroutine => rt.go(move || spin_until(&s)),
            Kind::Task => rt.spawn(async move { spin_until(&s) }),
        });
    }
    // The ticks come back through a std channel with a deadline, so that a
    // starved ticker fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let ticker = match ticker {
        Kind::Goroutine => rt.go(move || {
            let end = Instant::now() + RUN;
            let mut n = 0;
            while Instant::now() < end {
                gosched::time::sleep(Duration::from_millis(1));
                n += 1;
            }
            tx.send(n).unwrap();
        }),
        Kind::Task => rt.spawn(async move {
            let end = Instant::now() + RUN;
            let mut n = 0;
            while Instant::now() < end {
                gosched::time::sleep_async(Duration::from_millis(1)).await;
                n += 1;
            }
            tx.send(n).unwrap();
        }),
    };
    let ticks = rx.recv_timeout(RUN * 5);
    stop.store(true, Relaxed);
    for h in hog_handles {
        rt.block_on(h).unwrap();
    }
    rt.block_on(ticker).unwrap();
    ticks.expect("the ticker never finished: starved by the hogs")
}

/// Goroutine hogs, goroutine ticker, goroutines free to move (Go's model):
/// sysmon hands each hog's P to another M, so the ticker always finds one.
#[test]
fn goroutine_ticker_beside_goroutine_hogs_migrating() {
    let _s = serial();
    let n = ticks_beside_hogs(&migrating(2), Kind::Goroutine, Kind::Goroutine);
    eprintln!("ticks: {n}");
    assert!(
        n >= MIN_TICKS,
        "only {n} ticks in {RUN:?} beside {HOGS} hogs"
    );
}

/// Goroutine hogs, async ticker, default mode (the hogs stay on their Ms;
/// the ticker task moves to whichever M holds a P).
#[test]
fn task_ticker_beside_goroutine_hogs() {
    let _s = serial();
    let n = ticks_beside_hogs(&rt(2), Kind::Goroutine, Kind::Task);
    eprintln!("ticks: {n}");
    assert!(
        n >= MIN_TICKS,
        "only {n} ticks in {RUN:?} beside {HOGS} hogs"
    );
}

/// Async hogs (one never-ending poll each), async ticker.
#[test]
fn task_ticker_beside_task_hogs() {
    let _s = serial();
    let n = ticks_beside_hogs(&rt(2), Kind::Task, Kind::Task);
    eprintln!("ticks: {n}");
    assert!(
        n >= MIN_TICKS,
        "only {n} ticks in {RUN:?} beside {HOGS} hogs"
    );
}

/// Async hogs, goroutine ticker, goroutines free to move.
#[test]
fn goroutine_ticker_beside_task_hogs_migrating() {
    let _s = serial();
    let n = ticks_beside_hogs(&migrating(2), Kind::Task, Kind::Goroutine);
    eprintln!("ticks: {n}");
    assert!(
        n >= MIN_TICKS,
        "only {n} ticks in {RUN:?} beside {HOGS} hogs"
    );
}

/// Name prefix of the threads of the runtimes in the thread-count tests.
const THREADS: &str = "tcount";

/// This process's threads whose names start with `THREADS`: the M, sysmon
/// and blocking-pool threads of the runtime under test. (Counting every
/// thread raced with libtest, which starts the thread of the next test, to
/// wait on `serial()`, while this one runs.)
fn threads_now() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(THREADS))
        .count()
}

/// How long an idle M lives in the thread-count tests.
const KEEP_ALIVE: Duration = Duration::from_millis(100);

/// procs 2: 8 goroutines block 200 ms in place (`syscall_local`), and a
/// counter goroutine (yielding every step) keeps counting while they block:
/// sysmon hands their Ps to new Ms. Once the calls are over, the extra Ms
/// exit (`thread_keep_alive`) and the thread count shrinks back.
fn counter_beside_blocking_syscalls(rt: gosched::Runtime, in_place: bool) {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let (s, c) = (stop.clone(), count.clone());
    let counter = rt.go(move || {
        while !s.load(Relaxed) {
            c.fetch_add(1, Relaxed);
            gosched::yield_now();
        }
    });
    // The counter runs.
    while count.load(Relaxed) < 1000 {
        std::thread::yield_now();
    }
    let before_threads = threads_now();
    // Ms live then: the second P's M may not have started yet, and one M
    // per P may stay after the calls.
    let before_ms = rt.threads();
    let in_call = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (ic, f) = (in_call.clone(), finished.clone());
            rt.go(move || {
                let call = || {
                    ic.fetch_add(1, SeqCst);
                    std::thread::sleep(Duration::from_millis(200));
                    f.fetch_add(1, SeqCst);
                };
                if in_place {
                    gosched::syscall_local(call)
                } else {
                    gosched::syscall(call)
                }
            })
        })
        .collect();
    // Let them get into their calls, then measure the counter during the calls.
    let t = Instant::now();
    while in_call.load(SeqCst) < 8 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let c0 = count.load(Relaxed);
    std::thread::sleep(Duration::from_millis(50));
    let c1 = count.load(Relaxed);
    let during_threads = threads_now();
    let during_ms = rt.threads();
    // All 8 were inside their calls at once, the counter counting beside them.
    let done_early = finished.load(SeqCst);
    eprintln!(
        "{} in calls; counter +{} in 50 ms; threads {before_threads} -> {during_threads} \
         ({during_ms} Ms)",
        in_call.load(SeqCst),
        c1 - c0
    );
    assert_eq!(
        in_call.load(SeqCst),
        8,
        "not every caller got into its call"
    );
    assert_eq!(
        done_early, 0,
        "the calls ran a few at a time, not all at once"
    );
    assert!(c1 - c0 > 100, "the counter stalled: +{} in 50 ms", c1 - c0);
    assert!(
        during_threads >= before_threads + 6,
        "the blocked calls did not get Ms of their own: {before_threads} -> {during_threads}"
    );
    for h in callers {
        rt.block_on(h).unwrap();
    }
    // The calls are over: the Ms started for them go idle and exit after
    // `KEEP_ALIVE`, down to one M per P, while the counter still counts.
    let t = Instant::now();
    let allowed = before_threads + 2usize.saturating_sub(before_ms);
    while (rt.threads() > 2 || threads_now() > allowed) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (after_ms, after_threads) = (rt.threads(), threads_now());
    eprintln!(
        "after the calls: {after_ms} Ms, threads {during_threads} -> {after_threads} in {:?}",
        t.elapsed()
    );
    assert!(after_ms <= 2, "idle Ms did not exit: {after_ms} Ms live");
    assert!(
        after_threads <= allowed,
        "the thread count did not shrink back: {before_threads} before the calls \
         ({before_ms} Ms), {during_threads} during, {after_threads} after"
    );
    let c2 = count.load(Relaxed);
    while count.load(Relaxed) < c2 + 1000 {
        std::thread::yield_now();
    }
    stop.store(true, Relaxed);
    rt.block_on(counter).unwrap();
}

#[test]
fn counter_progresses_beside_blocking_syscalls_migrating() {
    let _s = serial();
    let rt = gosched::Builder::new()
        .procs(2)
        .thread_keep_alive(Some(KEEP_ALIVE))
        .thread_name(THREADS)
        .build()
        .unwrap();
    counter_beside_blocking_syscalls(rt, true);
}

/// The same with `syscall`: a call site never measured gives its P away
/// before the call (Go's `entersyscallblock`) instead of waiting for sysmon.
/// Ms whose goroutines ended exit.
#[test]
fn counter_progresses_beside_blocking_syscalls() {
    let _s = serial();
    let rt = gosched::Builder::new()
        .procs(2)
        .thread_keep_alive(Some(KEEP_ALIVE))
        .thread_name(THREADS)
        .build()
        .unwrap();
    counter_beside_blocking_syscalls(rt, false);
}

/// Ms exit and come back while goroutines run on them: with a keep-alive of
/// 1 ms, idle Ms retire between rounds and their `Machine`s are reused by
/// the next round's new threads. Some goroutines block in place so that sysmon starts more Ms. Every
/// goroutine runs once and the sums match: nothing is lost to an M that
/// exited.
#[test]
fn ms_exit_and_return_under_churn() {
    let _s = serial();
    let rt = gosched::Builder::new()
        .procs(2)
        .thread_keep_alive(Some(Duration::from_millis(1)))
        .build()
        .unwrap();
    const ROUNDS: u64 = 200;
    const PER_ROUND: u64 = 300;
    let mut max_ms = 0;
    let mut min_ms = usize::MAX;
    for round in 0..ROUNDS {
        let sum = rt
            .block_on(rt.go(move || {
                let done = gosched::chan::<u64>(64);
                let gate = gosched::chan::<()>(0);
                let hs: Vec<_> = (0..PER_ROUND)
                    .map(|i| {
                        let (done, gate) = (done.clone(), gate.clone());
                        gosched::go(move || {
                            if i % 50 == 0 {
                                gosched::syscall_local(|| {
                                    std::thread::sleep(Duration::from_micros(300))
                                });
                            }
                            if i % 3 == 0 {
                                // Park until the spawner lets everyone go.
                                let _ = gate.recv();
                            }
                            gosched::yield_now();
                            done.send(round * PER_ROUND + i).unwrap();
                        })
                    })
                    .collect();
                gate.close().unwrap();
                let mut sum = 0;
                for _ in 0..PER_ROUND {
                    sum += done.recv().unwrap();
                }
                for h in hs {
                    h.join().unwrap();
                }
                sum
            }))
            .unwrap();
        let want: u64 = (0..PER_ROUND).map(|i| round * PER_ROUND + i).sum();
        assert_eq!(sum, want, "round {round}: a goroutine was lost");
        max_ms = max_ms.max(rt.threads());
        // Let the idle Ms retire before the next round (most rounds).
        std::thread::sleep(Duration::from_millis(3));
        min_ms = min_ms.min(rt.threads());
    }
    eprintln!("Ms live: at most {max_ms} after a round, at least {min_ms} between rounds");
    assert!(
        max_ms > 2,
        "no round needed more than one M per P: {max_ms}"
    );
    assert!(min_ms <= 2, "idle Ms never exited between rounds: {min_ms}");
}

/// Go's `TestPingPongHog`, on 1 proc: two pairs of goroutines hand a token
/// back and forth through `runnext` (each side blocks every round, so the
/// partner always inherits the time slice); one pair does 1,000× the work
/// per step of the other. Both pairs get the P within a time slice of each
/// other, so their counts (work done) end within a factor of 20 (Go's own
/// bound) over 200 ms (Go's test runs 100 ms; a debug build's slower steps
/// and sysmon's backed-off looks make the first hand-over later here).
/// Without the time slice the first pair would keep the P.
///
/// Timing on a loaded box decides whether a try meets the bound, so it gets
/// five tries and must meet it once; without the time slice every try
/// fails.
#[test]
fn ping_pong_pairs_share_one_p() {
    let _s = serial();
    let tries: Vec<(u64, u64)> = (0..5).map(|_| ping_pong_once(rt(1))).collect();
    eprintln!("(hog, light) per try: {tries:?}");
    assert!(
        tries
            .iter()
            .any(|&(hog, light)| hog / 20 <= light && light / 20 <= hog),
        "one pair kept the P in every try: {tries:?}"
    );
}

/// One ping-pong step loop: take the ball, do `work` units, pass it back.
fn pinger(work: u64, count: &AtomicU64, ch: &gosched::Chan<bool>, done: &AtomicBool) {
    while ch.recv().is_some() {
        if done.load(Relaxed) {
            return;
        }
        let mut n = count.load(Relaxed);
        for _ in 0..work {
            n = std::hint::black_box(n + 1);
        }
        count.store(n, Relaxed);
        if ch.send(true).is_err() {
            return;
        }
    }
}

/// Spin (no runtime call, so the M stays busy) until `ready`.
fn spin_for(ready: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < until, "set-up stuck");
        std::hint::spin_loop();
    }
}

/// One 200 ms run of the two pairs: (hog pair's count, light pair's count).
fn ping_pong_once(rt: gosched::Runtime) -> (u64, u64) {
    {
        let (hog, light) = rt
            .block_on(rt.go(|| {
                let done = Arc::new(AtomicBool::new(false));
                let hog_count = Arc::new(AtomicU64::new(0));
                let light_count = Arc::new(AtomicU64::new(0));
                let hog_chan = gosched::chan::<bool>(0);
                let light_chan = gosched::chan::<bool>(0);
                let mut hs = Vec::new();
                for (limit, count, ch) in [
                    (1_000_000u64, &hog_count, &hog_chan),
                    (1_000, &light_count, &light_chan),
                ] {
                    for _ in 0..2 {
                        let (d, c, ch) = (done.clone(), count.clone(), ch.clone());
                        hs.push(gosched::go(move || pinger(limit, &c, &ch, &d)));
                    }
                }
                hog_chan.send(true).unwrap();
                light_chan.send(true).unwrap();
                gosched::time::sleep(Duration::from_millis(200));
                done.store(true, Relaxed);
                hog_chan.close().unwrap();
                light_chan.close().unwrap();
                for h in hs {
                    h.join().unwrap();
                }
                (hog_count.load(Relaxed), light_count.load(Relaxed))
            }))
            .unwrap();
        (hog, light)
    }
}

/// 1 proc: goroutine B is readied from a plain thread (onto the global
/// queue) while goroutine A loops on `try_recv` (a runtime call that never
/// blocks). sysmon asks A's slice to end and A yields at its next
/// `try_recv`, so B runs on A's thread; had A not yielded, sysmon would
/// retake the P after a grace period and B would run on another M.
#[test]
fn a_runtime_call_loop_yields_to_its_ps_other_goroutines() {
    let _s = serial();
    let rt = common::rt(1);
    for _ in 0..3 {
        let wake_b = gosched::chan::<()>(1);
        let b_ran = Arc::new(AtomicBool::new(false));
        let empty = gosched::chan::<()>(1);
        let (w, br) = (wake_b.clone(), b_ran.clone());
        let t = Instant::now();
        let (spins, ran_in_loop, a_thread, b_thread) = rt
            .block_on(rt.go(move || {
                let (w2, br2) = (w.clone(), br.clone());
                let started = gosched::chan::<()>(0);
                let s2 = started.clone();
                let b = gosched::go(move || {
                    s2.send(()).unwrap();
                    w2.recv().unwrap();
                    br2.store(true, SeqCst);
                    common::os_thread()
                });
                started.recv().unwrap(); // B has run on our one P, and parks
                let w3 = w.clone();
                std::thread::spawn(move || w3.send(()).unwrap());
                let mut spins = 0u64;
                let deadline = Instant::now() + Duration::from_secs(10);
                while !br.load(SeqCst) && Instant::now() < deadline {
                    let _ = empty.try_recv();
                    spins += 1;
                }
                let ran = br.load(SeqCst);
                let a_thread = common::os_thread();
                (spins, ran, a_thread, b.join().unwrap())
            }))
            .unwrap();
        eprintln!("B ran after {:?} ({spins} try_recvs)", t.elapsed());
        assert!(ran_in_loop, "B never ran beside the try_recv loop");
        assert!(b_ran.load(SeqCst));
        assert_eq!(b_thread, a_thread, "B ran on another M: A did not yield");
        drop(wake_b);
    }
}

/// The async form: a task whose channel is always ready never returns
/// `Pending` by itself; asked to yield, its next `recv_async` does, and the
/// task queued behind it on the one P runs — on the same M, since the poll
/// ended (had sysmon retaken the P instead, it would run on another M).
#[test]
fn an_always_ready_async_loop_yields() {
    let _s = serial();
    let rt = rt(1);
    for _ in 0..3 {
        let other_ran = Arc::new(AtomicBool::new(false));
        let o = other_ran.clone();
        let (looped, looper, other) = rt
            .block_on(rt.spawn(async move {
                let ch = gosched::chan::<u32>(1);
                let o2 = o.clone();
                // Queued behind us on the one P.
                let other = gosched::spawn(async move {
                    o2.store(true, SeqCst);
                    common::os_thread()
                });
                let mut n = 0u64;
                let deadline = Instant::now() + Duration::from_secs(10);
                let me = common::os_thread();
                while !o.load(SeqCst) && Instant::now() < deadline {
                    assert_eq!(common::os_thread(), me);
                    ch.try_send(1).unwrap();
                    ch.recv_async().await.unwrap();
                    n += 1;
                }
                (n, me, other.await.unwrap())
            }))
            .unwrap();
        assert!(other_ran.load(SeqCst), "the queued task never ran");
        eprintln!("{looped} ready receives before the queued task ran");
        assert_eq!(
            looper, other,
            "the P was retaken instead of the task yielding"
        );
    }
}

/// `set_procs` 2 → 1 → 4 → 2 → 3 → 1 while goroutines and tasks spawn,
/// talk over channels and sleep: nothing is lost (every unit completes with
/// the right sum), timers fire, and `procs()` reports each value.
#[test]
fn set_procs_under_load() {
    let _s = serial();
    let rt = gosched::Builder::new()
        .procs(2)
        .max_procs(4)
        .build()
        .unwrap();
    assert_eq!(rt.procs(), 2);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    // Spawners: each round spawns 50 goroutines and 50 tasks and joins them.
    for _ in 0..2 {
        let (s, d) = (stop.clone(), done.clone());
        hs.push(rt.go(move || {
            let mut rounds = 0u64;
            while !s.load(Relaxed) {
                let gs: Vec<_> = (0..50u64).map(|i| gosched::go(move || i)).collect();
                let ts: Vec<_> = (0..50u64)
                    .map(|i| gosched::spawn(async move { i }))
                    .collect();
                let sum: u64 = gs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                    + ts.into_iter()
                        .map(|h| gosched::block_on(h).unwrap())
                        .sum::<u64>();
                assert_eq!(sum, 2 * (0..50).sum::<u64>());
                rounds += 1;
            }
            d.fetch_add(rounds, Relaxed);
        }));
    }
    // Channel traffic: a pipeline of 3 stages.
    let (a, b, c) = (
        gosched::chan::<u64>(0),
        gosched::chan::<u64>(4),
        gosched::chan::<u64>(0),
    );
    let n = 20_000u64;
    {
        let a = a.clone();
        hs.push(rt.go(move || {
            for i in 0..n {
                a.send(i).unwrap();
            }
            a.close().unwrap();
        }));
    }
    {
        let (a, b) = (a.clone(), b.clone());
        hs.push(rt.go(move || {
            for v in a.iter() {
                b.send(v + 1).unwrap();
            }
            b.close().unwrap();
        }));
    }
    {
        let (b, c) = (b.clone(), c.clone());
        hs.push(rt.spawn(async move {
            while let Some(v) = b.recv_async().await {
                c.send_async(v * 2).await.unwrap();
            }
            c.close().unwrap();
        }));
    }
    let total = {
        let c = c.clone();
        rt.go(move || c.iter().sum::<u64>())
    };
    // Sleepers: timers must fire whatever P they were armed on.
    let slept = Arc::new(AtomicU64::new(0));
    let sleepers: Vec<_> = (0..40)
        .map(|i| {
            let sl = slept.clone();
            rt.go(move || {
                for _ in 0..5 {
                    gosched::time::sleep(Duration::from_millis(1 + i % 7));
                }
                sl.fetch_add(1, Relaxed);
            })
        })
        .collect();
    for want in [1, 4, 2, 3, 1, 2] {
        std::thread::sleep(Duration::from_millis(60));
        let before = rt.procs();
        let prev = rt.set_procs(want);
        assert_eq!(prev, before);
        assert_eq!(rt.procs(), want);
        assert_eq!(rt.block_on(rt.go(gosched::runtime::procs)).unwrap(), want);
    }
    assert_eq!(rt.set_procs(0), 2, "0 only reads");
    assert_eq!(rt.set_procs(99), 2, "clamped to max_procs");
    assert_eq!(rt.procs(), 4);
    for s in sleepers {
        rt.block_on(s).unwrap();
    }
    assert_eq!(slept.load(Relaxed), 40);
    assert_eq!(
        rt.block_on(total).unwrap(),
        (0..n).map(|i| (i + 1) * 2).sum()
    );
    stop.store(true, Relaxed);
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert!(done.load(Relaxed) > 0);
}

const EXHAUST_CHILD: &str = "GOSCHED_TEST_THREAD_EXHAUSTION_CHILD";

#[test]
fn thread_exhaustion_child() {
    if std::env::var_os(EXHAUST_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    // One P, at most 3 Ms: every in-place blocking call loses its P to a new
    // M, until the limit.
    let rt = gosched::Builder::new()
        .procs(1)
        .max_procs(1)
        .max_threads(3)
        .build()
        .unwrap();
    let hs: Vec<_> = (0..8)
        .map(|_| rt.go(|| gosched::syscall_local(|| std::thread::sleep(Duration::from_secs(5)))))
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    println!("no exhaustion");
}

/// Past `max_threads` the process ends with Go's message, never a hang.
#[test]
fn too_many_threads_is_go_s_fatal_error() {
    let out = common::run_child_test("thread_exhaustion_child", EXHAUST_CHILD);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child survived:\n{stderr}");
    assert!(
        stderr.contains("runtime: program exceeds 3-thread limit")
            && stderr.contains("fatal error: thread exhaustion"),
        "{stderr}"
    );
}

/// A sleep armed on a P that `set_procs` then kills (its M still held it)
/// fires while the one live P stays busy: the dying P's timers move to the
/// global heap, which every M holding a P runs. Left on the dead P, the
/// timer waited for an idle M to run it, and the busy runtime had none: the
/// sleeper never woke.
#[test]
fn a_sleep_on_a_p_that_dies_fires_while_the_live_p_is_busy() {
    let _s = serial();
    for _ in 0..5 {
        let rt = rt(2);
        let (woke_tx, woke_rx) = std::sync::mpsc::channel::<()>();
        let up = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut hs = Vec::new();
        for first in [true, false] {
            let (up, stop, woke) = (up.clone(), stop.clone(), woke_tx.clone());
            hs.push(rt.go(move || {
                // Both spin until both run: one on each P.
                up.fetch_add(1, SeqCst);
                spin_for(|| up.load(SeqCst) >= 2);
                if first {
                    gosched::runtime::set_procs(1);
                    up.fetch_add(1, SeqCst);
                    // The hog that keeps the live P busy from now on.
                    gosched::go(move || {
                        while !stop.load(Relaxed) {
                            gosched::yield_now();
                        }
                    });
                } else {
                    spin_for(|| up.load(SeqCst) == 3);
                }
                gosched::time::sleep(Duration::from_millis(2));
                woke.send(()).unwrap();
            }));
        }
        for _ in 0..2 {
            let woke = woke_rx.recv_timeout(Duration::from_secs(10));
            if woke.is_err() {
                stop.store(true, Relaxed);
                panic!("a sleep on the P that died never fired");
            }
        }
        stop.store(true, Relaxed);
        for h in hs {
            rt.block_on(h).unwrap();
        }
    }
}
