//! Unit tests of the channel's lock-free and intrusive parts — the ring
//! (`ring.rs`) and the wait queues (`queue.rs`) — on their own, without the
//! runtime. Small enough to run under Miri (`.ci/run`:
//! `cargo +nightly miri test -p gosched --lib chan::`); `gosched/tests/miri_chan.rs`
//! drives the whole channel core from plain threads.

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::task::Waker;

use super::core::{Waiter, WAITING};
use super::queue::WaitQueue;
use super::ring::{PushError, Ring};

/// Iterations of the two-thread tests: Miri runs them ~10⁴× slower.
const N: usize = if cfg!(miri) { 200 } else { 100_000 };

// ---- ring ----------------------------------------------------------------------------

/// The ring's indices are kept apart by distance, not alignment: no
/// alignment over 16 (malloc's fast path; `memalign` was a third of T1's
/// allocator time), and 128 bytes (a prefetched pair of cache lines) between
/// the allocation's start, the read-mostly fields, `head`, `tail` and the end.
#[cfg(not(loom))]
#[test]
fn ring_layout_spaces_the_indices() {
    fn check<T>() {
        assert!(std::mem::align_of::<Ring<T>>() <= 16);
        let [fields_end, head, tail, end] = Ring::<T>::layout();
        assert!(
            fields_end >= 128 + 5 * 8,
            "a gap before the fields: {fields_end}"
        );
        assert!(
            head >= fields_end + 128,
            "head {head} vs fields {fields_end}"
        );
        assert!(tail >= head + 8 + 128, "tail {tail} vs head {head}");
        assert!(end >= tail + 8 + 128, "end {end} vs tail {tail}");
    }
    check::<u8>();
    check::<std::time::Instant>();
    check::<[u64; 64]>();
}

#[test]
fn ring_fifo_full_empty_and_laps() {
    for cap in [1, 2, 3, 4, 7] {
        let r = Ring::<u32>::new(cap).unwrap();
        assert!(r.is_empty() && !r.is_full());
        // Several laps, each filling the ring completely, so every slot's stamp
        // goes around more than once.
        for lap in 0..5u32 {
            for i in 0..cap as u32 {
                assert!(r.push(lap * 100 + i).is_ok());
                assert_eq!(r.len(), i as usize + 1);
            }
            assert!(r.is_full());
            assert!(matches!(r.push(99), Err(PushError::Full(99))));
            for i in 0..cap as u32 {
                assert_eq!(r.pop(), Some(lap * 100 + i));
            }
            assert!(r.is_empty());
            assert_eq!(r.pop(), None);
        }
        // Half-full wrap-around: head and tail on different laps.
        for i in 0..(3 * cap as u32) {
            assert!(r.push(i).is_ok());
            assert_eq!(r.pop(), Some(i));
        }
    }
}

#[test]
fn ring_mark_fails_pushes_and_keeps_values() {
    let r = Ring::<String>::new(2).unwrap();
    assert!(r.push("a".to_string()).is_ok());
    assert!(!r.is_marked());
    assert!(r.mark());
    assert!(!r.mark(), "marked twice");
    assert!(r.is_marked());
    match r.push("b".to_string()) {
        Err(PushError::Closed(v)) => assert_eq!(v, "b"),
        _ => panic!("a push after mark succeeded"),
    }
    assert_eq!(r.len(), 1);
    assert!(!r.is_full());
    assert_eq!(r.pop().as_deref(), Some("a"));
    assert_eq!(r.pop(), None);
}

/// Counts its drops, so a test can see that the ring drops each buffered value
/// exactly once (Miri's leak check sees the rest).
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn ring_drop_drops_buffered_values() {
    let drops = Arc::new(AtomicUsize::new(0));
    let r = Ring::new(3).unwrap();
    for _ in 0..3 {
        assert!(r.push(Counted(drops.clone())).is_ok());
    }
    drop(r.pop());
    assert_eq!(drops.load(SeqCst), 1);
    drop(r);
    assert_eq!(drops.load(SeqCst), 3);
}

