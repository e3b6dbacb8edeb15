//! An idle runtime uses ~0% CPU. In its own test binary so that no other test's
//! work is counted in the process CPU time.

use std::time::{Duration, Instant};

/// The tests measure process CPU time: run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rt(procs: usize) -> gosched::Runtime {
    gosched::Builder::new().procs(procs).build().unwrap()
}

/// An idle runtime with a pending timer uses no CPU while it waits: the M sleeps
/// until the deadline instead of polling.
#[test]
fn idle_runtime_uses_no_cpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = rt(2);
    // Warm up the Ms.
    rt.block_on(rt.go(|| ())).unwrap();
    let h = rt.go(|| gosched::time::sleep(Duration::from_millis(300)));
    let before = process_cpu();
    let t = Instant::now();
    rt.block_on(h).unwrap();
    let wall = t.elapsed();
    let cpu = process_cpu() - before;
    assert!(wall >= Duration::from_millis(250));
    // Generous bound: a busy-waiting M would burn ~300 ms here.
    assert!(
        cpu < Duration::from_millis(60),
        "idle runtime burned {cpu:?} CPU in {wall:?}"
    );
}

/// An idle M that may not exit (no more Ms than Ps) waits for work without
/// a deadline once its keep-alive ran out, even a keep-alive of zero: it
/// does not wake up again and again to ask.
#[test]
fn idle_ms_that_may_not_exit_do_not_poll() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = gosched::Builder::new()
        .procs(2)
        .thread_keep_alive(Some(Duration::ZERO))
        .sysmon(false)
        .build()
        .unwrap();
    // Both Ps busy at once: two Ms.
    let (a, b) = (gosched::chan::<()>(0), gosched::chan::<()>(0));
    let (a2, b2) = (a.clone(), b.clone());
    let h = rt.go(move || {
        a2.send(()).unwrap();
        b2.recv().unwrap();
    });
    rt.block_on(rt.go(move || {
        a.recv().unwrap();
        b.send(()).unwrap();
    }))
    .unwrap();
    rt.block_on(h).unwrap();
    let before = process_cpu();
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let cpu = process_cpu() - before;
    assert!(
        cpu < Duration::from_millis(60),
        "idle Ms with a zero keep-alive burned {cpu:?} CPU in {:?} ({} Ms)",
        t.elapsed(),
        rt.threads()
    );
}

fn process_cpu() -> Duration {
    let mut ts = libc_timespec();
    // SAFETY: valid pointer to a timespec.
    unsafe {
        clock_gettime(2 /* CLOCK_PROCESS_CPUTIME_ID */, &mut ts)
    };
    Duration::new(ts.0 as u64, ts.1 as u32)
}

#[repr(C)]
struct Ts(i64, i64);
fn libc_timespec() -> Ts {
    Ts(0, 0)
}
extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Ts) -> i32;
}

/// With one P busy in a long poll and the other idle, the idle side costs little:
/// sysmon, with nothing in any `runnext`, looks once a millisecond. The process uses
/// about one core (the hog) plus sysmon's share.
#[test]
fn sysmon_beside_one_busy_p_is_cheap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = rt(2);
    rt.block_on(rt.go(|| ())).unwrap();
    let before = process_cpu();
    let t = Instant::now();
    rt.block_on(rt.go(|| {
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }))
    .unwrap();
    let wall = t.elapsed();
    let extra = (process_cpu() - before).saturating_sub(wall);
    eprintln!("sysmon: {extra:?} CPU beyond the hog in {wall:?}");
    // Generous bound: a spinning idle M would add ~500 ms.
    assert!(
        extra < wall / 10,
        "the idle side burned {extra:?} CPU beside a {wall:?} hog"
    );
}
