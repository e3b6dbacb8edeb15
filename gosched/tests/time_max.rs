//! `Duration::MAX` is Rust's "no timeout": every API that takes a duration accepts
//! it, on ready and on not-yet-ready operations (deadlines saturate at ~100 years
//! instead of overflowing `Instant + Duration`).

mod common;

use std::time::Duration;

use common::rt;
use gosched::chan::{Select, Selected};
use gosched::{chan, select};

const MAX: Duration = Duration::MAX;

#[test]
fn duration_max_on_ready_operations() {
    let rt = rt(2);
    let r = rt.block_on(rt.go(|| {
        let ch = chan::<u32>(1);
        ch.send_timeout(1, MAX).unwrap();
        assert_eq!(ch.recv_timeout(MAX).unwrap(), 1);
        ch.send(2).unwrap();
        let v = select! {
            recv(ch) -> v => v,
            after(MAX) => None,
        };
        assert_eq!(v, Some(2));
        ch.send(3).unwrap();
        let mut arm = ch.recv_arm();
        let mut sel = Select::new();
        sel.arm(&mut arm);
        assert_eq!(sel.select_timeout(MAX), Selected::Arm(0));
        drop(sel);
        assert_eq!(arm.take(), Some(3));
        gosched::block_on(gosched::time::timeout(MAX, async { 7 })).unwrap()
    }));
    assert_eq!(r.unwrap(), 7);
}

#[test]
fn duration_max_on_operations_that_complete_later() {
    let rt = rt(2);
    let ch = chan::<u32>(0);
    let (tx, rx) = (ch.clone(), ch.clone());
    // Each receive below waits (with a MAX timeout) for this sender.
    let sender = rt.go(move || {
        for v in 1..=4 {
            tx.send(v).unwrap();
        }
    });
    let got = rt.block_on(rt.go(move || {
        let mut got = vec![rx.recv_timeout(MAX).unwrap()];
        got.push(select! {
            recv(rx) -> v => v.unwrap(),
            after(MAX) => 0,
        });
        let mut arm = rx.recv_arm();
        let mut sel = Select::new();
        sel.arm(&mut arm);
        assert_eq!(sel.select_timeout(MAX), Selected::Arm(0));
        drop(sel);
        got.push(arm.take().unwrap());
        got.push(
            gosched::block_on(gosched::time::timeout(MAX, rx.recv_async()))
                .unwrap()
                .unwrap(),
        );
        got
    }));
    assert_eq!(got.unwrap(), vec![1, 2, 3, 4]);
    sender.join().unwrap();

    // A send that waits for its receiver.
    let (tx, rx) = (ch.clone(), ch.clone());
    let receiver = rt.go(move || rx.recv().unwrap());
    rt.block_on(rt.go(move || tx.send_timeout(9, MAX).unwrap()))
        .unwrap();
    assert_eq!(receiver.join().unwrap(), 9);
}

/// `sleep(Duration::MAX)` parks (it does not panic); aborting it cancels the
/// goroutine at its sleep. `Timer::new(MAX)` and `tick(MAX)` are accepted too.
#[test]
fn duration_max_sleep_parks_until_cancelled() {
    let rt = rt(2);
    let started = chan::<()>(1);
    let s = started.clone();
    let h = rt.go(move || {
        s.send(()).unwrap();
        gosched::time::sleep(MAX);
    });
    started.recv().unwrap();
    let timer = gosched::time::Timer::new(MAX);
    let ticker = gosched::time::tick(MAX);
    assert!(timer.chan().try_recv().is_err());
    assert!(ticker.chan().try_recv().is_err());
    h.abort();
    let err = h.join().unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
}