/// The ring drops what it holds in place, from head to tail, however the
/// positions wrapped and whether or not it was closed (marked): full,
/// partly full across the end of the slots, and empty.
#[test]
fn ring_drop_in_place_after_wrapping() {
    for (pushed, popped, mark) in [(5, 2, false), (7, 4, true), (4, 0, true), (6, 6, false)] {
        let drops = Arc::new(AtomicUsize::new(0));
        let r = Ring::new(4).unwrap();
        let mut held = 0;
        for _ in 0..pushed {
            if r.is_full() {
                drop(r.pop());
                held -= 1;
            }
            assert!(r.push(Counted(drops.clone())).is_ok());
            held += 1;
        }
        for _ in 0..popped.min(held) {
            drop(r.pop());
        }
        let left = r.len();
        if mark {
            assert!(r.mark());
        }
        let before = drops.load(SeqCst);
        drop(r);
        assert_eq!(
            drops.load(SeqCst) - before,
            left,
            "pushed {pushed}, popped {popped}, marked {mark}: each value left is dropped once"
        );
    }
}

#[test]
fn ring_zero_sized_huge_capacity() {
    // A zero-sized T: no per-slot memory, any capacity up to isize::MAX.
    let r = Ring::<()>::new(1 << 40).unwrap();
    for i in 0..5 {
        assert!(r.push(()).is_ok());
        assert_eq!(r.len(), i + 1);
    }
    assert_eq!(r.pop(), Some(()));
    assert_eq!(r.len(), 4);
    assert!(!r.is_full() && !r.is_empty());

    let r = Ring::<()>::new(isize::MAX as usize).unwrap();
    assert!(r.push(()).is_ok());
    assert!(Ring::<()>::new(isize::MAX as usize + 1).is_err());

    // Full, empty and mark with a zero-sized type that has a destructor.
    struct Token;
    impl Drop for Token {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
        }
    }
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    let r = Ring::<Token>::new(2).unwrap();
    assert!(r.push(Token).is_ok() && r.push(Token).is_ok());
    assert!(r.is_full());
    match r.push(Token) {
        Err(PushError::Full(t)) => drop(t),
        _ => panic!("pushed past cap"),
    }
    assert_eq!(DROPS.load(SeqCst), 1);
    drop(r.pop());
    assert_eq!(DROPS.load(SeqCst), 2);
    assert!(r.mark());
    assert!(matches!(r.push(Token), Err(PushError::Closed(_))));
    assert_eq!(DROPS.load(SeqCst), 3);
    assert_eq!(r.len(), 1);
    drop(r);
    assert_eq!(
        DROPS.load(SeqCst),
        4,
        "the buffered token is dropped with the ring"
    );
}

#[test]
fn ring_capacity_out_of_range() {
    // The slots' bytes must fit in isize::MAX.
    assert!(Ring::<u64>::new(usize::MAX / 2).is_err());
    assert!(Ring::<u8>::new(usize::MAX).is_err());
}

/// Two threads, one pushing 0..N and one popping: FIFO, nothing lost.
fn ring_two_threads(cap: usize) {
    let r = Arc::new(Ring::<usize>::new(cap).unwrap());
    let r2 = r.clone();
    let pusher = std::thread::spawn(move || {
        for i in 0..N {
            let mut v = i;
            loop {
                match r2.push(v) {
                    Ok(()) => break,
                    Err(PushError::Full(back)) => {
                        v = back;
                        std::thread::yield_now();
                    }
                    Err(PushError::Closed(_)) => unreachable!(),
                }
            }
        }
    });
    let mut next = 0;
    while next < N {
        match r.pop() {
            Some(v) => {
                assert_eq!(v, next, "out of order");
                next += 1;
            }
            None => std::thread::yield_now(),
        }
    }
    pusher.join().unwrap();
    assert!(r.is_empty());
}

#[test]
fn ring_two_threads_cap1() {
    ring_two_threads(1);
}

#[test]
fn ring_two_threads_cap2() {
    ring_two_threads(2);
}

