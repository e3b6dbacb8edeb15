//! loom models of the channel protocol: send/recv/close on buffered and
//! unbuffered channels, a cancelled receive racing a hand-off, and select's
//! "exactly one arm wins" claim racing a close; and a parked future re-polled
//! while its operation completes (without the waker, and with a new waker).
//!
//! Futures are driven by a tiny executor whose waker unparks the loom thread, so
//! the models exercise the real `SendFut`/`RecvFut`/`SelectFut` code.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Wake, Waker};

use super::core::{Inner, RecvFut, SendFut};
use super::select::{RecvArm, SelectArm, SelectFut, Selected};
use super::SendError;
use crate::loom::sync::Arc;
use loom::thread;

/// A wake-up flag with a condition variable. (Not `thread::unpark`: a late
/// wake-up of a select that already returned would then land on a thread that is
/// blocked in `join`, which loom does not model.)
#[derive(Default)]
struct Signal {
    woken: loom::sync::Mutex<bool>,
    cv: loom::sync::Condvar,
}

impl Wake for Signal {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.cv.notify_one();
    }
}

fn waker() -> Waker {
    Waker::from(std::sync::Arc::new(Signal::default()))
}

fn block_on<F: Future>(f: F) -> F::Output {
    let signal = std::sync::Arc::new(Signal::default());
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let mut woken = signal.woken.lock().unwrap();
        while !*woken {
            woken = signal.cv.wait(woken).unwrap();
        }
        *woken = false;
    }
}

fn send<T>(ch: &Inner<T>, v: T) -> Result<(), SendError<T>> {
    block_on(SendFut {
        inner: ch,
        value: Some(v),
        waiter: None,
    })
}

fn recv<T>(ch: &Inner<T>) -> Option<T> {
    block_on(RecvFut {
        inner: ch,
        waiter: None,
    })
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f)
}

/// For the models with three threads and a dozen lock operations each, whose
/// state space at 3 preemptions takes minutes: at most `bound` (or
/// LOOM_MAX_PREEMPTIONS, if lower).
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(b.preemption_bound.map_or(bound, |env| env.min(bound)));
    b.max_branches = 100_000;
    b.check(f);
}

/// Two values through a cap-1 channel: both arrive, in order.
#[test]
fn buffered_send_recv_in_order() {
    model(|| {
        let ch = Arc::new(Inner::<u32>::try_new(1).unwrap());
        let tx = ch.clone();
        let t = thread::spawn(move || {
            send(&tx, 1).unwrap();
            send(&tx, 2).unwrap();
        });
        assert_eq!(recv(&ch), Some(1));
        assert_eq!(recv(&ch), Some(2));
        t.join().unwrap();
    });
}

/// Unbuffered send vs receive vs close: the value is received, or it comes back
/// to the sender — never both, never neither.
#[test]
fn unbuffered_send_recv_close() {
    model(|| {
        let ch = Arc::new(Inner::<u32>::try_new(0).unwrap());
        let (tx, cl) = (ch.clone(), ch.clone());
        let sender = thread::spawn(move || send(&tx, 7));
        let closer = thread::spawn(move || cl.close().unwrap());
        let got = recv(&ch);
        let sent = sender.join().unwrap();
        closer.join().unwrap();
        match (got, sent) {
            (Some(7), Ok(())) => {}
            (None, Err(SendError(7))) => {}
            other => panic!("value lost or duplicated: {other:?}"),
        }
    });
}

/// Buffered: close races two sends (the second parks on the full buffer) and a
/// draining receiver. Whatever was sent arrives, in order; whatever failed came
/// back to the sender.
#[test]
fn buffered_close_with_parked_sender() {
    model_bounded(2, || {
        let ch = Arc::new(Inner::<u32>::try_new(1).unwrap());
        let (tx, cl) = (ch.clone(), ch.clone());
        let sender = thread::spawn(move || [send(&tx, 1), send(&tx, 2)]);
        let closer = thread::spawn(move || cl.close().unwrap());
        let mut got = Vec::new();
        while let Some(v) = recv(&ch) {
            got.push(v);
        }
        let results = sender.join().unwrap();
        closer.join().unwrap();
        let mut sent = Vec::new();
        for (r, v) in results.into_iter().zip([1, 2]) {
            match r {
                Ok(()) => sent.push(v),
                Err(SendError(back)) => assert_eq!(back, v),
            }
        }
        assert_eq!(got, sent);
    });
}

/// A parked receive is handed a value and then dropped: the value goes back
/// into the channel, so the non-blocking sender's success is never a loss.
#[test]
fn cancelled_recv_puts_value_back() {
    model(|| {
        let ch = Arc::new(Inner::<u32>::try_new(0).unwrap());
        let waker = waker();
        let mut cx = Context::from_waker(&waker);
        let mut fut = RecvFut {
            inner: &ch,
            waiter: None,
        };
        assert!(std::pin::Pin::new(&mut fut).poll(&mut cx).is_pending());
        let tx = ch.clone();
        let sender = thread::spawn(move || tx.try_send(9).is_ok());
        drop(fut);
        let delivered = sender.join().unwrap();
        assert_eq!(ch.try_recv().ok(), delivered.then_some(9));
    });
}

