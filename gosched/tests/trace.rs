//! The timeline (`GOSCHED_TRACE`, `runtime::trace_start` / `trace_stop`, the
//! flight recorder): the JSON parses, slices nest and close, flow arrows pair
//! up, and known scenarios show their events.
//!
//! A trace records every runtime of the process, so these tests take turns
//! (`SERIAL`).

mod common;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use gosched::runtime::{flight_recorder_start, trace_snapshot, trace_start, trace_stop};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("gosched-test-{}-{name}.json", std::process::id()))
}

struct Trace {
    other: Value,
    events: Vec<Value>,
}

fn load(path: &std::path::Path) -> Trace {
    let text = std::fs::read_to_string(path).unwrap();
    let v: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    let _ = std::fs::remove_file(path);
    Trace {
        other: v["otherData"].clone(),
        events: v["traceEvents"].as_array().expect("traceEvents").clone(),
    }
}

fn ph(e: &Value) -> &str {
    e["ph"].as_str().unwrap()
}

fn name(e: &Value) -> &str {
    e["name"].as_str().unwrap_or("")
}

fn ts(e: &Value) -> f64 {
    e["ts"].as_f64().unwrap()
}

fn track(e: &Value) -> (u64, u64) {
    (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())
}

impl Trace {
    /// Every `B` has its `E` on the same track, in stack order and not
    /// before it; every `X` has a duration; every track has a name; every
    /// flow_in has exactly one flow_out with the same id, no later, and the
    /// other way round. Returns the slices (`B` with their end).
    fn check_well_formed(&self) -> Vec<(&Value, f64)> {
        let mut stacks: HashMap<(u64, u64), Vec<&Value>> = HashMap::new();
        let mut slices = Vec::new();
        let mut named = std::collections::HashSet::new();
        let mut outs: HashMap<String, f64> = HashMap::new();
        let mut ins: HashMap<String, f64> = HashMap::new();
        let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
        for e in &self.events {
            if ph(e) == "M" {
                if name(e) == "thread_name" {
                    named.insert(track(e));
                }
                continue;
            }
            let t = track(e);
            // Each track's events are written in time order.
            let prev = last_ts.insert(t, ts(e)).unwrap_or(0.0);
            assert!(ts(e) >= prev, "out of order on {t:?}: {e}");
            match ph(e) {
                "B" => stacks.entry(t).or_default().push(e),
                "E" => {
                    let b = stacks
                        .get_mut(&t)
                        .and_then(Vec::pop)
                        .unwrap_or_else(|| panic!("E without B on {t:?}: {e}"));
                    assert!(ts(e) >= ts(b), "E before its B: {b} {e}");
                    slices.push((b, ts(e)));
                }
                "X" => assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}"),
                "i" => {}
                other => panic!("unexpected phase {other}: {e}"),
            }
            if let Some(id) = e["bind_id"].as_str() {
                let map = if e["flow_out"] == true {
                    &mut outs
                } else {
                    assert_eq!(e["flow_in"], true, "{e}");
                    &mut ins
                };
                assert!(
                    map.insert(id.to_string(), ts(e)).is_none(),
                    "flow id {id} twice: {e}"
                );
            }
            assert!(named.contains(&t), "track {t:?} has no name: {e}");
        }
        for (t, s) in &stacks {
            assert!(s.is_empty(), "slices left open on {t:?}: {s:?}");
        }
        for (id, t_in) in &ins {
            let t_out = outs
                .get(id)
                .unwrap_or_else(|| panic!("flow {id} has no start"));
            assert!(t_out <= t_in, "flow {id} arrives before it leaves");
        }
        for id in outs.keys() {
            assert!(ins.contains_key(id), "flow {id} has no end");
        }
        slices
    }

    fn track_names(&self) -> HashMap<(u64, u64), String> {
        self.events
            .iter()
            .filter(|e| ph(e) == "M" && name(e) == "thread_name")
            .map(|e| (track(e), e["args"]["name"].as_str().unwrap().to_string()))
            .collect()
    }

    fn named(&self, prefix: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| name(e).starts_with(prefix))
            .collect()
    }
}

/// Spins for about `us` microseconds.
fn busy(us: u64) -> u64 {
    let t = std::time::Instant::now();
    let mut x = 0u64;
    while t.elapsed() < Duration::from_micros(us) {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
    }
    x
}

