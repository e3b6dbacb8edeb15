//! The engine under every pool type: workers (reused goroutines), the idle
//! queue, blocked submitters, the purge, release and reboot.
//!
//! # State and who writes it
//!
//! One lock (`Core::state`) guards the idle queue, the queue of blocked
//! submitters and the purge goroutine's stop channel. The counters a caller may
//! read without the lock (`running`, `waiting`) are atomics, **written only
//! under the lock**, so every decision that depends on them is made under it.
//! `closed` and `cap` are written outside it (release, tune) and re-read under
//! it where a decision depends on them.
//!
//! `running` is ants' `Running`: live worker goroutines, idle or busy. A slot in
//! it is **reserved under the lock before the goroutine is spawned** (a
//! `Grant::Spawn`), so no interleaving of submits, tunes and exits can take
//! `running` past `cap` (ants #374: running > cap when two submitters both saw
//! a free slot).
//!
//! # A worker's life
//!
//! Spawned with its first task, a worker runs it, then *reverts* under the
//! lock: if the pool closed, or shrank below `running` (a `tune` down; ants'
//! lazy shrink), it retires on the spot (its `running` slot is freed in the same
//! critical section, so a shrink never retires more workers than it must);
//! else, if a submitter is blocked, the worker **takes the oldest one's task**
//! (no thundering herd, FIFO among submitters) and runs it next, without
//! parking; else it goes on the idle queue, stamped with the time. Only then
//! does the task it ran count as finished (`wait` returns to a pool at rest;
//! a task taken counts in flight from the same critical section). An idle
//! worker waits on its mailbox (`mailbox.rs`: one slot) for the next task or
//! its close, which means "exit". The mailbox is empty whenever the worker
//! is idle or granted, so handing it a task never waits (not even for the
//! worker to reach its receive).
//!
//! A panic in a task is the task's: the worker catches it, reports it (panic
//! handler or logger) and goes on. One exception: a worker whose runtime shuts
//! down is force-unwound at its blocking call, and that unwind is re-raised,
//! not reported. Guards settle the accounts however a worker ends — a
//! goroutine dropped before its first run (`Start`), unwound while idle or in
//! a task (`Retire`) — so `running`, `wait` and `release_timeout` stay true
//! after a runtime shutdown too. An unwound worker also leaves the idle queue
//! and closes its mailbox under the lock: a submitter that was handed it
//! already finds it closed (`Dispatch::Dead`) and acquires again.
//!
//! `release` and `reboot` each decide under the lock: `reboot` reopens and
//! installs the new purge goroutine's stop channel in one critical section,
//! so a racing `release` stops exactly the purge goroutine it sees.
//!
//! # Blocked submitters
//!
//! A submit that finds no idle worker and no free slot queues in a
//! [`WaitList`], unless the pool is non-blocking or `max_blocking` submitters
//! already wait (`Overload`). A blocking submit queues with its task **on
//! offer** (`Waiter::offer`); an async one offers nothing, since a submit
//! future dropped while it waits must leave its task unrun. Whoever frees a worker or a slot grants it to the head
//! under the lock: a reverting worker takes the offered task (`Grant::Taken`:
//! the worker runs it at once, the submitter only learns that it is done; ants
//! wakes the submitter to hand the task over, a park and a wake-up more per
//! task) or, when the head offers nothing, grants itself (`Grant::Worker`); a
//! worker given back by a submitter that gave up is granted as a worker too; a
//! retiring one or a `tune` up grants a slot (`Grant::Spawn`, already counted);
//! `release` grants `Grant::Closed`. Every grant but `Taken` leaves the task
//! in the entry, and the submitter takes it back with the grant. A submitter
//! that gives up (its timeout, its cancel token, an async submit dropped)
//! withdraws under the lock: still queued, it takes its task back; granted
//! already, it honours the grant — a task taken counts as submitted, a worker
//! or a slot is used or passed on — so nothing granted is lost and no task
//! runs twice or silently not at all. Because a retiring worker passes its
//! slot to the head waiter, submitters cannot stay stuck after every worker
//! died (ants #146).
//!
//! # Spawning no faster than workers start
//!
//! A submitting goroutine holds its P while it submits, so the workers it
//! spawns wait in run queues until a P is free to start them; a task is not
//! running (and its worker cannot come back for the next one) until then.
//! When the submitter outruns them, every submit finds no idle worker and
//! spawns yet another: a loop submitting tasks that sleep 10 ms through a pool
//! of 50,000 (W9) ran all 50,000 workers and 230 MiB, where ants runs 22,000
//! to 27,000. So once more than [`START_BACKLOG`] spawned workers have not run
//! yet (`starting`), a goroutine that spawns one yields (Go's `Gosched`), and
//! the queued workers start: W9 then runs 11,000 to 16,000 workers. Only for
//! pools whose tasks park (`tasks_park`: the last finished task suspended its
//! worker at least once; assumed until a task says otherwise): a worker that
//! computes does not come back sooner for being started sooner, and yielding
//! would only delay its submitter by a round of those tasks. Async submitters
//! and plain threads are not held back (a plain thread holds no P).
//!
//! # Purge, release, reboot
//!
//! The purge goroutine wakes every `expiry`, takes the prefix of the idle queue
//! that has been idle longer (one binary search), and closes those workers'
//! mailboxes **outside the lock**. `release` marks the pool closed, takes every
//! idle worker, grants `Closed` to every waiter and stops the purge; busy
//! workers retire when they revert. `release_timeout` then waits until every
//! worker and the purge goroutine have exited. `reboot` reopens a closed pool.
//! A worker that reverts into a closed pool retires instead of going back to
//! the idle queue (ants #113).

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::loom::lock;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::mailbox::{Mailbox, SendError};
use super::queue::WorkerQueue;
use super::stats::Counters;
use super::{Logger, PanicHandler, PoolError};
use crate::chan::{chan, Chan};
use crate::sched::wait::{pending, WaitReason};
use crate::sync::waitlist::{Cancelled, Key, WaitList};

