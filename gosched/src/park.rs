//! Thread parking: a one-shot wake token on top of the OS (Go's `note`), used
//! by idle Ms (`sched/machine.rs`), by plain threads blocked in `block_on`
//! (`block_on_thread`, where the `Parker` is the waker), and by the mutex's
//! thread waiters.
//!
//! `wake` publishes the token (Release) and, if the owner sleeps, wakes it;
//! taking the token is an Acquire, so whatever the waker wrote before `wake`
//! is visible after a wait returns. A wake that comes before the wait is not
//! lost: the token stays set. Spurious OS wake-ups are absorbed by the loops
//! around the token.
//!
//! # Two backends
//!
//! - **Linux (futex).** One `AtomicU32`: `EMPTY`, `NOTIFIED` (the token) or
//!   `PARKED` (the owner sleeps in `futex_wait` on the word). The parker is
//!   bound to no thread: whichever thread owns it now may wait on it, so the
//!   `Machine` of an M whose thread exited is reused by a later thread
//!   (`machine.rs`, "Idle Ms exit"). `wake` swaps in `NOTIFIED` and calls
//!   `futex_wake` only if it replaced `PARKED`; the sleeper goes
//!   `EMPTY → PARKED` by CAS before it sleeps, and the kernel's check of the
//!   word inside `futex_wait` closes the window between that CAS and the
//!   sleep. One atomic RMW per wake of a running owner (std's thread parker
//!   under a token flag costs two).
//! - **Elsewhere, and under loom** (whose models cannot see a futex): a token
//!   flag and the owner `Thread`'s own parker. That parker is bound once
//!   (`bind`), so there a `Machine` is never reused and Ms do not exit.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

#[cfg(not(all(target_os = "linux", not(loom))))]
use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::loom::thread;
#[cfg(not(all(target_os = "linux", not(loom))))]
use crate::loom::thread::Thread;

/// Whether a `Parker` may change owner thread (the futex backend): only then
/// may idle Ms exit and their `Machine` be reused.
pub(crate) const REBINDABLE: bool = cfg!(all(target_os = "linux", not(loom)));

#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) struct Parker {
    state: std::sync::atomic::AtomicU32,
}

#[cfg(all(target_os = "linux", not(loom)))]
mod futex {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    pub(super) const EMPTY: u32 = 0;
    pub(super) const NOTIFIED: u32 = 1;
    pub(super) const PARKED: u32 = 2;

    /// Sleep while `*word == expected`, at most `timeout` (a wake, a signal
    /// or a spurious return all just return: the caller re-checks).
    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a live, aligned u32 for the whole call; the
        // timeout pointer is null or points at `ts`, alive until we return.
        // FUTEX_WAIT only reads both.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                tsp,
            );
        }
    }

    /// Wake the one thread sleeping on `word`, if any.
    pub(super) fn wake_one(word: &AtomicU32) {
        // SAFETY: `word` is a live u32 (the waker holds the parker); a wake
        // on an address nobody sleeps on does nothing.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }
}

#[cfg(all(target_os = "linux", not(loom)))]
impl Parker {
    /// A parker (owned by whichever thread waits on it).
    pub(crate) fn new() -> Self {
        Parker {
            state: std::sync::atomic::AtomicU32::new(futex::EMPTY),
        }
    }

    /// As `new` (the futex parker needs no owner thread up front).
    pub(crate) fn unbound() -> Self {
        Parker::new()
    }

    /// Nothing to do: the futex parker is bound to no thread.
    pub(crate) fn bind(&self) {}

    /// Any thread: wake the owner (idempotent until it consumes the token).
    /// True if the owner was asleep in `park` (a futex wake was made).
    pub(crate) fn wake(&self) -> bool {
        use std::sync::atomic::Ordering::Release;
        let prev = self.state.swap(futex::NOTIFIED, Release);
        if prev != futex::NOTIFIED {
            PENDING_WAKES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if prev == futex::PARKED {
            futex::wake_one(&self.state);
            return true;
        }
        false
    }

    /// Take the token (owner only): true if a wake was pending.
    #[inline]
    fn take(&self) -> bool {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let had = self
            .state
            .compare_exchange(futex::NOTIFIED, futex::EMPTY, Acquire, Relaxed)
            .is_ok();
        if had {
            PENDING_WAKES.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        had
    }

    /// Owner only: sleep until a wake (left for `take`), a spurious return
    /// or the timeout.
    fn sleep(&self, timeout: Option<Duration>) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        if self
            .state
            .compare_exchange(futex::EMPTY, futex::PARKED, Acquire, Relaxed)
            .is_err()
        {
            return; // NOTIFIED: the token is there to take
        }
        futex::wait(&self.state, futex::PARKED, timeout);
        // Still PARKED: a timeout or a spurious return; a wake would have
        // made it NOTIFIED (left for `take`).
        let _ = self
            .state
            .compare_exchange(futex::PARKED, futex::EMPTY, Relaxed, Relaxed);
    }
}

#[cfg(not(all(target_os = "linux", not(loom))))]
pub(crate) struct Parker {
    /// The owner thread; set at creation, or by `bind` for a parker made on
    /// behalf of a thread not started yet (an M: `newm`). A `wake` before the
    /// bind only sets the token, which the owner sees before it first parks.
    thread: std::sync::OnceLock<Thread>,
    token: AtomicBool,
}

#[cfg(not(all(target_os = "linux", not(loom))))]
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
    /// True if a new token was left (the owner may have been asleep).
    pub(crate) fn wake(&self) -> bool {
        if !self.token.swap(true, Release) {
            #[cfg(not(loom))]
            PENDING_WAKES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
            return true;
        }
        false
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

    /// Owner only: sleep until an unpark, a spurious return or the timeout.
    fn sleep(&self, timeout: Option<Duration>) {
        match timeout {
            None => thread::park(),
            Some(d) => thread::park_timeout(d),
        }
    }

    /// Wake the owner without a token (it re-checks its stop condition).
    #[cfg(loom)]
    fn wake_for_shutdown(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

#[cfg_attr(loom, allow(dead_code))]
impl Parker {
    /// Owner only: block until woken (true), or until `stop()` says to give up
    /// (false).
    pub(crate) fn wait(&self, stop: impl Fn() -> bool) -> bool {
        while !self.take() {
            if stop() {
                // A wake may have landed between the token check and `stop`.
                return self.take();
            }
            self.sleep(None);
        }
        true
    }

    /// Owner only: as `wait`, but give up (false) at `deadline` too.
    pub(crate) fn wait_until(&self, stop: impl Fn() -> bool, deadline: Instant) -> bool {
        while !self.take() {
            if stop() {
                return self.take();
            }
            let now = Instant::now();
            if now >= deadline {
                return self.take();
            }
            self.sleep(Some(deadline - now));
        }
        true
    }

    /// Forget a pending wake. Only for an owner that knows nobody may still owe
    /// it one (see `try_sleep_on_timers`).
    pub(crate) fn reset(&self) {
        let _ = self.take();
    }

    /// Owner only: block until woken or until `timeout` elapsed. True if woken.
    pub(crate) fn wait_timeout(&self, timeout: Duration) -> bool {
        if self.take() {
            return true;
        }
        self.sleep(Some(timeout));
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
        Parker::wake(&self);
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        Parker::wake(self);
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
                parker.sleep(None);
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
                    Some(p) => {
                        p.wake();
                    }
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