#[test]
fn ping_pong_shows_wakeups_both_ways() {
    let _s = serial();
    const ROUNDS: u32 = 300;
    let rt = common::rt(2);
    let path = tmp("pingpong");
    trace_start(&path).unwrap();
    let (ping, pong) = (gosched::chan::<u32>(0), gosched::chan::<u32>(0));
    let (p2, q2) = (ping.clone(), pong.clone());
    // Spawned from a goroutine, so that it lands on `rt`.
    let spawner = rt.go(move || {
        gosched::Go::new().name("echo").spawn(move || {
            while let Some(v) = p2.recv() {
                q2.send(v + 1).unwrap();
            }
        })
    });
    let echo = rt.block_on(spawner).unwrap();
    let player = rt.go(move || {
        let mut v = 0;
        for _ in 0..ROUNDS {
            ping.send(v).unwrap();
            v = pong.recv().unwrap();
        }
        let _ = ping.close();
        v
    });
    assert_eq!(rt.block_on(player).unwrap(), ROUNDS);
    rt.block_on(echo).unwrap();
    let summary = trace_stop().unwrap();
    assert_eq!(summary.path.as_deref(), Some(path.as_path()));
    let t = load(&path);
    assert_eq!(t.other["mode"], "full");
    assert_eq!(t.other["events"].as_u64(), Some(summary.events));
    let slices = t.check_well_formed();

    // The named goroutine's runs carry its name; both goroutines ran many
    // times and parked on the channel between runs (not once per round:
    // with the partner on the other M, one run may serve two rounds).
    let echo_runs: Vec<_> = slices
        .iter()
        .filter(|(b, _)| name(b).ends_with(" echo") && b["tid"].as_u64().unwrap() < 1_000_000)
        .collect();
    assert!(
        echo_runs.len() as u32 >= ROUNDS / 2,
        "{} runs of echo",
        echo_runs.len()
    );
    let echo_g = echo_runs[0].0["args"]["g"].as_u64().unwrap();
    // Wake-ups of echo: unblock slices for it, each with an arrow to one of
    // its runs.
    let unblocks: Vec<_> = t
        .named(&format!("unblock G{echo_g}"))
        .into_iter()
        .filter(|e| e["flow_out"] == true)
        .collect();
    assert!(
        unblocks.len() as u32 >= ROUNDS / 2,
        "{} wake-ups of echo",
        unblocks.len()
    );
    let ins: std::collections::HashSet<_> = t
        .events
        .iter()
        .filter(|e| e["flow_in"] == true && e["args"]["g"].as_u64() == Some(echo_g))
        .filter_map(|e| e["bind_id"].as_str())
        .collect();
    for u in &unblocks {
        assert!(ins.contains(u["bind_id"].as_str().unwrap()), "{u}");
    }
    // The waker was the player: `by` names a G, not 0.
    assert!(unblocks
        .iter()
        .any(|u| u["args"]["by"].as_u64().unwrap() != 0));
    // Its stops say why: parked on the channel.
    let parked = t
        .events
        .iter()
        .filter(|e| {
            ph(e) == "E"
                && e["args"]["stop"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("parked: chan"))
        })
        .count();
    assert!(parked as u32 >= ROUNDS / 2, "{parked} parks on a channel");
    // The P tracks ("P0", "P1": each P that ran something) hold the runs
    // too, and the M tracks are named after their threads.
    let names = t.track_names();
    assert!(
        slices
            .iter()
            .any(|(b, _)| names[&track(b)].starts_with('P') && name(b).ends_with(" echo")),
        "{names:?}"
    );
    assert!(
        names.values().any(|n| n.starts_with("gosched-m")),
        "{names:?}"
    );
    // The `go` statement of echo, with its spawn site.
    let go = t.named(&format!("go G{echo_g}"));
    assert_eq!(go.len(), 1);
    assert!(
        go[0]["args"]["site"]
            .as_str()
            .unwrap()
            .contains("tests/trace.rs:"),
        "{}",
        go[0]
    );
}

#[test]
fn a_steal_shows_on_the_thief() {
    let _s = serial();
    let rt = common::rt(2);
    // Work queued behind a busy P is stolen by the other M (retried: the
    // other M may also be woken late enough to find nothing). The tasks are
    // spawned by a task on an M, so they queue on its P (from a plain
    // thread they went to the global queue, which both Ms drain in batches
    // without stealing: 6 runs without a steal, once in a CI run), and the
    // spawner then keeps its P busy for 2 ms, so the queue drains by steals.
    for attempt in 0.. {
        let path = tmp("steal");
        trace_start(&path).unwrap();
        rt.block_on(rt.spawn(async {
            let hs: Vec<_> = (0..64)
                .map(|_| gosched::spawn(async { busy(100) }))
                .collect();
            busy(2_000);
            for h in hs {
                h.await.unwrap();
            }
        }))
        .unwrap();
        trace_stop().unwrap();
        let t = load(&path);
        t.check_well_formed();
        let steals = t.named("steal ");
        if let Some(s) = steals.first() {
            assert!(s["args"]["n"].as_u64().unwrap() >= 1, "{s}");
            let victim = s["args"]["victim"].as_u64().unwrap();
            assert_ne!(s["args"]["p"].as_u64(), Some(victim), "{s}");
            // The thief's track is an M.
            let names = t.track_names();
            assert!(names[&track(s)].starts_with("gosched-m"), "{s}");
            return;
        }
        assert!(attempt < 5, "no steal in 6 runs of 64 tasks on 2 Ps");
    }
}