/// How one task ended, as the pool counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    Completed,
    /// Panicked, and the payload was already delivered (to a join handle).
    Panicked,
    /// Not run: its cancel token fired before a worker started it.
    Cancelled,
}

/// Settings fixed when the pool is built.
pub(crate) struct Options {
    pub(crate) expiry: Duration,
    pub(crate) prealloc: bool,
    pub(crate) nonblocking: bool,
    pub(crate) max_blocking: usize,
    pub(crate) panic_handler: Option<PanicHandler>,
    pub(crate) logger: Arc<dyn Logger>,
    pub(crate) disable_purge: bool,
    pub(crate) stack_size: Option<usize>,
}

/// A worker as the pool holds it while it is idle.
pub(crate) struct Worker<J> {
    mailbox: Mailbox<J>,
}

/// A blocked submitter, as the wait list holds it.
struct Waiter<J> {
    /// Its task, on offer to a reverting worker; given back with any other
    /// grant.
    offer: Option<J>,
    grant: Grant<J>,
}

/// What a blocked submitter is handed.
enum Grant<J> {
    Pending,
    /// An idle worker, waiting on its mailbox.
    Worker(Arc<Worker<J>>),
    /// A `running` slot, counted already: spawn a worker.
    Spawn,
    Closed,
    /// A reverting worker took the offered task and runs it (counted in
    /// flight and submitted already).
    Taken,
}

/// What a worker does after a task.
enum Revert<J> {
    /// Wait on the mailbox (idle, or granted to a submitter).
    Idle,
    /// Run this task, taken from a blocked submitter.
    Next(J),
    /// Exit: retired (its slot is freed already).
    Retired,
}

/// Why `dispatch` did not hand the task over; the task comes back.
pub(crate) enum Dispatch<J> {
    /// No worker could be started.
    Failed(PoolError, J),
    /// The worker died (its runtime shut down) after it was handed out.
    Dead(J),
}

/// What a successful acquire holds until the task is dispatched.
pub(crate) enum Slot<J> {
    Worker(Arc<Worker<J>>),
    Spawn,
}

struct State<J> {
    idle: WorkerQueue<Arc<Worker<J>>>,
    waiters: WaitList<Waiter<J>>,
    /// The purge goroutine's stop channel (closing it stops it); `None` when
    /// none runs (closed pool, or purge disabled).
    purge_stop: Option<Chan<()>>,
    /// Purge goroutines that have not exited yet (a reboot may start a new
    /// one while the old one is still on its way out).
    purgers: usize,
    /// `release_timeout` callers waiting for the last worker to exit.
    exit_waiters: WaitList<()>,
}

pub(crate) struct Core<J: Send + 'static> {
    state: Mutex<State<J>>,
    run: Box<dyn Fn(J) -> Ran + Send + Sync>,
    pub(crate) opts: Options,
    /// Capacity; -1 = unlimited.
    cap: AtomicIsize,
    running: AtomicUsize,
    waiting: AtomicUsize,
    closed: AtomicBool,
    /// Tasks dispatched and not finished yet (`wait`).
    in_flight: AtomicUsize,
    /// Workers spawned that have not run yet ("Spawning no faster than
    /// workers start").
    starting: AtomicUsize,
    /// Whether the last task a worker finished had parked on the way (a
    /// pool of blocking tasks); true until a task says otherwise.
    tasks_park: AtomicBool,
    idle_waiters: Mutex<WaitList<()>>,
    pub(crate) stats: Counters,
}

