//! W2 skynet: a 10-ary tree of units with `leaves` leaves; a leaf returns its
//! number, an inner node spawns its 10 children and sums what they return.
//! The result must be `leaves * (leaves - 1) / 2` (499999500000 for 1M).
//!
//! Rust implementations: each node keeps its 10 children's join handles in an
//! array (no Vec) and joins them in order: `.await` in async code, a blocking
//! `.join()` (which parks the goroutine/coroutine) in stackful code.
//! Go (`bench/go/w2_skynet.go`) is the classic skynet: each node makes one
//! unbuffered channel that its 10 children send their sums on.
//! `gosched-go-chan` is that program with gosched goroutines: the root
//! goroutine plays Go's main goroutine (makes the channel, starts the tree,
//! receives the sum), children are detached (`go`'s handle dropped), each inner
//! node makes one `gosched::chan(0)`, and every node sends its sum on its
//! parent's channel.
//! Timed: from spawning the root node until its sum is back.

use std::future::Future;
use std::time::Instant;

use super::{panic_msg, Impl, Sample};

const DIV: u64 = 10;

pub fn run(imp: Impl, procs: usize, leaves: u64) -> Sample {
    match imp {
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, leaves),
        #[cfg(feature = "gosched")]
        Impl::GoschedGoChan => gosched_go_chan(procs, leaves),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, leaves),
        Impl::Tokio => tokio_tasks(procs, leaves),
        Impl::Smol => smol_tasks(procs, leaves),
        Impl::May => may_coroutines(procs, leaves),
        _ => unreachable!("{imp:?} is not built into this binary"),
    }
}

// --- gosched goroutines: go + JoinHandle::join -------------------------------

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, leaves: u64) -> Sample {
    fn node(num: u64, size: u64) -> u64 {
        if size == 1 {
            return num;
        }
        let sub = size / DIV;
        let children: [gosched::JoinHandle<u64>; DIV as usize] =
            std::array::from_fn(|i| gosched::go(move || node(num + i as u64 * sub, sub)));
        children.into_iter().map(|h| h.join().expect("child")).sum()
    }
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt.block_on(rt.go(move || node(0, leaves))).expect("root");
    Sample::timed(t.elapsed(), sum)
}

// --- gosched goroutines: go + unbuffered channels (Go's skynet) -------------

#[cfg(feature = "gosched")]
fn gosched_go_chan(procs: usize, leaves: u64) -> Sample {
    // Go: func skynet(c chan<- int64, num, size int64).
    fn node(c: gosched::chan::Sender<u64>, num: u64, size: u64) {
        if size == 1 {
            c.send(num).expect("parent receives");
            return;
        }
        let (tx, rx) = gosched::chan(0).split();
        let sub = size / DIV;
        for i in 0..DIV {
            let tx = tx.clone();
            // Dropping the handle detaches the goroutine, as `go f()` in Go.
            drop(gosched::go(move || node(tx, num + i * sub, sub)));
        }
        let mut sum = 0;
        for _ in 0..DIV {
            sum += rx.recv().expect("child sends");
        }
        c.send(sum).expect("parent receives");
    }
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt
        .block_on(rt.go(move || {
            // Go's main goroutine: c := make(chan int64); go skynet(c, 0, leaves); <-c
            let (tx, rx) = gosched::chan(0).split();
            drop(gosched::go(move || node(tx, 0, leaves)));
            rx.recv().expect("root sends")
        }))
        .expect("root");
    Sample::timed(t.elapsed(), sum)
}

// --- gosched async tasks: spawn + JoinHandle.await ---------------------------

#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, leaves: u64) -> Sample {
    // Not an `async fn`: the spawn inside needs the future to be `Send`,
    // which a recursive `async fn` cannot prove (E0283); spelling out
    // `impl Future + Send` does, without boxing the future.
    #[allow(clippy::manual_async_fn)]
    fn node(num: u64, size: u64) -> impl Future<Output = u64> + Send {
        async move {
            if size == 1 {
                return num;
            }
            let sub = size / DIV;
            let children: [gosched::JoinHandle<u64>; DIV as usize] =
                std::array::from_fn(|i| gosched::spawn(node(num + i as u64 * sub, sub)));
            let mut sum = 0;
            for h in children {
                sum += h.await.expect("child");
            }
            sum
        }
    }
    let rt = super::gosched_runtime(procs);
    let t = Instant::now();
    let sum = rt.block_on(rt.spawn(node(0, leaves))).expect("root");
    Sample::timed(t.elapsed(), sum)
}

// --- tokio tasks: spawn + JoinHandle.await -----------------------------------

fn tokio_tasks(procs: usize, leaves: u64) -> Sample {
    // As above: `impl Future + Send`, not `async fn`.
    #[allow(clippy::manual_async_fn)]
    fn node(num: u64, size: u64) -> impl Future<Output = u64> + Send {
        async move {
            if size == 1 {
                return num;
            }
            let sub = size / DIV;
            let children: [tokio::task::JoinHandle<u64>; DIV as usize] =
                std::array::from_fn(|i| tokio::spawn(node(num + i as u64 * sub, sub)));
            let mut sum = 0;
            for h in children {
                sum += h.await.expect("child");
            }
            sum
        }
    }
    let rt = super::tokio_runtime(procs);
    let t = Instant::now();
    let sum = rt.block_on(rt.spawn(node(0, leaves))).expect("root");
    Sample::timed(t.elapsed(), sum)
}

// --- smol tasks: spawn + Task.await -----------------------------------------

/// As tokio's row: each node spawns its 10 children onto the smol executor
/// and awaits their `smol::Task`s in order (a `Task` is smol's join handle).
fn smol_tasks(procs: usize, leaves: u64) -> Sample {
    // As above: `impl Future + Send`, not `async fn`.
    #[allow(clippy::manual_async_fn)]
    fn node(num: u64, size: u64) -> impl Future<Output = u64> + Send {
        async move {
            if size == 1 {
                return num;
            }
            let sub = size / DIV;
            let children: [smol::Task<u64>; DIV as usize] =
                std::array::from_fn(|i| super::SMOL.spawn(node(num + i as u64 * sub, sub)));
            let mut sum = 0;
            for h in children {
                sum += h.await;
            }
            sum
        }
    }
    let rt = super::smol_runtime(procs);
    let t = Instant::now();
    let sum = rt.block_on(rt.spawn(node(0, leaves)));
    Sample::timed(t.elapsed(), sum)
}

// --- may coroutines: go! + JoinHandle::join ----------------------------------

fn may_coroutines(procs: usize, leaves: u64) -> Sample {
    fn node(num: u64, size: u64) -> u64 {
        if size == 1 {
            return num;
        }
        let sub = size / DIV;
        let children: [may::coroutine::JoinHandle<u64>; DIV as usize] =
            std::array::from_fn(|i| may::go!(move || node(num + i as u64 * sub, sub)));
        children
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|e| panic!("child: {}", panic_msg(&*e)))
            })
            .sum()
    }
    super::may_init(procs);
    let t = Instant::now();
    let sum = may::go!(move || node(0, leaves))
        .join()
        .unwrap_or_else(|e| panic!("root: {}", panic_msg(&*e)));
    Sample::timed(t.elapsed(), sum)
}
