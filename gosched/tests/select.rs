//! `select!`: Go's semantics ported from what `test/chan/*.go` check (fairness,
//! doubleselect, non-blocking select on every state, send arms on full channels,
//! many arms), exactly-one-arm under contention, and cancel safety of
//! `select_async!`.

mod common;

use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::rt;
use gosched::chan::{Chan, Select, Selected, SendError, TrySendError};
use gosched::{chan, select, select_async};

/// Send on a cap-0 channel once a receiver (a parked select) is there to take it.
fn send_when_received<T>(ch: &Chan<T>, mut v: T) {
    loop {
        match ch.try_send(v) {
            Ok(()) => return,
            Err(TrySendError::Full(back)) => {
                v = back;
                gosched::yield_now();
            }
            Err(TrySendError::Closed(_)) => panic!("closed"),
        }
    }
}

#[test]
fn picks_the_ready_arm_and_binds_values() {
    let (a, b) = (chan::<i32>(1), chan::<String>(1));
    b.send("hi".to_string()).unwrap();
    let got = select! {
        recv(a) -> v => format!("a {v:?}"),
        recv(b) -> v => format!("b {v:?}"),
    };
    assert_eq!(got, r#"b Some("hi")"#);

    // A send arm on a channel with room wins over a recv arm with nothing.
    let r = select! {
        recv(a) -> _ => unreachable!(),
        send(b, "x".to_string()) -> res => { res.unwrap(); 1 }
    };
    assert_eq!(r, 1);
    assert_eq!(b.try_recv().unwrap(), "x");
}

#[test]
fn default_and_after() {
    let a = chan::<i32>(0);
    let r = select! {
        recv(a) -> _ => 1,
        default => 2,
    };
    assert_eq!(r, 2);

    let t0 = Instant::now();
    let r = select! {
        recv(a) -> _ => 1,
        after(Duration::from_millis(30)) => 3,
    };
    assert_eq!(r, 3);
    assert!(t0.elapsed() >= Duration::from_millis(30));

    // A ready arm wins over `after`.
    let b = chan::<i32>(1);
    b.send(4).unwrap();
    let r = select! {
        recv(b) -> v => v.unwrap(),
        after(Duration::ZERO) => 0,
    };
    assert_eq!(r, 4);
    // The timer registration is gone: a cap-0 channel has no stale receiver.
    assert_eq!(a.try_send(1), Err(TrySendError::Full(1)));
}

/// Go's select fairness: two always-ready arms are each chosen 50% ± 5%.
#[test]
fn fairness_between_two_ready_arms() {
    const N: usize = 100_000;
    // Recv arms on closed channels are always ready.
    let (a, b) = (chan::<u8>(0), chan::<u8>(0));
    a.close().unwrap();
    b.close().unwrap();
    let mut hits = [0usize; 2];
    for _ in 0..N {
        let i = select! {
            recv(a) -> v => { assert!(v.is_none()); 0 }
            recv(b) -> v => { assert!(v.is_none()); 1 }
        };
        hits[i] += 1;
    }
    for h in hits {
        let share = h as f64 / N as f64;
        assert!((0.45..=0.55).contains(&share), "recv arms: {hits:?}");
    }

    // Send arms on channels with room, drained after each select.
    let (a, b) = (chan::<u8>(1), chan::<u8>(1));
    let mut hits = [0usize; 2];
    for _ in 0..N {
        let i = select! {
            send(a, 0) -> r => { r.unwrap(); 0 }
            send(b, 1) -> r => { r.unwrap(); 1 }
        };
        hits[i] += 1;
        let c = if i == 0 { &a } else { &b };
        assert_eq!(c.try_recv().unwrap() as usize, i);
        assert!(a.is_empty() && b.is_empty(), "the losing arm sent too");
    }
    for h in hits {
        let share = h as f64 / N as f64;
        assert!((0.45..=0.55).contains(&share), "send arms: {hits:?}");
    }
}

/// Uniform among three ready arms out of four (not merely a random start).
#[test]
fn fairness_is_uniform_among_ready_arms() {
    const N: usize = 60_000;
    let chans: Vec<Chan<u8>> = (0..4).map(|_| chan(0)).collect();
    for c in &chans[..3] {
        c.close().unwrap();
    }
    let mut hits = [0usize; 4];
    for _ in 0..N {
        let i = select! {
            recv(chans[0]) -> _ => 0,
            recv(chans[1]) -> _ => 1,
            recv(chans[2]) -> _ => 2,
            recv(chans[3]) -> _ => 3,
        };
        hits[i] += 1;
    }
    assert_eq!(hits[3], 0);
    for h in &hits[..3] {
        let share = *h as f64 / N as f64;
        assert!((0.30..=0.37).contains(&share), "{hits:?}");
    }
}

/// Non-blocking select on every channel state.
#[test]
fn nonblocking_select_on_every_state() {
    let rt = rt(2);
    fn try_recv<T: Send>(c: &Chan<T>) -> Option<Option<T>> {
        select! { recv(c) -> v => Some(v), default => None }
    }
    fn try_send<T: Send>(c: &Chan<T>, v: T) -> Option<Result<(), SendError<T>>> {
        select! { send(c, v) -> r => Some(r), default => None }
    }
    // Unbuffered, nobody waiting: both directions take `default`.
    let c = chan::<i32>(0);
    assert_eq!(try_recv(&c), None);
    assert_eq!(try_send(&c, 1), None);
    // Unbuffered with a parked receiver: the send arm is ready.
    let c2 = c.clone();
    let h = rt.go(move || c2.recv());
    loop {
        match try_send(&c, 5) {
            Some(r) => {
                r.unwrap();
                break;
            }
            None => std::thread::yield_now(),
        }
    }
    assert_eq!(rt.block_on(h).unwrap(), Some(5));
    // Unbuffered with a parked sender: the recv arm is ready.
    let c2 = c.clone();
    let h = rt.go(move || c2.send(6).unwrap());
    let got = loop {
        if let Some(v) = try_recv(&c) {
            break v;
        }
        std::thread::yield_now();
    };
    assert_eq!(got, Some(6));
    rt.block_on(h).unwrap();
    // Buffered: empty, partly full, full.
    let b = chan::<i32>(2);
    assert_eq!(try_recv(&b), None);
    assert_eq!(try_send(&b, 1), Some(Ok(())));
    assert_eq!(try_send(&b, 2), Some(Ok(())));
    assert_eq!(try_send(&b, 3), None, "full: send takes default");
    assert_eq!(try_recv(&b), Some(Some(1)));
    // Closed with data: drains, then `None`; sends are ready and fail.
    b.close().unwrap();
    assert_eq!(try_recv(&b), Some(Some(2)));
    assert_eq!(try_recv(&b), Some(None));
    assert_eq!(try_send(&b, 9), Some(Err(SendError(9))));
    c.close().unwrap();
    assert_eq!(try_recv(&c), Some(None));
    assert_eq!(try_send(&c, 9), Some(Err(SendError(9))));
}

/// Closing a channel wakes a select parked on it: recv arms get `None`, send
/// arms get their value back. Deterministic with a hand-polled async select;
/// then racing a goroutine (close before or after it parks: same outcome).
#[test]
fn close_wakes_parked_select() {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    for cap in [0, 1] {
        let (a, b) = (chan::<i32>(cap), chan::<i32>(0));
        if cap == 1 {
            a.send(0).unwrap(); // full: the send arm parks
        }
        let mut fut = pin!(async {
            select_async! {
                send(a, 42) -> r => r.unwrap_err().0,
                recv(b) -> v => { assert_eq!(v, None); -1 }
            }
        });
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        a.close().unwrap();
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(42), "cap {cap}");
        // And a recv arm woken by close.
        let mut fut = pin!(async {
            select_async! { recv(b) -> v => v }
        });
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        b.close().unwrap();
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(None));
    }
    let rt = rt(2);
    for round in 0..300 {
        let cap = round % 2;
        let (a, b) = (chan::<i32>(cap), chan::<i32>(0));
        if cap == 1 {
            a.send(0).unwrap();
        }
        let (a2, b2) = (a.clone(), b.clone());
        let h = rt.go(move || {
            select! {
                send(a2, 42) -> r => r.unwrap_err().0,
                recv(b2) -> v => { assert_eq!(v, None); -1 }
            }
        });
        a.close().unwrap();
        assert_eq!(rt.block_on(h).unwrap(), 42);
        if cap == 1 {
            assert_eq!(a.recv(), Some(0));
        }
        assert_eq!(a.recv(), None, "the failed send left nothing behind");
    }
}