impl<J: Send + 'static> Core<J> {
    /// A new pool, open (and its purge goroutine started, unless purging is
    /// off) or closed until `reboot` (fasthttp's `WorkerPool` before `Start`).
    pub(crate) fn new(
        cap: isize,
        opts: Options,
        run: Box<dyn Fn(J) -> Ran + Send + Sync>,
        open: bool,
    ) -> Result<Arc<Self>, PoolError> {
        let cap = if cap <= 0 { -1 } else { cap };
        let idle = if opts.prealloc {
            WorkerQueue::ring(cap as usize).ok_or(PoolError::InvalidPreAllocSize)?
        } else {
            WorkerQueue::stack()
        };
        let core = Arc::new(Core {
            state: Mutex::new(State {
                idle,
                waiters: WaitList::new(),
                purge_stop: None,
                purgers: 0,
                exit_waiters: WaitList::new(),
            }),
            run,
            opts,
            cap: AtomicIsize::new(cap),
            running: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            // Opened below (`open` starts the purge goroutine).
            closed: AtomicBool::new(true),
            in_flight: AtomicUsize::new(0),
            starting: AtomicUsize::new(0),
            tasks_park: AtomicBool::new(true),
            idle_waiters: Mutex::new(WaitList::new()),
            stats: Counters::default(),
        });
        if open {
            core.open()?;
        }
        Ok(core)
    }

    // ---- Reading ----------------------------------------------------------

    pub(crate) fn cap(&self) -> isize {
        self.cap.load(Ordering::Relaxed)
    }

    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    pub(crate) fn free(&self) -> isize {
        let cap = self.cap();
        if cap < 0 {
            -1
        } else {
            (cap - self.running() as isize).max(0)
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn idle_workers(&self) -> usize {
        lock(&self.state).idle.len()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    // ---- Submitting -------------------------------------------------------

    /// Wait for a worker or a slot (ants' `retrieveWorker`), with the task in
    /// `offer` (if any) on offer while waiting: it is back in `offer` when
    /// the future ends or is dropped, unless a worker took it.
    pub(crate) fn acquire<'a>(&'a self, offer: &'a mut Option<J>) -> Acquire<'a, J> {
        Acquire {
            core: self,
            offer,
            key: None,
            since: None,
        }
    }

    /// Try once, without waiting (whatever the pool's `nonblocking` says).
    pub(crate) fn try_acquire(&self) -> Result<Slot<J>, PoolError> {
        let mut st = lock(&self.state);
        match self.acquire_locked(&mut st) {
            Some(r) => r,
            None => Err(PoolError::Overload),
        }
    }

    /// `None`: the caller must wait (or give up).
    fn acquire_locked(&self, st: &mut State<J>) -> Option<Result<Slot<J>, PoolError>> {
        if self.is_closed() {
            self.stats.rejected.fetch_add(1, Ordering::Relaxed);
            return Some(Err(PoolError::Closed));
        }
        if let Some(w) = st.idle.detach() {
            return Some(Ok(Slot::Worker(w)));
        }
        let cap = self.cap();
        let running = self.running();
        if cap < 0 || (running as isize) < cap {
            self.running.store(running + 1, Ordering::Relaxed);
            return Some(Ok(Slot::Spawn));
        }
        None
    }

    /// Hand `job` to the slot: put it in the idle worker's mailbox (one
    /// slot, empty while the worker is idle or granted: this never waits), or
    /// spawn a worker with it. Counts the task in flight first (so `wait`
    /// sees it). `Dead`: the worker was unwound by its runtime's shutdown
    /// after it was handed out; the caller acquires again.
    pub(crate) fn dispatch(self: &Arc<Self>, slot: Slot<J>, job: J) -> Result<(), Dispatch<J>> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.stats.submitted.fetch_add(1, Ordering::Relaxed);
        match slot {
            Slot::Worker(w) => match w.mailbox.try_send(job) {
                Ok(()) => Ok(()),
                Err(e) => {
                    self.stats.submitted.fetch_sub(1, Ordering::Relaxed);
                    self.finish_one();
                    match e {
                        SendError::Closed(job) => Err(Dispatch::Dead(job)),
                        SendError::Full(_) => {
                            unreachable!("gosched::pool: an idle worker's mailbox held a task")
                        }
                    }
                }
            },
            Slot::Spawn => {
                self.spawn_worker(job)
                    .map_err(|(e, job)| Dispatch::Failed(e, job))?;
                self.let_workers_start();
                Ok(())
            }
        }
    }

    /// After a spawn: a submitting goroutine that has outrun the workers it
    /// started lets them run first ("Spawning no faster than workers
    /// start").
    fn let_workers_start(&self) {
        if self.starting.load(Ordering::Relaxed) > START_BACKLOG
            && self.tasks_park.load(Ordering::Relaxed)
            && crate::coro::in_goroutine()
        {
            crate::coro::yield_goroutine();
        }
    }

    fn spawn_worker(self: &Arc<Self>, first: J) -> Result<(), (PoolError, J)> {
        let mut go = crate::Go::new();
        if let Some(size) = self.opts.stack_size {
            go = go.stack_size(size);
        }
        // The first job travels in a cell the spawner keeps a hold on, so that
        // a failed spawn (no stack) gives it back instead of dropping it.
        let cell = Arc::new(Mutex::new(Some(first)));
        self.starting.fetch_add(1, Ordering::Relaxed);
        let start = Start {
            core: Some(Arc::clone(self)),
            job: Arc::clone(&cell),
        };
        match go.try_spawn(move || worker_main(start)) {
            Ok(handle) => {
                drop(handle); // detached: the pool tracks its workers itself
                Ok(())
            }
            Err(e) => {
                // `Start` was dropped unrun: it settled the accounts.
                self.stats.submitted.fetch_sub(1, Ordering::Relaxed);
                let job = lock(&cell).take().expect("a failed spawn ran nothing");
                Err((PoolError::Spawn(e), job))
            }
        }
    }

    /// Give back what an acquire was granted but will not use.
    pub(crate) fn give_back(&self, slot: Slot<J>) {
        let mut st = lock(&self.state);
        let wakers = match slot {
            Slot::Worker(w) => {
                if w.mailbox.is_closed() {
                    // Unwound by its runtime's shutdown: it retired already.
                    return;
                }
                if self.is_closed() {
                    drop(st);
                    // It is waiting on its mailbox: closing it makes it exit.
                    let _ = w.mailbox.close();
                    return;
                }
                // Granted on as a worker, not given a task here: the next
                // submitter dispatches through the worker's mailbox.
                self.park_worker_locked(&mut st, &w, false)
                    .0
                    .into_iter()
                    .collect()
            }
            Slot::Spawn => self.retire_locked(&mut st),
        };
        drop(st);
        wakers.into_iter().for_each(Waker::wake);
    }

    // ---- Workers ----------------------------------------------------------

    fn execute(&self, job: J) {
        let before = crate::coro::suspensions();
        let ran = match catch_unwind(AssertUnwindSafe(|| (self.run)(job))) {
            Ok(ran) => ran,
            Err(payload) => {
                if crate::coro::force_unwinding() {
                    // Not the task's panic: the worker is being cancelled (its
                    // runtime shuts down). The unwind must go on to the
                    // coroutine's root; `Retire` settles the accounts.
                    std::panic::resume_unwind(payload);
                }
                self.report_panic(payload);
                Ran::Panicked
            }
        };
        let counter = match ran {
            Ran::Completed => &self.stats.completed,
            Ran::Panicked => {
                self.stats.panicked.fetch_add(1, Ordering::Relaxed);
                &self.stats.completed
            }
            Ran::Cancelled => &self.stats.cancelled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // Written only when it changes: read by every spawn, and a pool's
        // tasks mostly behave alike.
        let parked = crate::coro::suspensions() != before;
        if self.tasks_park.load(Ordering::Relaxed) != parked {
            self.tasks_park.store(parked, Ordering::Relaxed);
        }
    }

    fn report_panic(&self, payload: Box<dyn Any + Send>) {
        match &self.opts.panic_handler {
            Some(handler) => {
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| handler(payload))) {
                    if crate::coro::force_unwinding() {
                        // The handler parked and its runtime shut down.
                        std::panic::resume_unwind(p);
                    }
                    self.opts.logger.log(format_args!(
                        "the panic handler panicked; the worker goes on"
                    ));
                }
            }
            None => {
                let msg = payload
                    .downcast_ref::<&'static str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(a non-string payload)");
                self.opts.logger.log(format_args!(
                    "a task panicked: {msg}; the worker goes on (set a panic_handler to handle it)"
                ));
            }
        }
    }

    /// After a task: take a blocked submitter's task, go idle (or to a
    /// waiting submitter), or retire.
    fn revert(&self, me: &Arc<Worker<J>>) -> Revert<J> {
        let mut st = lock(&self.state);
        let cap = self.cap();
        if self.is_closed() || (cap > 0 && self.running() as isize > cap) {
            drop(st);
            self.retire();
            return Revert::Retired;
        }
        let (waker, next) = self.park_worker_locked(&mut st, me, true);
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
        next.map_or(Revert::Idle, Revert::Next)
    }

    /// An idle worker: to the oldest blocked submitter, else onto the idle
    /// queue. With `take` (a worker back from a task, not a grant given
    /// back), a submitter that offers its task hands it to the worker
    /// instead: returned, counted in flight and submitted, to run next.
    fn park_worker_locked(
        &self,
        st: &mut State<J>,
        w: &Arc<Worker<J>>,
        take: bool,
    ) -> (Option<Waker>, Option<J>) {
        if !st.waiters.is_empty() {
            let mut next = None;
            let waker = st.waiters.notify_front_with(|waiter| {
                waiter.grant = match waiter.offer.take() {
                    Some(job) if take => {
                        next = Some(job);
                        Grant::Taken
                    }
                    offer => {
                        waiter.offer = offer;
                        Grant::Worker(Arc::clone(w))
                    }
                }
            });
            if next.is_some() {
                // Before the lock is released: `wait` never sees the pool at
                // rest between the task the worker ran and this one.
                self.in_flight.fetch_add(1, Ordering::AcqRel);
                self.stats.submitted.fetch_add(1, Ordering::Relaxed);
            }
            self.waiting.store(st.waiters.len(), Ordering::Relaxed);
            return (waker, next);
        }
        // A preallocated ring holds `cap` workers, `running <= cap`, and a
        // worker leaves the queue when it retires (`Retire`), so it has room.
        let fits = st.idle.insert(Arc::clone(w), crate::time::now()).is_ok();
        debug_assert!(fits, "a preallocated pool's idle ring overflowed");
        (None, None)
    }

    /// Free one `running` slot (a worker exits, or a reservation is dropped)
    /// and pass it to the oldest blocked submitter if the pool may use it.
    fn retire_locked(&self, st: &mut State<J>) -> Vec<Waker> {
        let mut running = self.running() - 1;
        let mut wakers = Vec::new();
        let cap = self.cap();
        if !self.is_closed() && !st.waiters.is_empty() && (cap < 0 || (running as isize) < cap) {
            running += 1;
            wakers.extend(st.waiters.notify_front_with(|w| w.grant = Grant::Spawn));
            self.waiting.store(st.waiters.len(), Ordering::Relaxed);
        }
        self.running.store(running, Ordering::Relaxed);
        wakers.extend(self.notify_if_exited_locked(st));
        wakers
    }

    /// Free one `running` slot and wake whoever that lets go on.
    fn retire(&self) {
        let wakers = self.retire_locked(&mut lock(&self.state));
        wakers.into_iter().for_each(Waker::wake);
    }

    /// The last worker and purge goroutine are gone: wake `release_timeout`.
    fn notify_if_exited_locked(&self, st: &mut State<J>) -> Vec<Waker> {
        if self.running() == 0 && st.purgers == 0 {
            st.exit_waiters.notify_all()
        } else {
            Vec::new()
        }
    }

    fn finish_one(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let wakers = lock(&self.idle_waiters).notify_all();
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    // ---- Purge, tune, release, reboot -------------------------------------

    /// Open the pool and start the purge goroutine (unless purging is off);
    /// nothing if it is open already. The pool opens, and the purge's stop
    /// channel is installed, in one critical section (a racing `release`
    /// sees both or neither); the goroutine is spawned after it, without the
    /// lock: a spawn that fails drops the goroutine's exit guard at once, and
    /// that takes the lock.
    fn open(self: &Arc<Self>) -> Result<(), PoolError> {
        /// Counts the purge goroutine out however it ends: returning, unwound
        /// by a runtime shutdown, or dropped before it first ran.
        struct Exit<J: Send + 'static>(Weak<Core<J>>);
        impl<J: Send + 'static> Drop for Exit<J> {
            fn drop(&mut self) {
                if let Some(core) = self.0.upgrade() {
                    core.purger_exited();
                }
            }
        }
        let rx = {
            let mut st = lock(&self.state);
            if !self.is_closed() {
                return Ok(());
            }
            self.closed.store(false, Ordering::Release);
            if self.opts.disable_purge {
                return Ok(());
            }
            let stop = chan::<()>(0);
            let rx = stop.clone();
            st.purge_stop = Some(stop);
            st.purgers += 1;
            rx
        };
        let exit = Exit(Arc::downgrade(self));
        let expiry = self.opts.expiry;
        let spawned = crate::Go::new().try_spawn(move || {
            let exit = exit;
            // Stops when the channel is closed (release) or the pool is gone.
            while let Err(crate::chan::RecvTimeoutError::Timeout) = rx.recv_timeout(expiry) {
                match exit.0.upgrade() {
                    Some(core) => core.purge(),
                    None => return,
                }
            }
        });
        match spawned {
            Ok(handle) => {
                drop(handle);
                Ok(())
            }
            Err(e) => {
                // No purge goroutine: close again, the whole way (submitters
                // may have queued and workers gone idle meanwhile).
                self.release();
                Err(PoolError::Spawn(e))
            }
        }
    }

    fn purger_exited(&self) {
        let mut st = lock(&self.state);
        st.purgers -= 1;
        let wakers = self.notify_if_exited_locked(&mut st);
        drop(st);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Stop the workers idle for longer than `expiry` (ants' purge tick).
    pub(crate) fn purge(&self) {
        let Some(cut) = crate::time::now().checked_sub(self.opts.expiry) else {
            return;
        };
        let stale = lock(&self.state).idle.take_expired(cut);
        self.stats
            .purged
            .fetch_add(stale.len() as u64, Ordering::Relaxed);
        // Outside the lock: each close readies a parked goroutine.
        for w in stale {
            let _ = w.mailbox.close();
        }
    }

    /// Change the capacity (ants' `Tune`): ignored for unlimited and
    /// preallocated pools and for `n <= 0`. Growing grants the new slots to
    /// blocked submitters at once; shrinking is lazy (busy workers retire as
    /// they finish).
    pub(crate) fn tune(&self, n: isize) {
        if n <= 0 || self.opts.prealloc {
            return;
        }
        let mut st = lock(&self.state);
        // Read under the lock: a racing tune must not make this one skip
        // the grants its own capacity allows.
        let cap = self.cap();
        if cap < 0 || n == cap {
            return;
        }
        self.cap.store(n, Ordering::Relaxed);
        let mut wakers = Vec::new();
        if !self.is_closed() {
            let mut running = self.running();
            while (running as isize) < n && !st.waiters.is_empty() {
                running += 1;
                wakers.extend(st.waiters.notify_front_with(|w| w.grant = Grant::Spawn));
            }
            self.running.store(running, Ordering::Relaxed);
            self.waiting.store(st.waiters.len(), Ordering::Relaxed);
        }
        drop(st);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Close the pool (ants' `Release`). False if it was closed already.
    pub(crate) fn release(&self) -> bool {
        let mut st = lock(&self.state);
        // Under the lock: `reboot` opens and installs its purge goroutine's
        // stop channel in one critical section, so a release sees both or
        // neither.
        if self.closed.swap(true, Ordering::AcqRel) {
            return false;
        }
        let idle = st.idle.take_all();
        let wakers = st.waiters.notify_all_with(|w| w.grant = Grant::Closed);
        self.waiting.store(0, Ordering::Relaxed);
        let stop = st.purge_stop.take();
        drop(st);
        for w in idle {
            let _ = w.mailbox.close();
        }
        if let Some(stop) = stop {
            let _ = stop.close();
        }
        wakers.into_iter().for_each(Waker::wake);
        true
    }

    /// Wait until every worker and the purge goroutine have exited (the
    /// last one out notifies `exit_waiters`).
    pub(crate) fn exited(&self) -> impl Future<Output = ()> + Send + '_ {
        Until::new(
            &self.state,
            |st| &mut st.exit_waiters,
            WaitReason::PoolSubmit,
            move |st: &State<J>| self.running() == 0 && st.purgers == 0,
        )
    }

    /// Reopen a closed pool (ants' `Reboot`); nothing on an open one.
    pub(crate) fn reboot(self: &Arc<Self>) -> Result<(), PoolError> {
        self.open()
    }

    /// Until no task is in flight (`finish_one` notifies at zero).
    pub(crate) fn idle(&self) -> impl Future<Output = ()> + Send + '_ {
        Until::new(
            &self.idle_waiters,
            |list| list,
            WaitReason::WaitGroup,
            move |_: &WaitList<()>| self.in_flight() == 0,
        )
    }
}

/// What a worker goroutine starts with. Dropped without being started (the
/// spawn failed, or the runtime shut down before the goroutine first ran),
/// it frees the `running` slot reserved for the worker and counts its first
/// task as finished; the task itself stays in the cell (a failed spawn hands
/// it back to the submitter) or is dropped with it.
struct Start<J: Send + 'static> {
    core: Option<Arc<Core<J>>>,
    job: Arc<Mutex<Option<J>>>,
}

impl<J: Send + 'static> Drop for Start<J> {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            core.starting.fetch_sub(1, Ordering::Relaxed);
            core.finish_one();
            core.retire();
        }
    }
}

