//! Machine (M): an OS thread running the schedule loop while it holds a P.
//!
//! One file per protocol:
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | `Machine` and the M's context, `newm`/`mstart`, the schedule loop, `execute` (one poll), retaken Ps |
//! | `findrunnable.rs` | `find_runnable` in Go's order, stealing (`steal_work`, `steal_queued`), timers |
//! | `stopm.rs` | an M without work: the idle list, the timer sleeper, idle Ms exiting, virtual time's sleeper |
//! | `../lockos.rs` | `lock_os_thread`: `stoplockedm` and `startlockedm` |
//!
//! # Goroutines move, as in Go
//!
//! A started goroutine is queued, stolen and handed off with its P like any
//! task: where goroutines are virtual threads (`vthread`) its thread-locals
//! travel with it (its own thread pointer), so resuming on another M is
//! sound. Elsewhere it moves too, and the crate docs say what that leaves
//! unsound. The one exception is `lock_os_thread` (`lockos.rs`): a locked
//! goroutine runs only on its M, and that M runs nothing else (Go's
//! `lockedm`/`lockedg`); whoever takes it off a queue hands it to its M
//! with the P (`startlockedm`, in `schedule`).
//!
//! # Who writes what
//!
//! `MachineCtx` is the M's own (a thread-local context, `Cell`s: only its
//! thread touches it). Of `Machine`, other threads write `nextp` (with
//! `next_spinning` and `lockedg_next` before it: `start`'s Release swap
//! publishes them to the M's Acquire take) and the hints `preempt` (sysmon);
//! the rest is written by the M itself and read by others as hints.
//!
//! # Retaken Ps
//!
//! The poll of a task runs with the P in USER (`begin_poll`; the M keeps the
//! word, generation included, in `pword`). When the poll returns, the M CASes
//! USER→RUNNING; if that fails, sysmon retook the P (`sysmon.rs`) and the M is
//! P-less: it looks for an idle P and otherwise parks, as Go's `exitsyscall`.
//! A runtime call or a syscall inside the poll that finds the P retaken takes
//! an idle P at once if there is one (`lost_p_in_poll`), so the poll may end
//! on another P than it began on.

mod findrunnable;
mod stopm;

use std::cell::{Cell, RefCell};

use super::context;
use super::preempt;
use super::processor::Processor;
use super::task::{Ran, Task};
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::sync::Mutex;
use crate::loom::thread;
use crate::park::Parker;
use std::sync::Arc;

const NO_P: usize = usize::MAX;

pub(crate) struct Machine {
    pub(crate) parker: Parker,
    nextp: AtomicUsize,
    next_spinning: AtomicBool,
    /// The goroutine locked to this M, handed to it with a P by the M that
    /// took it off a run queue (`startlockedm`, `lockos.rs`). Written before
    /// that P is handed (`start`'s Release swap of `nextp` publishes it),
    /// taken by this M with the P.
    lockedg_next: Mutex<Option<Task>>,
    /// This M's thread exited ("Idle Ms exit") and no new thread reuses the
    /// `Machine` yet. Written under the scheduler lock; a snapshot for stats.
    retired: AtomicBool,
    /// A goroutine is locked to this M (`lockos.rs`; `MachineCtx::lockedg`
    /// as others see it, for stats: std atomic, outside loom's model).
    pub(crate) locked: std::sync::atomic::AtomicBool,
    /// sysmon asks the task running here to yield (`preempt.rs`; a hint:
    /// std atomic, outside loom's model).
    pub(crate) preempt: std::sync::atomic::AtomicBool,
    /// Inside a call made in place (`syscall.rs`): the P it holds stays USER
    /// (`status.rs`, "Calls in place"), and this tells sysmon and thieves
    /// that the M is not about to run anything. Written by this M only (a
    /// plain store on entry, Release after the P's `syscalltick`; on
    /// return, or when the poll the call parked in ends); read by others
    /// through `Processor::owner` (Acquire), a hint: std atomic, outside
    /// loom's model.
    pub(crate) in_call: std::sync::atomic::AtomicBool,
    /// This M (the timer sleeper) is blocked in the netpoller, not on its
    /// parker: `wake` also wakes the poller. Stored (SeqCst) under the
    /// sleeper lock before `Shared::sleeper_until`, so a `timer_added` that
    /// reads the sleeper's time also sees this.
    #[cfg(not(loom))]
    in_netpoll: std::sync::atomic::AtomicBool,
    /// The runtime, for `wake` to reach its poller.
    #[cfg(not(loom))]
    runtime: std::sync::OnceLock<std::sync::Weak<Shared>>,
}