/// A select parked on two unbuffered channels; one sender hands it a value
/// while another thread closes the other channel. Exactly one arm wins; the
/// value is received iff the send succeeded.
#[test]
fn select_claim_vs_close() {
    model(|| {
        let a = Arc::new(Inner::<u32>::try_new(0).unwrap());
        let b = Arc::new(Inner::<u32>::try_new(0).unwrap());
        let (a2, b2) = (a.clone(), b.clone());
        let sender = thread::spawn(move || send(&a2, 5));
        let closer = thread::spawn(move || b2.close().unwrap());
        let (mut ra, mut rb) = (RecvArm::new(&a), RecvArm::new(&b));
        let picked = {
            let mut arms: [&mut dyn SelectArm; 2] = [&mut ra, &mut rb];
            block_on(SelectFut::new(&mut arms, false))
        };
        // Release the sender if its value was not taken.
        a.close().unwrap();
        let sent = sender.join().unwrap();
        closer.join().unwrap();
        match picked {
            Selected::Arm(0) => {
                assert_eq!(ra.take(), Some(5));
                assert_eq!(sent, Ok(()));
            }
            Selected::Arm(1) => {
                assert_eq!(rb.take(), None);
                assert_eq!(sent, Err(SendError(5)), "a losing arm took the value");
            }
            other => panic!("{other:?}"),
        }
    });
}

/// Buffered, lock-free side against the parking side: a receiver parks on an
/// empty cap-1 ring while two lock-free sends arrive. Both values arrive in
/// order and the receiver never sleeps through a value (a lost wake-up would
/// deadlock the model).
#[test]
fn buffered_parked_receiver_no_lost_wakeup() {
    model(|| {
        let ch = Arc::new(Inner::<u32>::try_new(1).unwrap());
        let rx = ch.clone();
        let r = thread::spawn(move || [recv(&rx), recv(&rx)]);
        send(&ch, 1).unwrap();
        send(&ch, 2).unwrap();
        assert_eq!(r.join().unwrap(), [Some(1), Some(2)]);
    });
}

/// Buffered select: a select receiving from a cap-1 channel or a closed-later
/// one, against a lock-free send. Exactly one arm wins; the value is never lost.
#[test]
fn buffered_select_vs_send() {
    model(|| {
        let a = Arc::new(Inner::<u32>::try_new(1).unwrap());
        let b = Arc::new(Inner::<u32>::try_new(1).unwrap());
        let (a2, b2) = (a.clone(), b.clone());
        let sender = thread::spawn(move || a2.try_send(5).is_ok());
        let closer = thread::spawn(move || b2.close().unwrap());
        let (mut ra, mut rb) = (RecvArm::new(&a), RecvArm::new(&b));
        let picked = {
            let mut arms: [&mut dyn SelectArm; 2] = [&mut ra, &mut rb];
            block_on(SelectFut::new(&mut arms, false))
        };
        assert!(sender.join().unwrap(), "cap 1 and empty: the send fits");
        closer.join().unwrap();
        match picked {
            Selected::Arm(0) => assert_eq!(ra.take(), Some(5)),
            Selected::Arm(1) => {
                assert_eq!(rb.take(), None);
                assert_eq!(a.try_recv().ok(), Some(5), "the value stayed buffered");
            }
            other => panic!("{other:?}"),
        }
    });
}

/// A parked receive is re-polled, spinning rather than waiting for its waker,
/// while a sender hands it a value. Only the waiter's state (`complete`'s Release,
/// `poll_state`'s Acquire) orders the sender's write of the slot before the
/// receiver's read: a Relaxed `complete` is a causality violation on the slot.
#[test]
fn repolled_recv_reads_handed_value() {
    model(|| {
        let ch = Arc::new(Inner::<u32>::try_new(0).unwrap());
        // Woken by the sender but never waited on: no synchronisation through it.
        let waker = waker();
        let mut cx = Context::from_waker(&waker);
        let mut fut = RecvFut {
            inner: &ch,
            waiter: None,
        };
        assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
        let tx = ch.clone();
        let sender = thread::spawn(move || assert!(tx.try_send(9).is_ok(), "a receiver is parked"));
        let got = loop {
            if let Poll::Ready(v) = Pin::new(&mut fut).poll(&mut cx) {
                break v;
            }
            thread::yield_now();
        };
        assert_eq!(got, Some(9));
        sender.join().unwrap();
    });
}

/// A parked receive, registered with waker A, is re-polled with a new waker B
/// while a sender completes it and wakes whatever waker it finds. `poll_state`
/// re-checks the state and stores B under the channel lock, so either the
/// re-poll sees the completion or the sender finds B: waiting for B never hangs
/// (a lost wake-up, with the sender waking the stale A, would deadlock the
/// model), and loom's cell checks that the sender's read of the waker after
/// unlocking never races a store.
#[test]
fn repoll_with_new_waker_no_lost_wakeup() {
    model(|| {
        let ch = Arc::new(Inner::<u32>::try_new(0).unwrap());
        let a = waker();
        let mut fut = RecvFut {
            inner: &ch,
            waiter: None,
        };
        assert!(Pin::new(&mut fut)
            .poll(&mut Context::from_waker(&a))
            .is_pending());
        let tx = ch.clone();
        let sender = thread::spawn(move || assert!(tx.try_send(9).is_ok(), "a receiver is parked"));
        // `block_on` polls with its own waker, B, and then waits for B.
        assert_eq!(block_on(fut), Some(9));
        sender.join().unwrap();
    });
}