/// Workers spawned and not yet run beyond which a submitting goroutine
/// yields after a spawn ("Spawning no faster than workers start").
const START_BACKLOG: usize = 16;

/// A worker goroutine.
fn worker_main<J: Send + 'static>(mut start: Start<J>) {
    /// Frees the worker's slot however the goroutine ends (also when a
    /// runtime shutdown unwinds it while it waits or runs a task).
    struct Retire<'a, J: Send + 'static> {
        core: &'a Core<J>,
        me: &'a Arc<Worker<J>>,
        armed: bool,
        /// A task is running: unwound here, it still counts as finished.
        in_task: bool,
    }
    impl<J: Send + 'static> Drop for Retire<'_, J> {
        fn drop(&mut self) {
            if self.in_task {
                self.core.finish_one();
            }
            if self.armed {
                // Unwound (its runtime shut down), maybe while idle: take it
                // off the idle queue so nobody is handed a dead worker, and
                // close its mailbox so a submitter that was handed it already
                // finds it dead and acquires again.
                let wakers = {
                    let mut st = lock(&self.core.state);
                    st.idle.remove(self.me);
                    // Under the lock, so that `give_back` (which checks it
                    // under the lock) never puts it back. Nobody waits on
                    // this mailbox (its receiver is this worker): the close
                    // wakes nobody.
                    let _ = self.me.mailbox.close();
                    self.core.retire_locked(&mut st)
                };
                if let Some(job) = self.me.mailbox.try_recv() {
                    // Sent before the close: it will not run.
                    drop(job);
                    self.core.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                    self.core.finish_one();
                }
                wakers.into_iter().for_each(Waker::wake);
            }
        }
    }

    let core = start.core.take().expect("a worker starts once");
    core.starting.fetch_sub(1, Ordering::Relaxed);
    let first = lock(&start.job)
        .take()
        .expect("the first job is taken once");
    drop(start);
    let me = Arc::new(Worker {
        mailbox: Mailbox::new(),
    });
    let mut guard = Retire {
        core: &core,
        me: &me,
        armed: true,
        in_task: true,
    };
    let mut job = first;
    loop {
        core.execute(job);
        // The task counts as finished only once its worker is back (idle,
        // handed on, with its next task, or retired): after `wait`, the pool
        // is at rest.
        match core.revert(&me) {
            Revert::Next(next) => {
                // Counted in flight already: the guard stays in the task.
                core.finish_one();
                job = next;
                continue;
            }
            Revert::Retired => {
                guard.in_task = false;
                core.finish_one();
                guard.armed = false;
                return;
            }
            Revert::Idle => {
                guard.in_task = false;
                core.finish_one();
            }
        }
        match me.mailbox.recv() {
            Some(next) => {
                guard.in_task = true;
                job = next;
            }
            // Closed: purged, or the pool was released.
            None => return,
        }
    }
}