impl Machine {
    /// Hand this idle M the P `p` and wake it.
    pub(crate) fn start(&self, p: usize, spinning: bool) {
        self.next_spinning.store(spinning, Relaxed);
        // A swap, not a store: it also checks that nobody handed this M a P
        // it has not taken yet (and loom orders it as a read-modify-write).
        let prev = self.nextp.swap(p, Release);
        debug_assert_eq!(prev, NO_P, "an idle M was handed two Ps");
        // (The timer sleeper may wait in the netpoller.)
        self.wake();
    }

    /// Whether a P handed over by `start` waits to be taken.
    pub(super) fn has_nextp(&self) -> bool {
        self.nextp.load(Acquire) != NO_P
    }

    /// Take the P (and spinning flag) handed over by `start`.
    pub(super) fn take_nextp(&self) -> Option<(usize, bool)> {
        let p = self.nextp.swap(NO_P, Acquire);
        (p != NO_P).then(|| (p, self.next_spinning.load(Relaxed)))
    }

    /// An M for a thread about to be started (it binds the parker itself).
    pub(super) fn new() -> Machine {
        Machine {
            parker: Parker::unbound(),
            nextp: AtomicUsize::new(NO_P),
            next_spinning: AtomicBool::new(false),
            lockedg_next: Mutex::new(None),
            retired: AtomicBool::new(false),
            locked: std::sync::atomic::AtomicBool::new(false),
            preempt: std::sync::atomic::AtomicBool::new(false),
            in_call: std::sync::atomic::AtomicBool::new(false),
            #[cfg(not(loom))]
            in_netpoll: std::sync::atomic::AtomicBool::new(false),
            #[cfg(not(loom))]
            runtime: std::sync::OnceLock::new(),
        }
    }

    /// Wake this M wherever it waits: its parker, or the netpoller. True if
    /// it was asleep in either.
    pub(crate) fn wake(&self) -> bool {
        let woke = self.parker.wake();
        #[cfg(not(loom))]
        if self.in_netpoll.load(SeqCst) {
            if let Some(s) = self.runtime.get().and_then(std::sync::Weak::upgrade) {
                s.netpoll.wake();
                return true;
            }
        }
        woke
    }

    /// `newm` gives a retired M a new thread.
    fn revive(&self) {
        debug_assert!(self.retired.load(Relaxed));
        debug_assert_eq!(self.nextp.load(Relaxed), NO_P);
        self.retired.store(false, Relaxed);
        // A request sysmon made through a stale `Processor::owner` (it
        // counts in `preempt::REQUESTS` until cleared).
        preempt::clear(self);
    }

    /// Whether this M's thread exited and nobody reuses it yet (stats).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Relaxed)
    }

    /// `startlockedm`'s half: the goroutine locked to this M, to run with the
    /// P about to be handed to it.
    pub(super) fn put_lockedg(&self, task: Task) {
        let prev = lock(&self.lockedg_next).replace(task);
        debug_assert!(prev.is_none(), "a locked M was handed two goroutines");
    }

    /// The goroutine handed with the P just taken (`put_lockedg`).
    pub(crate) fn take_lockedg(&self) -> Option<Task> {
        lock(&self.lockedg_next).take()
    }
}

