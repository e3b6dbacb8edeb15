//! Channels: Go's semantics (rendezvous, buffering, close), the three kinds of
//! callers, cancel safety, and an MPMC stress with per-producer order checks.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

use common::rt;
use gosched::chan::{self, RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};

#[test]
fn unbuffered_is_a_rendezvous() {
    let rt = rt(2);
    let ch = gosched::chan::<u32>(0);
    let sent = Arc::new(AtomicBool::new(false));
    let (c2, s2) = (ch.clone(), sent.clone());
    let sender = rt.go(move || {
        c2.send(7).unwrap();
        s2.store(true, SeqCst);
    });
    // Nobody receives: the send cannot complete (no buffer).
    assert_eq!(ch.try_send(1), Err(TrySendError::Full(1)));
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !sent.load(SeqCst),
        "a cap-0 send completed without a receiver"
    );
    assert_eq!(ch.len(), 0);
    assert_eq!(ch.recv(), Some(7));
    rt.block_on(sender).unwrap();
    assert!(sent.load(SeqCst));
}

#[test]
fn buffered_fifo_full_empty() {
    let ch = gosched::chan::<i32>(3);
    assert_eq!(ch.cap(), 3);
    for i in 0..3 {
        ch.try_send(i).unwrap();
    }
    assert_eq!(ch.try_send(9), Err(TrySendError::Full(9)));
    assert_eq!(ch.len(), 3);
    assert_eq!(ch.try_recv(), Ok(0));
    assert_eq!(ch.try_recv(), Ok(1));
    assert_eq!(ch.try_recv(), Ok(2));
    assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn close_semantics() {
    let rt = rt(2);
    // Buffered with data: receivers drain, then None; sends fail with the value.
    let ch = gosched::chan::<i32>(2);
    ch.send(1).unwrap();
    ch.close().unwrap();
    assert!(ch.is_closed());
    assert_eq!(ch.close(), Err(chan::CloseError));
    assert_eq!(ch.send(5).unwrap_err().0, 5);
    assert_eq!(ch.try_send(6), Err(TrySendError::Closed(6)));
    assert_eq!(ch.recv(), Some(1));
    assert_eq!(ch.recv(), None);
    assert_eq!(ch.try_recv(), Err(TryRecvError::Closed));

    // Parked receivers wake with None; parked senders get their value back.
    let ch = gosched::chan::<i32>(0);
    let parked = Arc::new(AtomicUsize::new(0));
    let rs: Vec<_> = (0..4)
        .map(|_| {
            let c = ch.clone();
            rt.go(move || c.recv())
        })
        .collect();
    let ch2 = gosched::chan::<i32>(1);
    ch2.send(0).unwrap();
    let ss: Vec<_> = (1..=4)
        .map(|i| {
            let (c, p) = (ch2.clone(), parked.clone());
            rt.go(move || {
                p.fetch_add(1, SeqCst);
                c.send(i)
            })
        })
        .collect();
    while parked.load(SeqCst) < 4 {
        std::thread::yield_now();
    }
    // The goroutines may or may not have reached the wait queues yet: the
    // assertions hold on either path. (The parked path is pinned down
    // deterministically in tests/select.rs `close_wakes_parked_select` and the
    // loom models.)
    ch.close().unwrap();
    ch2.close().unwrap();
    for r in rs {
        assert_eq!(rt.block_on(r).unwrap(), None);
    }
    let mut back: Vec<i32> = ss
        .into_iter()
        .map(|s| rt.block_on(s).unwrap().unwrap_err().0)
        .collect();
    back.sort();
    assert_eq!(back, vec![1, 2, 3, 4]);
    assert_eq!(ch2.recv(), Some(0));
    assert_eq!(ch2.recv(), None);
}

#[test]
fn dropping_last_sender_closes_and_last_receiver_fails_sends() {
    let (tx, rx) = gosched::chan::<i32>(4).split();
    let tx2 = tx.clone();
    tx.send(1).unwrap();
    drop(tx);
    tx2.send(2).unwrap();
    drop(tx2);
    let got: Vec<_> = rx.iter().collect();
    assert_eq!(got, vec![1, 2]);

    let (tx, rx) = gosched::chan::<i32>(0).split();
    drop(rx);
    assert_eq!(tx.send(3).unwrap_err().0, 3);
}

/// A split channel is freed once both halves are gone: the values still in
/// its buffer are dropped (`split` used to leak the channel).
#[test]
fn split_channel_is_freed_with_its_values() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let ch = gosched::chan(2);
    ch.try_send(Counted(dropped.clone())).ok().unwrap();
    let (tx, rx) = ch.split();
    tx.try_send(Counted(dropped.clone())).ok().unwrap();
    drop(tx);
    drop(rx);
    assert_eq!(
        dropped.load(SeqCst),
        2,
        "the buffered values were not dropped"
    );
}

