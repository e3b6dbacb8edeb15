//! The G-P-M core. Nothing outside this module touches run queues.
//!
//! - `task.rs`: G — the task allocation, its state word (`state.rs`), wakers, JoinHandle.
//! - `runq.rs`: a P's lock-free 256-slot ring.
//! - `processor.rs`: P — runq + runnext + timers + caches; its status word (`status.rs`).
//! - `machine.rs`: M — the schedule loop, `find_runnable`, spinning, park/unpark.
//! - `owned.rs`: every live task (for shutdown and `num_goroutine`).
//!
//! `Shared` is one runtime: its Ps, the global run queue, the idle P and idle M
//! lists (all under one scheduler lock, as Go's `sched.lock`), the spinning/idle
//! counters of the lost-wake-up protocol (see `machine.rs`), the global timers
//! and the stack pool.

pub(crate) mod alloc;
pub(crate) mod machine;
pub(crate) mod owned;
pub(crate) mod park;
pub(crate) mod processor;
pub(crate) mod runq;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod syscall;
pub(crate) mod task;

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::ptr::{self, NonNull};
use std::sync::{Condvar, OnceLock, Weak};

use crossbeam_utils::CachePadded;

use crate::coro::stack::StackPool;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use crate::loom::sync::{Arc, Mutex};
use crate::time::{TimerEntry, Timers};
use machine::Machine;
use owned::OwnedTasks;
use processor::Processor;
use status::Enter;
use task::{Header, JoinHandle, Task};

/// Runtime configuration fixed at build time.
pub(crate) struct Config {
    pub(crate) procs: usize,
    pub(crate) stack_size: usize,
    pub(crate) max_threads: usize,
    pub(crate) name: String,
}

pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) procs: Box<[CachePadded<Processor>]>,
    sched: Mutex<Sched>,
    /// Length of the global queue, readable without the lock.
    global_len: AtomicUsize,
    pub(crate) npidle: AtomicUsize,
    pub(crate) nmspinning: AtomicUsize,
    pub(crate) owned: OwnedTasks,
    pub(crate) stacks: StackPool,
    pub(crate) global_timers: Timers,
    /// The timer sleeper's wake-up time: 0 = no M sleeps on timers, `NEVER` while
    /// it is computing (see `machine.rs`).
    pub(crate) sleeper_until: AtomicU64,
    pub(crate) sleeper: Mutex<Option<Arc<Machine>>>,
    /// The runnext watcher (see "The runnext watcher" in `machine.rs`): `watching`
    /// is true while an M holds the role, `watcher` is that M (for shutdown).
    pub(crate) watching: AtomicBool,
    pub(crate) watcher: Mutex<Option<Arc<Machine>>>,
    pub(crate) shutdown: AtomicBool,
    /// Fallback task ids for P-less spawns, and the source of P batches.
    next_id: AtomicU64,
    /// Spawns and completions counted without a P (for `num_goroutine`).
    pless_spawned: AtomicU64,
    pless_completed: AtomicU64,
    /// Numbers coprime to the P count: strides for a random steal order.
    coprimes: Box<[usize]>,
    /// Live M threads; `shutdown_timeout` waits on `ms_exited`.
    pub(crate) live_ms: std::sync::Mutex<usize>,
    pub(crate) ms_exited: Condvar,
    pub(crate) nthreads: AtomicUsize,
    pub(crate) threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
    me: Weak<Shared>,
}

pub(crate) struct Sched {
    global: VecDeque<Task>,
    /// Set by teardown: tasks pushed from then on are cancelled by the pusher.
    closed: bool,
    idle_ps: Vec<usize>,
    idle_ms: Vec<Arc<Machine>>,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Arc<Shared> {
        let n = config.procs;
        Arc::new_cyclic(|me| Shared {
            procs: (0..n)
                .map(|i| CachePadded::new(Processor::new(i)))
                .collect(),
            sched: Mutex::new(Sched {
                global: VecDeque::new(),
                closed: false,
                // Every P starts idle; the last one is taken first (LIFO).
                idle_ps: (0..n).rev().collect(),
                idle_ms: Vec::new(),
            }),
            global_len: AtomicUsize::new(0),
            npidle: AtomicUsize::new(n),
            nmspinning: AtomicUsize::new(0),
            owned: OwnedTasks::new(n),
            stacks: StackPool::new(),
            global_timers: Timers::new(),
            sleeper_until: AtomicU64::new(0),
            sleeper: Mutex::new(None),
            watching: AtomicBool::new(false),
            watcher: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            pless_spawned: AtomicU64::new(0),
            pless_completed: AtomicU64::new(0),
            coprimes: (1..=n).filter(|&c| gcd(c, n) == 1).collect(),
            live_ms: std::sync::Mutex::new(0),
            ms_exited: Condvar::new(),
            nthreads: AtomicUsize::new(0),
            threads: std::sync::Mutex::new(Vec::new()),
            me: me.clone(),
            config,
        })
    }