/// The calling M's per-thread context.
pub(crate) struct MachineCtx {
    pub(crate) shared: Arc<Shared>,
    pub(super) m: Arc<Machine>,
    /// The P this M holds, if any.
    pub(crate) p: Cell<Option<usize>>,
    pub(super) spinning: Cell<bool>,
    /// Set by `yield_now` during a poll.
    pub(crate) yielded: Cell<bool>,
    /// True while a task's poll runs.
    pub(crate) in_poll: Cell<bool>,
    /// The status word of our P as `begin_poll` stored it (USER and the
    /// generation): what our CASes compare during a poll (`status.rs`,
    /// "Generations").
    pub(crate) pword: Cell<u64>,
    /// Polls begun on this M (an in-place syscall tells whether the poll it
    /// entered in is still the current one: `syscall.rs`).
    pub(crate) poll_seq: Cell<u64>,
    /// Inside an in-place syscall of the current poll (`Machine::in_call`
    /// as this M sees it): runtime calls made by the call itself go P-less
    /// (`with_current_p`), since sysmon may retake the P at any moment, and
    /// nothing preempts.
    pub(crate) in_syscall: Cell<bool>,
    /// The G whose poll the timeline saw begin (`trace_start`).
    traced: Cell<(u64, bool)>,
    /// The task this M is polling (for `lock_os_thread`).
    pub(crate) running: Cell<Option<std::ptr::NonNull<super::task::Header>>>,
    /// The goroutine locked to this M (`lockos.rs`, Go's `m.lockedg`): while
    /// set, this M runs nothing else.
    pub(crate) lockedg: Cell<Option<std::ptr::NonNull<super::task::Header>>>,
    /// The in-place syscall of a virtual runtime that the running goroutine
    /// is in (`vtime::BusyGuard::syscall`): released here if the goroutine
    /// parks inside it.
    #[cfg(not(loom))]
    virtual_syscall: Cell<Option<Arc<super::vtime::SyscallToken>>>,
    /// This M retired ("Idle Ms exit"): its thread leaves the schedule loop
    /// (shared with its `ExitGuard`).
    retired: std::rc::Rc<Cell<bool>>,
    /// Each P's `execs` at our last `steal_queued` pass.
    #[cfg(not(loom))]
    execs_seen: RefCell<Vec<u32>>,
    /// The last `Shared::heap_trims` this M acted on (`trim_if_asked`).
    heap_trims_seen: Cell<u32>,
}

/// Start a new M (OS thread) running P `p`.
pub(crate) fn newm(shared: Arc<Shared>, p: usize, spinning: bool) {
    let n = shared.nthreads.fetch_add(1, AcqRel);
    let giveback = |shared: &Shared| {
        shared.nthreads.fetch_sub(1, AcqRel);
        shared.release_p(p);
        if spinning {
            shared.spinning_end();
        }
    };
    if n >= shared.config.max_threads {
        // Go's `checkmcount`: more threads than allowed means runaway
        // blocking (every M stuck in a syscall or a never-ending poll); end
        // the process with a clear message rather than hang. The loom models
        // cap their threads on purpose, so there the work just stays queued.
        #[cfg(not(loom))]
        fatal_thread_exhaustion(shared.config.max_threads);
        #[cfg(loom)]
        {
            giveback(&shared);
            return;
        }
    }
    #[cfg(not(loom))]
    shared.start_sysmon();
    *lock(&shared.live_ms) += 1;
    // The `Machine` of a retired M is reused first ("Idle Ms exit"), so
    // their number stays that of the most threads ever live at once.
    let m = match shared.reuse_retired_m() {
        Some(m) => {
            m.revive();
            m
        }
        None => {
            let m = Arc::new(Machine::new());
            #[cfg(not(loom))]
            let _ = m.runtime.set(Arc::downgrade(&shared));
            lock(&shared.machines).push(m.clone());
            m
        }
    };
    shared.procs[p]
        .owner
        .store(Arc::as_ptr(&m).cast_mut(), Release);
    let s2 = shared.clone();
    let seq = shared.mseq.fetch_add(1, Relaxed);
    let kept = m.clone();
    let res = thread::Builder::new()
        .name(format!("{}-m{seq}", shared.config.name))
        .spawn(move || mstart(s2, m, p, spinning));
    match res {
        Ok(h) => {
            let mut threads = lock(&shared.threads);
            // Handles of retired Ms' threads that have finished: dropping
            // them detaches nothing.
            #[cfg(not(loom))]
            threads.retain(|h| !h.is_finished());
            threads.push(h);
        }
        Err(e) => {
            eprintln!("gosched: cannot start an M thread: {e}");
            *lock(&shared.live_ms) -= 1;
            // The `Machine` never got its thread: retire it.
            shared.retire_m(&mut lock(&shared.sched), kept);
            giveback(&shared);
        }
    }
}

