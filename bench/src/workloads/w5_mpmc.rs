//! W5 mpmc: 4 producers and 4 consumers share one channel of capacity `cap`
//! (1024, and 0 = rendezvous); `n` u64 in all; reported as elapsed / n ns
//! per message.
//!
//! Same method everywhere (and in `bench/go/w5_mpmc.go`):
//! - the root makes the channel, spawns 4 consumers (each sums what it
//!   receives until the channel is closed and drained, and returns its sum),
//!   then 4 producers (producer p sends `p*n/4 .. (p+1)*n/4`);
//! - the channel is closed once every producer is done: gosched's root joins
//!   the producers then calls `close()` (Go: a WaitGroup, then `close(ch)`);
//!   elsewhere each producer owns a sender clone and the root drops its own,
//!   so the channel closes when the last producer ends;
//! - the root adds the 4 consumer sums: the check is n(n-1)/2.
//!
//! Timed: spawning the root until it returns. Units: gosched goroutines
//! (`send`/`recv`), gosched async tasks (`send_async`/`recv_async`), Go
//! goroutines (`chan int64`), tokio tasks and smol tasks with
//! `async_channel::bounded` (`bounded(1)` for the cap-0 row: async-channel
//! has no cap 0; labelled),
//! and 8 plain OS threads (the main thread is the root, no runtime, `procs`
//! unused) with `gosched::chan` (`gosched-threads`), `crossbeam_channel::bounded`,
//! `flume::bounded` and `kanal::bounded` (all have a real cap 0). may has no bounded
//! channel: no may row.

use std::time::Instant;

use super::{Impl, Sample};

const PRODUCERS: u64 = 4;
const CONSUMERS: usize = 4;

pub fn run(imp: Impl, procs: usize, n: u64, cap: usize) -> Sample {
    assert!(
        n % PRODUCERS == 0,
        "W5 size must be a multiple of {PRODUCERS}"
    );
    let per = n / PRODUCERS;
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, per, cap),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, per, cap),
        Impl::Tokio => tokio_tasks(procs, per, cap),
        Impl::Smol => smol_tasks(procs, per, cap),
        #[cfg(feature = "gosched")]
        Impl::GoschedThreads => {
            let (tx, rx) = gosched::chan::<u64>(cap).split();
            threads(tx, rx, per, |tx, v| tx.send(v).is_ok(), |rx| rx.recv())
        }
        Impl::Crossbeam => {
            let (tx, rx) = crossbeam_channel::bounded::<u64>(cap);
            threads(tx, rx, per, |tx, v| tx.send(v).is_ok(), |rx| rx.recv().ok())
        }
        Impl::Flume => {
            let (tx, rx) = flume::bounded::<u64>(cap);
            threads(tx, rx, per, |tx, v| tx.send(v).is_ok(), |rx| rx.recv().ok())
        }
        Impl::Kanal => {
            let (tx, rx) = kanal::bounded::<u64>(cap);
            threads(tx, rx, per, |tx, v| tx.send(v).is_ok(), |rx| rx.recv().ok())
        }
        _ => unreachable!("{imp:?} has no W5 implementation in this binary"),
    }
}

/// Goroutines, `gosched::chan(cap)`, blocking `send`/`recv`, `close()`.
#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, per: u64, cap: usize) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.go(move || {
            let ch = gosched::chan::<u64>(cap);
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let ch = ch.clone();
                    gosched::go(move || {
                        let mut sum = 0u64;
                        while let Some(v) = ch.recv() {
                            sum += v;
                        }
                        sum
                    })
                })
                .collect();
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let ch = ch.clone();
                    gosched::go(move || {
                        for v in p * per..(p + 1) * per {
                            ch.send(v).expect("send");
                        }
                    })
                })
                .collect();
            for h in producers {
                h.join().expect("producer");
            }
            ch.close().expect("close");
            consumers
                .into_iter()
                .map(|h| h.join().expect("consumer"))
                .sum::<u64>()
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

