//! A Go-style pipeline: a generator goroutine, a stage of workers, a fan-in
//! with `select!`, a progress ticker, a per-item deadline and cancellation
//! by closing a `done` channel — the patterns of Go's "Pipelines and
//! cancellation", with gosched's channels.
//!
//!     cargo run --release --example pipeline
//!
//! The generator sends the numbers 1..=N; four workers square them (some
//! take longer); the collector fans their outputs in, gives up on the run
//! after a deadline, and once it has enough results closes `done`, which
//! stops the generator and the workers wherever they are blocked.

use std::time::{Duration, Instant};

use gosched::chan::{Chan, Receiver, Sender};

const N: u64 = 2_000;
const WORKERS: usize = 4;
/// The collector stops after this many results (and cancels the rest).
const WANTED: usize = 1_500;

/// Send 1..=n until done is closed.
fn generate(n: u64, out: Sender<u64>, done: Chan<()>) {
    for i in 1..=n {
        gosched::select! {
            send(out, i) -> r => if r.is_err() { return },
            recv(done) -> _ => return,
        }
    }
}

/// Square what comes in; every 100th item is slow.
fn square(id: usize, input: Receiver<u64>, out: Sender<(usize, u64, u64)>, done: Chan<()>) {
    for v in &input {
        if v % 100 == 0 {
            gosched::time::sleep(Duration::from_millis(2));
        }
        gosched::select! {
            send(out, (id, v, v * v)) -> r => if r.is_err() { return },
            recv(done) -> _ => return,
        }
    }
}

fn run() -> String {
    let t = Instant::now();
    let done = gosched::chan::<()>(0);
    let (num_tx, num_rx) = gosched::chan::<u64>(16).split();
    let (sq_tx, sq_rx) = gosched::chan::<(usize, u64, u64)>(16).split();

    let mut stages = Vec::new();
    {
        let done = done.clone();
        stages.push(gosched::go(move || generate(N, num_tx, done)));
    }
    for id in 0..WORKERS {
        let (input, out, done) = (num_rx.clone(), sq_tx.clone(), done.clone());
        stages.push(gosched::go(move || square(id, input, out, done)));
    }
    // The collector keeps no sender: once the workers end, `sq_rx` closes.
    drop((num_rx, sq_tx));

    let tick = gosched::time::tick(Duration::from_millis(5));
    let deadline = gosched::time::after(Duration::from_secs(10));
    let (mut got, mut ticks) = (0usize, 0u32);
    let mut per_worker = [0usize; WORKERS];
    let mut sum: u128 = 0;
    while got < WANTED {
        gosched::select! {
            recv(sq_rx) -> r => match r {
                Some((id, v, sq)) => {
                    assert_eq!(sq, v * v);
                    per_worker[id] += 1;
                    sum += sq as u128;
                    got += 1;
                }
                None => break, // every worker ended
            },
            recv(tick.chan()) -> _ => ticks += 1,
            recv(deadline) -> _ => panic!("the pipeline made no progress in 10 s"),
        }
    }
    // Cancel: every stage blocked on a send sees `done` closed and returns.
    done.close().unwrap();
    for s in stages {
        s.join().unwrap();
    }
    format!(
        "pipeline: {got} of {N} squares collected in {:?} ({ticks} progress ticks), then \
         cancelled; per worker {per_worker:?}; sum of the squares collected {sum}",
        t.elapsed()
    )
}

fn main() {
    let rt = gosched::Builder::new().build().expect("runtime");
    let report = rt.block_on(rt.go(run)).unwrap();
    println!("{report}");
}
