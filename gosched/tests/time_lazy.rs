//! Lazy timer channels (Go 1.23, `chan::core::ChanTimer`): the timer of
//! `time::after` goes on a timer heap only once a receiver parks on its
//! channel; until then every receive that finds the channel empty checks the
//! deadline itself and fires the timer there. These tests pin down what a
//! user can see of that: nothing on a heap until somebody waits, the value
//! (the deadline) delivered by whichever receive comes first after it, once,
//! the split channel kept open by its pending timer, and no lost or doubled
//! value when a parked receiver's heap entry and a polling receiver race.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use gosched::chan::{RecvTimeoutError, TryRecvError};
use gosched::testing::run_virtual;
use gosched::time::{after, now, sleep};

const SEC: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);

/// Timers pending on every heap of the calling runtime.
fn heaped() -> usize {
    gosched::runtime::stats().timers
}

#[test]
fn an_after_nobody_waits_on_is_on_no_heap() {
    run_virtual(|| {
        let base = heaped();
        let t0 = now();
        let chans: Vec<_> = (0..1000).map(|_| after(HOUR)).collect();
        assert_eq!(heaped(), base, "created: on no heap");
        for c in &chans {
            assert_eq!(c.try_recv(), Err(TryRecvError::Empty));
            assert_eq!(c.len(), 0);
            assert!(!c.is_closed());
        }
        assert_eq!(heaped(), base, "looked at before the deadline: on no heap");
        // A receiver parks on one of them: that one, and only it, goes on a
        // heap. (The virtual clock moves past the 1 s sleep only once every
        // goroutine is parked, so the receiver is parked when it returns.)
        let c = chans[0].clone();
        let h = gosched::go(move || c.recv());
        sleep(SEC);
        assert_eq!(heaped(), base + 1, "one receiver parked: one timer heaped");
        assert_eq!(
            h.join().unwrap(),
            Some(t0 + HOUR),
            "the value is the deadline"
        );
    });
}

#[test]
fn a_due_after_is_fired_by_the_receive_that_finds_it() {
    run_virtual(|| {
        let t0 = now();
        let [a, b, c, d, e] = std::array::from_fn(|_| after(SEC));
        // Nobody waits: the clock passes the deadline with the timers on no heap.
        sleep(2 * SEC);
        assert_eq!(a.try_recv(), Ok(t0 + SEC), "try_recv fires it");
        assert_eq!(a.try_recv(), Err(TryRecvError::Empty), "once");
        assert_eq!(b.len(), 1, "len fires it");
        assert_eq!(b.recv(), Some(t0 + SEC));
        let got = gosched::select! {
            recv(c) -> v => v,
            default => None,
        };
        assert_eq!(got, Some(t0 + SEC), "a select arm fires it");
        assert_eq!(gosched::block_on(d.recv_async()), Some(t0 + SEC));
        assert!(!e.is_closed(), "its Chan handle keeps it open");
        assert_eq!(e.recv_timeout(SEC), Ok(t0 + SEC));
        assert_eq!(e.recv_timeout(SEC), Err(RecvTimeoutError::Timeout));
    });
}

#[test]
fn a_pending_timer_keeps_a_split_channel_open() {
    run_virtual(|| {
        let t0 = now();
        // Fired by a receive that finds it due.
        let (tx, rx) = after(SEC).split();
        drop(tx);
        assert!(!rx.is_closed(), "the pending timer can still send");
        sleep(2 * SEC);
        assert_eq!(rx.try_recv(), Ok(t0 + SEC));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed), "then it closes");
        // Fired from the heap, for a parked receiver.
        let t1 = now();
        let (tx, rx) = after(SEC).split();
        drop(tx);
        assert_eq!(rx.recv(), Some(t1 + SEC));
        assert_eq!(rx.recv(), None);
    });
}

