//! 10,000,000 messages through one channel with 4 producers and 4 consumer
//! goroutines on 2 Ps (both busy, stealing): every (producer, seq) arrives
//! exactly once, and each consumer sees every producer's messages in order.
//! Then the same with a select on both ends, and Go's prime sieve.

mod common;

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

use common::rt;
use gosched::{chan, select, Chan};

const PRODUCERS: u64 = 4;
const CONSUMERS: usize = 4;
const TOTAL: u64 = 10_000_000;

fn mpmc_exactly_once(cap: usize) {
    let per = TOTAL / PRODUCERS;
    let rt = rt(2);
    let ch = chan::<u64>(cap);
    // One counter per message: index = producer * per + seq.
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..TOTAL).map(|_| AtomicU8::new(0)).collect());
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let c = ch.clone();
            rt.go(move || {
                for seq in 0..per {
                    c.send(p * per + seq).unwrap();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (c, seen) = (ch.clone(), seen.clone());
            rt.go(move || {
                let mut last = [None::<u64>; PRODUCERS as usize];
                let mut n = 0u64;
                while let Some(m) = c.recv() {
                    let (p, seq) = ((m / per) as usize, m % per);
                    if let Some(l) = last[p] {
                        assert!(seq > l, "producer {p}: {seq} after {l}");
                    }
                    last[p] = Some(seq);
                    seen[m as usize].fetch_add(1, Relaxed);
                    n += 1;
                }
                n
            })
        })
        .collect();
    for p in producers {
        rt.block_on(p).unwrap();
    }
    ch.close().unwrap();
    let received: u64 = consumers.into_iter().map(|c| rt.block_on(c).unwrap()).sum();
    assert_eq!(received, TOTAL, "cap {cap}");
    if let Some(i) = seen.iter().position(|s| s.load(Relaxed) != 1) {
        panic!(
            "cap {cap}: message {i} (producer {}, seq {}) received {} times",
            i as u64 / per,
            i as u64 % per,
            seen[i].load(Relaxed)
        );
    }
}

#[test]
fn ten_million_messages_cap_1024() {
    mpmc_exactly_once(1024);
}

#[test]
fn ten_million_messages_cap_0() {
    mpmc_exactly_once(0);
}

/// Go's sieve (`test/chan/sieve1.go`): a chain of filter goroutines, one per
/// prime found, connected by unbuffered channels. The first 1,000 primes.
#[test]
fn prime_sieve_first_1000_primes() {
    let rt = rt(2);
    let primes = rt
        .go(|| {
            fn generate(ch: Chan<u64>) {
                for i in 2.. {
                    if ch.send(i).is_err() {
                        return; // the sieve is done
                    }
                }
            }
            fn filter(input: Chan<u64>, output: Chan<u64>, prime: u64) {
                while let Some(i) = input.recv() {
                    if i % prime != 0 && output.send(i).is_err() {
                        break;
                    }
                }
                // Stop the stage upstream; `input` and `output` drop here.
            }
            let (tx, mut rx) = (chan::<u64>(0), None::<Chan<u64>>);
            let first = tx.clone();
            gosched::go(move || generate(first));
            let mut input = tx;
            let mut primes = Vec::with_capacity(1000);
            for _ in 0..1000 {
                let prime = input.recv().unwrap();
                primes.push(prime);
                let out = chan::<u64>(0);
                let (i, o) = (input.clone(), out.clone());
                gosched::go(move || filter(i, o, prime));
                input = out;
                rx = Some(input.clone());
            }
            drop(rx);
            primes
        })
        .join()
        .unwrap();
    let expected: Vec<u64> = (2..)
        .filter(|n: &u64| (2..).take_while(|d| d * d <= *n).all(|d| n % d != 0))
        .take(1000)
        .collect();
    assert_eq!(primes, expected);
    assert_eq!(primes[999], 7919);
}

/// Both ends selecting over two channels, 2,000,000 messages, both Ps busy.
#[test]
fn select_both_ends_two_million() {
    const N: u64 = 2_000_000;
    let rt = rt(2);
    let (x, y) = (chan::<u64>(64), chan::<u64>(0));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (x, y) = (x.clone(), y.clone());
            rt.go(move || {
                for i in (p..N).step_by(2) {
                    select! {
                        send(x, i) -> r => r.unwrap(),
                        send(y, i) -> r => r.unwrap(),
                    }
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (x, y) = (x.clone(), y.clone());
            rt.go(move || {
                let (mut sum, mut n) = (0u64, 0u64);
                let mut open = 2;
                while open > 0 {
                    let v = select! {
                        recv(x) -> v => v,
                        recv(y) -> v => v,
                    };
                    match v {
                        Some(v) => {
                            sum += v;
                            n += 1;
                        }
                        None => open -= 1,
                    }
                    if open < 2 {
                        // One is closed (both are closed together): drain the other.
                        while let Ok(v) = x.try_recv() {
                            sum += v;
                            n += 1;
                        }
                        return (sum, n);
                    }
                }
                (sum, n)
            })
        })
        .collect();
    for p in producers {
        rt.block_on(p).unwrap();
    }
    x.close().unwrap();
    y.close().unwrap();
    let (mut sum, mut n) = (0, 0);
    for c in consumers {
        let (s, k) = rt.block_on(c).unwrap();
        sum += s;
        n += k;
    }
    assert_eq!(n, N);
    assert_eq!(sum, N * (N - 1) / 2);
}