/// Select with send arms on full channels: exactly one send completes when one
/// channel gets room, and the other channel is untouched.
#[test]
fn send_arms_on_full_channels() {
    let rt = rt(2);
    for _ in 0..200 {
        let (a, b) = (chan::<u32>(1), chan::<u32>(1));
        a.send(1).unwrap();
        b.send(2).unwrap();
        let (a2, b2) = (a.clone(), b.clone());
        let h = rt.go(move || {
            select! {
                send(a2, 10) -> r => { r.unwrap(); 'a' }
                send(b2, 20) -> r => { r.unwrap(); 'b' }
            }
        });
        assert_eq!(a.recv(), Some(1));
        let which = rt.block_on(h).unwrap();
        match which {
            // It may have completed on `a` (room made) or, never, on `b`.
            'a' => {
                assert_eq!(a.try_recv(), Ok(10));
                assert_eq!(b.len(), 1);
                assert_eq!(b.try_recv(), Ok(2));
            }
            _ => panic!("the send arm on the still-full channel completed"),
        }
        assert!(a.is_empty() && b.is_empty());
    }
}

/// Go's doubleselect: 4 senders each select over 4 unbuffered channels, 4
/// receivers each select over their channel and a done channel. Every value
/// arrives exactly once.
#[test]
fn doubleselect_no_value_twice_or_lost() {
    const SENDERS: u64 = 4;
    const PER: u64 = 20_000;
    let rt = rt(2);
    let chans: Vec<Chan<u64>> = (0..4).map(|_| chan(0)).collect();
    let done = chan::<()>(0);
    let mut receivers = Vec::new();
    for c in &chans {
        let (c, done) = (c.clone(), done.clone());
        receivers.push(rt.go(move || {
            let mut got = Vec::new();
            loop {
                select! {
                    recv(c) -> v => got.push(v.unwrap()),
                    recv(done) -> _ => return got,
                }
            }
        }));
    }
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let cs = chans.clone();
        senders.push(rt.go(move || {
            for i in 0..PER {
                let v = s * PER + i;
                select! {
                    send(cs[0], v) -> r => r.unwrap(),
                    send(cs[1], v) -> r => r.unwrap(),
                    send(cs[2], v) -> r => r.unwrap(),
                    send(cs[3], v) -> r => r.unwrap(),
                }
            }
        }));
    }
    for h in senders {
        rt.block_on(h).unwrap();
    }
    done.close().unwrap();
    let mut seen = HashSet::new();
    let mut total = 0;
    for h in receivers {
        for v in rt.block_on(h).unwrap() {
            assert!(seen.insert(v), "value {v} delivered twice");
            total += 1;
        }
    }
    assert_eq!(total, SENDERS * PER, "values lost");
}