#[test]
fn two_parked_receivers_one_value() {
    run_virtual(|| {
        let t0 = now();
        let ch = after(SEC);
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let c = ch.clone();
                gosched::go(move || c.recv_timeout(10 * SEC))
            })
            .collect();
        let mut got: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        got.sort_by_key(|r| r.is_err());
        assert_eq!(got, [Ok(t0 + SEC), Err(RecvTimeoutError::Timeout)]);
    });
}

/// Parked receivers (whose heap entry fires the timer) against polling ones
/// (which fire it themselves once it is due), on both Ps, many rounds: the
/// value arrives exactly once every round. Whoever gets it closes the
/// channel, which releases everybody else.
#[test]
fn heap_and_receive_firing_race_without_loss_or_double() {
    let rt = common::rt(2);
    let rounds = 400;
    let got = Arc::new(AtomicUsize::new(0));
    for round in 0..rounds {
        let ch = after(Duration::from_micros((round % 7) as u64 * 20));
        let mut hs = Vec::new();
        for parker in [true, false, true, false] {
            let (c, got) = (ch.clone(), got.clone());
            hs.push(rt.go(move || {
                let v = if parker {
                    c.recv()
                } else {
                    loop {
                        match c.try_recv() {
                            Ok(v) => break Some(v),
                            Err(TryRecvError::Closed) => break None,
                            Err(TryRecvError::Empty) => gosched::yield_now(),
                        }
                    }
                };
                if v.is_some() {
                    got.fetch_add(1, SeqCst);
                    c.close().unwrap();
                }
            }));
        }
        drop(ch);
        for h in hs {
            rt.block_on(h).unwrap();
        }
        assert_eq!(got.load(SeqCst), round + 1, "round {round}");
    }
}

/// The timer runs on the clock it was made on, whoever waits: an `after` of
/// a virtual runtime received by a plain thread arrives when the virtual
/// clock jumps (its entry goes on that runtime's heap, not on the real-time
/// heap of the thread's global runtime, an hour of real time away).
#[test]
fn a_virtual_after_received_by_a_plain_thread_follows_the_virtual_clock() {
    let got = run_virtual(|| {
        let t0 = now();
        let ch = after(HOUR);
        let done = gosched::chan(1);
        let d = done.clone();
        std::thread::spawn(move || {
            let _ = d.send(ch.recv());
        });
        (done.recv().unwrap(), t0)
    });
    assert_eq!(got.0, Some(got.1 + HOUR));
}

/// ... and a plain thread's receive compares the deadline with that clock,
/// not its own: the virtual clock stands still while a goroutine runs.
#[test]
fn a_plain_thread_does_not_fire_a_virtual_after_early() {
    run_virtual(|| {
        let ch = after(Duration::from_millis(1));
        // Real time passes; the virtual clock does not (this goroutine runs).
        std::thread::sleep(Duration::from_millis(20));
        let c = ch.clone();
        let r = std::thread::spawn(move || c.try_recv()).join().unwrap();
        assert_eq!(r, Err(TryRecvError::Empty), "virtual 1 ms has not passed");
    });
}

/// A timer whose heap went away unrun (the runtime of the receiver that put
/// it there shut down) is put on a heap again by the next receiver.
#[test]
fn a_timer_cleared_with_its_runtime_is_heaped_again() {
    let ch = after(Duration::from_millis(500)); // a plain thread: real clock
    {
        let rt = common::rt(2);
        let (c, stop) = (ch.clone(), gosched::chan::<()>(0));
        let s = stop.clone();
        let h = rt.go(move || {
            gosched::select! {
                recv(c) -> _v => panic!("fired before the runtime went"),
                recv(s) -> _v => {},
            }
        });
        // Until the select has put the timer on one of rt's heaps.
        let mut spins = 0;
        while rt.stats().timers == 0 {
            spins += 1;
            assert!(spins < 1_000_000, "the select never parked");
            std::thread::yield_now();
        }
        stop.close().unwrap();
        rt.block_on(h).unwrap();
        drop(rt); // its heaps are cleared, the entry with them
    }
    assert!(
        ch.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the timer never fired for a receiver parked after the clear"
    );
}
