//! Thread parking: a one-shot wake token on top of the OS thread parker (Go's
//! `note`), used by idle Ms (`sched/machine.rs`), by plain threads blocked in
//! `block_on` (`block_on_thread`, where the `Parker` is the waker), and by the
//! mutex's thread waiters.
//!
//! `wake` publishes the token (Release) and unparks; `wait` consumes it (Acquire),
//! so whatever the waker wrote before `wake` is visible after `wait` returns. A
//! wake that comes before the wait is not lost: the token stays set, and the
//! thread parker itself also remembers an early unpark. Spurious OS wake-ups are
//! absorbed by the loop around the token.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::loom::thread::{self, Thread};

pub(crate) struct Parker {
    /// The owner thread; set at creation, or by `bind` for a parker made on
    /// behalf of a thread not started yet (an M: `newm`). A `wake` before the
    /// bind only sets the token, which the owner sees before it first parks.
    thread: std::sync::OnceLock<Thread>,
    token: AtomicBool,
}

#[cfg_attr(loom, allow(dead_code))] // under loom only the models use it
impl Parker {
    /// A parker for the calling thread.
    pub(crate) fn new() -> Self {
        let p = Parker::unbound();
        p.bind();
        p
    }

    /// A parker for a thread that will call `bind` before it first waits.
    pub(crate) fn unbound() -> Self {
        Parker {
            thread: std::sync::OnceLock::new(),
            token: AtomicBool::new(false),
        }
    }

    /// Owner, once, before its first wait: make the calling thread the owner.
    pub(crate) fn bind(&self) {
        let ok = self.thread.set(thread::current()).is_ok();
        debug_assert!(ok, "Parker bound twice");
    }

