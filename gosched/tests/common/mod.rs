//! Test helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// A minimal one-shot signal: `Gate::wait()` is a future that completes once
/// `open()` was called (from any thread). Used to park goroutines and tasks
/// until channels exist. Any number may wait: `open` wakes them all (it
/// once kept only the last waiter's waker, so a test with several waiters
/// that had all parked before `open` hung — seen in CI under load).
#[derive(Clone, Default)]
pub struct Gate(Arc<Mutex<(bool, Vec<Waker>)>>);

impl Gate {
    pub fn new() -> Self {
        Gate::default()
    }
    pub fn open(&self) {
        let ws = {
            let mut g = self.0.lock().unwrap();
            g.0 = true;
            std::mem::take(&mut g.1)
        };
        for w in ws {
            w.wake();
        }
    }
    pub fn wait(&self) -> GateWait {
        GateWait(self.0.clone())
    }
}

pub struct GateWait(Arc<Mutex<(bool, Vec<Waker>)>>);

impl Future for GateWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut g = self.0.lock().unwrap();
        if g.0 {
            Poll::Ready(())
        } else {
            if !g.1.iter().any(|w| w.will_wake(cx.waker())) {
                g.1.push(cx.waker().clone());
            }
            Poll::Pending
        }
    }
}

pub fn rt(procs: usize) -> gosched::Runtime {
    gosched::Builder::new().procs(procs).build().unwrap()
}

/// Counts its drops into the shared counter.
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs the test `name` of this test binary alone in a child process with
/// `env` set to "1" (tests that change process-wide limits, or must abort).
pub fn run_child_test(name: &str, env: &str) -> std::process::Output {
    run_child_test_with(name, env, &[])
}

/// `run_child_test` with more environment variables for the child (e.g.
/// `GOSCHED_DEBUG`, read when its runtime is built).
pub fn run_child_test_with(name: &str, env: &str, vars: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .envs(vars.iter().copied())
        .output()
        .unwrap()
}

/// Run `f` on its own thread; fail (instead of hanging) if it does not
/// finish within `deadline`. A hung runtime is leaked, not dropped.
pub fn within<T: Send + 'static>(
    what: &str,
    deadline: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    use std::sync::mpsc;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(deadline) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no progress in {deadline:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked (see above)"),
    }
}

/// Recurse with 512 bytes a frame until the stack overflows (the stack
/// tests' guard hit; never returns in practice).
#[inline(never)]
pub fn recurse(n: u64) -> u64 {
    let buf = std::hint::black_box([n as u8; 512]);
    if n == u64::MAX {
        return 0;
    }
    recurse(n + 1) + buf[7] as u64
}

/// Start goroutine `go` (spawned from a goroutine of `rt`) recursing until
/// its stack overflows, and wait for it: the guard hit aborts the process,
/// so this returns only if the guard failed (it panics then).
pub fn overflow_in(rt: &gosched::Runtime, go: gosched::Go) -> ! {
    let h = rt.block_on(rt.go(move || go.spawn(|| recurse(0)))).unwrap();
    let _ = rt.block_on(h);
    unreachable!("the overflow must abort the process");
}

/// An OS thread's kernel id. A goroutine is a virtual thread of its own
/// (`thread::current()` is the goroutine's), so tests that ask which M runs
/// them ask the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OsThread(i64);

/// The OS thread running the caller.
pub fn os_thread() -> OsThread {
    // SAFETY: gettid has no arguments and cannot fail.
    OsThread(unsafe { libc::syscall(libc::SYS_gettid) })
}