/// Async tasks, `gosched::chan(cap)`, `send_async`/`recv_async`, `close()`.
#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, per: u64, cap: usize) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.spawn(async move {
            let ch = gosched::chan::<u64>(cap);
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let ch = ch.clone();
                    gosched::spawn(async move {
                        let mut sum = 0u64;
                        while let Some(v) = ch.recv_async().await {
                            sum += v;
                        }
                        sum
                    })
                })
                .collect();
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let ch = ch.clone();
                    gosched::spawn(async move {
                        for v in p * per..(p + 1) * per {
                            ch.send_async(v).await.expect("send");
                        }
                    })
                })
                .collect();
            for h in producers {
                h.await.expect("producer");
            }
            ch.close().expect("close");
            let mut sum = 0u64;
            for h in consumers {
                sum += h.await.expect("consumer");
            }
            sum
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

/// tokio tasks, `async_channel::bounded(cap)` (`bounded(1)` for cap 0).
fn tokio_tasks(procs: usize, per: u64, cap: usize) -> Sample {
    let rt = super::tokio_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.spawn(async move {
            let (tx, rx) = async_channel::bounded::<u64>(cap.max(1));
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let rx = rx.clone();
                    tokio::spawn(async move {
                        let mut sum = 0u64;
                        while let Ok(v) = rx.recv().await {
                            sum += v;
                        }
                        sum
                    })
                })
                .collect();
            drop(rx);
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        for v in p * per..(p + 1) * per {
                            tx.send(v).await.expect("send");
                        }
                    })
                })
                .collect();
            drop(tx);
            for h in producers {
                h.await.expect("producer");
            }
            let mut sum = 0u64;
            for h in consumers {
                sum += h.await.expect("consumer");
            }
            sum
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

/// smol tasks, `async_channel::bounded(cap)` (`bounded(1)` for cap 0): tokio's
/// row on the smol executor (sender clones owned by the producers, the
/// root's dropped; the producers' then the consumers' `Task`s awaited).
fn smol_tasks(procs: usize, per: u64, cap: usize) -> Sample {
    let rt = super::smol_runtime(procs);
    let t = Instant::now();
    let sum = rt.block_on(rt.spawn(async move {
        let (tx, rx) = async_channel::bounded::<u64>(cap.max(1));
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let rx = rx.clone();
                super::SMOL.spawn(async move {
                    let mut sum = 0u64;
                    while let Ok(v) = rx.recv().await {
                        sum += v;
                    }
                    sum
                })
            })
            .collect();
        drop(rx);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let tx = tx.clone();
                super::SMOL.spawn(async move {
                    for v in p * per..(p + 1) * per {
                        tx.send(v).await.expect("send");
                    }
                })
            })
            .collect();
        drop(tx);
        for h in producers {
            h.await;
        }
        let mut sum = 0u64;
        for h in consumers {
            sum += h.await;
        }
        sum
    }));
    Sample::timed(t.elapsed(), sum)
}

/// 8 plain OS threads around one channel crate's bounded channel; the main
/// thread is the root. `send` returns false once the channel is closed,
/// `recv` None once it is closed and drained.
fn threads<S, R>(
    tx: S,
    rx: R,
    per: u64,
    send: fn(&S, u64) -> bool,
    recv: fn(&R) -> Option<u64>,
) -> Sample
where
    S: Clone + Send + 'static,
    R: Clone + Send + 'static,
{
    let t = Instant::now();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let rx = rx.clone();
            std::thread::spawn(move || {
                let mut sum = 0u64;
                while let Some(v) = recv(&rx) {
                    sum += v;
                }
                sum
            })
        })
        .collect();
    drop(rx);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for v in p * per..(p + 1) * per {
                    assert!(send(&tx, v), "send on a closed channel");
                }
            })
        })
        .collect();
    drop(tx);
    for h in producers {
        h.join().expect("producer");
    }
    let sum = consumers
        .into_iter()
        .map(|h| h.join().expect("consumer"))
        .sum::<u64>();
    Sample::timed(t.elapsed(), sum)
}
