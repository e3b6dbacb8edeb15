//! Synchronisation shim: std (or crossbeam) in normal builds, loom under `--cfg loom`.
//!
//! Every part of the scheduler imports its atomics, cells, locks, threads,
//! thread-locals and thread parking from here, so the loom models exercise the very
//! code that runs in production: under loom the whole `sched` module is compiled
//! and `sched/loom_runtime.rs` runs the real scheduler. (Under loom only part of the
//! crate is compiled, so some items go unused there.)
//!
//! loom does not model time. Under loom the scheduler's clock (`clock::now_ns`) is
//! a per-model counter that only a timed park advances: `park_timeout(d)` first
//! yields (so that a thread that would wake us runs), then moves the clock forward
//! by `d`, and returns as a timed-out park would. So a timer fires exactly when an
//! M's timed sleep for it ends, as in production, and the models stay
//! deterministic.
#![cfg_attr(loom, allow(unused_imports, dead_code))]

#[cfg(not(loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
        };
    }
}

#[cfg(loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{
            fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
        };
    }
}

#[cfg(not(loom))]
pub(crate) mod cell {
    /// `UnsafeCell` with loom's closure-based access API, so that the same code
    /// compiles in both builds. Transparent: it has the layout of `T` (as std's
    /// `UnsafeCell` does), so a field can be initialised through a cast
    /// pointer (`chan::core::Waiter::empty`).
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
pub(crate) mod cell {
    pub(crate) use loom::cell::UnsafeCell;
}

#[cfg(not(loom))]
pub(crate) mod thread {
    // (On Linux the `Parker` sleeps on a futex, not on the thread parker.)
    #[cfg(not(target_os = "linux"))]
    pub(crate) use std::thread::{current, park, park_timeout, Thread};
    pub(crate) use std::thread::{yield_now, Builder, JoinHandle};
}

#[cfg(loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::{current, park, yield_now, Builder, JoinHandle, Thread};
    /// A timed park under loom: let the others run, then let `d` pass (see the
    /// module docs). Like a real timed park, it may return without an unpark.
    pub(crate) fn park_timeout(d: std::time::Duration) {
        yield_now();
        super::clock::advance(d.as_nanos() as u64);
    }
}

/// The model clock (see the module docs). One per OS thread, i.e. per running
/// model: `cargo test` runs models in parallel on different threads.
#[cfg(loom)]
pub(crate) mod clock {
    use std::cell::Cell;

    std::thread_local! {
        static NOW: Cell<u64> = const { Cell::new(0) };
    }

    /// Nanoseconds since the model's start.
    pub(crate) fn now_ns() -> u64 {
        NOW.with(|n| n.get())
    }

    /// Let `ns` pass.
    pub(crate) fn advance(ns: u64) {
        NOW.with(|n| n.set(n.get().saturating_add(ns)));
    }

    /// A model starts at time 0.
    pub(crate) fn reset() {
        NOW.with(|n| n.set(0));
    }
}

/// Lock a mutex, treating poisoning as impossible: the scheduler never panics while
/// holding one of its locks (user code never runs under them).
#[inline]
pub(crate) fn lock<T>(m: &sync::Mutex<T>) -> sync::MutexGuard<'_, T> {
    #[cfg(not(loom))]
    {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
    #[cfg(loom)]
    {
        m.lock().unwrap()
    }
}