/// A select parked on two unbuffered channels; two threads try to hand it a
/// value at the same moment. Exactly one hand-off succeeds, every time.
#[test]
fn exactly_one_arm_wins_under_contention() {
    let rt = rt(2);
    for round in 0..3_000u32 {
        let (a, b) = (chan::<u32>(0), chan::<u32>(0));
        let (a2, b2) = (a.clone(), b.clone());
        let h = rt.go(move || {
            select! {
                recv(a2) -> v => (0, v.unwrap()),
                recv(b2) -> v => (1, v.unwrap()),
            }
        });
        let start = Arc::new(Barrier::new(2));
        let ok = Arc::new(AtomicUsize::new(0));
        let spawn = |c: Chan<u32>, v: u32| {
            let (start, ok) = (start.clone(), ok.clone());
            std::thread::spawn(move || {
                start.wait();
                // Try until the select is parked or has been served.
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    match c.try_send(v) {
                        Ok(()) => {
                            ok.fetch_add(1, SeqCst);
                            return true;
                        }
                        Err(_) if c.is_closed() => return false,
                        Err(_) => std::hint::spin_loop(),
                    }
                }
                false
            })
        };
        let ta = spawn(a.clone(), round * 2);
        let tb = spawn(b.clone(), round * 2 + 1);
        let (arm, v) = rt.block_on(h).unwrap();
        // The select is done: stop the other sender.
        a.close().unwrap();
        b.close().unwrap();
        let (ra, rb) = (ta.join().unwrap(), tb.join().unwrap());
        assert_eq!(ok.load(SeqCst), 1, "round {round}: {ra} {rb}");
        assert_eq!(v, round * 2 + arm);
        assert_eq!((ra, rb), (arm == 0, arm == 1));
    }
}