/// Go's "thread exhaustion": print why and abort.
#[cfg(not(loom))]
#[cold]
fn fatal_thread_exhaustion(max: usize) -> ! {
    eprintln!(
        "runtime: program exceeds {max}-thread limit\n\
         fatal error: thread exhaustion\n\
         (gosched: every M is blocked in a system call or a poll that does not \
         return; raise the limit with Builder::max_threads, or block less: \
         gosched::syscall hands slow calls to a bounded pool)"
    );
    std::process::abort();
}

/// Counts an M's exit however its thread ends (a panic that escapes the
/// schedule loop included), so that shutdown never waits for a dead M and
/// `nthreads` stays the count of live Ms (a retired M was taken off it
/// already, under the scheduler lock: `retired`, shared with its context).
struct ExitGuard {
    shared: Arc<Shared>,
    m: Arc<Machine>,
    retired: std::rc::Rc<Cell<bool>>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if !self.retired.get() {
            self.shared.nthreads.fetch_sub(1, AcqRel);
            // A goroutine handed to this locked M as it exits (or as a
            // panic ends its thread): nobody else may run it.
            if let Some(t) = self.m.take_lockedg() {
                t.shutdown();
            }
        }
        *lock(&self.shared.live_ms) -= 1;
        self.shared.ms_exited.notify_all();
    }
}

/// An M's thread.
fn mstart(shared: Arc<Shared>, m: Arc<Machine>, p: usize, spinning: bool) {
    let retired = std::rc::Rc::new(Cell::new(false));
    let _exit = ExitGuard {
        shared: shared.clone(),
        m: m.clone(),
        retired: retired.clone(),
    };
    m.parker.bind();
    #[cfg(not(loom))]
    crate::stack::overflow::ensure_thread_altstack();
    let ctx = MachineCtx {
        shared: shared.clone(),
        m,
        p: Cell::new(Some(p)),
        spinning: Cell::new(spinning),
        yielded: Cell::new(false),
        in_poll: Cell::new(false),
        pword: Cell::new(0),
        running: Cell::new(None),
        traced: Cell::new((0, false)),
        lockedg: Cell::new(None),
        #[cfg(not(loom))]
        virtual_syscall: Cell::new(None),
        retired,
        poll_seq: Cell::new(0),
        in_syscall: Cell::new(false),
        #[cfg(not(loom))]
        execs_seen: RefCell::new(Vec::new()),
        heap_trims_seen: Cell::new(0),
    };
    // Uninstalled before `ctx` is dropped (declared after it).
    let _installed = context::install_machine(&ctx);
    ctx.schedule();
    if !ctx.retired.get() {
        // (A retired M's `Machine` may already serve a new thread.)
        preempt::clear(&ctx.m);
    }
}

impl MachineCtx {
    pub(super) fn proc(&self, p: usize) -> &Processor {
        &self.shared.procs[p]
    }

    /// The schedule loop; returns at shutdown.
    fn schedule(&self) {
        while let Some((task, inherit)) = self.find_runnable() {
            if self.spinning.get() {
                self.resetspinning();
            }
            if let Some(m) = task.lockedm().filter(|m| !Arc::ptr_eq(m, &self.m)) {
                // Locked to another M: only that M may run it (`lockos.rs`).
                let m = m.clone();
                self.startlockedm(task, &m);
                continue;
            }
            self.execute(task, inherit);
        }
    }

    /// Go's `resetspinning`: this M found work; if it was the last spinner, start
    /// another one so the next burst of work is noticed.
    fn resetspinning(&self) {
        self.spinning.set(false);
        self.shared.spinning_end();
        if self.shared.idle_ps() != 0 {
            self.shared.wakep();
        }
    }

