//! `timeout`, `after` and `tick` on the runtime's timers.

use std::time::{Duration, Instant};

#[test]
fn timeout_completes_or_elapses() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let r = rt.block_on(gosched::time::timeout(Duration::from_millis(200), async {
        5
    }));
    assert_eq!(r, Ok(5));
    let t = Instant::now();
    let r = rt.block_on(gosched::time::timeout(
        Duration::from_millis(20),
        std::future::pending::<()>(),
    ));
    assert_eq!(r, Err(gosched::time::Elapsed));
    assert!(t.elapsed() >= Duration::from_millis(20));
    // In a goroutine, through block_on.
    let h = rt.go(|| {
        gosched::block_on(gosched::time::timeout(
            Duration::from_millis(10),
            gosched::time::sleep_async(Duration::from_secs(5)),
        ))
    });
    assert!(rt.block_on(h).unwrap().is_err());
}

#[test]
fn after_fires_once() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let h = rt.go(|| {
        let t = Instant::now();
        let ch = gosched::time::after(Duration::from_millis(15));
        let at = ch.recv().unwrap();
        assert!(at.duration_since(t) >= Duration::from_millis(15));
        assert!(ch.try_recv().is_err(), "fires only once");
    });
    rt.block_on(h).unwrap();
}

#[test]
fn tick_ticks_and_stops() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let h = rt.go(|| {
        let t = Instant::now();
        let ticker = gosched::time::tick(Duration::from_millis(5));
        for _ in 0..5 {
            ticker.recv().unwrap();
        }
        assert!(t.elapsed() >= Duration::from_millis(25));
        ticker.stop();
    });
    rt.block_on(h).unwrap();
}