#[test]
fn a_syscall_retake_shows_on_the_p_and_on_sysmon() {
    let _s = serial();
    let rt = common::rt(2);
    let path = tmp("syscall");
    trace_start(&path).unwrap();
    rt.block_on(async {
        let slow = gosched::go(|| {
            // Work queued behind the call: sysmon takes the P away for it.
            let hs: Vec<_> = (0..4).map(|_| gosched::go(|| busy(2_000))).collect();
            gosched::syscall_local(|| std::thread::sleep(Duration::from_millis(30)));
            hs
        });
        for h in slow.await.unwrap() {
            h.await.unwrap();
        }
    });
    trace_stop().unwrap();
    let t = load(&path);
    let slices = t.check_well_formed();
    let names = t.track_names();
    let retakes = t.named("retake P");
    assert!(!retakes.is_empty(), "no retake");
    let r = retakes[0];
    assert!(name(r).ends_with("(syscall)"), "{r}");
    assert!(names[&track(r)].ends_with("sysmon"), "{r}");
    assert!(!t.named("handoff P").is_empty(), "no hand-off");
    // The call is a slice on its M's track and on its P's, and the P's slice
    // ends at the retake (the P left the call).
    let p = r["args"]["p"].as_u64().unwrap();
    let calls: Vec<_> = slices
        .iter()
        .filter(|(b, _)| name(b) == "syscall")
        .collect();
    assert!(calls
        .iter()
        .any(|(b, _)| names[&track(b)].starts_with("gosched-m")));
    let on_p: Vec<_> = calls
        .iter()
        .filter(|(b, _)| names[&track(b)] == format!("P{p}"))
        .collect();
    assert!(!on_p.is_empty(), "no syscall slice on P{p}");
    assert!(
        on_p.iter().any(|(_, end)| (*end - ts(r)).abs() < 1.0),
        "{on_p:?} {r}"
    );
    // On the M's track the call lasts its 30 ms.
    assert!(
        calls.iter().any(|(b, end)| end - ts(b) >= 29_000.0),
        "{calls:?}"
    );
}

#[test]
fn flight_recorder_keeps_only_its_window() {
    let _s = serial();
    let rt = common::rt(2);
    flight_recorder_start(Duration::from_millis(5)).unwrap();
    // About 100 ms of hand-offs: far more than the window.
    let (ping, pong) = (gosched::chan::<u32>(0), gosched::chan::<u32>(0));
    let (p2, q2) = (ping.clone(), pong.clone());
    let echo = rt.go(move || {
        while let Some(v) = p2.recv() {
            q2.send(v).unwrap();
        }
    });
    rt.block_on(rt.go(move || {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(100) {
            ping.send(1).unwrap();
            pong.recv().unwrap();
        }
        let _ = ping.close();
    }))
    .unwrap();
    rt.block_on(echo).unwrap();
    let path = tmp("flight");
    let summary = trace_snapshot(&path).unwrap();
    let path2 = tmp("flight2");
    // A second snapshot works too: recording goes on.
    trace_snapshot(&path2).unwrap();
    let _ = std::fs::remove_file(&path2);
    let stopped = trace_stop().unwrap();
    assert_eq!(stopped.path, None);
    let t = load(&path);
    assert_eq!(t.other["mode"], "flight recorder");
    assert!(summary.dropped > 0, "{summary:?}");
    assert!(summary.events > 0, "{summary:?}");
    eprintln!("flight snapshot: {summary:?}");
    t.check_well_formed();
    let from = t.other["window_start_us"].as_f64().unwrap();
    assert!(from > 50_000.0, "the window starts late in the run: {from}");
    for e in t.events.iter().filter(|e| ph(e) != "M") {
        assert!(ts(e) >= from, "an event before the window: {e}");
    }
}