/// Future of [`Core::acquire`]: a worker or a slot, the news that a worker
/// took the offered task, or why not. Cancel-safe: dropped after it was
/// granted a worker or a slot, it gives it back; the task is back in the
/// offer unless a worker took it.
pub(crate) struct Acquire<'a, J: Send + 'static> {
    core: &'a Core<J>,
    /// The task on offer: moved into the wait entry while queued, and back
    /// here when the entry is consumed, unless a worker took it.
    offer: &'a mut Option<J>,
    key: Option<Key>,
    /// When it started waiting (for the wait-time statistics).
    since: Option<Instant>,
}

impl<J: Send + 'static> Acquire<'_, J> {
    /// The entry is consumed: the task comes back unless a worker took it;
    /// the grant, as the submitter sees it (`Ok(None)`: taken).
    fn granted(&mut self, waiter: Waiter<J>) -> Result<Option<Slot<J>>, PoolError> {
        let core = self.core;
        if waiter.offer.is_some() {
            *self.offer = waiter.offer;
        }
        if let Some(since) = self.since.take() {
            core.stats.record_wait(crate::time::since(since));
        }
        match waiter.grant {
            Grant::Worker(w) => Ok(Some(Slot::Worker(w))),
            Grant::Spawn => Ok(Some(Slot::Spawn)),
            Grant::Taken => Ok(None),
            Grant::Closed => {
                core.stats.rejected.fetch_add(1, Ordering::Relaxed);
                Err(PoolError::Closed)
            }
            Grant::Pending => unreachable!("notified without a grant"),
        }
    }