#[test]
fn ring_two_pushers_two_poppers() {
    let r = Arc::new(Ring::<usize>::new(2).unwrap());
    let per = N / 2;
    let pushers: Vec<_> = (0..2)
        .map(|p| {
            let r = r.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    let mut v = p * per + i;
                    while let Err(e) = r.push(v) {
                        match e {
                            PushError::Full(back) => v = back,
                            PushError::Closed(_) => unreachable!(),
                        }
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let taken = Arc::new(AtomicUsize::new(0));
    let poppers: Vec<_> = (0..2)
        .map(|_| {
            let (r, taken) = (r.clone(), taken.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while taken.load(SeqCst) < 2 * per {
                    match r.pop() {
                        Some(v) => {
                            taken.fetch_add(1, SeqCst);
                            got.push(v);
                        }
                        None => std::thread::yield_now(),
                    }
                }
                got
            })
        })
        .collect();
    for p in pushers {
        p.join().unwrap();
    }
    let mut all = Vec::new();
    for p in poppers {
        let got = p.join().unwrap();
        // Per pusher, values come out in order.
        for src in 0..2 {
            let mine: Vec<_> = got.iter().filter(|&&v| v / per == src).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "per-pusher order");
        }
        all.extend(got);
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..2 * per).collect::<Vec<_>>(),
        "each value exactly once"
    );
}

// ---- wait queue ----------------------------------------------------------------------

fn waiter(v: u32) -> Arc<Waiter<u32>> {
    Waiter::holding(v, Waker::noop())
}

/// Pop everything, returning the values in order.
fn drain(q: &mut WaitQueue<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(w) = q.pop_front() {
        // SAFETY: popped: the waiter is unqueued, and nobody else holds it.
        out.push(unsafe { w.take_value() }.unwrap());
    }
    out
}

#[test]
fn queue_fifo_and_counts() {
    let ws: Vec<_> = (0..4).map(waiter).collect();
    let mut q = WaitQueue::new();
    for w in &ws {
        q.push_back(w.clone());
        assert_eq!(Arc::strong_count(w), 2, "the queue holds one count");
    }
    assert_eq!(q.len(), 4);
    let mut seen = Vec::new();
    assert!(!q.any(|w| {
        seen.push(w.state());
        false
    }));
    assert_eq!(seen, [WAITING; 4]);
    assert_eq!(drain(&mut q), [0, 1, 2, 3]);
    assert_eq!(q.len(), 0);
    for w in &ws {
        assert_eq!(Arc::strong_count(w), 1, "popping gave the count back");
    }
}

#[test]
fn queue_remove_anywhere_is_o1_and_idempotent() {
    // Remove the middle, the head and the tail, in every combination of a
    // five-node queue, then check order and counts.
    for mask in 0u32..32 {
        let ws: Vec<_> = (0..5).map(waiter).collect();
        let mut q = WaitQueue::new();
        for w in &ws {
            q.push_back(w.clone());
        }
        for (i, w) in ws.iter().enumerate() {
            if mask & (1 << i) != 0 {
                assert!(q.remove(w));
                assert!(!q.remove(w), "a second remove is a no-op");
                assert_eq!(Arc::strong_count(w), 1);
            }
        }
        let expect: Vec<u32> = (0..5).filter(|i| mask & (1 << i) == 0).collect();
        assert_eq!(q.len(), expect.len());
        // Re-queue a removed node: its links were reset.
        if mask & 1 != 0 {
            q.push_back(ws[0].clone());
        }
        let mut got = drain(&mut q);
        if mask & 1 != 0 {
            assert_eq!(got.pop(), Some(0));
        }
        assert_eq!(got, expect);
        for w in &ws {
            assert_eq!(Arc::strong_count(w), 1);
            assert!(!q.remove(w), "removing a popped waiter is a no-op");
        }
    }
}

#[test]
fn queue_drop_releases_its_counts() {
    let ws: Vec<_> = (0..3).map(waiter).collect();
    {
        let mut q = WaitQueue::new();
        for w in &ws {
            q.push_back(w.clone());
        }
        assert!(q.remove(&ws[1]));
    }
    for w in &ws {
        assert_eq!(Arc::strong_count(w), 1);
    }
    // The queue may also hold the last count: dropping it frees the waiters.
    let mut q = WaitQueue::new();
    q.push_back(waiter(7));
    q.push_back(waiter(8));
    drop(q);
}
