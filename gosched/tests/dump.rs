//! The goroutine dump (`runtime::dump_goroutines`): goroutines and tasks
//! parked on each kind of primitive show the right wait reason, a wait time
//! that grows, and the line of this file that spawned them.

// One spawn runs inside `block_on(async { .. })` to land on the test's
// runtime; its handle is the result wanted, not something to await.
#![allow(clippy::async_yields_async)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gosched::sync::{Cond, Mutex, RwLock, Semaphore, WaitGroup};

fn dump(rt: &gosched::Runtime) -> String {
    let mut out = Vec::new();
    rt.dump_goroutines(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The dump's entry for the unit spawned on `line` of this file:
/// (kind, bracketed state).
fn entry(text: &str, line: u32) -> Option<(String, String)> {
    let site = format!("tests/dump.rs:{line}:");
    let mut prev: Option<&str> = None;
    for l in text.lines() {
        if l.trim_start().starts_with("spawned at ") && l.contains(&site) {
            let head = prev?;
            let kind = head.split(' ').next()?.to_string();
            let state = head[head.find('[')? + 1..head.rfind(']')?].to_string();
            return Some((kind, state));
        }
        if !l.trim().is_empty() {
            prev = Some(l);
        }
    }
    None
}

/// Milliseconds in a state like "sleep, 1500 ms".
fn waited_ms(state: &str) -> u64 {
    let ms = state.rsplit(", ").next().unwrap();
    ms.trim_end_matches(" ms").parse().unwrap()
}

#[test]
fn every_wait_reason_with_its_spawn_site_and_a_growing_wait() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let recv_ch = gosched::chan::<u32>(0);
    let send_ch = gosched::chan::<u32>(0);
    let sel_a = gosched::chan::<u32>(0);
    let sel_b = gosched::chan::<u32>(0);
    let mutex = Arc::new(Mutex::new(0u32));
    let rw = Arc::new(RwLock::new(0u32));
    let wg = WaitGroup::new();
    wg.add(1);
    let cond_pair = Arc::new((Mutex::new(false), Cond::new()));
    let sem = Arc::new(Semaphore::new(1));
    assert!(sem.try_acquire(1)); // held by the test: the waiter parks
    let never = gosched::chan::<()>(0);
    let task_ch = gosched::chan::<u32>(0);
    let timeout_ch = gosched::chan::<u32>(0);
    let wg_ch = gosched::chan::<u32>(0);
    let wg_go = WaitGroup::new();
    let named_ch = gosched::chan::<u32>(0);

    // Held by the test thread while the waiters park.
    let guard = mutex.lock();
    let read_guard = rw.read();

    let mut expect: Vec<(u32, &str, &str)> = Vec::new();
    let mut hs = Vec::new();
    // Each spawn on the line of its `at!` (`line!()` there is that line).
    macro_rules! at {
        ($kind:expr, $reason:expr, $spawn:expr) => {{
            expect.push((line!(), $kind, $reason));
            hs.push($spawn);
        }};
    }
    let rx = recv_ch.clone();
    let recv = move || assert_eq!(rx.recv(), Some(1));
    at!("goroutine", "chan receive", rt.go(recv));
    let tx = send_ch.clone();
    let send = move || tx.send(1).unwrap();
    at!("goroutine", "chan send", rt.go(send));
    let (a, b) = (sel_a.clone(), sel_b.clone());
    let select = move || {
        gosched::select! {
            recv(a) -> _v => {},
            recv(b) -> _v => {},
        }
    };
    at!("goroutine", "select", rt.go(select));
    let nap = || gosched::time::sleep(Duration::from_secs(30));
    at!("goroutine", "sleep", rt.go(nap));
    let m = mutex.clone();
    let lock = move || drop(m.lock());
    at!("goroutine", "sync.Mutex.Lock", rt.go(lock));
    let r = rw.clone();
    let write = move || drop(r.write());
    at!("goroutine", "sync.RWMutex.Lock", rt.go(write));
    let w = wg.clone();
    at!("goroutine", "sync.WaitGroup.Wait", rt.go(move || w.wait()));
    let cp = cond_pair.clone();
    let cond_wait = move || {
        let (lock, cond) = &*cp;
        let mut done = lock.lock();
        while !*done {
            done = cond.wait(done);
        }
    };
    at!("goroutine", "sync.Cond.Wait", rt.go(cond_wait));
    let s = sem.clone();
    at!("goroutine", "semacquire", rt.go(move || s.acquire(1)));
    let nv = never.clone();
    let stuck = rt.go(move || assert_eq!(nv.recv(), Some(())));
    at!("goroutine", "join", rt.go(move || drop(stuck.join())));
    let tr = task_ch.clone();
    let recv_task = async move { assert_eq!(tr.recv_async().await, Some(1)) };
    at!("task", "chan receive", rt.spawn(recv_task));
    let forever = || gosched::block_on(std::future::pending::<()>());
    at!("goroutine", "block_on", rt.go(forever));
    // A bounded receive names the receive, not its timer.
    let to_rx = timeout_ch.clone();
    let bounded = move || assert_eq!(to_rx.recv_timeout(Duration::from_secs(30)), Ok(5));
    at!("goroutine", "chan receive", rt.go(bounded));
    // Spawned through a WaitGroup: the site is still this file's line.
    // (Inside `block_on`, so that it spawns on `rt`, not the global runtime.)
    let wg_rx = wg_ch.clone();
    let fw = move || assert_eq!(wg_rx.recv(), Some(6));
    let wgg = &wg_go;
    // (The handle is the result we want, not something to await.)
    #[rustfmt::skip]
    at!("goroutine", "chan receive", rt.block_on(async { wgg.go(fw) }));

    // A named goroutine shows its name.
    let nm_rx = named_ch.clone();
    let fnm = move || assert_eq!(nm_rx.recv(), Some(7));
    #[rustfmt::skip]
    at!("goroutine", "chan receive", rt.block_on(async { gosched::Go::new().name("worker-7").spawn(fnm) }));

    // Wait until every one of them shows as parked with its reason.
    let t = Instant::now();
    let first = loop {
        let text = dump(&rt);
        let all = expect.iter().all(|&(line, kind, reason)| {
            entry(&text, line).is_some_and(|(k, s)| k == kind && s.starts_with(reason))
        });
        if all {
            break text;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "not every unit shows its wait reason and spawn line:\n{text}\nexpected {expect:#?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    eprintln!("{first}");
    let slept_before = waited_ms(&entry(&first, expect[3].0).unwrap().1);
    // The wait times grow.
    std::thread::sleep(Duration::from_millis(120));
    let second = dump(&rt);
    let slept_after = waited_ms(&entry(&second, expect[3].0).unwrap().1);
    assert!(
        slept_after >= slept_before + 80,
        "the sleeper's wait did not grow: {slept_before} ms, then {slept_after} ms"
    );
    assert!(second.contains("listed;"), "{second}");
    assert!(
        second.contains("\"worker-7\" [chan receive, "),
        "the named goroutine's name is missing:\n{second}"
    );

    // Release everyone (the sleeper and the block_on are cancelled at drop).
    recv_ch.send(1).unwrap();
    assert_eq!(send_ch.recv(), Some(1));
    sel_a.send(1).unwrap();
    drop(guard);
    drop(read_guard);
    wg.done();
    *cond_pair.0.lock() = true;
    cond_pair.1.broadcast();
    sem.release(1);
    never.send(()).unwrap();
    task_ch.send(1).unwrap();
    timeout_ch.send(5).unwrap();
    wg_ch.send(6).unwrap();
    named_ch.send(7).unwrap();
    // Join all but the sleeper (3) and the block_on (11).
    for (i, h) in hs.into_iter().enumerate() {
        if i != 3 && i != 11 {
            rt.block_on(h).unwrap();
        }
    }
    wg_go.wait();
}

const SIGQUIT_CHILD: &str = "GOSCHED_TEST_SIGQUIT_CHILD";

/// Parks a goroutine on a channel, then sends itself SIGQUIT and waits to
/// be ended by the runtime's watcher (built with `GOSCHED_DEBUG=sigquit=1`
/// by the parent below).
#[test]
fn sigquit_child() {
    if std::env::var_os(SIGQUIT_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let ch = gosched::chan::<u32>(0);
    let rx = ch.clone();
    let _h = rt.go(move || rx.recv());
    while !dump(&rt).contains("[chan receive") {
        std::thread::yield_now();
    }
    let pid = std::process::id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-QUIT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    // The watcher dumps and exits with status 2; if it does not within
    // 10 s, exit 0 so that the parent sees the wrong status.
    std::thread::sleep(Duration::from_secs(10));
    drop(ch);
    std::process::exit(0);
}

/// `GOSCHED_DEBUG=sigquit=1`: SIGQUIT prints the goroutine dump to stderr
/// and exits with status 2, as Go does.
#[test]
fn sigquit_dumps_goroutines_and_exits_2() {
    let out = common::run_child_test_with(
        "sigquit_child",
        SIGQUIT_CHILD,
        &[("GOSCHED_DEBUG", "sigquit=1")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(err.contains("SIGQUIT: quit"), "{err}");
    assert!(err.contains("[chan receive, "), "{err}");
    assert!(err.contains("tests/dump.rs:"), "{err}");
}

const SIGQUIT_IN_GOROUTINE_CHILD: &str = "GOSCHED_TEST_SIGQUIT_IN_GOROUTINE_CHILD";

/// A goroutine raises SIGQUIT itself, so the handler runs on its OS thread
/// while the goroutine's thread pointer is installed (`raise` reads the
/// thread's id from the goroutine's TCB copy); then it spins, so that its
/// area stays installed until the watcher exits the process.
#[test]
fn sigquit_in_goroutine_child() {
    if std::env::var_os(SIGQUIT_IN_GOROUTINE_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let h = rt.go(|| {
        let before = common::os_thread();
        // SAFETY: raise has no preconditions; the runtime handles SIGQUIT.
        assert_eq!(unsafe { libc::raise(libc::SIGQUIT) }, 0);
        assert_eq!(common::os_thread(), before);
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    });
    let _ = rt.block_on(h);
    // The watcher did not exit the process within 10 s: the wrong status.
    std::process::exit(0);
}

/// The SIGQUIT handler on a thread running a goroutine on its own thread
/// pointer: the dump is printed and the process exits with status 2.
#[test]
fn sigquit_raised_inside_a_goroutine_dumps_and_exits_2() {
    let out = common::run_child_test_with(
        "sigquit_in_goroutine_child",
        SIGQUIT_IN_GOROUTINE_CHILD,
        &[("GOSCHED_DEBUG", "sigquit=1")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(err.contains("SIGQUIT: quit"), "{err}");
    // The raiser never parked: counted, not listed.
    assert!(err.contains("1 more alive that never parked"), "{err}");
}
