//! The M's parking spot: a one-shot wake token on top of the OS thread parker
//! (Go's `note`). `wake` publishes a token and unparks; `wait` consumes it. A wake
//! that comes before the wait is not lost: the token stays set, and the thread
//! parker itself also remembers an early unpark.

use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::loom::thread::{self, Thread};

pub(crate) struct Parker {
    thread: Thread,
    token: AtomicBool,
}

impl Parker {
    /// A parker for the calling thread.
    pub(crate) fn new() -> Self {
        Parker {
            thread: thread::current(),
            token: AtomicBool::new(false),
        }
    }

    /// Any thread: wake the owner (idempotent until it consumes the token).
    pub(crate) fn wake(&self) {
        if !self.token.swap(true, Release) {
            self.thread.unpark();
        }
    }

    /// Owner only: block until woken, or until `stop()` says to give up.
    pub(crate) fn wait(&self, stop: impl Fn() -> bool) {
        while !self.token.swap(false, Acquire) {
            if stop() {
                return;
            }
            thread::park();
        }
    }

    /// Owner only: block until woken or until `timeout` elapsed. True if woken.
    pub(crate) fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        if self.token.swap(false, Acquire) {
            return true;
        }
        thread::park_timeout(timeout);
        self.token.swap(false, Acquire)
    }
}