    /// Stop waiting (a timeout, a cancel): `None` if it was still queued
    /// (the task is back in the offer); else the grant it got meanwhile,
    /// which the caller must honour as a completed acquire.
    pub(crate) fn withdraw(&mut self) -> Option<Result<Option<Slot<J>>, PoolError>> {
        let key = self.key.take()?;
        let mut st = lock(&self.core.state);
        match st.waiters.cancel(key) {
            Cancelled::Queued(waiter) => {
                self.core.waiting.store(st.waiters.len(), Ordering::Relaxed);
                drop(st);
                *self.offer = waiter.offer;
                None
            }
            Cancelled::Notified(waiter) => {
                drop(st);
                Some(self.granted(waiter))
            }
        }
    }
}

/// `Ok(None)`: a worker took the offered task (it is submitted; nothing to
/// dispatch).
impl<J: Send + 'static> Future for Acquire<'_, J> {
    type Output = Result<Option<Slot<J>>, PoolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let core = this.core;
        let mut st = lock(&core.state);
        if let Some(key) = this.key {
            let Some(waiter) = st.waiters.poll(key, cx.waker()) else {
                return pending(WaitReason::PoolSubmit, cx);
            };
            drop(st);
            this.key = None;
            return Poll::Ready(this.granted(waiter));
        }
        if let Some(r) = core.acquire_locked(&mut st) {
            return Poll::Ready(r.map(Some));
        }
        let o = &core.opts;
        if o.nonblocking || (o.max_blocking != 0 && st.waiters.len() >= o.max_blocking) {
            drop(st);
            core.stats.rejected.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(Err(PoolError::Overload));
        }
        let waiter = Waiter {
            offer: this.offer.take(),
            grant: Grant::Pending,
        };
        this.key = Some(st.waiters.push_back(waiter, cx.waker()));
        core.waiting.store(st.waiters.len(), Ordering::Relaxed);
        drop(st);
        this.since = Some(crate::time::now());
        pending(WaitReason::PoolSubmit, cx)
    }
}