    pub(crate) fn arc(&self) -> Arc<Shared> {
        self.me.upgrade().expect("runtime is alive while used")
    }

    // ---- spawning and readying ---------------------------------------------------

    /// Spawn a task; `make` builds its future from its id. The new G goes to the
    /// current P's `runnext` (Go's `newproc`), then `wakep`.
    pub(crate) fn spawn_with_id<F>(
        self: &Arc<Self>,
        make: impl FnOnce(u64) -> F,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // One entry into the P for the id, the counter and the `runnext` put.
        let rest = with_current_p(self, |p| match p {
            // SAFETY: `with_current_p` gives us the P in RUNNING on its owner M.
            Some(p) => unsafe {
                // Owner-only counter: a plain load + store.
                p.spawned.store(p.spawned.load(Relaxed) + 1, Relaxed);
                let l = p.local();
                if l.id_next == l.id_end {
                    l.id_next = self.next_id.fetch_add(processor::ID_BATCH, Relaxed);
                    l.id_end = l.id_next + processor::ID_BATCH;
                }
                let id = l.id_next;
                l.id_next += 1;
                let (task, handle) = task::new_task(make(id), id, self.clone());
                let lazy = p.runqput(task, true, |batch| self.global_push_batch(batch));
                Err((handle, lazy))
            },
            None => {
                self.pless_spawned.fetch_add(1, Relaxed);
                let id = self.next_id.fetch_add(1, Relaxed);
                Ok(task::new_task(make(id), id, self.clone()))
            }
        });
        match rest {
            Err((handle, lazy)) => {
                self.wakep_after_runqput(lazy);
                handle
            }
            Ok((task, handle)) => {
                // P-less: the global queue (closed after shutdown: it cancels the
                // task at once).
                self.global_push(task);
                self.wakep_if_idle();
                handle
            }
        }
    }

    /// Count a completed task (for `num_goroutine`).
    pub(crate) fn task_completed(&self) {
        let p = machine::current()
            .filter(|ctx| ptr::eq(Arc::as_ptr(&ctx.shared), self))
            .and_then(|ctx| ctx.p.get());
        match p {
            Some(p) => self.procs[p].completed.fetch_add(1, Relaxed),
            None => self.pless_completed.fetch_add(1, Relaxed),
        };
    }

    /// Goroutines and tasks spawned and not yet completed (a snapshot).
    pub(crate) fn live_tasks(&self) -> usize {
        let spawned: u64 = self
            .procs
            .iter()
            .map(|p| p.spawned.load(Relaxed))
            .sum::<u64>()
            + self.pless_spawned.load(Relaxed);
        let completed: u64 = self
            .procs
            .iter()
            .map(|p| p.completed.load(Relaxed))
            .sum::<u64>()
            + self.pless_completed.load(Relaxed);
        spawned.saturating_sub(completed) as usize
    }

    /// Make a task runnable (Go's `ready`): into the current P's `runnext` when
    /// called on one of our Ms holding a P, else onto the global queue; then wake
    /// an M if Ps are idle and nobody spins. `yielded`: Go's `Gosched`, global
    /// queue.
    pub(crate) fn schedule(&self, task: Task, yielded: bool) {
        if yielded {
            self.global_push(task);
            self.wakep_if_idle();
            return;
        }
        let put = with_current_p(self, |p| match p {
            // SAFETY: owner of `p` (RUNNING).
            Some(p) => Ok(unsafe { p.runqput(task, true, |batch| self.global_push_batch(batch)) }),
            None => Err(task),
        });
        match put {
            Ok(lazy) => self.wakep_after_runqput(lazy),
            Err(t) => {
                self.global_push(t);
                self.wakep_if_idle();
            }
        }
    }