/// Many arms: a 64-arm select built by `select!` and the dynamic `Select`.
#[test]
fn sixty_four_arms() {
    let rt = rt(2);
    let chans: Vec<Chan<usize>> = (0..64).map(|_| chan(0)).collect();
    macro_rules! select64 {
        ($c:ident; $($i:literal)*) => {
            select! { $( recv($c[$i]) -> v => ($i, v.unwrap()), )* }
        };
    }
    for k in [0usize, 17, 42, 63] {
        let cs = chans.clone();
        let h = rt.go(move || {
            select64!(cs; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
                24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48
                49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
        });
        send_when_received(&chans[k], 1000 + k);
        assert_eq!(rt.block_on(h).unwrap(), (k, 1000 + k));
        // Every other registration is gone: nobody takes a value any more.
        for c in &chans {
            assert!(matches!(c.try_send(0), Err(TrySendError::Full(0))));
        }
    }
    // The same with the run-time builder, from a plain thread.
    let cs = chans.clone();
    let h = rt.go(move || send_when_received(&cs[33], 7));
    let mut arms: Vec<_> = chans.iter().map(|c| c.recv_arm()).collect();
    let mut sel = Select::new();
    for a in arms.iter_mut() {
        sel.arm(a);
    }
    let picked = sel.select();
    drop(sel);
    assert_eq!(picked, Selected::Arm(33));
    assert_eq!(arms[33].take(), Some(7));
    assert!(arms
        .iter()
        .enumerate()
        .all(|(i, a)| i == 33 || !a.is_selected()));
    rt.block_on(h).unwrap();
}

/// The same select in a goroutine, an async task and on a plain thread.
#[test]
fn select_from_every_kind_of_caller() {
    let rt = rt(2);
    let (a, b) = (chan::<u32>(0), chan::<u32>(0));
    let (a1, b1) = (a.clone(), b.clone());
    let g =
        rt.go(move || select! { recv(a1) -> v => v.unwrap(), recv(b1) -> v => v.unwrap() + 100 });
    let (a2, b2) = (a.clone(), b.clone());
    let t = rt.spawn(async move {
        select_async! { recv(a2) -> v => v.unwrap(), recv(b2) -> v => v.unwrap() + 100 }
    });
    let (a3, b3) = (a.clone(), b.clone());
    let th = std::thread::spawn(move || {
        select! { recv(a3) -> v => v.unwrap(), recv(b3) -> v => v.unwrap() + 100 }
    });
    for i in 0..3 {
        if i % 2 == 0 {
            a.send(i).unwrap();
        } else {
            b.send(i).unwrap();
        }
    }
    let mut got = vec![
        rt.block_on(g).unwrap(),
        rt.block_on(t).unwrap(),
        th.join().unwrap(),
    ];
    got.sort();
    assert_eq!(got, vec![0, 2, 101]);
}

fn noop_waker() -> Waker {
    Waker::noop().clone()
}

/// Dropping a parked `select_async!` after a value was handed to it puts the
/// value back into the channel; dropping it before withdraws every waiter.
#[test]
fn dropped_async_select_loses_nothing() {
    let (a, b) = (chan::<String>(0), chan::<String>(0));
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    {
        let mut fut = pin!(async {
            select_async! {
                recv(a) -> v => v,
                recv(b) -> v => v,
            }
        });
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        // The select is parked on both: a cap-0 send is taken by it.
        a.try_send("kept".to_string()).unwrap();
        // No other arm can take a value any more.
        assert!(matches!(b.try_send("x".into()), Err(TrySendError::Full(_))));
        // Dropped without observing the value.
    }
    assert_eq!(
        a.try_recv().unwrap(),
        "kept",
        "the handed-over value came back"
    );
    assert!(a.try_recv().is_err());
    {
        let mut fut = pin!(async {
            select_async! { recv(a) -> v => v, recv(b) -> v => v }
        });
        assert!(fut.as_mut().poll(&mut cx).is_pending());
    }
    // Withdrawn: nobody receives on either channel.
    assert!(matches!(a.try_send("y".into()), Err(TrySendError::Full(_))));
    assert!(matches!(b.try_send("y".into()), Err(TrySendError::Full(_))));
    // A pending send arm withdraws its value with it (it was never sent).
    let c = chan::<String>(0);
    {
        let mut fut = pin!(async {
            select_async! { send(c, "z".to_string()) -> r => r }
        });
        assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Pending));
    }
    assert!(
        c.try_recv().is_err(),
        "a withdrawn send delivered its value"
    );
}