impl<J: Send + 'static> Drop for Acquire<'_, J> {
    fn drop(&mut self) {
        // Dropped while waiting: the task goes back to the offer (the caller
        // drops it or tries again); a grant it got meanwhile is passed on.
        // A task taken meanwhile runs: it was submitted.
        if let Some(Ok(Some(slot))) = self.withdraw() {
            self.core.give_back(slot);
        }
    }
}

/// Wait on a `WaitList` until `done` holds. `done` is checked under the
/// list's lock, and whoever makes it hold takes that lock afterwards and
/// notifies the whole list: either the waiter sees it hold, or it is queued
/// when it is notified (no lost wake-up). Cancel-safe.
pub(crate) struct Until<'a, S, F> {
    lock: &'a Mutex<S>,
    list: fn(&mut S) -> &mut WaitList<()>,
    done: F,
    reason: WaitReason,
    key: Option<Key>,
}

impl<'a, S, F: Fn(&S) -> bool + Unpin> Until<'a, S, F> {
    pub(crate) fn new(
        lock: &'a Mutex<S>,
        list: fn(&mut S) -> &mut WaitList<()>,
        reason: WaitReason,
        done: F,
    ) -> Self {
        Until {
            lock,
            list,
            done,
            reason,
            key: None,
        }
    }
}

impl<S, F: Fn(&S) -> bool + Unpin> Future for Until<'_, S, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut g = lock(this.lock);
        if let Some(key) = this.key {
            return match (this.list)(&mut g).poll(key, cx.waker()) {
                Some(()) => {
                    this.key = None;
                    Poll::Ready(())
                }
                None => pending(this.reason, cx),
            };
        }
        if (this.done)(&g) {
            return Poll::Ready(());
        }
        this.key = Some((this.list)(&mut g).push_back((), cx.waker()));
        pending(this.reason, cx)
    }
}

impl<S, F> Drop for Until<'_, S, F> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let _ = (self.list)(&mut lock(self.lock)).cancel(key);
        }
    }
}