#[test]
fn misuse_gets_clear_errors() {
    let _s = serial();
    use std::io::ErrorKind;
    let e = trace_stop().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    let e = trace_snapshot(tmp("none")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("flight_recorder_start"), "{e}");
    let e = flight_recorder_start(Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = trace_start("/nonexistent-dir/x/trace.json").unwrap_err();
    assert!(
        e.to_string().contains("/nonexistent-dir/x/trace.json"),
        "{e}"
    );

    flight_recorder_start(Duration::from_secs(1)).unwrap();
    let e = trace_start(tmp("second")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("trace_stop"), "{e}");
    let _ = std::fs::remove_file(tmp("second"));
    trace_stop().unwrap();
    // A snapshot into a directory that does not exist: an error, and the
    // recorder is not disturbed.
    flight_recorder_start(Duration::from_secs(1)).unwrap();
    assert!(trace_snapshot("/nonexistent-dir/x/s.json").is_err());
    trace_stop().unwrap();
}

const ENV_CHILD: &str = "GOSCHED_TEST_TRACE_ENV_CHILD";

/// Built with `GOSCHED_TRACE=path` by the parent below: runs a little and
/// returns; the trace is written at exit.
#[test]
fn env_child() {
    if std::env::var_os(ENV_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    let rt = common::rt(2);
    let hs: Vec<_> = (0..10u64).map(|i| rt.go(move || i * 2)).collect();
    let sum: u64 = hs.into_iter().map(|h| rt.block_on(h).unwrap()).sum();
    assert_eq!(sum, 90);
}

#[test]
fn gosched_trace_variable_writes_the_file_at_exit() {
    let path = tmp("env");
    let out = common::run_child_test_with(
        "env_child",
        ENV_CHILD,
        &[("GOSCHED_TRACE", path.to_str().unwrap())],
    );
    assert!(out.status.success(), "{out:?}");
    let t = load(&path);
    t.check_well_formed();
    // Ten goroutines created (with their spawn site) and run.
    let gos: Vec<_> = t
        .named("go G")
        .into_iter()
        .filter(|e| {
            e["args"]["site"]
                .as_str()
                .unwrap()
                .contains("tests/trace.rs:")
        })
        .collect();
    assert_eq!(gos.len(), 10, "{gos:?}");
    let finished = t
        .events
        .iter()
        .filter(|e| e["args"]["stop"] == "finished")
        .count();
    assert!(finished >= 10, "{finished} finished runs");
}

/// Goroutine ids are per runtime: with two runtimes in one trace, every
/// arrow joins a waker and a run of the same runtime, and each runtime's
/// named goroutine keeps its own name (the ids overlap).
#[test]
fn two_runtimes_keep_their_arrows_and_names_apart() {
    let _s = serial();
    let rts: Vec<_> = ["alpha", "beta"]
        .iter()
        .map(|n| {
            gosched::Builder::new()
                .procs(2)
                .thread_name(*n)
                .build()
                .unwrap()
        })
        .collect();
    let path = tmp("two");
    trace_start(&path).unwrap();
    let runs: Vec<_> = rts
        .iter()
        .zip(["alpha", "beta"])
        .map(|(rt, n)| {
            rt.go(move || {
                let (a, b) = (gosched::chan::<u32>(0), gosched::chan::<u32>(0));
                let (a2, b2) = (a.clone(), b.clone());
                let echo = gosched::Go::new().name(format!("echo-{n}")).spawn(move || {
                    while let Some(v) = a2.recv() {
                        b2.send(v).unwrap();
                    }
                });
                for i in 0..200 {
                    a.send(i).unwrap();
                    b.recv().unwrap();
                }
                let _ = a.close();
                echo.join().unwrap();
            })
        })
        .collect();
    for (rt, h) in rts.iter().zip(runs) {
        rt.block_on(h).unwrap();
    }
    trace_stop().unwrap();
    let t = load(&path);
    let slices = t.check_well_formed();
    let names = t.track_names();
    // Each runtime's echo runs only on its own Ms.
    for n in ["alpha", "beta"] {
        let runs: Vec<_> = slices
            .iter()
            .filter(|(b, _)| name(b).ends_with(&format!("echo-{n}")))
            .filter(|(b, _)| !names[&track(b)].starts_with('P'))
            .collect();
        assert!(runs.len() >= 50, "{n}: {} runs", runs.len());
        for (b, _) in runs {
            assert!(
                names[&track(b)].starts_with(n),
                "{n}'s echo ran on {}",
                names[&track(b)]
            );
        }
    }
    // Every arrow between two Ms stays within one runtime.
    let mut outs = HashMap::new();
    for e in &t.events {
        if e["flow_out"] == true {
            outs.insert(e["bind_id"].as_str().unwrap().to_string(), e);
        }
    }
    let mut checked = 0;
    for e in t.events.iter().filter(|e| e["flow_in"] == true) {
        let o = outs[e["bind_id"].as_str().unwrap()];
        let (from, to) = (&names[&track(o)], &names[&track(e)]);
        let rt_of = |s: &str| {
            if s.starts_with("alpha") {
                "alpha"
            } else if s.starts_with("beta") {
                "beta"
            } else {
                "other"
            }
        };
        if rt_of(from) != "other" {
            assert_eq!(
                rt_of(from),
                rt_of(to),
                "an arrow from {from} to {to}: {o} -> {e}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 100, "{checked} arrows between Ms");
}
