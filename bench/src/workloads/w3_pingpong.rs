//! W3 pingpong: two units, two unbuffered channels, `n` round trips;
//! reported as elapsed / n ns per round trip.
//!
//! Same method everywhere (and in `bench/go/w3_pingpong.go`): the root unit
//! makes the `ping` and `pong` channels, spawns the ponger (which answers
//! every `v` received on `ping` with `v + 1` on `pong` until `ping` is
//! closed), then itself sends `0..n` on `ping`, waiting for each answer, and
//! sums the answers (the check: n(n+1)/2). It closes `ping` (gosched:
//! `close()`, Go: `close(ping)`, tokio/smol/may: drops the sender) and joins the
//! ponger. Timed: spawning the root until it returns.
//!
//! Channels: gosched goroutines `gosched::chan(0)` with `send`/`recv`,
//! gosched async tasks `gosched::chan(0)` with `send_async`/`recv_async`,
//! Go `make(chan int64)`. Peers without a rendezvous channel use the closest
//! they have, labelled in the table: tokio tasks and smol tasks with
//! `async_channel::bounded(1)` ("cap 1"), may coroutines with `may::sync::mpsc::channel` ("unbounded").
//! In a ping-pong at most one value is ever in flight per channel, so the
//! capacity changes only whether the sender waits for the handoff.

use std::time::Instant;

use super::{panic_msg, Impl, Sample};

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, n),
        Impl::Tokio => tokio_tasks(procs, n),
        Impl::Smol => smol_tasks(procs, n),
        Impl::May => may_coroutines(procs, n),
        _ => unreachable!("{imp:?} has no W3 implementation in this binary"),
    }
}

/// Goroutines, cap-0 `gosched::chan`, blocking `send`/`recv`.
#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.go(move || {
            let ping = gosched::chan::<u64>(0);
            let pong = gosched::chan::<u64>(0);
            let ponger = {
                let (ping, pong) = (ping.clone(), pong.clone());
                gosched::go(move || {
                    while let Some(v) = ping.recv() {
                        pong.send(v + 1).expect("pong send");
                    }
                })
            };
            let mut sum = 0u64;
            for i in 0..n {
                ping.send(i).expect("ping send");
                sum += pong.recv().expect("pong recv");
            }
            ping.close().expect("close ping");
            ponger.join().expect("ponger");
            sum
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

/// Async tasks, cap-0 `gosched::chan`, `send_async`/`recv_async`.
#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.spawn(async move {
            let ping = gosched::chan::<u64>(0);
            let pong = gosched::chan::<u64>(0);
            let ponger = {
                let (ping, pong) = (ping.clone(), pong.clone());
                gosched::spawn(async move {
                    while let Some(v) = ping.recv_async().await {
                        pong.send_async(v + 1).await.expect("pong send");
                    }
                })
            };
            let mut sum = 0u64;
            for i in 0..n {
                ping.send_async(i).await.expect("ping send");
                sum += pong.recv_async().await.expect("pong recv");
            }
            ping.close().expect("close ping");
            ponger.await.expect("ponger");
            sum
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

/// tokio tasks, `async_channel::bounded(1)` (no cap 0 there).
fn tokio_tasks(procs: usize, n: u64) -> Sample {
    let rt = super::tokio_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.spawn(async move {
            let (ping_tx, ping_rx) = async_channel::bounded::<u64>(1);
            let (pong_tx, pong_rx) = async_channel::bounded::<u64>(1);
            let ponger = tokio::spawn(async move {
                while let Ok(v) = ping_rx.recv().await {
                    pong_tx.send(v + 1).await.expect("pong send");
                }
            });
            let mut sum = 0u64;
            for i in 0..n {
                ping_tx.send(i).await.expect("ping send");
                sum += pong_rx.recv().await.expect("pong recv");
            }
            drop(ping_tx);
            ponger.await.expect("ponger");
            sum
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

/// smol tasks, `async_channel::bounded(1)` (no cap 0 there): tokio's row
/// on the smol executor, the ponger's `smol::Task` awaited at the end.
fn smol_tasks(procs: usize, n: u64) -> Sample {
    let rt = super::smol_runtime(procs);
    let t = Instant::now();
    let sum = rt.block_on(rt.spawn(async move {
        let (ping_tx, ping_rx) = async_channel::bounded::<u64>(1);
        let (pong_tx, pong_rx) = async_channel::bounded::<u64>(1);
        let ponger = super::SMOL.spawn(async move {
            while let Ok(v) = ping_rx.recv().await {
                pong_tx.send(v + 1).await.expect("pong send");
            }
        });
        let mut sum = 0u64;
        for i in 0..n {
            ping_tx.send(i).await.expect("ping send");
            sum += pong_rx.recv().await.expect("pong recv");
        }
        drop(ping_tx);
        ponger.await;
        sum
    }));
    Sample::timed(t.elapsed(), sum)
}

/// may coroutines, `may::sync::mpsc::channel` (unbounded: may has no other).
fn may_coroutines(procs: usize, n: u64) -> Sample {
    use may::sync::mpsc;
    super::may_init(procs);
    let t = Instant::now();
    let sum = may::go!(move || {
        let (ping_tx, ping_rx) = mpsc::channel::<u64>();
        let (pong_tx, pong_rx) = mpsc::channel::<u64>();
        let ponger = may::go!(move || {
            while let Ok(v) = ping_rx.recv() {
                pong_tx.send(v + 1).expect("pong send");
            }
        });
        let mut sum = 0u64;
        for i in 0..n {
            ping_tx.send(i).expect("ping send");
            sum += pong_rx.recv().expect("pong recv");
        }
        drop(ping_tx);
        ponger.join().expect("ponger");
        sum
    })
    .join()
    .unwrap_or_else(|e| panic!("root coroutine: {}", panic_msg(&*e)));
    Sample::timed(t.elapsed(), sum)
}