#[test]
fn timeouts_give_values_back() {
    let rt = rt(2);
    let ch = gosched::chan::<i32>(0);
    let c = ch.clone();
    let h = rt.go(move || {
        let e = c.send_timeout(4, Duration::from_millis(20)).unwrap_err();
        assert!(matches!(e, SendTimeoutError::Timeout(4)));
        c.recv_timeout(Duration::from_millis(20))
    });
    assert_eq!(rt.block_on(h).unwrap(), Err(RecvTimeoutError::Timeout));
    // Plain-thread forms too.
    assert_eq!(
        ch.recv_timeout(Duration::from_millis(5)),
        Err(RecvTimeoutError::Timeout)
    );
}

#[test]
fn mixed_callers_round_trip() {
    // plain thread → goroutine → async task → plain thread
    let rt = rt(2);
    let (a, b, c) = (
        gosched::chan::<u64>(0),
        gosched::chan::<u64>(0),
        gosched::chan::<u64>(0),
    );
    let (a2, b2) = (a.clone(), b.clone());
    let g = rt.go(move || {
        for v in &a2 {
            b2.send(v + 1).unwrap();
        }
        b2.close().unwrap();
    });
    let (b3, c3) = (b.clone(), c.clone());
    let t = rt.spawn(async move {
        while let Some(v) = b3.recv_async().await {
            c3.send_async(v * 2).await.unwrap();
        }
        c3.close().unwrap();
    });
    let feeder = std::thread::spawn(move || {
        for i in 0..10_000 {
            a.send(i).unwrap();
        }
        a.close().unwrap();
    });
    let got: Vec<u64> = c.iter().collect();
    assert_eq!(got, (0..10_000).map(|i| (i + 1) * 2).collect::<Vec<_>>());
    feeder.join().unwrap();
    rt.block_on(g).unwrap();
    rt.block_on(t).unwrap();
}

#[test]
fn dropped_recv_future_loses_nothing() {
    let rt = rt(2);
    for _ in 0..200 {
        let ch = gosched::chan::<u32>(0);
        let c = ch.clone();
        // A task parks a receive, then gives up as soon as a value may be in flight.
        let abandon = rt.spawn(async move {
            let fut = c.recv_async();
            let mut fut = Box::pin(fut);
            let first = futures_poll_once(fut.as_mut()).await.flatten();
            gosched::task::yield_now().await;
            drop(fut); // maybe after a sender filled it
            first
        });
        let s = ch.clone();
        let sender = rt.go(move || s.send(42).unwrap());
        // The first poll may have received it (the sender came first); otherwise it
        // is still with the sender (parked) or back in the channel, and a fresh
        // receive gets it.
        match rt.block_on(abandon).unwrap() {
            Some(v) => assert_eq!(v, 42),
            None => assert_eq!(ch.recv(), Some(42)),
        }
        rt.block_on(sender).unwrap();
    }
}