/// Both sides selecting on unbuffered channels, many rounds, both Ps busy:
/// producers select-send over two channels, consumers select-receive over both;
/// every message arrives exactly once.
#[test]
fn select_mpmc_stress() {
    const PRODUCERS: u64 = 4;
    const PER: u64 = 50_000;
    let rt = rt(2);
    for cap in [0usize, 16] {
        let (x, y) = (chan::<u64>(cap), chan::<u64>(cap));
        let done = chan::<()>(0);
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let (x, y, done) = (x.clone(), y.clone(), done.clone());
                rt.go(move || {
                    let mut sum = 0u64;
                    let mut n = 0u64;
                    loop {
                        let v = select! {
                            recv(x) -> v => v,
                            recv(y) -> v => v,
                            recv(done) -> _ => None,
                        };
                        match v {
                            Some(v) => {
                                sum += v;
                                n += 1;
                            }
                            None => {
                                // Drain what is still buffered.
                                while let Ok(v) = x.try_recv().or_else(|_| y.try_recv()) {
                                    sum += v;
                                    n += 1;
                                }
                                return (sum, n);
                            }
                        }
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (x, y) = (x.clone(), y.clone());
                rt.go(move || {
                    for i in 0..PER {
                        let v = p * PER + i + 1;
                        select! {
                            send(x, v) -> r => r.unwrap(),
                            send(y, v) -> r => r.unwrap(),
                        }
                    }
                })
            })
            .collect();
        for h in producers {
            rt.block_on(h).unwrap();
        }
        done.close().unwrap();
        let (mut sum, mut n) = (0, 0);
        for h in consumers {
            let (s, c) = rt.block_on(h).unwrap();
            sum += s;
            n += c;
        }
        let total = PRODUCERS * PER;
        assert_eq!(n, total, "cap {cap}");
        assert_eq!(sum, total * (total + 1) / 2, "cap {cap}");
    }
}

#[test]
fn select_on_timer_channels() {
    let tick = gosched::time::tick(Duration::from_millis(2));
    let stop = gosched::time::after(Duration::from_millis(40));
    let mut ticks = 0;
    loop {
        select! {
            recv(tick.chan()) -> t => { assert!(t.is_some()); ticks += 1; }
            recv(stop) -> _ => break,
        }
    }
    assert!(ticks >= 3, "{ticks} ticks");
}

#[test]
fn empty_select_with_default_and_after() {
    let r = select! { default => 1 };
    assert_eq!(r, 1);
    let r = select! { after(Duration::from_millis(1)) => 2 };
    assert_eq!(r, 2);
    let a = chan::<()>(0);
    let r: Result<(), SendError<()>> = select! { send(a, ()) -> r => r, default => Ok(()) };
    assert!(r.is_ok());
}

/// Go registers a parked select's cases in random order, so that cases on one
/// channel win equally often even when the select parks before any is ready
/// (issue 18, item 4). Three receive arms (then three send arms) on one
/// rendezvous channel: the select parks, then the partner arrives.
#[test]
fn same_channel_arms_of_a_parked_select_win_uniformly() {
    const ROUNDS: usize = 3_000;
    let ch = gosched::chan::<usize>(0);
    let mut wins = [0usize; 3];
    for round in 0..ROUNDS {
        let mut arms = [ch.recv_arm(), ch.recv_arm(), ch.recv_arm()];
        let [a, b, c] = &mut arms;
        let k = park_then(&mut [a, b, c], || {
            ch.try_send(round).expect("a receiver is parked")
        });
        wins[k] += 1;
    }
    let mut send_wins = [0usize; 3];
    for _ in 0..ROUNDS {
        let mut arms = [ch.send_arm(0), ch.send_arm(1), ch.send_arm(2)];
        let [a, b, c] = &mut arms;
        let mut got = None;
        let k = park_then(&mut [a, b, c], || got = ch.try_recv().ok());
        assert_eq!(got, Some(k), "the value came from the winning arm");
        send_wins[k] += 1;
    }
    for w in wins.iter().chain(send_wins.iter()) {
        let share = *w as f64 / ROUNDS as f64;
        assert!(
            (share - 1.0 / 3.0).abs() <= 0.05,
            "a case won {share:.3} of the rounds (recv {wins:?}, send {send_wins:?})"
        );
    }
}

/// Park a select over `arms` (hand-polled: nothing may be ready), run `partner`,
/// and return the arm that completed.
fn park_then(arms: &mut [&mut dyn gosched::chan::SelectArm], partner: impl FnOnce()) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut sel = Select::new();
    for a in arms.iter_mut() {
        sel.arm(*a);
    }
    let mut fut = pin!(sel.select_async());
    assert!(
        fut.as_mut().poll(&mut cx).is_pending(),
        "nothing is ready yet"
    );
    partner();
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Selected::Arm(k)) => k,
        other => panic!("the parked select did not complete: {other:?}"),
    }
}

/// `recv(time::after(d))` — what a Go user types first — compiles and works: the
/// temporary channel lives for the whole select (issue 18, item 5).
#[test]
fn recv_on_a_temporary_after_channel() {
    let a = gosched::chan::<u8>(0);
    let t0 = Instant::now();
    let fired = select! {
        recv(a) -> _ => false,
        recv(gosched::time::after(Duration::from_millis(5))) -> v => v.is_some(),
    };
    assert!(fired);
    assert!(t0.elapsed() >= Duration::from_millis(5));
    let rt = rt(2);
    let fired = rt.block_on(async {
        gosched::select_async! {
            recv(gosched::time::after(Duration::from_millis(1))) -> v => v.is_some(),
        }
    });
    assert!(fired);
}