    /// Any thread: wake the owner (idempotent until it consumes the token).
    pub(crate) fn wake(&self) {
        if !self.token.swap(true, Release) {
            #[cfg(not(loom))]
            PENDING_WAKES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Take the token (owner only): true if a wake was pending.
    #[inline]
    fn take(&self) -> bool {
        let had = self.token.swap(false, Acquire);
        #[cfg(not(loom))]
        if had {
            PENDING_WAKES.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        had
    }

    /// Owner only: block until woken (true), or until `stop()` says to give up
    /// (false).
    pub(crate) fn wait(&self, stop: impl Fn() -> bool) -> bool {
        while !self.take() {
            if stop() {
                // A wake may have landed between the token check and `stop`.
                return self.take();
            }
            thread::park();
        }
        true
    }

    /// Wake the owner without a token (it re-checks its stop condition).
    #[cfg(loom)]
    fn wake_for_shutdown(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Forget a pending wake. Only for an owner that knows nobody may still owe
    /// it one (see `try_sleep_on_timers`).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn reset(&self) {
        let _ = self.take();
    }

    /// Owner only: block until woken or until `timeout` elapsed. True if woken.
    pub(crate) fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        if self.take() {
            return true;
        }
        thread::park_timeout(timeout);
        self.take()
    }

    /// Owner only: consume a pending wake without blocking.
    fn try_take(&self) -> bool {
        self.take()
    }
}

/// A token never taken (the owner exited, or its parker was dropped) stops
/// counting as pending.
#[cfg(not(loom))]
impl Drop for Parker {
    fn drop(&mut self) {
        let _ = self.take();
    }
}

/// A `Parker` is the waker of the thread that owns it (`block_on_thread`).
impl Wake for Parker {
    fn wake(self: std::sync::Arc<Self>) {
        Parker::wake(&self)
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        Parker::wake(self)
    }
}

#[cfg(not(loom))]
thread_local! {
    /// The calling plain thread's parker, made once per thread.
    static THREAD_PARKER: std::sync::Arc<Parker> = std::sync::Arc::new(Parker::new());
}

/// Poll `fut` on the calling (plain) thread, parking it while pending.
/// Threads of the whole process parked in `block_on_thread` now, and how
/// many times such a park has returned: deadlock detection
/// (`sched/checkdead.rs`) tells a thread that waits for ever from one that
/// is about to poll, and sees any wake-up between its two looks.
#[cfg(not(loom))]
pub(crate) static BLOCK_ON_PARKED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);
#[cfg(not(loom))]
pub(crate) static BLOCK_ON_WAKES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Wakes given (a parker's token set) and not yet taken by their owner,
/// over every parker of the process: a thread that was woken but has not
/// run yet still counts as awake for deadlock detection.
#[cfg(not(loom))]
pub(crate) static PENDING_WAKES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

pub(crate) fn block_on_thread<F: Future>(fut: F) -> F::Output {
    #[cfg(not(loom))]
    let parker = THREAD_PARKER.with(|p| p.clone());
    // loom: a fresh parker per call (std thread-locals are shared by the model's
    // threads).
    #[cfg(loom)]
    let parker = std::sync::Arc::new(Parker::new());
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // A counterpart is often only microseconds away (a channel rendezvous
        // with another thread): spin, then yield, before paying for a futex sleep
        // and wake-up (crossbeam's Backoff does the same).
        // (loom explores every interleaving anyway: there, just park.)
        let mut step = if cfg!(loom) { 10 } else { 0u32 };
        while !parker.try_take() {
            if step < 7 {
                for _ in 0..1u32 << step {
                    std::hint::spin_loop();
                }
            } else if step < 10 {
                thread::yield_now();
            } else {
                #[cfg(not(loom))]
                BLOCK_ON_PARKED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                thread::park();
                #[cfg(not(loom))]
                {
                    BLOCK_ON_PARKED.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    BLOCK_ON_WAKES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            step += 1;
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The lost-wake-up protocol of `machine.rs`, on the real `Parker`: a spinning M
    //! that finds nothing gives up its P, decrements `nmspinning`, re-checks, and
    //! parks on the idle list; a submitter publishes work, fences, and wakes an idle
    //! M if nobody spins (or "starts a new M" if none is idle). If a wake-up were
    //! lost, the M would park forever with work queued: loom reports the deadlock.
    use super::*;
    use loom::sync::atomic::{fence, AtomicUsize};
    use loom::sync::{Arc, Mutex};

    struct Sched {
        work: AtomicUsize,
        nmspinning: AtomicUsize,
        idle_ms: Mutex<Vec<Arc<Parker>>>,
        taken: AtomicUsize,
        stop: AtomicUsize,
    }

    impl Sched {
        fn take(&self) -> bool {
            if self.work.compare_exchange(1, 0, SeqCst, SeqCst).is_ok() {
                self.taken.fetch_add(1, SeqCst);
                true
            } else {
                false
            }
        }
    }

    #[test]
    fn no_lost_wakeup_between_spinning_m_and_submitter() {
        loom::model(|| {
            let s = Arc::new(Sched {
                work: AtomicUsize::new(0),
                nmspinning: AtomicUsize::new(1), // the M below starts spinning
                idle_ms: Mutex::new(Vec::new()),
                taken: AtomicUsize::new(0),
                stop: AtomicUsize::new(0),
            });
            let s2 = s.clone();
            let m = loom::thread::spawn(move || {
                let s = s2;
                let me = Arc::new(Parker::new());
                // find_runnable: nothing found while spinning.
                if s.take() {
                    return;
                }
                // Stop spinning (RMW = StoreLoad barrier), re-check.
                s.nmspinning.fetch_sub(1, SeqCst);
                fence(SeqCst);
                if s.take() {
                    return;
                }
                // Park on the idle list until handed work.
                s.idle_ms.lock().unwrap().push(me.clone());
                let woken = me.wait(|| s.stop.load(SeqCst) == 1);
                let got = s.take();
                if woken {
                    assert!(got, "woken without work");
                } else {
                    assert!(!got, "lost wake-up: the work waited for shutdown");
                }
            });
            // Submitter: publish, barrier, wakep if nobody spins.
            s.work.store(1, SeqCst);
            fence(SeqCst);
            if s.nmspinning.load(SeqCst) == 0 {
                let idle = s.idle_ms.lock().unwrap().pop();
                match idle {
                    Some(p) => p.wake(),
                    // wakep with no idle M creates one: model it by running the work here.
                    None => {
                        s.take();
                    }
                }
            }
            // Shutdown: release whatever M is still parked idle (that is normal).
            s.stop.store(1, SeqCst);
            for p in s.idle_ms.lock().unwrap().drain(..) {
                p.wake_for_shutdown();
            }
            m.join().unwrap();
            // The M or the "new M" ran the work, exactly once.
            assert_eq!(s.taken.load(SeqCst), 1);
        });
    }
}