async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(move |cx| match std::pin::Pin::new(&mut f).poll(cx) {
        std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

fn mpmc(cap: usize, per_producer: u64) {
    let rt = rt(2);
    let ch = gosched::chan::<(u8, u64)>(cap);
    let producers: Vec<_> = (0..4u8)
        .map(|p| {
            let c = ch.clone();
            rt.go(move || {
                for seq in 0..per_producer {
                    c.send((p, seq)).unwrap();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let c = ch.clone();
            rt.go(move || {
                let mut last = [None::<u64>; 4];
                let mut got = Vec::new();
                while let Some((p, seq)) = c.recv() {
                    // Per-producer order is kept as seen by each consumer.
                    if let Some(l) = last[p as usize] {
                        assert!(seq > l, "producer {p}: {seq} after {l}");
                    }
                    last[p as usize] = Some(seq);
                    got.push((p, seq));
                }
                got
            })
        })
        .collect();
    for p in producers {
        rt.block_on(p).unwrap();
    }
    ch.close().unwrap();
    let mut all: Vec<(u8, u64)> = consumers
        .into_iter()
        .flat_map(|c| rt.block_on(c).unwrap())
        .collect();
    assert_eq!(all.len() as u64, 4 * per_producer);
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len() as u64,
        4 * per_producer,
        "a message was received twice"
    );
}

#[test]
fn mpmc_cap_1024_every_message_exactly_once() {
    mpmc(1024, 250_000);
}

#[test]
fn mpmc_cap_0_every_message_exactly_once() {
    mpmc(0, 50_000);
}

// ---- capacity --------------------------------------------------------------------

/// A capacity whose buffer cannot be allocated: 1 << 40 `u64`s (16 TiB of
/// slots). Where the kernel hands out any amount of address space without
/// backing it (`vm.overcommit_memory = 1`) that allocation would succeed and
/// filling in its slots would exhaust memory, so there the test asks for more
/// than the address space holds (2⁶² bytes: still within `isize::MAX`).
fn unallocatable_u64_cap() -> usize {
    let always =
        std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|s| s.trim() == "1");
    if always {
        1 << 58
    } else {
        1 << 40
    }
}

#[test]
fn huge_capacity_panics_with_a_clear_message() {
    let cap = unallocatable_u64_cap();
    let caught = std::panic::catch_unwind(|| gosched::chan::<u64>(cap))
        .expect_err("chan::<u64>(1 << 40) made a channel");
    let msg = caught
        .downcast_ref::<String>()
        .expect("the panic carries a message");
    assert!(
        msg.contains(&format!("gosched::chan::<u64>({cap})"))
            && msg.contains("cannot allocate the buffer")
            && msg.contains("use a smaller capacity"),
        "unclear message: {msg}"
    );

    // Out of range: the bytes cannot even be counted in an isize.
    let caught = std::panic::catch_unwind(|| gosched::chan::<u64>(usize::MAX))
        .expect_err("chan::<u64>(usize::MAX) made a channel");
    let msg = caught.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("capacity out of range") && msg.contains("use a smaller capacity"),
        "unclear message: {msg}"
    );
}

#[test]
fn try_chan_returns_the_error() {
    let cap = unallocatable_u64_cap();
    let e = chan::try_chan::<u64>(cap).unwrap_err();
    assert_eq!(e.capacity(), cap);
    assert!(!e.is_out_of_range());
    // A typed error: Display + std::error::Error.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
    assert!(boxed.to_string().contains("cannot allocate the buffer"));

    let e = chan::try_chan::<[u8; 64]>(usize::MAX / 8).unwrap_err();
    assert!(e.is_out_of_range());
    assert_eq!(e, chan::try_chan::<[u8; 64]>(usize::MAX / 8).unwrap_err());

    // Normal capacities are unaffected.
    let ch = chan::try_chan::<u64>(4).unwrap();
    assert_eq!(ch.cap(), 4);
    ch.try_send(1).unwrap();
    assert_eq!(ch.recv(), Some(1));
    assert_eq!(chan::try_chan::<u64>(0).unwrap().cap(), 0);
}

#[test]
fn zero_sized_values_take_any_capacity() {
    // As in Go, `make(chan struct{}, n)` needs no buffer memory, whatever `n`.
    let ch = gosched::chan::<()>(1 << 40);
    assert_eq!(ch.cap(), 1 << 40);
    for i in 0..5 {
        ch.try_send(()).unwrap();
        assert_eq!(ch.len(), i + 1);
    }
    for _ in 0..5 {
        assert_eq!(ch.try_recv(), Ok(()));
    }
    assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
    assert!(chan::try_chan::<()>(isize::MAX as usize).is_ok());
    assert!(chan::try_chan::<()>(usize::MAX)
        .unwrap_err()
        .is_out_of_range());

    // Full at its cap, and the channel still works as a channel (close, drain).
    let ch = gosched::chan::<()>(3);
    for _ in 0..3 {
        ch.try_send(()).unwrap();
    }
    assert_eq!(ch.try_send(()), Err(TrySendError::Full(())));
    ch.close().unwrap();
    assert_eq!(ch.iter().count(), 3);
    assert_eq!(ch.try_recv(), Err(TryRecvError::Closed));
}
