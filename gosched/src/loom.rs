//! Synchronisation shim: std (or crossbeam) in normal builds, loom under `--cfg loom`.
//!
//! Every lock-free part of the scheduler imports its atomics, cells, locks and thread
//! parking from here, so the loom models in `sched/` exercise the very code that runs
//! in production. (Under loom only part of the crate is compiled, so some items go
//! unused there.)
#![cfg_attr(loom, allow(unused_imports, dead_code))]

#[cfg(not(loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::{Arc, Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
        };
    }
}

#[cfg(loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{
            fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
        };
    }
}

#[cfg(not(loom))]
pub(crate) mod cell {
    /// `UnsafeCell` with loom's closure-based access API, so that the same code
    /// compiles in both builds.
    #[derive(Debug)]
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
    pub(crate) use std::thread::{current, park, park_timeout, yield_now, Thread};
}

#[cfg(loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::{current, park, yield_now, Thread};
    /// loom does not model time: a timed park is an untimed one there.
    pub(crate) fn park_timeout(_: std::time::Duration) {
        park()
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