    /// Run `task` once on our P. With the timeline on, a copy of this
    /// function that records the run (one check here, none in the copy
    /// that runs when it is off: two checks around the poll cost W3 async
    /// about 3%).
    #[inline]
    fn execute(&self, task: Task, inherit_time: bool) {
        if crate::trace::on() {
            self.execute_traced(task, inherit_time);
        } else {
            self.execute_with::<false>(task, inherit_time);
        }
    }

    #[cold]
    #[inline(never)]
    fn execute_traced(&self, task: Task, inherit_time: bool) {
        self.execute_with::<true>(task, inherit_time);
    }

    #[inline(always)]
    fn execute_with<const TRACE: bool>(&self, task: Task, inherit_time: bool) {
        let pi = self.p.get().expect("execute without a P");
        let p = self.proc(pi);
        if !inherit_time {
            // A new time slice: owner-only write; sysmon preempts a slice
            // that has not moved for `FORCE_PREEMPT`.
            p.schedtick
                .store(p.schedtick.load(Relaxed).wrapping_add(1), Relaxed);
            if p.slice_expired.load(Relaxed) {
                p.slice_expired.store(false, Relaxed);
            }
        }
        // Owner-only write; thieves compare it across their `runnext` wait.
        p.execs
            .store(p.execs.load(Relaxed).wrapping_add(1), Release);
        debug_assert!(task.lockedm().is_none_or(|m| Arc::ptr_eq(m, &self.m)));
        if TRACE {
            // Stamped while the P is still RUNNING (sysmon cannot take it):
            // a retake always comes after this start on the P's track.
            self.trace_start(pi, &task);
        }
        self.pword.set(p.status.begin_poll());
        self.poll_seq.set(self.poll_seq.get().wrapping_add(1));
        self.in_poll.set(true);
        self.running.set(Some(task.raw()));
        #[cfg(not(loom))]
        if self.shared.debug.hogs {
            let h = task.header();
            p.running.set(h.id, h.goroutine, h.site);
        }
        if !task.header().goroutine {
            // An async task runs on the M's own thread-locals, not on the area
            // of the goroutine that ran before it (`vthread`).
            crate::vthread::to_host();
        }
        let ran = task.run_detailed();
        self.running.set(None);
        self.in_poll.set(false);
        // A preemption request ends with the poll it was meant for (a
        // flag left on an M that goes idle would keep every runtime call
        // of every M on the slow path of `preempt::requested`).
        preempt::clear(&self.m);
        // The poll is over: take the P back, unless sysmon retook it. (The P
        // may not be the one we started with: a syscall or runtime call that
        // found it retaken may have taken an idle one, `lost_p_in_poll`.)
        // A goroutine that parked inside an in-place syscall left `in_call`
        // set: clear it (the rest of that call runs unmarked, in a later
        // poll).
        if self.in_syscall.replace(false) {
            self.m.in_call.store(false, Relaxed);
        }
        let p = match self.p.get() {
            Some(pi) if self.proc(pi).status.end_poll(self.pword.get()) => Some(self.proc(pi)),
            _ => {
                self.p.set(None);
                None
            }
        };
        let yielded = self.yielded.replace(false);
        #[cfg(not(loom))]
        self.end_virtual_syscall(yielded);
        if TRACE {
            self.trace_end(&ran, yielded);
        }
        if let Ran::Notified(t) = ran {
            // Still runnable (a locked goroutine too: whoever takes it from
            // the queue hands it back to us, `startlockedm`).
            if let Some(p) = p {
                if !yielded || p.has_work() || self.shared.global_len() == 0 {
                    // Woken while it ran, or yielding (Go's goyield): the back
                    // of the local queue. Every G queued here runs before it,
                    // and the global queue gets a G every 61 ticks
                    // (`GLOBAL_FAIRNESS_TICK`) — or at once, below, when the
                    // local queue is empty.
                    // SAFETY: we own `p` (RUNNING).
                    unsafe {
                        p.runqput_tail(t, |b, seniors| self.shared.global_push_batch(b, seniors))
                    };
                } else {
                    // `yield_now` with nothing local but work in the global
                    // queue: to the global queue's tail, and refill from its
                    // head in the same critical section (Go's Gosched; what
                    // find_runnable would do next with a second lock).
                    self.shared.global_push_and_refill(t, p);
                }
            } else {
                // No P: the global queue.
                self.shared.global_push(t);
                self.shared.wakep_if_idle();
            }
        }
    }

