//! Channels between plain OS threads, without the runtime (blocking `send`/`recv`
//! on a plain thread park the thread): the channel core, its ring and its wait
//! queues, small enough for Miri —
//! `cargo +nightly miri test -p gosched --test miri_chan` (see `.ci/run`) — and
//! a quick check in the normal build, with more iterations.
//!
//! Under Miri's weak-memory emulation, the FIFO tests check that no wake-up is
//! lost (a lost one leaves both threads parked: Miri reports a deadlock) and no
//! value is reordered on cap 0/1/2 channels, whose senders and receivers keep
//! parking and waking each other.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;

use gosched::chan::{Chan, TryRecvError, TrySendError};
use gosched::{chan, select};

/// Messages per test: Miri interprets, ~10⁴× slower.
const N: u64 = if cfg!(miri) { 200 } else { 20_000 };

/// One sender thread sends 0..N, then drops its end (closing the channel); the
/// receiver checks the order and the close.
fn one_to_one_in_order(cap: usize) {
    let (tx, rx) = chan::<u64>(cap).split();
    let sender = thread::spawn(move || {
        for i in 0..N {
            tx.send(i).unwrap();
        }
    });
    for i in 0..N {
        assert_eq!(rx.recv(), Some(i), "cap {cap}: lost or reordered");
    }
    assert_eq!(rx.recv(), None, "cap {cap}: the last sender's drop closes");
    sender.join().unwrap();
}

#[test]
fn two_threads_cap0_in_order() {
    one_to_one_in_order(0);
}

#[test]
fn two_threads_cap1_in_order() {
    one_to_one_in_order(1);
}

#[test]
fn two_threads_cap2_in_order() {
    one_to_one_in_order(2);
}