    /// After a `runqput(next = true)` on the current P. `lazy`: the task went
    /// into an empty `runnext` and the P is not in its eager phase. Then, while an
    /// M watches (`machine.rs`, "The runnext watcher"), nobody is woken: this M
    /// runs the task as soon as the current poll returns (in a channel hand-off,
    /// at once), and if the poll goes on, the watcher sends an M to steal it.
    /// Otherwise, Go's `wakep`.
    #[inline]
    fn wakep_after_runqput(&self, lazy: bool) {
        if lazy && self.watching.load(Relaxed) {
            return;
        }
        if lazy && cfg!(all(target_arch = "x86_64", not(loom))) {
            // The task was published by the `runnext` swap, on x86-64 a locked
            // instruction and so a full barrier: only the compiler must not
            // hoist the loads above it (an `mfence` here measurably slows every
            // wake-up).
            std::sync::atomic::compiler_fence(SeqCst);
            self.wakep_if_idle_fenced();
        } else {
            self.wakep_if_idle();
        }
    }

    /// The submitter's half of the lost-wake-up protocol: work is published (above),
    /// then a StoreLoad barrier, then look at the spinning count.
    #[inline]
    pub(crate) fn wakep_if_idle(&self) {
        fence(SeqCst);
        self.wakep_if_idle_fenced();
    }

    /// `wakep_if_idle` for a caller that has already ordered its publication
    /// before these loads.
    #[inline]
    fn wakep_if_idle_fenced(&self) {
        if self.npidle.load(Relaxed) != 0 && self.nmspinning.load(Relaxed) == 0 {
            self.wakep();
        }
    }

    // ---- global queue -------------------------------------------------------------

    pub(crate) fn global_len(&self) -> usize {
        self.global_len.load(Acquire)
    }

    pub(crate) fn global_push(&self, task: Task) {
        let mut s = lock(&self.sched);
        if s.closed {
            // Shut down: nothing will run it; complete it as cancelled.
            drop(s);
            task.shutdown();
            return;
        }
        s.global.push_back(task);
        self.global_len.store(s.global.len(), Release);
    }

    /// `global_push` followed by `globrunqget` into `p`'s ring, under one lock
    /// (the yield path: `p` has nothing queued).
    pub(crate) fn global_push_and_refill(&self, task: Task, p: &Processor) {
        let mut s = lock(&self.sched);
        if s.closed {
            drop(s);
            task.shutdown();
            return;
        }
        s.global.push_back(task);
        // Go's batch, all of it into the ring in queue order; find_runnable pops
        // the first next.
        for _ in 0..self.global_batch(s.global.len(), 0) {
            let t = s.global.pop_front().expect("len checked");
            // SAFETY: the caller owns `p` (RUNNING) and its ring is empty, so the
            // at most 128 tasks fit.
            unsafe { p.runqput(t, false, |_| unreachable!("ring had room")) };
        }
        self.global_len.store(s.global.len(), Release);
    }

    pub(crate) fn global_push_batch(&self, batch: Vec<NonNull<Header>>) {
        // SAFETY: ring items are owned task references.
        let tasks = batch.into_iter().map(|p| unsafe { Task::from_raw(p) });
        let mut s = lock(&self.sched);
        if s.closed {
            drop(s);
            tasks.for_each(Task::shutdown);
            return;
        }
        s.global.extend(tasks);
        self.global_len.store(s.global.len(), Release);
    }

    /// Take a batch from the global queue for `p` (Go's `globrunqget`): run the
    /// first, put the rest in `p`'s ring. `max` 0 = no limit beyond Go's.
    pub(crate) fn globrunqget(&self, p: &Processor, max: usize) -> Option<Task> {
        if self.global_len() == 0 {
            return None;
        }
        let mut s = lock(&self.sched);
        self.globrunqget_locked(&mut s, p, max)
    }

    /// How many Gs a P takes from a global queue of `len` (Go's `globrunqget`):
    /// its fair share `len/procs + 1`, at most `max` (0: no limit) and half a ring.
    fn global_batch(&self, len: usize, max: usize) -> usize {
        let n = (len / self.procs.len() + 1).min(len);
        let n = if max > 0 { n.min(max) } else { n };
        n.min(runq::CAPACITY / 2)
    }

    fn globrunqget_locked(&self, s: &mut Sched, p: &Processor, max: usize) -> Option<Task> {
        let len = s.global.len();
        if len == 0 {
            return None;
        }
        let n = self.global_batch(len, max);
        let first = s.global.pop_front();
        let mut spill = Vec::new();
        for _ in 1..n {
            let t = s.global.pop_front().expect("len checked");
            // SAFETY: the caller owns `p` (RUNNING).
            unsafe { p.runqput(t, false, |b| spill.extend(b)) };
        }
        // SAFETY: overflowed items are owned references.
        s.global
            .extend(spill.into_iter().map(|x| unsafe { Task::from_raw(x) }));
        self.global_len.store(s.global.len(), Release);
        first
    }