    /// Our P was retaken while we were inside a poll (a syscall returned, or
    /// a runtime call found the generation moved): Go's `exitsyscall` slow
    /// path. Take an idle P if there is one and go on with the poll on it;
    /// else go on P-less (a goroutine back from `syscall` then yields, so it
    /// waits for a P instead of running beside the procs limit).
    pub(crate) fn lost_p_in_poll(&self) {
        self.p.set(None);
        if let Some(pi) = self.shared.acquire_idle_p() {
            let p = self.proc(pi);
            p.set_owner(&self.m);
            // A new slice on this P, as far as sysmon can tell (its records
            // of the P are about whoever held it before).
            p.schedtick
                .store(p.schedtick.load(Relaxed).wrapping_add(1), Relaxed);
            p.execs
                .store(p.execs.load(Relaxed).wrapping_add(1), Release);
            if crate::trace::on() {
                // Before USER, as `execute` stamps its start.
                let (g, goroutine) = self.running_g();
                self.shared
                    .trace(pi, crate::trace::Ev::ProcTake { g, goroutine });
            }
            self.pword.set(p.status.begin_poll());
            self.p.set(Some(pi));
        }
    }

    /// The timeline: a poll of `task` begins on P `pi`.
    #[cold]
    #[inline(never)]
    fn trace_start(&self, pi: usize, task: &Task) {
        let h = task.header();
        self.traced.set((h.id, h.goroutine));
        let ev = crate::trace::Ev::Start {
            g: h.id,
            goroutine: h.goroutine,
        };
        self.shared.trace(pi, ev);
    }

    /// The timeline: that poll ended. (The G is the one `trace_start` saw: a
    /// trace started during the poll records an end without a start, which
    /// the exporter ignores.)
    #[cold]
    #[inline(never)]
    fn trace_end(&self, ran: &Ran, yielded: bool) {
        let (g, goroutine) = self.traced.replace((0, false));
        let why = match ran {
            Ran::Parked(r) => crate::trace::Stop::Parked(super::wait::describe(*r, goroutine)),
            Ran::Finished => crate::trace::Stop::Finished,
            Ran::Notified(_) if yielded => crate::trace::Stop::Runnable("yield"),
            Ran::Notified(_) => crate::trace::Stop::Runnable("woken while running"),
        };
        self.shared.trace(
            self.p.get().unwrap_or(NO_P),
            crate::trace::Ev::End { g, why },
        );
    }

    /// The G this M is polling (id 0 if none), and whether it is a goroutine.
    pub(crate) fn running_g(&self) -> (u64, bool) {
        match self.running.get() {
            // SAFETY: `running` is set only for the length of a poll, during
            // which the M's run-queue reference keeps the task alive, and
            // only this thread reads it.
            Some(h) => unsafe {
                let h = h.as_ref();
                (h.id, h.goroutine)
            },
            None => (0, false),
        }
    }

    /// The current goroutine's in-place syscall (virtual runtimes).
    #[cfg(not(loom))]
    pub(crate) fn set_virtual_syscall(&self, token: Option<Arc<super::vtime::SyscallToken>>) {
        self.virtual_syscall.set(token);
    }

    /// A poll ended inside an in-place syscall of a virtual runtime: a
    /// goroutine that parked there is not busy any more; one that yielded
    /// stays counted until its guard drops (it waits for a P).
    #[cfg(not(loom))]
    #[inline]
    fn end_virtual_syscall(&self, yielded: bool) {
        // Every poll ends here: real-time runtimes only test the Option.
        if self.shared.virtual_clock.is_none() {
            return;
        }
        if let Some(token) = self.virtual_syscall.take() {
            if !yielded {
                token.release();
            }
        }
    }
}