/// Two senders, two receivers: every value exactly once, each sender's values
/// in order.
fn two_by_two(cap: usize) {
    let ch = chan::<u64>(cap);
    let per = N / 2;
    let senders: Vec<_> = (0..2u64)
        .map(|p| {
            let tx = ch.clone();
            thread::spawn(move || {
                for i in 0..per {
                    tx.send(p << 32 | i).unwrap();
                }
            })
        })
        .collect();
    let receivers: Vec<_> = (0..2)
        .map(|_| {
            let rx = ch.clone();
            thread::spawn(move || rx.iter().collect::<Vec<u64>>())
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    ch.close().unwrap();
    let mut all = Vec::new();
    for r in receivers {
        let got = r.join().unwrap();
        for p in 0..2 {
            let mine: Vec<_> = got.iter().filter(|&&v| v >> 32 == p).collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "cap {cap}: sender {p}'s values out of order at one receiver: {mine:?}"
            );
        }
        all.extend(got);
    }
    all.sort_unstable();
    let want: Vec<u64> = (0..2)
        .flat_map(|p| (0..per).map(move |i| p << 32 | i))
        .collect();
    assert_eq!(all, want, "every value exactly once");
}

#[test]
fn two_by_two_cap0() {
    two_by_two(0);
}

#[test]
fn two_by_two_cap1() {
    two_by_two(1);
}

#[test]
fn close_wakes_a_parked_receiver_and_sender() {
    for cap in [0, 1] {
        let ch = chan::<u64>(cap);
        let rx = ch.clone();
        let receiver = thread::spawn(move || rx.recv());
        // Whether or not it parked yet, close makes it return None.
        ch.close().unwrap();
        assert_eq!(receiver.join().unwrap(), None);

        let ch = chan::<String>(cap);
        if cap == 1 {
            ch.send("fills the buffer".into()).unwrap();
        }
        let tx = ch.clone();
        let sender = thread::spawn(move || tx.send("x".to_string()));
        ch.close().unwrap();
        assert_eq!(sender.join().unwrap().unwrap_err().0, "x");
    }
}

fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// A parked receive or send that is dropped unlinks its waiter from the middle
/// of the wait queue (`WaitQueue::remove`), on both flavors of channel.
#[test]
fn dropped_parked_futures_unlink() {
    for cap in [0, 1] {
        let ch = chan::<String>(cap);
        {
            let mut a = pin!(ch.recv_async());
            let mut b = pin!(ch.recv_async());
            let mut c = pin!(ch.recv_async());
            assert!(poll_once(a.as_mut()).is_pending());
            assert!(poll_once(b.as_mut()).is_pending());
            assert!(poll_once(c.as_mut()).is_pending());
            // Dropped in reverse order: each leaves from the tail.
        }
        let mut a = Box::pin(ch.recv_async());
        let mut b = Box::pin(ch.recv_async());
        let mut c = Box::pin(ch.recv_async());
        assert!(poll_once(a.as_mut()).is_pending());
        assert!(poll_once(b.as_mut()).is_pending());
        assert!(poll_once(c.as_mut()).is_pending());
        drop(b);
        ch.try_send("first".into()).unwrap();
        assert_eq!(poll_once(a.as_mut()), Poll::Ready(Some("first".into())));
        drop(c); // the last parked receiver, unlinked: the queue is empty
        if cap == 0 {
            assert_eq!(
                ch.try_send("nobody".into()),
                Err(TrySendError::Full("nobody".into()))
            );
        }

        // Parked senders: cap 0 parks at once, cap 1 once the buffer is full.
        let ch = chan::<String>(cap);
        if cap == 1 {
            ch.try_send("buffered".into()).unwrap();
        }
        let mut s1 = Box::pin(ch.send_async("s1".into()));
        let mut s2 = Box::pin(ch.send_async("s2".into()));
        assert!(poll_once(s1.as_mut()).is_pending());
        assert!(poll_once(s2.as_mut()).is_pending());
        drop(s1); // withdrawn from the head: never sent
        if cap == 1 {
            assert_eq!(ch.try_recv().as_deref(), Ok("buffered"));
        }
        assert_eq!(ch.try_recv().as_deref(), Ok("s2"));
        assert_eq!(poll_once(s2.as_mut()), Poll::Ready(Ok(())));
        assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
    }
}

/// A receive that was handed a value and then dropped puts the value back.
#[test]
fn dropped_filled_recv_puts_back() {
    let ch = chan::<String>(0);
    let mut r = Box::pin(ch.recv_async());
    assert!(poll_once(r.as_mut()).is_pending());
    ch.try_send("v".into()).unwrap(); // straight into the parked receiver's slot
    drop(r);
    assert_eq!(ch.try_recv().as_deref(), Ok("v"), "the value came back");
}

/// A blocking select on a plain thread: the losing arms' waiters are unlinked
/// (`WaitQueue::remove`), the winning one gets the value.
#[test]
fn select_on_plain_threads() {
    let rounds = if cfg!(miri) { 4 } else { 200 };
    for round in 0..rounds {
        let (a, b) = (chan::<u64>(0), chan::<u64>(1));
        let (a2, b2) = (a.clone(), b.clone());
        let sender = thread::spawn(move || {
            if round % 2 == 0 {
                a2.send(round).unwrap();
            } else {
                b2.send(round).unwrap();
            }
        });
        let got = select! {
            recv(a) -> v => ("a", v),
            recv(b) -> v => ("b", v),
        };
        let want = if round % 2 == 0 { "a" } else { "b" };
        assert_eq!(got, (want, Some(round)));
        sender.join().unwrap();
        assert_eq!(a.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(b.try_recv(), Err(TryRecvError::Empty));
    }
}

/// Values still buffered or parked when the last handle goes are dropped once
/// (Miri's leak checker and the count see to it).
#[test]
fn values_are_dropped_with_the_channel() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    for cap in [0, 1, 3] {
        drops.store(0, SeqCst);
        let ch: Chan<Counted> = chan(cap);
        for _ in 0..cap {
            assert!(ch.try_send(Counted(drops.clone())).is_ok());
        }
        let (tx, rx) = ch.split();
        drop(rx); // nobody can receive: the buffered values stay until the end
        assert!(tx.try_send(Counted(drops.clone())).is_err());
        assert_eq!(drops.load(SeqCst), 1, "the refused value came back");
        drop(tx);
        assert_eq!(drops.load(SeqCst), cap + 1);
    }
}

// ---- capacity ------------------------------------------------------------------------

#[test]
fn zero_sized_values_take_any_capacity() {
    let ch = chan::<()>(1 << 40);
    assert_eq!(ch.cap(), 1 << 40);
    for i in 0..5 {
        ch.try_send(()).unwrap();
        assert_eq!(ch.len(), i + 1);
    }
    assert_eq!(ch.try_recv(), Ok(()));
    assert_eq!(ch.len(), 4);
    let full = chan::<()>(2);
    full.try_send(()).unwrap();
    full.try_send(()).unwrap();
    assert_eq!(full.try_send(()), Err(TrySendError::Full(())));
    assert!(chan::try_chan::<()>(isize::MAX as usize).is_ok());
    assert!(chan::try_chan::<()>(usize::MAX)
        .unwrap_err()
        .is_out_of_range());
}

#[test]
fn zero_sized_values_between_threads() {
    let (tx, rx) = chan::<()>(1).split();
    let sender = thread::spawn(move || {
        for _ in 0..N {
            tx.send(()).unwrap();
        }
    });
    assert_eq!(rx.iter().count() as u64, N);
    sender.join().unwrap();
}

#[test]
fn out_of_range_capacity_is_an_error() {
    // Bytes beyond isize::MAX: rejected before any allocation is tried.
    let e = chan::try_chan::<u64>(usize::MAX / 4).unwrap_err();
    assert!(e.is_out_of_range());
    assert_eq!(e.capacity(), usize::MAX / 4);
    assert!(e.to_string().contains("use a smaller capacity"), "{e}");
    let caught = std::panic::catch_unwind(|| chan::<u64>(usize::MAX / 4)).unwrap_err();
    let msg = caught
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(msg.contains("capacity out of range"), "{msg}");
}