    // ---- idle Ps and Ms -------------------------------------------------------------

    pub(crate) fn lock_sched(&self) -> crate::loom::sync::MutexGuard<'_, Sched> {
        lock(&self.sched)
    }

    /// Take an idle P (caller holds the scheduler lock). The P is ours: RUNNING.
    pub(crate) fn pidleget(&self, s: &mut Sched) -> Option<usize> {
        let p = s.idle_ps.pop()?;
        self.npidle.fetch_sub(1, SeqCst);
        self.procs[p].status.store(status::RUNNING);
        Some(p)
    }

    /// Put a P on the idle list (caller holds the lock and owns the P).
    pub(crate) fn pidleput(&self, s: &mut Sched, p: usize) {
        debug_assert!(!self.procs[p].has_work(), "idle P with queued work");
        self.procs[p].status.store(status::IDLE);
        s.idle_ps.push(p);
        self.npidle.fetch_add(1, SeqCst);
    }

    /// Go's `wakep`: if nobody spins, start a spinning M on an idle P.
    pub(crate) fn wakep(&self) {
        if self.shutdown.load(Relaxed) {
            return;
        }
        if self.nmspinning.load(SeqCst) != 0
            || self
                .nmspinning
                .compare_exchange(0, 1, SeqCst, SeqCst)
                .is_err()
        {
            return;
        }
        let p = {
            let mut s = lock(&self.sched);
            self.pidleget(&mut s)
        };
        match p {
            Some(p) => self.startm(p, true),
            None => {
                self.nmspinning.fetch_sub(1, SeqCst);
            }
        }
    }

    /// Run P `p` on an idle M, or a new one.
    fn startm(&self, p: usize, spinning: bool) {
        let m = lock(&self.sched).idle_ms.pop().or_else(|| {
            // The runnext watcher is idle too: use it rather than a new thread.
            let mut w = lock(&self.watcher);
            let m = w.take();
            if m.is_some() {
                self.watching.store(false, SeqCst);
            }
            m
        });
        match m {
            Some(m) => m.start(p, spinning),
            None => machine::newm(self.arc(), p, spinning),
        }
    }

    /// Put an M on the idle list unless the runtime is shutting down.
    pub(crate) fn midleput(&self, m: Arc<Machine>) -> bool {
        let mut s = lock(&self.sched);
        if self.shutdown.load(Acquire) {
            return false;
        }
        debug_assert!(
            !s.idle_ms.iter().any(|x| Arc::ptr_eq(x, &m)),
            "M put on the idle list twice"
        );
        s.idle_ms.push(m);
        true
    }

    // ---- timers -----------------------------------------------------------------------

    /// Earliest timer over every P and the global heap.
    pub(crate) fn next_timer(&self) -> u64 {
        self.procs
            .iter()
            .map(|p| p.timers.next_when())
            .fold(self.global_timers.next_when(), u64::min)
    }

    /// A timer became some heap's earliest: make sure an M wakes for it (Go's
    /// `wakeNetPoller`).
    pub(crate) fn timer_added(&self, when: u64) {
        match self.sleeper_until.load(SeqCst) {
            0 => self.wakep(),
            until if when < until => {
                if let Some(m) = &*lock(&self.sleeper) {
                    m.parker.wake();
                }
            }
            _ => {}
        }
    }

    // ---- shutdown ----------------------------------------------------------------------

    /// Stop scheduling: wake every parked M so it exits.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, SeqCst);
        let ms: Vec<_> = lock(&self.sched).idle_ms.drain(..).collect();
        for m in ms {
            m.parker.wake();
        }
        if let Some(m) = &*lock(&self.sleeper) {
            m.parker.wake();
        }
        if let Some(m) = &*lock(&self.watcher) {
            m.parker.wake();
        }
    }

    /// After every M stopped: cancel every task (parked ones from the owned list,
    /// runnable ones from the queues), free timers and cached stacks. From here
    /// on, a task pushed to the global queue (a wake from a foreign thread, a
    /// spawn) is cancelled by whoever pushes it, and a task reaching its first park
    /// is cancelled by its poll.
    pub(crate) fn teardown(&self) {
        self.owned.close();
        let queued: Vec<Task> = {
            let mut s = lock(&self.sched);
            s.closed = true;
            self.global_len.store(0, Release);
            s.global.drain(..).collect()
        };
        queued.into_iter().for_each(Task::shutdown);
        for p in self.procs.iter() {
            p.drain().into_iter().for_each(Task::shutdown);
        }
        // Cancelling runs destructors (goroutine stacks unwind), which may wake
        // or spawn: those are cancelled on the spot (closed queue), so one pass
        // over the parked tasks finishes the job.
        while let Some(t) = self.owned.pop() {
            t.shutdown();
        }
        for p in self.procs.iter() {
            p.timers.clear();
            // SAFETY: no M runs any more: this thread is the only user of every P.
            unsafe { p.local().stacks.drain(&self.stacks) };
        }
        // Free the stacks' memory now; the slabs are unmapped when the last
        // handle to the runtime (a JoinHandle, a waker) is gone.
        self.stacks.trim();
        self.global_timers.clear();
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

// ---- the calling thread's runtime ---------------------------------------------------------

thread_local! {
    /// The runtime entered by `Runtime::block_on` / `enter` on a plain thread.
    static ENTERED: Cell<*const Shared> = const { Cell::new(ptr::null()) };
}

/// Run `f` with the runtime the calling code belongs to: the M's, else the one
/// entered by `Runtime::block_on`, else the global runtime.
#[inline(never)]
pub(crate) fn with_current<R>(f: impl FnOnce(&Arc<Shared>) -> R) -> R {
    if let Some(ctx) = machine::current() {
        return f(&ctx.shared);
    }
    let entered = ENTERED.with(|e| e.get());
    if !entered.is_null() {
        // SAFETY: `EnterGuard` keeps the runtime alive while it is entered, and
        // `arc()` gives an owned handle for the call.
        let shared = unsafe { &*entered }.arc();
        return f(&shared);
    }
    f(crate::runtime::global_shared())
}

/// Marks the calling plain thread as inside a runtime until dropped.
pub(crate) struct EnterGuard {
    prev: *const Shared,
    _rt: Arc<Shared>,
}

impl EnterGuard {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        let prev = ENTERED.with(|e| e.replace(Arc::as_ptr(shared)));
        EnterGuard {
            prev,
            _rt: shared.clone(),
        }
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        ENTERED.with(|e| e.set(self.prev));
    }
}

