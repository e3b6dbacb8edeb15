//! `gosched::time::Timer`: Go 1.23 `time.Timer` semantics (`new`, `stop`,
//! `reset`, `after_func`, drop). Timing is only asserted as lower bounds, or as
//! upper bounds of seconds.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gosched::chan::RecvTimeoutError;
use gosched::time::Timer;

const MS: Duration = Duration::from_millis(1);
/// Long enough that a value that was going to arrive has arrived.
const WELL_AFTER: Duration = Duration::from_millis(150);
/// A generous bound for something that must happen (a shared 2-core box).
const EVENTUALLY: Duration = Duration::from_secs(10);

/// Runs `f` as a goroutine on a fresh 2-proc runtime.
fn in_goroutine(f: impl FnOnce() + Send + 'static) {
    let rt = common::rt(2);
    rt.block_on(rt.go(f)).unwrap();
}

#[test]
fn fires_once_after_d() {
    in_goroutine(|| {
        let t0 = Instant::now();
        let t = Timer::new(20 * MS);
        let at = t.recv().unwrap();
        assert!(at.duration_since(t0) >= 20 * MS);
        assert!(t0.elapsed() >= 20 * MS);
        assert_eq!(
            t.chan().recv_timeout(WELL_AFTER),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(!t.stop(), "fired and received: nothing to stop");
    });
}

#[test]
fn fires_from_a_plain_thread_and_an_async_task() {
    let t0 = Instant::now();
    let t = Timer::new(10 * MS);
    assert!(t.recv().unwrap().duration_since(t0) >= 10 * MS);

    let rt = common::rt(2);
    let at = rt.block_on(rt.spawn(async move {
        let t = Timer::new(10 * MS);
        t.chan().recv_async().await.unwrap()
    }));
    assert!(at.unwrap().duration_since(t0) >= 20 * MS);
}

#[test]
fn stop_before_firing() {
    in_goroutine(|| {
        let t = Timer::new(30 * MS);
        assert!(t.stop(), "pending: stopped by this call");
        assert!(!t.stop(), "stopped already");
        let r = t.chan().recv_timeout(30 * MS + WELL_AFTER);
        assert_eq!(
            r,
            Err(RecvTimeoutError::Timeout),
            "a stopped timer never fires"
        );
    });
}

#[test]
fn stop_after_firing() {
    in_goroutine(|| {
        // Fired and received: false.
        let t = Timer::new(5 * MS);
        t.recv().unwrap();
        assert!(!t.stop());

        // Fired, not received (Go 1.23): stop discards the value and says true.
        let t = Timer::new(5 * MS);
        gosched::time::sleep(5 * MS + WELL_AFTER);
        assert_eq!(t.chan().len(), 1, "fired into the buffer");
        assert!(t.stop());
        assert_eq!(
            t.chan().recv_timeout(WELL_AFTER),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(!t.stop());
    });
}

#[test]
fn reset_while_pending_moves_the_deadline() {
    in_goroutine(|| {
        // Later.
        let t = Timer::new(20 * MS);
        let t1 = Instant::now();
        assert!(t.reset(200 * MS), "was pending");
        let at = t.recv().unwrap();
        assert!(at.duration_since(t1) >= 200 * MS);
        assert_eq!(
            t.chan().recv_timeout(WELL_AFTER),
            Err(RecvTimeoutError::Timeout)
        );

        // Earlier.
        let t = Timer::new(Duration::from_secs(3600));
        let t1 = Instant::now();
        assert!(t.reset(10 * MS));
        let at = t
            .chan()
            .recv_timeout(EVENTUALLY)
            .expect("fires at the new deadline");
        assert!(at.duration_since(t1) >= 10 * MS);

        // Reset after fire-and-receive re-arms it: false, then it fires again.
        let t1 = Instant::now();
        assert!(!t.reset(10 * MS));
        assert!(t.recv().unwrap().duration_since(t1) >= 10 * MS);

        // Reset after stop.
        let t = Timer::new(Duration::from_secs(3600));
        assert!(t.stop());
        assert!(!t.reset(5 * MS));
        assert!(t.chan().recv_timeout(EVENTUALLY).is_ok());
    });
}

#[test]
fn reset_after_fire_without_receive_drops_the_stale_value() {
    in_goroutine(|| {
        let t0 = Instant::now();
        let t = Timer::new(5 * MS);
        gosched::time::sleep(5 * MS + WELL_AFTER);
        assert_eq!(t.chan().len(), 1, "fired into the buffer");
        let t1 = Instant::now();
        // Go 1.23: the unreceived value counts as still pending.
        assert!(t.reset(50 * MS));
        assert!(t.chan().is_empty(), "stale value drained by reset");
        let at = t.recv().unwrap();
        assert!(
            at >= t1 + 50 * MS,
            "the new arming's value, not the stale one"
        );
        assert!(at.duration_since(t0) >= 50 * MS + WELL_AFTER);
        assert_eq!(
            t.chan().recv_timeout(WELL_AFTER),
            Err(RecvTimeoutError::Timeout)
        );
    });
}

#[test]
fn select_on_the_timer_channel() {
    in_goroutine(|| {
        let never: gosched::Chan<u32> = gosched::chan(0);
        let t = Timer::new(10 * MS);
        let t0 = Instant::now();
        // (`recv(t.chan())` does not parse in `select!` yet: a method call.)
        let tc = t.chan();
        let at = gosched::select! {
            recv(never) -> _v => unreachable!("nobody sends"),
            recv(tc) -> at => at.unwrap(),
        };
        assert!(at.duration_since(t0) >= 10 * MS);
        // A stopped timer's channel is never ready.
        let t = Timer::new(5 * MS);
        t.stop();
        let tc = t.chan();
        let r = gosched::select! {
            recv(tc) -> _v => "fired",
            after(5 * MS + WELL_AFTER) => "timed out",
        };
        assert_eq!(r, "timed out");
    });
}

#[test]
fn drop_stops_it() {
    in_goroutine(|| {
        let t = Timer::new(10 * MS);
        let ch = t.chan().clone();
        drop(t);
        assert_eq!(
            ch.recv_timeout(10 * MS + WELL_AFTER),
            Err(RecvTimeoutError::Timeout)
        );
    });
}

#[test]
fn after_func_runs_once_and_stop_prevents_it() {
    in_goroutine(|| {
        let runs = Arc::new(AtomicUsize::new(0));
        // Unbuffered: `f` blocks in `send` until received, which only a
        // goroutine (or thread) may do.
        let done: gosched::Chan<Instant> = gosched::chan(0);
        let (r, d) = (runs.clone(), done.clone());
        let t0 = Instant::now();
        let t = Timer::after_func(10 * MS, move || {
            r.fetch_add(1, SeqCst);
            d.send(Instant::now()).unwrap();
        });
        let at = done.recv_timeout(EVENTUALLY).expect("f ran");
        assert!(at.duration_since(t0) >= 10 * MS);
        gosched::time::sleep(WELL_AFTER);
        assert_eq!(runs.load(SeqCst), 1);
        assert!(!t.stop(), "f already started");
        assert!(
            t.chan().try_recv().is_err(),
            "an after_func timer's channel stays empty"
        );

        // Reset: runs again.
        assert!(!t.reset(5 * MS));
        done.recv_timeout(EVENTUALLY).expect("f ran again");
        gosched::time::sleep(WELL_AFTER);
        assert_eq!(runs.load(SeqCst), 2);

        // Stopped before its deadline: never runs.
        let r = runs.clone();
        let t = Timer::after_func(20 * MS, move || {
            r.fetch_add(1, SeqCst);
        });
        assert!(t.stop());
        gosched::time::sleep(20 * MS + WELL_AFTER);
        assert_eq!(runs.load(SeqCst), 2);
    });
}

/// Many timers, each reset concurrently by several goroutines (some resets land
/// after an earlier arming fired, some before): once every reset has returned,
/// each timer delivers exactly one value.
#[test]
fn concurrent_resets_fire_exactly_once() {
    const TIMERS: usize = 64;
    const RESETTERS: usize = 3;
    const RESETS: u64 = 40;
    let rt = common::rt(2);
    let timers: Arc<Vec<Timer>> = Arc::new(
        (0..TIMERS)
            .map(|_| Timer::new(Duration::from_secs(3600)))
            .collect(),
    );

    let mut hs = Vec::new();
    for g in 0..TIMERS * RESETTERS {
        let timers = timers.clone();
        hs.push(rt.go(move || {
            let t = &timers[g % TIMERS];
            let mut x = (g as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for _ in 0..RESETS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // 0..2 ms: some armings fire before the next reset drains them.
                t.reset(Duration::from_micros(x % 2000));
                if x % 3 == 0 {
                    gosched::yield_now();
                }
            }
        }));
    }
    for h in hs {
        rt.block_on(h).unwrap();
    }

    let timers2 = timers.clone();
    rt.block_on(rt.go(move || {
        for (i, t) in timers2.iter().enumerate() {
            t.chan()
                .recv_timeout(EVENTUALLY)
                .unwrap_or_else(|e| panic!("timer {i} never fired: {e:?}"));
        }
        gosched::time::sleep(WELL_AFTER);
        for (i, t) in timers2.iter().enumerate() {
            assert!(t.chan().try_recv().is_err(), "timer {i} fired twice");
            assert!(!t.stop(), "timer {i}: fired and received");
        }
    }))
    .unwrap();
}

#[test]
fn debug_shows_state() {
    let t = Timer::new(Duration::from_secs(3600));
    let s = format!("{t:?}");
    assert!(s.starts_with("Timer") && s.contains("chan"), "{s}");
    t.stop();
    assert!(format!("{t:?}").contains("deadline: None"));
}

/// An arming that is due at once, reset right away to a far deadline: its task
/// may already be past its sleep, racing the reset on the other P. Whatever
/// the interleaving, nothing is received once the reset has returned.
#[test]
fn stale_arming_never_delivers_after_reset() {
    const ITERS: usize = 2000;
    let rt = common::rt(2);
    let hs: Vec<_> = (0..2)
        .map(|g| {
            rt.go(move || {
                let t = Timer::new(Duration::from_secs(3600));
                for i in 0..ITERS {
                    t.reset(Duration::ZERO);
                    // Spin 0..40 µs: long enough, sometimes, for the other P to
                    // steal the task and reach `fire` just as we reset.
                    let spin = Duration::from_nanos(((i * 7919 + g * 104_729) % 40_000) as u64);
                    let t0 = Instant::now();
                    while t0.elapsed() < spin {
                        std::hint::spin_loop();
                    }
                    if i % 7 == 0 {
                        gosched::yield_now();
                    }
                    t.reset(Duration::from_secs(3600));
                    assert!(t.chan().try_recv().is_err(), "iteration {i}: stale value");
                }
                gosched::time::sleep(WELL_AFTER);
                assert!(t.chan().try_recv().is_err(), "stale value after the loop");
                assert!(t.stop(), "the last arming is still pending");
            })
        })
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
}

/// Go 1.23 for tickers: after `stop` returns no tick arrives (an unreceived
/// one is discarded), and `reset` starts ticking again at the new period.
#[test]
fn ticker_stop_and_reset() {
    in_goroutine(|| {
        let t = gosched::time::tick(MS);
        for _ in 0..3 {
            assert!(t.chan().recv_timeout(EVENTUALLY).is_ok());
        }
        gosched::time::sleep(5 * MS); // a tick is waiting now
        t.stop();
        assert_eq!(
            t.chan().recv_timeout(WELL_AFTER),
            Err(RecvTimeoutError::Timeout),
            "a tick arrived after stop"
        );
        t.reset(2 * MS);
        let start = Instant::now();
        for _ in 0..3 {
            assert!(
                t.chan().recv_timeout(EVENTUALLY).is_ok(),
                "no tick after reset"
            );
        }
        assert!(
            start.elapsed() >= 4 * MS,
            "ticks of a 2 ms ticker came too fast"
        );
    });
}
