//! `runtime::stats()` adds up, and `GOSCHED_DEBUG=schedtrace=N[,scheddetail=1]`
//! prints Go's `SCHED` lines.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gosched::runtime::{PState, Stats};

/// The hog tests fill the cores; run the tests of this file one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sum(s: &Stats, f: impl Fn(&gosched::runtime::ProcStats) -> u64) -> u64 {
    s.per_proc.iter().map(f).sum()
}

/// Spawns, completions and steals are counted: 20 rounds of 2,000 short
/// async tasks spawned from one task on 2 Ps; the other P steals some. At
/// the end every task is counted as spawned and completed, nothing is
/// live, and every steal is counted on both sides.
#[test]
fn spawns_completions_and_steals_add_up() {
    let _s = serial();
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    const ROUNDS: u64 = 20;
    const N: u64 = 2_000;
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    rt.block_on(rt.spawn(async move {
        for _ in 0..ROUNDS {
            let hs: Vec<_> = (0..N)
                .map(|_| {
                    let d = d.clone();
                    gosched::spawn(async move {
                        // A little work, so that the queue lasts long
                        // enough for the other P to steal from it.
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(2) {
                            std::hint::spin_loop();
                        }
                        d.fetch_add(1, Relaxed);
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
        }
    }))
    .unwrap();
    assert_eq!(done.load(Relaxed), ROUNDS * N);
    // Completion is counted just after a task's join handle is woken.
    let t = Instant::now();
    let s = loop {
        let s = rt.stats();
        if s.live == 0 || t.elapsed() > Duration::from_secs(5) {
            break s;
        }
        std::thread::yield_now();
    };
    eprintln!("{s:#?}");
    assert_eq!(s.live, 0, "every task completed");
    assert_eq!((s.runnable, s.running, s.parked), (0, 0, 0));
    let spawned = sum(&s, |p| p.spawned);
    let completed = sum(&s, |p| p.completed);
    // The root task was spawned from this plain thread (not on a P); the
    // block_on's warm-up none: everything else on a P.
    assert!(
        spawned >= ROUNDS * N,
        "spawns on Ps: {spawned} < {}",
        ROUNDS * N
    );
    assert!(completed >= ROUNDS * N, "completions on Ps: {completed}");
    let (steals_in, stolen) = (sum(&s, |p| p.steals_in), sum(&s, |p| p.stolen));
    assert_eq!(
        steals_in, stolen,
        "each steal counted by the thief and the victim"
    );
    assert!(steals_in > 0, "the idle P never stole from the busy one");
    assert_eq!(s.procs, 2);
    assert_eq!(
        s.per_proc
            .iter()
            .filter(|p| p.state != PState::Dead)
            .count(),
        2
    );
}

/// A task that never yields on 1 P, with another task queued behind it:
/// sysmon asks it to yield (a preemption request), then retakes the P and
/// hands it off, and the counters of P 0 say so. Then a goroutine blocked
/// in an in-place syscall with work queued behind it: a syscall retake.
#[test]
fn preemptions_retakes_and_hand_offs_are_counted() {
    let _s = serial();
    let rt = gosched::Builder::new().procs(1).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let hog = rt.spawn(async move {
        while !st.load(Relaxed) {
            std::hint::spin_loop();
        }
    });
    // Queued behind the hog: runs once the P is handed off.
    let ran = rt.block_on(rt.spawn(async { 7 })).unwrap();
    assert_eq!(ran, 7);
    stop.store(true, Relaxed);
    rt.block_on(hog).unwrap();
    let s = rt.stats();
    let p = &s.per_proc[0];
    eprintln!("{p:#?}");
    assert!(p.preempt_requests >= 1, "no preemption request: {p:?}");
    assert!(p.user_retakes >= 1, "no retake from the long poll: {p:?}");
    assert!(p.handoffs >= 1, "no hand-off: {p:?}");

    let before = p.syscall_retakes;
    let blocker = rt.go(|| {
        gosched::syscall_local(|| std::thread::sleep(Duration::from_millis(50)));
    });
    // Make sure the call is under way, then queue work behind it.
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(rt.block_on(rt.spawn(async { 8 })).unwrap(), 8);
    rt.block_on(blocker).unwrap();
    let s = rt.stats();
    assert!(
        s.per_proc[0].syscall_retakes > before,
        "no retake from the syscall: {:?}",
        s.per_proc[0]
    );
}

/// A goroutine inside a call made in place shows its P as in a syscall (the
/// P's word stays USER; its M's `in_call` says so), and as in a poll again
/// once the call returns. sysmon is off: nothing retakes the P meanwhile.
#[test]
fn a_p_in_a_call_in_place_is_reported_in_syscall() {
    let _s = serial();
    let rt = gosched::Builder::new()
        .procs(2)
        .sysmon(false)
        .build()
        .unwrap();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let (returned_tx, returned) = std::sync::mpsc::channel();
    let (finish, finish_rx) = std::sync::mpsc::channel::<()>();
    let g = rt.go(move || {
        gosched::syscall_local(|| {
            entered_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        // Back in the poll, still on the P: a plain wait, not a call.
        returned_tx.send(()).unwrap();
        finish_rx.recv().unwrap();
    });
    entered.recv().unwrap();
    let s = rt.stats();
    let in_call: Vec<_> = s
        .per_proc
        .iter()
        .filter(|p| p.state == PState::InSyscall)
        .collect();
    assert_eq!(in_call.len(), 1, "{:#?}", s.per_proc);
    assert_eq!(s.in_syscall, 1);
    assert!(in_call[0].syscalltick >= 1);
    release.send(()).unwrap();
    returned.recv().unwrap();
    let s = rt.stats();
    assert_eq!(s.in_syscall, 0, "{:#?}", s.per_proc);
    assert_eq!(
        s.per_proc
            .iter()
            .filter(|p| p.state == PState::InPoll)
            .count(),
        1,
        "{:#?}",
        s.per_proc
    );
    finish.send(()).unwrap();
    rt.block_on(g).unwrap();
}

/// Under load (producers, consumers, sleepers on 2 Ps), every snapshot's
/// parts add up to the live count, and none reports more runnable tasks
/// than exist.
#[test]
fn snapshots_under_load_are_consistent() {
    let _s = serial();
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for i in 0..8 {
        let st = stop.clone();
        hs.push(rt.go(move || {
            let ch = gosched::chan::<u64>(4);
            let tx = ch.clone();
            let h = gosched::go(move || {
                let mut n = 0;
                while let Some(v) = ch.recv() {
                    n += v;
                }
                n
            });
            let mut k = 0;
            while !st.load(Relaxed) {
                tx.send(k).unwrap();
                k += 1;
                if k % 64 == i {
                    gosched::time::sleep(Duration::from_micros(200));
                }
            }
            tx.close().unwrap();
            h.join().unwrap()
        }));
    }
    let t = Instant::now();
    let mut looks = 0;
    while t.elapsed() < Duration::from_millis(300) {
        let s = rt.stats();
        assert!(s.runnable <= s.live, "{s:?}");
        assert_eq!(s.runnable + s.running + s.parked, s.live, "{s:?}");
        assert!(s.idle_procs <= s.procs);
        assert!(s.running <= s.procs);
        looks += 1;
    }
    stop.store(true, Relaxed);
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert!(looks > 10);
}

/// The snapshot tells parked from running: 10 goroutines parked on a
/// channel and 2 async tasks spinning (one per P) show as `parked >= 10`
/// and `running == 2`.
#[test]
fn parked_and_running_are_told_apart() {
    let _s = serial();
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let ch = gosched::chan::<()>(0);
    let parked: Vec<_> = (0..10)
        .map(|_| {
            let rx = ch.clone();
            rt.go(move || assert_eq!(rx.recv(), None))
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let st = stop.clone();
            rt.spawn(async move {
                while !st.load(Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let t = Instant::now();
    let s = loop {
        let s = rt.stats();
        if (s.parked >= 10 && s.running == 2) || t.elapsed() > Duration::from_secs(5) {
            break s;
        }
        std::thread::yield_now();
    };
    stop.store(true, Relaxed);
    ch.close().unwrap();
    for h in spinners {
        rt.block_on(h).unwrap();
    }
    for h in parked {
        rt.block_on(h).unwrap();
    }
    assert!(s.parked >= 10, "{s:?}");
    assert_eq!(s.running, 2, "{s:?}");
    assert_eq!(s.idle_procs, 0, "{s:?}");
}

const TRACE_CHILD: &str = "GOSCHED_TEST_SCHEDTRACE_CHILD";

/// Runs 200 ms of work on 2 Ps in a runtime built with `GOSCHED_DEBUG` set
/// by the parent (below), then idles 100 ms.
#[test]
fn schedtrace_child() {
    if std::env::var_os(TRACE_CHILD).is_none() {
        return; // only meaningful as the child of the tests below
    }
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let hs: Vec<_> = (0..4)
        .map(|_| {
            rt.go(|| {
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(200) {
                    gosched::yield_now();
                }
            })
        })
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
}

fn run_trace_child(debug: &str) -> String {
    let out =
        common::run_child_test_with("schedtrace_child", TRACE_CHILD, &[("GOSCHED_DEBUG", debug)]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `schedtrace=20`: Go's line, every 20 ms, while busy and while idle.
#[test]
fn schedtrace_prints_go_s_sched_lines() {
    let _s = serial();
    let err = run_trace_child("schedtrace=20");
    let re = regex::Regex::new(
        r"^SCHED (\d+)ms: gomaxprocs=2 idleprocs=[0-2] threads=\d+ spinningthreads=\d+ needspinning=0 idlethreads=\d+ runqueue=\d+ \[ (\d+ ){2}\] schedticks=\[ (\d+ ){2}\]$",
    )
    .unwrap();
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("SCHED")).collect();
    assert!(
        lines.len() >= 8,
        "expected a SCHED line every 20 ms over ~300 ms, got {}:\n{err}",
        lines.len()
    );
    let mut last = 0;
    for l in &lines {
        let c = re
            .captures(l)
            .unwrap_or_else(|| panic!("not Go's format: {l:?}"));
        let ms: u64 = c[1].parse().unwrap();
        assert!(ms >= last, "time went backwards: {l}");
        last = ms;
    }
    // Idle lines too: sysmon wakes from its idle sleep to print them.
    assert!(
        lines.iter().any(|l| l.contains("idleprocs=2")),
        "no line while the runtime idled:\n{err}"
    );
}

/// `scheddetail=1`: the summary line, then a line per P, per M, and per
/// goroutine or task that has parked (Go's G lines).
#[test]
fn scheddetail_lists_every_p_and_m() {
    let _s = serial();
    let err = run_trace_child("schedtrace=50,scheddetail=1");
    let head = regex::Regex::new(
        r"^SCHED \d+ms: gomaxprocs=2 idleprocs=[0-2] threads=\d+ spinningthreads=\d+ needspinning=0 idlethreads=\d+ runqueue=\d+ live=\d+ runnable=\d+ running=\d+ parked=\d+ insyscall=\d+ blockingcalls=\d+ lockedthreads=\d+$",
    )
    .unwrap();
    let p_line = regex::Regex::new(
        r"^  P(\d+): status=[0-4] schedtick=\d+ syscalltick=\d+ m=(nil|\d+) runqsize=\d+ timerslen=\d+ steals=\d+/\d+ handoffs=\d+ preempts=\d+ retakes=\d+/\d+$",
    )
    .unwrap();
    let m_line =
        regex::Regex::new(r"^  M\d+: p=(nil|\d+) locked=(true|false) retired=(true|false)$")
            .unwrap();
    let g_line = regex::Regex::new(r"^  G\d+: status=[124]\([^)]*\) (goroutine|task)$").unwrap();
    let mut g_lines = 0;
    let lines: Vec<&str> = err.lines().collect();
    let heads: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("SCHED"))
        .collect();
    assert!(heads.len() >= 3, "too few SCHED blocks:\n{err}");
    for &i in &heads {
        assert!(
            head.is_match(lines[i]),
            "not the detail format: {:?}",
            lines[i]
        );
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.starts_with("  "))
            .copied()
            .collect();
        let ps: Vec<String> = block
            .iter()
            .filter_map(|l| p_line.captures(l).map(|c| c[1].to_string()))
            .collect();
        assert_eq!(ps, ["0", "1"], "every P listed once, in order:\n{block:#?}");
        let ms = block.iter().filter(|l| m_line.is_match(l)).count();
        assert!(ms >= 1, "no M lines:\n{block:#?}");
        let gs = block.iter().filter(|l| g_line.is_match(l)).count();
        g_lines += gs;
        assert_eq!(
            ps.len() + ms + gs,
            block.len(),
            "an unknown line:\n{block:#?}"
        );
    }
    // The yielding goroutines have parked (a yield is a `Pending`): listed
    // while they run.
    assert!(g_lines >= 1, "no G lines in any block:\n{err}");
}

const HOGS_CHILD: &str = "GOSCHED_TEST_HOGS_CHILD";

/// On 1 P, an async task spins 100 ms without a runtime call while another
/// waits behind it (run with `GOSCHED_DEBUG=hogs=1` by the parent below).
#[test]
fn hogs_child() {
    if std::env::var_os(HOGS_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    let rt = gosched::Builder::new().procs(1).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    println!("hog spawned at line {}", line!() + 1);
    let hog = rt.spawn(async move {
        while !st.load(Relaxed) {
            std::hint::spin_loop();
        }
    });
    assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
    stop.store(true, Relaxed);
    rt.block_on(hog).unwrap();
}

/// `GOSCHED_DEBUG=hogs=1`: sysmon names the task it asks to yield and the
/// one whose P it hands off, with its spawn site.
#[test]
fn hog_report_names_the_task_and_its_spawn_site() {
    let _s = serial();
    let out = common::run_child_test_with("hogs_child", HOGS_CHILD, &[("GOSCHED_DEBUG", "hogs=1")]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: u32 = stdout
        .lines()
        // (libtest prints "test hogs_child ... " on the same line first)
        .find_map(|l| l.split("hog spawned at line ").nth(1))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let site = format!("tests/stats.rs:{line}:");
    let asked = regex::Regex::new(
        r"^gosched: hog: task \d+ spawned at \S+ has run \d+ ms without a runtime call; asked to yield at its next runtime call$",
    )
    .unwrap();
    assert!(
        err.lines().any(|l| asked.is_match(l) && l.contains(&site)),
        "no 'asked to yield' report naming {site}:\n{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains(&site) && l.contains("P0 handed to another M")),
        "no hand-off report naming {site}:\n{err}"
    );
}