/// Run `f` with the P this thread holds, if it is one of `shared`'s Ms and holds
/// one. Inside a poll (status USER) this CASes USER→RUNNING first and restores
/// USER after; if sysmon retook the P, the M is P-less from then on and `f` gets
/// `None` (every runtime call has a P-less path).
#[inline]
pub(crate) fn with_current_p<R>(shared: &Shared, f: impl FnOnce(Option<&Processor>) -> R) -> R {
    let Some(ctx) = machine::current() else {
        return f(None);
    };
    if !ptr::eq(Arc::as_ptr(&ctx.shared), shared) {
        return f(None);
    }
    let Some(pi) = ctx.p.get() else {
        return f(None);
    };
    let p = &shared.procs[pi];
    match p.status.enter_runtime() {
        Enter::Nested => f(Some(p)),
        Enter::Entered => {
            let r = f(Some(p));
            p.status.store(status::USER);
            r
        }
        Enter::Retaken => {
            ctx.p.set(None);
            f(None)
        }
    }
}

/// `with_current` and `with_current_p` with one thread-local lookup: `f` gets
/// the current runtime and, if this thread is one of its Ms holding a P, the P.
#[inline(never)]
pub(crate) fn with_current_and_p<R>(f: impl FnOnce(&Arc<Shared>, Option<&Processor>) -> R) -> R {
    match machine::current() {
        Some(ctx) => {
            let shared = &ctx.shared;
            with_current_p(shared, |p| f(shared, p))
        }
        None => with_current(|shared| f(shared, None)),
    }
}

/// Arm a timer on the current P (or the global heap when P-less).
pub(crate) fn add_timer(when: u64, entry: Arc<TimerEntry>) {
    with_current_and_p(|shared, p| {
        let earliest = match p {
            Some(p) => p.timers.add(when, entry),
            None => shared.global_timers.add(when, entry),
        };
        if earliest {
            shared.timer_added(when);
        }
    })
}

/// True inside the poll of an async task (not a goroutine) on one of our Ms.
pub(crate) fn in_async_task() -> bool {
    machine::current().is_some_and(|c| c.in_poll.get()) && !crate::coro::on_goroutine_stack()
}

/// `yield_now`: the current task, woken by itself, goes to the global queue
/// after this poll instead of the local one (Go's `Gosched`).
pub(crate) fn mark_yield() {
    if let Some(ctx) = machine::current() {
        ctx.yielded.set(true);
    }
}

/// The lazily started global runtime's handle storage.
pub(crate) static GLOBAL: OnceLock<crate::runtime::Runtime> = OnceLock::new();
