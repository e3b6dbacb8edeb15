//! Pulling a preempted M onto this core (`machine.rs`, "A preempted home").
//!
//! A started goroutine runs only on its own M ("The thread rule"). When the
//! kernel leaves that M waiting for a core, the goroutines other Ms ready
//! for it wait too, however idle the other Ms become: nobody else may run
//! them. Linux places a woken thread on its previous core; if a busy thread
//! (a load generator, another process) holds that core, the M waits up to a
//! scheduler tick (4 ms at 250 Hz) while the core of the M that woke it goes
//! idle again and again, too briefly for the kernel's idle balancing (which
//! skips cores whose average idle time is under its migration cost).
//!
//! So the M that readied the goroutines, finding them still undrained after
//! a while and the stalled M's thread hardly running meanwhile (its CPU
//! clock, `cpu_time_ns`), moves it to its own core: it narrows that thread's
//! CPU affinity to the core it runs on, which migrates the thread there at
//! once, sleeps a moment so that it runs, and puts its mask back.
//!
//! # Who writes what
//!
//! Everything is under `ThreadPin::state`'s lock: the thread id and its
//! CPU clock (set by the M's thread when it starts, `bind`; cleared before
//! it retires or exits, `unbind`, also when a panic ends it, so nobody
//! narrows or reads a reused id), and the mask to put back. A puller reads
//! the thread's current affinity, keeps it, narrows it to its own core (only
//! a core the thread may use: a user's pinning is kept), and marks the pin
//! `pulled`; a second pull before the restore is refused. The puller itself
//! puts the mask back after its pause (`release`): the migration already
//! happened, and a narrowed mask must not outlive the pause, since a thread
//! inherits its creator's affinity (an M started by a pulled M would keep
//! one core for life). As a backstop the M restores at every schedule
//! (`restore`, one relaxed load), and a thread it creates while pulled
//! starts from the mask it had before (`inherited`, `apply`).
//!
//! Elsewhere than Linux this is a no-op.

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::atomic::{AtomicBool, Ordering::*};
    use std::sync::Mutex;

    const SET_SIZE: usize = std::mem::size_of::<libc::cpu_set_t>();

    /// A thread's affinity, to put back.
    pub(crate) type Mask = Box<libc::cpu_set_t>;

    struct State {
        /// The bound thread (0: none).
        tid: libc::pid_t,
        /// Its CPU-time clock.
        clock: libc::clockid_t,
        /// Its affinity before the pull, to put back.
        saved: Option<Mask>,
    }

    /// One M's thread, as other Ms see it for pulling.
    pub(crate) struct ThreadPin {
        state: Mutex<State>,
        /// A pull is in effect: the M restores at its next schedule.
        pulled: AtomicBool,
    }

    /// Set `tid`'s affinity to `set`; if the kernel refuses (a cpuset
    /// shrank meanwhile), to every CPU, which it intersects with the
    /// allowed ones: never leave a thread on one core by mistake.
    fn set_or_widen(tid: libc::pid_t, set: &libc::cpu_set_t) {
        // SAFETY: `set` is valid for `SET_SIZE` bytes; `tid` is 0 (the
        // caller) or a live bound thread (see `State`).
        if unsafe { libc::sched_setaffinity(tid, SET_SIZE, set) } == 0 {
            return;
        }
        // SAFETY: a `cpu_set_t` is a plain bit array.
        let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for cpu in 0..8 * SET_SIZE {
            // SAFETY: in bounds.
            unsafe { libc::CPU_SET(cpu, &mut all) };
        }
        // SAFETY: as above.
        unsafe { libc::sched_setaffinity(tid, SET_SIZE, &all) };
    }

    /// On a thread just created by a pulled M: take the mask its creator
    /// had before the pull.
    pub(crate) fn apply(mask: &libc::cpu_set_t) {
        set_or_widen(0, mask);
    }

    impl ThreadPin {
        pub(crate) fn new() -> Self {
            ThreadPin {
                state: Mutex::new(State {
                    tid: 0,
                    clock: 0,
                    saved: None,
                }),
                pulled: AtomicBool::new(false),
            }
        }

        fn state(&self) -> std::sync::MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// Called on the M's thread when it starts (also a reused `Machine`'s
        /// new thread).
        pub(crate) fn bind(&self) {
            let mut st = self.state();
            // SAFETY: no arguments; returns this thread's id.
            let tid = unsafe { libc::gettid() };
            let mut clock: libc::clockid_t = 0;
            // SAFETY: `pthread_self` is this live thread; `clock` is valid.
            let ok = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0;
            // Without its clock nobody can tell it waits: never pulled.
            st.tid = if ok { tid } else { 0 };
            st.clock = clock;
            st.saved = None;
            self.pulled.store(false, SeqCst);
        }

        /// Called on the M's thread before it retires or exits.
        pub(crate) fn unbind(&self) {
            let mut st = self.state();
            self.put_back_here(&mut st);
            st.tid = 0;
        }

        /// On the M's own thread (lock held): if a pull is in effect, take
        /// the saved mask back.
        fn put_back_here(&self, st: &mut State) {
            if self.pulled.swap(false, SeqCst) {
                if let Some(set) = st.saved.take() {
                    set_or_widen(0, &set);
                }
            }
        }

        /// The thread's CPU time so far (None: not bound, or unreadable).
        pub(crate) fn cpu_time_ns(&self) -> Option<u64> {
            let st = self.state();
            if st.tid == 0 {
                return None;
            }
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is valid; the clock is a live thread's (bound;
            // `unbind` clears it under this lock before the thread exits).
            if unsafe { libc::clock_gettime(st.clock, &mut ts) } != 0 {
                return None;
            }
            Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
        }

        /// Move the thread to the core the caller runs on, if that is one of
        /// its cores. False if it could not: not bound, pulled already, not
        /// allowed there, or the kernel refused.
        pub(crate) fn pull_here(&self) -> bool {
            let mut st = self.state();
            if st.tid == 0 || self.pulled.load(Relaxed) {
                return false;
            }
            // SAFETY: no arguments.
            let cpu = unsafe { libc::sched_getcpu() };
            if cpu < 0 || cpu as usize >= 8 * SET_SIZE {
                return false;
            }
            let cpu = cpu as usize;
            // SAFETY: a `cpu_set_t` is a plain bit array; zeroed is empty.
            let mut saved: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: `saved` is valid for `SET_SIZE` bytes; `tid` is a live
            // thread of this process (bound, and `unbind` clears it under
            // this lock before the thread exits).
            if unsafe { libc::sched_getaffinity(st.tid, SET_SIZE, &mut saved) } != 0 {
                return false;
            }
            // SAFETY: `cpu` is below the set's size in bits (checked above).
            if !unsafe { libc::CPU_ISSET(cpu, &saved) } {
                return false; // pinned elsewhere (by the user): keep it
            }
            // SAFETY: as above.
            let mut here: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            unsafe { libc::CPU_SET(cpu, &mut here) };
            // SAFETY: valid set of the right size; `tid` as above.
            if unsafe { libc::sched_setaffinity(st.tid, SET_SIZE, &here) } != 0 {
                return false;
            }
            st.saved = Some(Box::new(saved));
            self.pulled.store(true, SeqCst);
            true
        }

        /// The puller, after its pause: put the thread's mask back (it has
        /// moved already). A no-op if the M restored it first.
        pub(crate) fn release(&self) {
            let mut st = self.state();
            if st.tid != 0 && self.pulled.swap(false, SeqCst) {
                if let Some(set) = st.saved.take() {
                    set_or_widen(st.tid, &set);
                }
            }
        }

        /// On the M's own thread, in the scheduler: put back the affinity it
        /// had if another M narrowed it. One relaxed load otherwise.
        #[inline]
        pub(crate) fn restore(&self) {
            if self.pulled.load(Relaxed) {
                self.restore_slow();
            }
        }

        #[cold]
        fn restore_slow(&self) {
            let mut st = self.state();
            self.put_back_here(&mut st);
        }

        /// On the M's own thread, about to create a thread: the mask it had
        /// before a pull still in effect (the new thread `apply`s it).
        pub(crate) fn inherited(&self) -> Option<Mask> {
            if !self.pulled.load(Relaxed) {
                return None;
            }
            self.state().saved.clone()
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    /// Elsewhere: nothing to pull.
    pub(crate) struct ThreadPin;

    /// Nothing to put back.
    pub(crate) type Mask = ();

    pub(crate) fn apply(_: &Mask) {}

    impl ThreadPin {
        pub(crate) fn new() -> Self {
            ThreadPin
        }
        pub(crate) fn bind(&self) {}
        pub(crate) fn unbind(&self) {}
        pub(crate) fn cpu_time_ns(&self) -> Option<u64> {
            None
        }
        pub(crate) fn pull_here(&self) -> bool {
            false
        }
        pub(crate) fn release(&self) {}
        #[inline]
        pub(crate) fn restore(&self) {}
        pub(crate) fn inherited(&self) -> Option<Mask> {
            None
        }
    }
}

pub(crate) use imp::{apply, Mask, ThreadPin};

/// The mask a thread created now should start with: the calling M's own if
/// another M has it narrowed at the moment (`ThreadPin::inherited`).
pub(crate) fn inherited() -> Option<Mask> {
    super::context::current().and_then(|ctx| ctx.m.pin.inherited())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::ThreadPin;
    use std::sync::mpsc;

    fn mask_of(tid: i32) -> libc::cpu_set_t {
        // SAFETY: zeroed is a valid empty set; the call fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid buffer of the right size.
        let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) };
        assert_eq!(r, 0, "sched_getaffinity");
        set
    }

    fn count(set: &libc::cpu_set_t) -> usize {
        // SAFETY: reads the set's bits.
        unsafe { libc::CPU_COUNT(set) as usize }
    }

    /// A pulled thread runs only on the puller's core until it restores,
    /// then has exactly the mask it started with.
    #[test]
    fn pull_narrows_to_this_core_and_restore_puts_the_mask_back() {
        let pin = std::sync::Arc::new(ThreadPin::new());
        let (to_t, from_main) = mpsc::channel::<()>();
        let (to_main, from_t) = mpsc::channel::<(i32, libc::cpu_set_t, libc::cpu_set_t)>();
        let p2 = pin.clone();
        let t = std::thread::spawn(move || {
            p2.bind();
            // SAFETY: no arguments.
            let tid = unsafe { libc::gettid() };
            let before = mask_of(0);
            to_main.send((tid, before, before)).unwrap();
            from_main.recv().unwrap(); // pulled
            let narrowed = mask_of(0);
            p2.restore();
            let after = mask_of(0);
            to_main.send((tid, narrowed, after)).unwrap();
            p2.unbind();
        });
        let (_, before, _) = from_t.recv().unwrap();
        assert!(pin.pull_here(), "pulling a bound thread of ours");
        to_t.send(()).unwrap();
        let (_, narrowed, after) = from_t.recv().unwrap();
        t.join().unwrap();
        assert_eq!(count(&narrowed), 1, "narrowed to one core");
        assert_eq!(count(&after), count(&before), "restored");
        for cpu in 0..8 * std::mem::size_of::<libc::cpu_set_t>() {
            // SAFETY: in bounds.
            unsafe {
                assert_eq!(libc::CPU_ISSET(cpu, &after), libc::CPU_ISSET(cpu, &before));
            }
        }
        assert!(!pin.pull_here(), "an unbound pin is never pulled");
    }

    /// `restore` without a pull leaves the mask alone.
    #[test]
    fn restore_without_a_pull_is_a_no_op() {
        let pin = ThreadPin::new();
        pin.bind();
        let before = mask_of(0);
        pin.restore();
        let after = mask_of(0);
        assert_eq!(count(&before), count(&after));
        pin.unbind();
    }
}
