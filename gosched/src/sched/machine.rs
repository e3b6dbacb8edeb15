//! Machine (M): an OS thread running the schedule loop while it holds a P.
//!
//! # The schedule loop
//!
//! `find_runnable` follows Go's order: this P's due timers; every 61st schedule
//! tick one G from the global queue (fairness); `runnext`, then the local ring;
//! a batch from the global queue; the netpoller without blocking, after one
//! pass that takes half of another P's ring if its M started no poll since
//! our last pass (`steal_queued`);
//! stealing (4 rounds over the Ps in a random order, half of a victim's ring;
//! timers and `runnext` of victims only in the last round); then the P is
//! dropped and the M parks.
//!
//! # Spinning and waking
//!
//! The lost-wake-up protocol between spinning Ms and submitters, and `wakep`,
//! live in `idle.rs`; the wake policy for `runnext` (where we differ from Go)
//! in `ready.rs`, and sysmon's watch over stuck `runnext`s in `sysmon.rs`. This file is the M's side: steps 6–8
//! of `find_runnable` (spin, drop the P, stop spinning and re-check).
//!
//! Stealing a running P's `runnext`: a thief takes it only if, after the 3 µs
//! wait, `runnext` still holds the G it saw *and* the victim's `execs` (polls
//! started) did not move, i.e. the victim has been in one poll the whole time.
//! Go re-checks only the pointer, which in a ping-pong steals the partner readied
//! a moment later. Such a steal puts the victim in its eager phase (`ready.rs`).
//!
//! # Parking and timers
//!
//! Idle Ms park on their `Parker` (`crate::park`) in the idle-M list; `wakep`
//! pops one, hands it a P through `nextp`, and wakes it (with none on the
//! list, the timer sleeper: `Shared::startm`). One idle M at a time is the
//! *timer sleeper*: instead of parking indefinitely it parks until the earliest
//! timer of any P (`Shared::next_timer`), publishing that time in
//! `sleeper_until`. A timer that becomes earlier than that wakes it
//! (`Shared::timer_added`). Publication is a Dekker pair: the sleeper stores
//! `sleeper_until` then reads the heaps' `when0`; an adder stores `when0` then
//! reads `sleeper_until` (all SeqCst), so one of them sees the other. An idle
//! runtime with no timers has every M parked: no CPU is used.
//!
//! # The thread rule
//!
//! A goroutine (a stackful task, `coro`) stays on the M where it first ran, for
//! its whole life: LLVM caches a thread-local's address across calls, so a
//! function that resumed on another thread could read and write the previous
//! thread's slot (llvm/llvm-project#98479). Unstarted goroutines and async tasks
//! (which never move during a poll) are queued, stolen and handed off as Go
//! does. The rule applies where goroutines cannot be virtual threads (there
//! `Builder::migrate_goroutines`, unsafe, turns it off) and under
//! `Builder::pin_goroutines`; where they are virtual threads (`vthread`),
//! every goroutine is migratable by default, and this machinery serves only
//! goroutines homed by `lock_os_thread` or spawned with
//! `Go::migratable(false)`.
//!
//! - *Home.* At its first run the M records itself in the task header
//!   (`Task::set_home`). From then on the task is never in a P's queue or the
//!   global queue, so nobody can steal it.
//! - *Ready.* A homed task readied on its own M goes into the M's `next` slot
//!   (its `runnext`: it inherits the time slice, the slot's previous occupant
//!   moves to the back of `localq`); readied anywhere else (another M, a timer,
//!   a plain thread) it is pushed on its M's `inbox` (a small locked queue) and
//!   the M's parker is woken. Woken during its own poll, or yielding, it goes
//!   to the back of `localq`. `next` and `localq` are the M's own (no lock).
//! - *Running it.* An M holding a P takes `next` first, then alternates, by
//!   schedule tick, between its homed queue and the P's queue, so neither
//!   starves. A P-less M with homed work takes an idle P; if there is none it
//!   waits on the *want-P* list, and the next M that would put a P on the idle
//!   list hands it over instead (`Shared::pidleput`). So: want-P non-empty ⇒ no
//!   idle P (both under the scheduler lock).
//! - *Hand-off to the readied goroutine's M* (Go's `startlockedm`). When
//!   a poll readies a goroutine homed on another M and then ends its chain
//!   (parks or finishes, nothing in our `next`), Go would run that goroutine
//!   next on this P, in the slice it inherits (`runnext`). If its M has no P
//!   and no P is idle, we give it ours: found on the want-P list, the idle
//!   list or as the timer sleeper (under the lock of each, so it cannot
//!   leave meanwhile), the goroutine is moved to the front of its inbox and
//!   marked (`Machine::handed`), and the P passes through `nextp`; the M
//!   runs it first, inheriting the slice. If the M is still on its way
//!   there (`Machine::pless`: P-less, in the scheduler, not in a poll), we
//!   wait for it up to `HANDOFF_WAIT`, yielding our core. Due timers run
//!   first at every schedule, and a goroutine they ready on another M
//!   becomes the candidate (in Go it would take `runnext`): a chain handing
//!   one P back and forth otherwise starved a 1 ms ticker homed on either
//!   M (`tests/handoff.rs`). A chain ends with its time slice: once
//!   sysmon marks the P's slice expired (`Processor::slice_expired`), the
//!   next link runs its own queue instead, so a goroutine readied earlier
//!   in either M's inbox gets the P. Without the hand-off, a
//!   goroutine pair split across two Ms on one P (a retake during a hog's
//!   slice hands the P to a new M, which starts the unstarted goroutines)
//!   got one exchange per step of whatever else the readier's M ran: Go's
//!   `TestPingPongHog` missed its bound in most tries on a loaded machine.
//! - *Ms take turns.* More Ms can hold runnable goroutines than there are
//!   Ps (an M that went idle lost its P to another, then its goroutines were
//!   woken). An M holding a P that sees the first M on the want-P list
//!   waiting `M_SLICE` (250 µs) or longer gives it its P at its next
//!   schedule and, with homed work of its own, queues behind it
//!   (`yield_p_to_waiter`; `Shared::want_p_since` is the lock-free hint).
//!   Without it a waiter got a P only when some M ran out of work: in a busy
//!   server its connections' requests waited tens of milliseconds.
//! - *Parking.* An M parks only after finding its homed queues empty; a
//!   pusher's wake is a parker token, and every park loop re-checks the inbox
//!   (a reset token is never trusted), so no wake-up is lost. Parked on the
//!   idle list and woken by homed work, the M leaves the list for an idle P or
//!   the want-P list; if `wakep` popped it first, a P is already on its way.
//!   Before parking, an M with live homed goroutines watches its inbox for up
//!   to `HOMED_SPIN` (20 µs) while another P is busy, or an M was woken for
//!   its homed goroutines less than that ago (`homed_spin`): its goroutines
//!   cannot go to the other M, so each hand-off with that M's goroutines
//!   would otherwise cost a park and a futex wake.
//! - *A preempted home.* The kernel can leave an M waiting for a core
//!   (three runnable threads on two cores: two Ms and a load generator)
//!   while other Ms ready its goroutines into its inbox; nobody else may run
//!   them. Woken onto its previous core behind a busy thread, it can wait a
//!   whole scheduler tick (4 ms at 250 Hz) while its readier's core idles in
//!   gaps too short for the kernel's balancing. An M that pushed into
//!   another M's inbox remembers it (`MachineCtx::pushed`); if, when its own
//!   queues next run dry (before it polls the network), that inbox has not
//!   been drained for `PREEMPTED_HOME_NS` (200 µs), and that M's thread then
//!   runs less than half of the next 100 µs (its CPU clock), it moves that
//!   M onto its own core (`affinity.rs`: the affinity is narrowed, which
//!   migrates the thread at once), sleeps 20 µs so that it runs (a
//!   `sched_yield` did not: the kernel keeps running the yielder while it
//!   counts the other thread ahead in CPU time), and puts the mask back
//!   (`pull_preempted_home`). An M that keeps its core (a long-running
//!   goroutine: sysmon's business), one in a call or one running a locked
//!   goroutine stays where it is, and a spinning M does not pull. (Leaving
//!   every M inside a poll alone instead lost most of the gain: the kernel
//!   preempts Ms inside polls too.)
//! - *Shutdown.* An exiting M cancels the goroutines homed on it, on its own
//!   thread (`cancel_homed`: `next`, `localq`, inbox, and its parked ones
//!   from the owned list); teardown closes and drains every inbox (later
//!   pushes cancel the task: complete already, or never started).
//!
//! Cost: a goroutine readied on another M runs only when its home M gets to it
//! (and wakes it if parked); work does not rebalance after the first run, so
//! `go` places new goroutines as before (stolen while unstarted).
//!
//! # Idle Ms exit
//!
//! An M that waited on the idle list for `Config::thread_keep_alive` without
//! being handed a P retires (`try_retire`), so the thread count that grew
//! with blocked syscalls shrinks back — unless a goroutine is homed on it
//! (only this thread may run it), or no more Ms live than Ps. Under the
//! scheduler lock it leaves the idle list (if `wakep` popped it first, a P
//! is coming: it stays); then, under its inbox lock, it checks that nothing
//! is homed here or queued and marks the inbox retired. `adopt` homes a
//! goroutine under the same lock and refuses a retired M, so either the
//! adoption lands first (the M stays) or it is refused (the placing M starts
//! the goroutine itself). The `Machine` goes on a free list; `newm` gives
//! the next new thread a retired `Machine` before it makes one, so every
//! `Processor::owner` pointer stays valid and `Shared::machines` is as long
//! as the most Ms ever live at once. This needs a `Parker` bound to no
//! thread (the futex backend, `park.rs`); elsewhere Ms never exit.
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

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ptr;
use std::time::Duration;

use super::context;
use super::preempt;
use super::processor::{fastrand, Processor};
use super::status;
use super::task::{Ran, Task};
use super::timers::{now_ns, NEVER};
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::sync::Mutex;
use crate::loom::thread;
use crate::park::Parker;
use std::sync::Arc;

/// One G from the global queue every this many schedule ticks (Go: 61).
const GLOBAL_FAIRNESS_TICK: u32 = 61;
/// Steal rounds over all Ps (Go: 4).
const STEAL_ROUNDS: usize = 4;
/// How long a thief waits before taking a running victim's `runnext` (Go: ~3 µs):
/// the victim most likely just readied that G and is about to block.
const RUNNEXT_STEAL_DELAY: Duration = Duration::from_micros(3);
const NO_P: usize = usize::MAX;
/// An M places new goroutines on other Ms only once it holds this many.
const PLACE_MIN: usize = 32;
/// How many times a crowded M sends a new goroutine to the global queue for
/// a spinning M to start (`place`). It may take it back at its 61st
/// schedule tick at the soonest, so 8 gives the spinner 488 time slices.
const MAX_BOUNCES: u8 = 8;
/// How long an M whose homed goroutines are all blocked keeps its P and
/// watches its inbox before parking, while another P is busy (`homed_spin`).
/// Waking a parked M costs a futex wake and a thread switch (~5 µs here);
/// a goroutine on another M that hands work back within this time is served
/// by a cache-line transfer instead.
const HOMED_SPIN: Duration = Duration::from_micros(20);
const HOMED_SPIN_NS: u64 = HOMED_SPIN.as_nanos() as u64;
/// How long an M with homed goroutines to run may wait on the want-P list
/// before an M holding a P gives it its P ("Ms take turns"): goroutines stay
/// on their M, so when more Ms have runnable goroutines than there are Ps
/// (an M that went idle and lost its P to another, then got work back), the
/// Ms share the Ps in slices of this length instead of the waiter getting a
/// P only when some M runs out of work (a busy server: its goroutines
/// starved for tens of ms, the p99 of every request they serve). Each turn
/// costs a futex wake and a park, about 10 us here: 4% at this slice.
const M_SLICE: Duration = Duration::from_micros(250);
/// `steal_queued`: the ring length from which an M about to poll takes the
/// oldest tasks of a P whose M makes progress (W12 async: a threshold of 16
/// lost msgs/s, 24-32 won both msgs/s and p99, 48-64 lost the p99 gain).
#[cfg(not(loom))]
const STEAL_QUEUED_BACKLOG: usize = 32;
/// ... and how many it takes: the few that would otherwise wait longest,
/// after which the thief is soon back at the poller (half of the ring cost
/// 5-10% msgs/s: tasks moved off their cache, and no M polled meanwhile).
#[cfg(not(loom))]
const STEAL_QUEUED_OLDEST: u32 = 8;
/// How long an inbox this M pushed into may stay undrained before this M,
/// out of work of its own, gives its core away once ("A preempted home").
/// A poll here is 5–50 µs, so a home M on a core drains sooner than this.
#[cfg(not(loom))]
const PREEMPTED_HOME_NS: u64 = 200_000;
/// Then how long the M's CPU clock is watched: under half of it on a core
/// means it waits for one.
#[cfg(not(loom))]
const PREEMPTED_HOME_CPU_NS: u64 = 100_000;

/// The affinity a new M starts with, if its creator was pulled.
#[cfg(not(loom))]
type MaskOf = super::affinity::Mask;
#[cfg(loom)]
type MaskOf = ();

/// How long an M that pulled another onto its core sleeps to leave the core
/// to it (at least; the kernel's timer slack adds up to 50 µs).
#[cfg(not(loom))]
const PULL_PAUSE: Duration = Duration::from_micros(20);

/// An inbox this M pushed into, not yet seen drained ("A preempted home").
#[cfg(not(loom))]
#[derive(Clone, Copy)]
struct Pushed {
    m: ptr::NonNull<Machine>,
    /// Its `inbox_drains` at the push.
    drains: u32,
    /// When first found undrained (0: not yet).
    since: u64,
    /// When its CPU clock was read, and what it said.
    cpu: Option<(u64, u64)>,
}
/// How long an M whose last poll readied a goroutine on a P-less M waits
/// for that M to reach a list where it can hand it its P
/// (`hand_off_to_readied`): a woken thread takes a few µs to get there,
/// tens on a loaded machine.
#[cfg(not(loom))]
const HANDOFF_WAIT: Duration = Duration::from_micros(100);
/// An M's queues of homed goroutines keep up to this many slots of
/// capacity when it trims after a burst (`trim_if_asked`).
#[cfg(not(loom))]
const QUEUE_KEEP: usize = 256;
/// The netpoller's timeouts are whole milliseconds (epoll): a sleeper whose
/// next timer is sooner sleeps on its parker instead.
#[cfg(not(loom))]
const POLLER_MIN_SLEEP_NS: u64 = 1_000_000;

pub(crate) struct Machine {
    pub(crate) parker: Parker,
    nextp: AtomicUsize,
    next_spinning: AtomicBool,
    /// Homed tasks readied by other threads (see "The thread rule").
    inbox: Mutex<Inbox>,
    /// `inbox.tasks.len()`, for lock-free emptiness checks.
    inbox_len: AtomicUsize,
    /// Drains of the inbox so far (by its M): a pusher sees whether the M
    /// got to its push ("A preempted home"). A hint: std atomic, outside
    /// loom's model.
    inbox_drains: std::sync::atomic::AtomicU32,
    /// This M's thread, for another M to pull onto its core ("A preempted
    /// home", `affinity.rs`).
    #[cfg(not(loom))]
    pub(super) pin: super::affinity::ThreadPin,
    /// The M runs a goroutine that called `lock_os_thread` (a hint for
    /// pullers: such a thread is left where it is).
    #[cfg(not(loom))]
    pub(super) locked_hint: AtomicBool,
    /// The inbox's front came with a P handed over by the M that readied
    /// it ("Hand-off to the readied goroutine's M"): this M runs it first,
    /// in the time slice it inherits. Written before the P is handed
    /// (`start`'s Release swap of `nextp` publishes it); cleared when the
    /// inbox is drained.
    handed: AtomicBool,
    /// This M has no P and is in the scheduler, on its way to wait for one
    /// (set where `find_runnable` finds itself P-less, cleared where it
    /// finds a P): not inside a poll. A hint for `hand_off_to_readied`,
    /// which waits a moment for such an M to reach a list; std atomic,
    /// outside loom's model (the hand-off re-checks under the locks).
    pless: std::sync::atomic::AtomicBool,
    /// Live goroutines homed here (placed or started, not yet complete).
    /// Heuristic for placement: std atomic, outside loom's model.
    pub(crate) homed: std::sync::atomic::AtomicUsize,
    /// sysmon asks the task running here to yield (`preempt.rs`; a hint:
    /// std atomic, outside loom's model).
    pub(crate) preempt: std::sync::atomic::AtomicBool,
    /// Inside a call made in place (`syscall.rs`): the P it holds stays USER
    /// (`status.rs`, "Calls in place"), and this tells sysmon, thieves and
    /// placement that the M is not about to run anything. Written by this M
    /// only (a plain store on entry, Release after the P's `syscalltick`;
    /// on return, or when the poll the call parked in ends); read by others
    /// through `Processor::owner` (Acquire), a hint: std atomic, outside
    /// loom's model.
    pub(crate) in_call: std::sync::atomic::AtomicBool,
    /// This M (the timer sleeper) is blocked in the netpoller, not on its
    /// parker: `wake` also wakes the poller. SeqCst: a Dekker pair with the
    /// inbox length (`push_locked` stores the length, then reads this; the
    /// sleeper stores this, then reads the length).
    #[cfg(not(loom))]
    in_netpoll: std::sync::atomic::AtomicBool,
    /// The runtime, for `wake` to reach its poller.
    #[cfg(not(loom))]
    runtime: std::sync::OnceLock<std::sync::Weak<Shared>>,
}

struct Inbox {
    tasks: VecDeque<Task>,
    /// Set by teardown: a push cancels the task instead.
    closed: bool,
    /// The M's thread exited ("Idle Ms exit"): `adopt` refuses new
    /// goroutines until `newm` gives this `Machine` a thread again.
    retired: bool,
    /// The one goroutine homed here blocks in place with its P given away
    /// (`sched/syscall.rs`, `block_alone`): `adopt` refuses new goroutines,
    /// which would wait for the whole call.
    blocking: bool,
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
    fn take_nextp(&self) -> Option<(usize, bool)> {
        let p = self.nextp.swap(NO_P, Acquire);
        (p != NO_P).then(|| (p, self.next_spinning.load(Relaxed)))
    }

    /// An M for a thread about to be started (it binds the parker itself).
    pub(super) fn new() -> Machine {
        Machine {
            parker: Parker::unbound(),
            nextp: AtomicUsize::new(NO_P),
            next_spinning: AtomicBool::new(false),
            inbox: Mutex::new(Inbox {
                tasks: VecDeque::new(),
                closed: false,
                retired: false,
                blocking: false,
            }),
            inbox_len: AtomicUsize::new(0),
            inbox_drains: std::sync::atomic::AtomicU32::new(0),
            #[cfg(not(loom))]
            pin: super::affinity::ThreadPin::new(),
            #[cfg(not(loom))]
            locked_hint: AtomicBool::new(false),
            handed: AtomicBool::new(false),
            pless: std::sync::atomic::AtomicBool::new(false),
            homed: std::sync::atomic::AtomicUsize::new(0),
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

    /// Another thread readies a task homed on this M: queue it and wake the M
    /// (a token: harmless if it is running, and it re-checks the inbox before
    /// it parks). True if the M was asleep (`wake`).
    pub(crate) fn push_remote(&self, task: Task) -> bool {
        self.push_locked(lock(&self.inbox), task)
    }

    /// Queue `task` in the inbox whose lock the caller passes, then wake the
    /// M. Torn down (closed): cancel it here, as a push to the closed global
    /// queue does.
    fn push_locked(&self, mut inbox: impl std::ops::DerefMut<Target = Inbox>, task: Task) -> bool {
        if inbox.closed {
            drop(inbox);
            task.shutdown();
            return false;
        }
        inbox.tasks.push_back(task);
        self.inbox_len.store(inbox.tasks.len(), SeqCst);
        drop(inbox);
        self.wake()
    }

    /// Home `task`, a pinned goroutine that has not run yet, on this M: it
    /// counts in `homed` (placement) until it completes (`task::complete`).
    pub(crate) fn home(self: &Arc<Self>, task: &Task) {
        self.homed.fetch_add(1, Relaxed);
        task.set_home(self.clone());
    }

    /// `home` a task on this M from another thread, and hand it over; `Err`
    /// gives it back if the M has retired (its thread exited: "Idle Ms
    /// exit"). Homing under the inbox lock is what makes `try_retire`'s
    /// look at `homed` exact.
    pub(crate) fn adopt(self: &Arc<Self>, task: Task) -> Result<(), Task> {
        let inbox = lock(&self.inbox);
        if inbox.retired || inbox.blocking {
            return Err(task);
        }
        self.home(&task);
        self.push_locked(inbox, task);
        Ok(())
    }

    /// A goroutine about to block in place with its P given away: refuse
    /// adoptions (`adopt`) until `end_blocking`, if no goroutine but the
    /// caller's `own` (1, or 0 for a migratable one) is homed here and none
    /// waits in the inbox. False otherwise: a goroutine adopted a moment ago
    /// would wait for the whole call. Exact under the inbox lock, which
    /// `adopt` homes under.
    pub(crate) fn begin_blocking(&self, own: usize) -> bool {
        let mut inbox = lock(&self.inbox);
        if self.homed.load(Relaxed) > own || !inbox.tasks.is_empty() {
            return false;
        }
        inbox.blocking = true;
        true
    }

    /// The call `begin_blocking` announced returned: accept adoptions again.
    pub(crate) fn end_blocking(&self) {
        lock(&self.inbox).blocking = false;
    }

    /// The inbox half of `MachineCtx::try_retire`: from now on refuse
    /// goroutines (`adopt`), unless one is homed here or waits in the inbox.
    /// True if retired. Exact under the inbox lock, since `adopt` homes
    /// under it.
    pub(crate) fn retire_if_unused(&self) -> bool {
        let mut inbox = lock(&self.inbox);
        if self.homed.load(Relaxed) != 0 || !inbox.tasks.is_empty() {
            return false;
        }
        inbox.retired = true;
        true
    }

    /// `newm` could not start this M's thread: refuse goroutines from now
    /// on, and hand back the ones adopted so far (unstarted), no longer
    /// homed here.
    fn retire_unstarted(&self) -> Vec<Task> {
        let mut inbox = lock(&self.inbox);
        inbox.retired = true;
        self.inbox_len.store(0, SeqCst);
        let tasks: Vec<Task> = inbox.tasks.drain(..).collect();
        drop(inbox);
        for t in &tasks {
            t.unhome();
        }
        tasks
    }

    /// `newm` gives a retired M a new thread: accept goroutines again.
    fn revive(&self) {
        let mut inbox = lock(&self.inbox);
        debug_assert!(inbox.retired && inbox.tasks.is_empty());
        debug_assert_eq!(self.nextp.load(Relaxed), NO_P);
        inbox.retired = false;
        drop(inbox);
        // A request sysmon made through a stale `Processor::owner` (it
        // counts in `preempt::REQUESTS` until cleared).
        preempt::clear(self);
    }

    /// Shrink the inbox's buffer to `QUEUE_KEEP` slots (or its length)
    /// (`MachineCtx::trim_if_asked`).
    #[cfg(not(loom))]
    fn shrink_inbox(&self) {
        lock(&self.inbox).tasks.shrink_to(QUEUE_KEEP);
    }

    /// Tasks in the inbox (a snapshot, for stats).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn inbox_len(&self) -> usize {
        self.inbox_len.load(Relaxed)
    }

    /// Whether this M's thread exited and nobody reuses it yet (stats).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn is_retired(&self) -> bool {
        lock(&self.inbox).retired
    }

    fn has_inbox(&self) -> bool {
        self.inbox_len.load(SeqCst) != 0
    }

    /// The hand-off's first half (the caller holds the lock of the list
    /// this M waits on for a P, or of the timer sleeper): move the task
    /// `raw` to the front of the inbox and mark it to run first. False if it
    /// is not in the inbox (this M took it already).
    fn promote(&self, raw: ptr::NonNull<super::task::Header>) -> bool {
        let mut inbox = lock(&self.inbox);
        let Some(i) = inbox.tasks.iter().position(|t| t.raw() == raw) else {
            return false;
        };
        if i != 0 {
            let t = inbox.tasks.remove(i).expect("position is in range");
            inbox.tasks.push_front(t);
        }
        self.handed.store(true, Relaxed);
        true
    }

    /// Append the inbox to `q` (this M's local queue). A task a hand-off
    /// put at the inbox's front goes with the rest, in order (it runs
    /// without the inherited slice then).
    fn drain_inbox_into(&self, q: &mut VecDeque<Task>) {
        let mut inbox = lock(&self.inbox);
        q.append(&mut inbox.tasks);
        self.inbox_len.store(0, SeqCst);
        self.handed.store(false, Relaxed);
        self.inbox_drains.fetch_add(1, Relaxed);
    }

    /// The task a hand-off put at the inbox's front, if one did (`promote`).
    fn take_handed(&self) -> Option<Task> {
        if !self.handed.load(Relaxed) {
            return None;
        }
        self.handed.store(false, Relaxed);
        let mut inbox = lock(&self.inbox);
        let t = inbox.tasks.pop_front();
        self.inbox_len.store(inbox.tasks.len(), SeqCst);
        t
    }

    /// Teardown: close the inbox and take what is in it.
    pub(crate) fn close_inbox(&self) -> Vec<Task> {
        let mut inbox = lock(&self.inbox);
        inbox.closed = true;
        self.inbox_len.store(0, SeqCst);
        inbox.tasks.drain(..).collect()
    }
}

/// What `MachineCtx::other_ms_homed` found.
struct OtherMs {
    /// The least loaded other M, and its homed goroutines.
    best: *const Machine,
    least: usize,
    /// Homed goroutines over all other Ms holding a P, and how many Ms.
    total: usize,
    ms: usize,
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
    /// Goroutines homed here that hold `lock_os_thread` (`lockos.rs`): while
    /// non-zero this M runs only its homed goroutines.
    pub(crate) locked: Cell<u32>,
    /// The in-place syscall of a virtual runtime that the running goroutine
    /// is in (`vtime::BusyGuard::syscall`): released here if the goroutine
    /// parks inside it.
    #[cfg(not(loom))]
    virtual_syscall: Cell<Option<Arc<super::vtime::SyscallToken>>>,
    /// The schedule tick at which `place` last sent a goroutine back to the
    /// global queue: the 61st-tick fairness pick does not take it again in
    /// the same tick.
    bounce_tick: Cell<u32>,
    /// This M retired ("Idle Ms exit"): its thread leaves the schedule loop
    /// (shared with its `ExitGuard`).
    retired: std::rc::Rc<Cell<bool>>,
    /// Homed tasks readied on this M: the `runnext` of the thread rule, and
    /// the local FIFO behind it. Only this thread touches them.
    next: Cell<Option<Task>>,
    localq: RefCell<VecDeque<Task>>,
    /// The last goroutine the current poll readied on another M, and that
    /// M: where our P goes if the poll ends the chain and that M waits for
    /// a P ("Hand-off to the readied goroutine's M"). Empty when a poll
    /// begins: every schedule with a P takes it, a retaken P and a locked M
    /// drop it.
    handoff: Cell<Option<(ptr::NonNull<Machine>, ptr::NonNull<super::task::Header>)>>,
    /// Another M whose inbox we pushed into and have not seen drained ("A
    /// preempted home").
    #[cfg(not(loom))]
    pushed: Cell<Option<Pushed>>,
    /// Each P's `execs` at our last `steal_queued` pass.
    #[cfg(not(loom))]
    execs_seen: RefCell<Vec<u32>>,
    /// Running this P's due timers at the top of `find_runnable`: a goroutine
    /// they ready on another M becomes the hand-off candidate (in Go it
    /// would take `runnext`, ahead of whatever the last poll readied).
    in_top_timers: Cell<bool>,
    /// The last `Shared::heap_trims` this M acted on (`trim_if_asked`).
    heap_trims_seen: Cell<u32>,
}

impl MachineCtx {
    /// Live goroutines homed on this M.
    pub(crate) fn homed_here(&self) -> usize {
        self.m.homed.load(Relaxed)
    }
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
    // The M exists before its thread, so that placement can send goroutines
    // to it while the OS starts the thread (`place`). The `Machine` of a
    // retired M is reused first ("Idle Ms exit"), so their number stays that
    // of the most threads ever live at once.
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
    #[cfg(not(loom))]
    let mask = super::affinity::inherited();
    #[cfg(loom)]
    let mask = None;
    let res = thread::Builder::new()
        .name(format!("{}-m{seq}", shared.config.name))
        .spawn(move || mstart(s2, m, p, spinning, mask));
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
            // The `Machine` never got its thread: retire it, and send the
            // goroutines placement adopted onto it meanwhile (unstarted) to
            // the global queue, for another M to start.
            for t in kept.retire_unstarted() {
                shared.global_push(t);
            }
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
    #[cfg(not(loom))]
    m: Arc<Machine>,
    retired: std::rc::Rc<Cell<bool>>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if !self.retired.get() {
            self.shared.nthreads.fetch_sub(1, AcqRel);
            // Also when a panic ends the thread: nobody may pull its id.
            // (A retired M unbound before its `Machine` could be reused.)
            #[cfg(not(loom))]
            self.m.pin.unbind();
        }
        *lock(&self.shared.live_ms) -= 1;
        self.shared.ms_exited.notify_all();
    }
}

/// An M's thread. `mask`: the affinity its creator had before another M
/// narrowed it (`affinity.rs`), taken first.
fn mstart(
    shared: Arc<Shared>,
    m: Arc<Machine>,
    p: usize,
    spinning: bool,
    #[allow(unused_variables)] mask: Option<MaskOf>,
) {
    #[cfg(not(loom))]
    if let Some(mask) = mask {
        super::affinity::apply(&mask);
    }
    let retired = std::rc::Rc::new(Cell::new(false));
    let _exit = ExitGuard {
        shared: shared.clone(),
        #[cfg(not(loom))]
        m: m.clone(),
        retired: retired.clone(),
    };
    m.parker.bind();
    #[cfg(not(loom))]
    m.pin.bind();
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
        locked: Cell::new(0),
        #[cfg(not(loom))]
        virtual_syscall: Cell::new(None),
        retired,
        bounce_tick: Cell::new(u32::MAX),
        poll_seq: Cell::new(0),
        in_syscall: Cell::new(false),
        next: Cell::new(None),
        localq: RefCell::new(VecDeque::new()),
        handoff: Cell::new(None),
        #[cfg(not(loom))]
        pushed: Cell::new(None),
        #[cfg(not(loom))]
        execs_seen: RefCell::new(Vec::new()),
        in_top_timers: Cell::new(false),
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

/// A thief's pause before taking a running victim's `runnext` (under loom, one
/// yield: the victim gets to run, or not, in every interleaving).
fn runnext_steal_wait() {
    #[cfg(not(loom))]
    {
        let until = std::time::Instant::now() + RUNNEXT_STEAL_DELAY;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    thread::yield_now();
}

impl MachineCtx {
    fn proc(&self, p: usize) -> &Processor {
        &self.shared.procs[p]
    }

    /// The schedule loop; returns at shutdown.
    fn schedule(&self) {
        while let Some((task, inherit)) = self.find_runnable() {
            if self.spinning.get() {
                self.resetspinning();
            }
            let Some(task) = self.place(task) else {
                continue;
            };
            self.execute(task, inherit);
        }
    }

    /// A pinned goroutine about to run for the first time stays where it
    /// first runs, so choose that M now: here, unless a P is idle and this M
    /// is crowded — it holds at least `PLACE_MIN` homed goroutines, or one of
    /// them waits to run (two CPU-bound goroutines homed together could never
    /// run in parallel) — then an idle M is started there with it, or it goes
    /// to the global queue for a new M; unless, with no P idle, one of our
    /// homed goroutines waits to run: then it starts on the M of another P
    /// that holds fewer goroutines (its inbox), else goes to the global
    /// queue for a spinning M (up to `MAX_BOUNCES` times: `Task::bounce`);
    /// or unless this M holds at least `PLACE_MIN` and over 11/10 of the average
    /// of the Ms holding a P (then it is homed on the least loaded of them
    /// and pushed to its inbox: it starts there). Returns the task if it
    /// runs here.
    fn place(&self, task: Task) -> Option<Task> {
        if !task.pinned() || task.home().is_some() {
            return Some(task);
        }
        let mine = self.m.homed.load(Relaxed);
        let mut task = task;
        // A homed goroutine of ours waits to run (it yielded, or was woken
        // behind another): starting this one here too would make them take
        // turns on one thread for good, while a P is idle.
        let crowded = mine >= PLACE_MIN || !self.localq.borrow().is_empty();
        if crowded && self.shared.idle_ps() > 0 {
            // A P is idle: start an idle M there with this goroutine.
            match self.shared.start_idle_m_with(task) {
                Ok(()) => return None,
                Err(t) if self.shared.nthreads.load(Relaxed) < self.shared.config.max_threads => {
                    // No idle M yet: the global queue, and `wakep` starts one
                    // (it takes the task and, holding none, runs it).
                    self.shared.global_push(t);
                    self.shared.wakep();
                    return None;
                }
                Err(t) => task = t,
            }
        } else if crowded && mine < PLACE_MIN && self.shared.nprocs() > 1 {
            // No P idle. A homed goroutine of ours waits to run, so this one
            // would take turns with it on one thread for good. If the M of
            // another P holds fewer goroutines than we do, it starts there
            // (its inbox): two CPU-bound goroutines spawned together run in
            // parallel, and W4's four yielders end up two and two. (Sending
            // them through the global queue instead left the split to
            // chance, and where a goroutine starts is for good: 3:1 splits,
            // 2x slower, in 4 runs of 9.) Else, if an M spins, through the
            // global queue for it (a `wakep` for this very goroutine, most
            // often), at most `MAX_BOUNCES` times: our 61st-tick fairness
            // pick may take it back.
            if let Some(o) = self.other_ms_homed().filter(|o| o.least < mine) {
                // SAFETY: `o.best` came from `Arc::as_ptr` of an M in
                // `Shared::machines`, which holds a strong count for the
                // runtime's life: taking one more and owning it is sound.
                let target = unsafe {
                    Arc::increment_strong_count(o.best);
                    Arc::from_raw(o.best)
                };
                match target.adopt(task) {
                    Ok(()) => return None,
                    Err(t) => task = t, // it retired a moment ago
                }
            }
            if self.shared.spinning_ms() > 0 && task.bounce(MAX_BOUNCES) {
                if let Some(pi) = self.p.get() {
                    self.bounce_tick.set(self.proc(pi).schedtick.load(Relaxed));
                }
                self.shared.global_push(task);
                return None;
            }
        }
        if mine >= PLACE_MIN && self.shared.nprocs() > 1 {
            if let Some(o) = self.other_ms_homed() {
                let (total, ms) = (mine + o.total, 1 + o.ms);
                let (m, c) = (o.best, o.least);
                if c < mine && mine * 10 * ms > total * 11 {
                    // SAFETY: `m` came from `Arc::as_ptr` of an M in
                    // `Shared::machines`, which holds a strong count for the
                    // runtime's life: taking one more and owning it is sound.
                    let target = unsafe {
                        Arc::increment_strong_count(m);
                        Arc::from_raw(m)
                    };
                    match target.adopt(task) {
                        Ok(()) => return None,
                        // It retired a moment ago: start it here.
                        Err(t) => task = t,
                    }
                }
            }
        }
        self.m.home(&task);
        Some(task)
    }

    /// The homed goroutines of the other Ms that hold a P (placement): the
    /// least loaded of them and its count, their total and how many there
    /// are. `None` if no other M holds a P.
    fn other_ms_homed(&self) -> Option<OtherMs> {
        let me: *const Machine = Arc::as_ptr(&self.m);
        let mut out: Option<OtherMs> = None;
        for q in self.shared.procs.iter() {
            let m = q.owner.load(Acquire).cast_const();
            if m.is_null() || m == me || !status::is_held_by_m(q.status.load()) {
                continue;
            }
            // SAFETY: `owner` points into `Shared::machines`, which keeps
            // every `Machine` for the runtime's life (`Processor::owner`).
            let other = unsafe { &*m };
            if other.in_call.load(Acquire) {
                continue; // in a call made in place: runs nothing until it returns
            }
            let c = other.homed.load(Relaxed);
            let o = out.get_or_insert(OtherMs {
                best: m,
                least: c,
                total: 0,
                ms: 0,
            });
            o.total += c;
            o.ms += 1;
            if c < o.least {
                (o.best, o.least) = (m, c);
            }
        }
        out
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
        debug_assert!(!task.pinned() || task.home().is_some(), "placed first");
        debug_assert!(task.home().is_none_or(|h| Arc::ptr_eq(h, &self.m)));
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
                // The P was retaken: not ours to give at our next schedule.
                self.handoff.set(None);
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
            // Still runnable: the chain goes on here, no hand-off.
            self.handoff.set(None);
            if t.home().is_some() {
                // Homed: woken while it ran, or yielding: the back of our own
                // queue (never the global one, where another M could take it).
                // (Draining the inbox in front of it first cost W13 15% on
                // a 16-core box: the order of its wake-ups changes.) At the
                // end of an expired slice (sysmon's request, honoured) it
                // goes behind the inbox too, as Go's preempted G goes to
                // the global queue's tail: a goroutine readied here from
                // another M long ago ran only after it otherwise, and in a
                // chain of hand-offs that one may never run (the hog pair
                // of `tests/sysmon.rs` `split_pairs_share_one_p`).
                let mut q = self.localq.borrow_mut();
                if p.is_some_and(|p| p.slice_expired.load(Relaxed)) && self.m.has_inbox() {
                    self.m.drain_inbox_into(&mut q);
                }
                q.push_back(t);
            } else if let Some(p) = p {
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

    /// Find a G to run, parking as needed. `None` at shutdown.
    fn find_runnable(&self) -> Option<(Task, bool)> {
        let shared = &*self.shared;
        'top: loop {
            if self.retired.get() {
                // Idle too long: this thread exits. Checked before shutdown:
                // our `Machine` may already serve a new thread, whose
                // goroutines only that thread may cancel.
                return None;
            }
            // Another M narrowed our affinity to pull us onto its core ("A
            // preempted home"): we got there; take our own cores back.
            #[cfg(not(loom))]
            self.m.pin.restore();
            if shared.shutdown.load(Acquire) {
                self.drop_p_for_exit();
                self.cancel_homed();
                return None;
            }
            if let Some(pi) = self.p.get().filter(|&pi| shared.p_dying(pi)) {
                // `set_procs` shrank below our P: give it up (`procresize.rs`).
                self.p.set(None);
                self.stop_spinning();
                shared.destroy_p(pi);
                continue 'top;
            }
            if self.is_locked() {
                // `lock_os_thread`: only our homed goroutines (`lockos.rs`),
                // which wait for a P their own way (no hand-off to us, nor
                // from us: a candidate left from an earlier poll is dropped).
                self.m.pless.store(false, Relaxed);
                self.handoff.set(None);
                match self.find_locked() {
                    Some(r) => return Some(r),
                    None => continue 'top,
                }
            }
            let Some(pi) = self.p.get() else {
                // P-less (woken by the timer or for homed work, or our P was
                // retaken): a P handed to us as the timer sleeper
                // (`hand_off_to_readied`); else take an idle P; else wait for
                // one if our homed goroutines need it, or park.
                self.m.pless.store(true, Relaxed);
                if let Some((p, spinning)) = self.m.take_nextp() {
                    self.p.set(Some(p));
                    self.spinning.set(spinning);
                    continue 'top;
                }
                if self.has_homed_work() {
                    self.wait_for_p();
                } else {
                    match shared.acquire_idle_p() {
                        Some(p) => self.p.set(Some(p)),
                        None => self.park_idle(),
                    }
                }
                continue 'top;
            };
            let p = self.proc(pi);
            p.set_owner(&self.m);

            // 1. Due timers of this P and the global (P-less) heap — first,
            // as in Go's `schedule`, also in a chain of hand-offs below (a
            // split ping-pong pair handing one P back and forth starved a
            // 1 ms ticker to under 150 ticks a second when they came after).
            self.in_top_timers.set(true);
            self.run_timers(p);
            self.in_top_timers.set(false);

            // Ms take turns: the goroutine our last poll (or a timer just
            // now) readied on another M runs next if that M waits for a P
            // and nothing of ours waits in `next` (Go's `runnext`).
            if let Some((m, g)) = self.handoff.take() {
                if self.hand_off_to_readied(pi, m, g) {
                    continue 'top;
                }
            }
            if self.m.pless.load(Relaxed) {
                self.m.pless.store(false, Relaxed);
                // A P handed to us with the goroutine it readied: that runs
                // first, in the slice it inherits, before anything (turn
                // taking included) can send the P on.
                if let Some(t) = self.m.take_handed() {
                    return Some((t, true));
                }
            }
            // Another M's homed goroutines have waited for a P longer than
            // `M_SLICE`.
            if shared.want_p_since.load(Relaxed) != 0 && self.yield_p_to_waiter(pi) {
                continue 'top;
            }

            // 2. Fairness: every 61st tick, one G from the global queue first
            // (once per tick: not again in the same tick after `place` sent
            // the G it took back to the global queue).
            let tick = p.schedtick.load(Relaxed);
            if tick % GLOBAL_FAIRNESS_TICK == 0
                && tick != self.bounce_tick.get()
                && shared.global_len() > 0
            {
                if let Some(t) = shared.globrunqget(p, 1) {
                    return Some((t, false));
                }
            }

            // 3. Local: our homed `next`, then the homed queue and the P's
            // queue (`runnext`, then the ring), alternating which goes first by
            // schedule tick so that neither starves the other.
            if let Some(t) = self.next.take() {
                return Some((t, true));
            }
            if let Some(t) = self.m.take_handed() {
                return Some((t, true));
            }
            let homed_first = p.schedtick.load(Relaxed) % 2 == 0;
            if homed_first {
                if let Some(t) = self.homed_pop() {
                    return Some((t, false));
                }
            }
            // SAFETY: we own `p`.
            if let Some(r) = unsafe { p.runqget() } {
                return Some(r);
            }
            if !homed_first {
                if let Some(t) = self.homed_pop() {
                    return Some((t, false));
                }
            }

            // 4. A batch from the global queue.
            if let Some(t) = shared.globrunqget(p, 0) {
                return Some((t, false));
            }

            // 5. The netpoller, without blocking, unless an M is blocked in
            // it (it will deliver): what is ready lands on our queues' tails
            // as one batch (`Shared::inject`). Work already queued on another
            // busy P is taken first (`steal_queued`): a poll would find our
            // own sockets ready again and keep us busy with them while that
            // P's queue waits for its M, which the kernel may have preempted
            // for a whole time slice (tokio steals before it polls, too).
            #[cfg(not(loom))]
            if shared.netpoll.has_waiters() && !shared.netpoll.someone_blocked() {
                if let Some(t) = self.steal_queued(p) {
                    return Some((t, false));
                }
                self.pull_preempted_home(true);
                if let Some(ready) = shared.netpoll.poll(Some(Duration::ZERO), now_ns) {
                    shared.inject(ready, Some(p));
                    // SAFETY: we own `p`.
                    if let Some(r) = unsafe { p.runqget() } {
                        return Some(r);
                    }
                    if let Some(t) = self.homed_pop() {
                        return Some((t, false));
                    }
                }
            }

            // 6. Steal, if this M already spins or fewer than half the busy Ps spin.
            if self.spinning.get() || shared.may_spin() {
                if !self.spinning.get() {
                    self.spinning.set(true);
                    shared.spinning_begin();
                }
                if let Some(t) = self.steal_work(p) {
                    return Some((t, false));
                }
            }

            // Timers of every P, so those of idle or busy Ps are honoured; what
            // fires lands in our runnext.
            self.run_all_timers();
            // SAFETY: we own `p`.
            if let Some(r) = unsafe { p.runqget() } {
                return Some(r);
            }

            // Homed work that arrived meanwhile (a timer we ran, an inbox push).
            if let Some(t) = self.next.take() {
                return Some((t, true));
            }
            if let Some(t) = self.homed_pop() {
                return Some((t, false));
            }

            // 6b. Our homed goroutines can only run here: if a busy M may
            // wake one soon, wait for it briefly instead of parking.
            if self.homed_spin(p) {
                continue 'top;
            }

            // 7. Drop the P, re-checking the global queue under the lock.
            {
                let mut s = lock(&shared.sched);
                if shared.global_len() > 0 {
                    if let Some(t) = shared.globrunqget_locked(&mut s, p, 0) {
                        return Some((t, false));
                    }
                }
                shared.pidleput(&mut s, pi);
                self.p.set(None);
                self.m.pless.store(true, Relaxed);
            }

            // 8. Stop spinning, then re-check everything (the barrier is the RMW).
            if self.spinning.get() {
                self.spinning.set(false);
                shared.spinning_end();
                // StoreLoad: pairs with the submitter's fence in `wakep_if_idle`.
                fence(SeqCst);
                let work = shared.global_len() > 0
                    || shared
                        .procs
                        .iter()
                        .any(|q| q.status.load() != status::IDLE && q.has_work())
                    || shared.next_timer() <= shared.clock_ns();
                if work {
                    if let Some(p) = shared.acquire_idle_p() {
                        self.p.set(Some(p));
                        self.spinning.set(true);
                        shared.spinning_begin();
                        continue 'top;
                    }
                }
            }

            // 9./10. Sleep until the next timer, or park until handed a P.
            self.park_idle();
        }
    }

    /// Before parking, an M holding live homed goroutines (all blocked now)
    /// watches for work for up to `HOMED_SPIN` while another P is busy: the
    /// thread rule keeps those goroutines here, so when they talk to
    /// goroutines of another M every hand-off would otherwise cost a park and
    /// a futex wake (a cap-0 channel between producers homed on one M and
    /// consumers on the other went from ~0.2 to ~4.5 µs per message). Go's
    /// spinning Ms look for work before `stopm` for the same reason. An M
    /// woken from its park for its homed goroutines (`Shared::ready`) counts
    /// as busy for `HOMED_SPIN` before it takes a P: without that, the M that
    /// woke it found no busy P and parked too, and two Ms whose goroutines
    /// only talk to each other took turns parking (W5 cap 0 with the 4
    /// consumers started on one M and the producers on the other: 1.0-3.4
    /// µs per message in 1 run of 15-40, against about 0.5). No spin when no
    /// other P is busy and nobody was woken (nobody to hand work back: an
    /// idle runtime parks at once). True if work arrived.
    fn homed_spin(&self, p: &Processor) -> bool {
        // loom: a time-bounded spin would be an unbounded loop of modelled
        // loads; the models check the protocol without this shortcut (it only
        // ever returns to the top of `find_runnable`, which re-checks).
        if cfg!(loom) {
            return false;
        }
        let shared = &*self.shared;
        if self.m.homed.load(Relaxed) == 0 || shared.nprocs() < 2 {
            return false;
        }
        // Another P is busy, or an M was woken for its goroutines a moment
        // ago and is about to take one: either may hand work back.
        let others_busy = |now: u64| {
            shared.idle_ps() + 1 < shared.nprocs()
                || now.saturating_sub(shared.homed_wake_ns.load(Relaxed)) < HOMED_SPIN_NS
        };
        let start = now_ns();
        if !others_busy(start) {
            return false;
        }
        loop {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            if self.m.has_inbox() || p.has_work() || shared.global_len() > 0 {
                return true;
            }
            let now = now_ns();
            if shared.shutdown.load(Relaxed)
                || !others_busy(now)
                || now.saturating_sub(start) >= HOMED_SPIN_NS
            {
                return false;
            }
        }
    }

    pub(super) fn run_timers(&self, p: &Processor) {
        let shared = &*self.shared;
        let (a, b) = (p.timers.next_when(), shared.global_timers.next_when());
        if a == NEVER && b == NEVER {
            return;
        }
        let now = shared.clock_ns();
        if a <= now {
            shared.run_due_timers(&p.timers, now);
        }
        if b <= now {
            shared.run_due_timers(&shared.global_timers, now);
        }
    }

    fn run_all_timers(&self) {
        let shared = &*self.shared;
        let next = shared.next_timer();
        if next == NEVER {
            return;
        }
        let now = shared.clock_ns();
        if next > now {
            return;
        }
        for q in shared.procs.iter() {
            shared.run_due_timers(&q.timers, now);
        }
        shared.run_due_timers(&shared.global_timers, now);
    }

    /// Go's `stealWork`: 4 rounds over the Ps in a random order.
    fn steal_work(&self, p: &Processor) -> Option<Task> {
        let shared = &*self.shared;
        let n = shared.procs.len();
        if n == 1 {
            return None;
        }
        for round in 0..STEAL_ROUNDS {
            let last = round == STEAL_ROUNDS - 1;
            let now = if last { shared.clock_ns() } else { 0 };
            // SAFETY: we own `p`.
            let r = fastrand(unsafe { &mut p.local().rng }) as usize;
            let start = r % n;
            let stride = shared.coprimes[(r >> 32) % shared.coprimes.len()];
            for k in 0..n {
                let vi = (start + k * stride) % n;
                if vi == p.id {
                    continue;
                }
                let v = self.proc(vi);
                if last && v.timers.next_when() <= now {
                    shared.run_due_timers(&v.timers, now);
                    // SAFETY: we own `p`.
                    if let Some((t, _)) = unsafe { p.runqget() } {
                        return Some(t);
                    }
                }
                if matches!(v.status.load(), status::IDLE | status::DEAD) {
                    continue;
                }
                if let Some(t) = self.steal_ring(p, v) {
                    return Some(t);
                }
                let next = if last {
                    v.runnext.load(Acquire)
                } else {
                    ptr::null_mut()
                };
                if !next.is_null() {
                    if status::is_held_by_m(v.status.load()) && !v.owner_in_call() {
                        // The victim most likely readied that G and is about to
                        // block: let it run it. Steal only if the victim stayed in
                        // one poll for the whole wait and `runnext` still holds the
                        // G we saw. (Go re-checks only the pointer, so in a
                        // ping-pong it steals the partner readied a moment later.)
                        let execs = v.execs.load(Acquire);
                        runnext_steal_wait();
                        if v.execs.load(Acquire) != execs {
                            continue;
                        }
                        if let Some(t) = v.steal_runnext(next) {
                            v.runnext_was_stuck();
                            p.count_steal_from(v, 1);
                            if crate::trace::on() {
                                self.trace_steal(p.id, vi, 1);
                            }
                            return Some(t);
                        }
                        continue;
                    }
                    if let Some(t) = v.steal_runnext(next) {
                        p.count_steal_from(v, 1);
                        if crate::trace::on() {
                            self.trace_steal(p.id, vi, 1);
                        }
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// One pass over the other Ps' rings (not their `runnext`, nor their
    /// timers), for an M about to poll the network, which would otherwise
    /// leave those queues waiting while it serves its own sockets, without
    /// spinning. From the first P that holds tasks:
    /// - whose M has not started a poll since our last pass (`execs`
    ///   unmoved: preempted by the kernel, or in a long poll): half its ring;
    /// - whose M makes progress but whose ring holds `STEAL_QUEUED_BACKLOG`
    ///   or more: its `STEAL_QUEUED_OLDEST` oldest tasks.
    ///
    /// The second is the tail's: with none, fresh sockets were served before
    /// the older round trips queued on the busy P, and W12 (async) round
    /// trips spread both ways (p99 1.07-1.10× tokio's). Taking half of every
    /// non-empty ring in passing cost W12 10%, and half of a progressing P's
    /// ring of 64 or more gave tokio's tail at 5-10% fewer msgs/s (with one
    /// message in flight per connection, msgs/s is connections ÷ the mean
    /// round trip). The oldest eight of a ring of 32 or more: more msgs/s
    /// and a p99 about 0.85× tokio's (README, W12).
    #[cfg(not(loom))]
    fn steal_queued(&self, p: &Processor) -> Option<Task> {
        let shared = &*self.shared;
        // Live Ps only: this runs whenever the M's queues run dry, and
        // `procs` has a slot for every CPU of the box (the rest are DEAD,
        // their rings empty).
        let n = shared.nprocs().min(shared.procs.len());
        if n == 1 {
            return None;
        }
        let mut seen = self.execs_seen.borrow_mut();
        if seen.len() != n {
            seen.clear();
            seen.resize(n, u32::MAX);
        }
        // SAFETY: we own `p`.
        let start = fastrand(unsafe { &mut p.local().rng }) as usize % n;
        for k in 0..n {
            let vi = (start + k) % n;
            let v = self.proc(vi);
            if vi == p.id || v.runq.is_empty() {
                continue;
            }
            let execs = v.execs.load(Relaxed);
            let max = if std::mem::replace(&mut seen[vi], execs) == execs {
                // Not moved: half, as any steal.
                u32::MAX
            } else if v.runq.len() >= STEAL_QUEUED_BACKLOG {
                // Moving, but behind: its oldest few.
                STEAL_QUEUED_OLDEST
            } else {
                continue;
            };
            if let Some(t) = self.steal_ring_at_most(p, v, max) {
                return Some(t);
            }
        }
        None
    }

    /// This M pushed into another M's inbox (`readied_elsewhere`): remember
    /// the first such M until it drains ("A preempted home").
    #[cfg(not(loom))]
    #[inline]
    fn pushed_to(&self, m: &Machine) {
        if self.pushed.get().is_none() {
            self.pushed.set(Some(Pushed {
                m: ptr::NonNull::from(m),
                drains: m.inbox_drains.load(Relaxed),
                since: 0,
                cpu: None,
            }));
        }
    }

    /// Out of work of our own, about to poll or to park (`pause` false):
    /// if an inbox we pushed into has waited `PREEMPTED_HOME_NS` undrained
    /// and its M then got less than half of a core over
    /// `PREEMPTED_HOME_CPU_NS`, that M is waiting for a core: pull it onto
    /// ours (`affinity.rs`); unless we park anyway, sleep `PULL_PAUSE` so
    /// that it runs, and put its mask back once it did ("A preempted
    /// home"; else it restores the mask itself at its next schedule). Left alone: an
    /// M that keeps its core (a long-running goroutine: sysmon's business),
    /// one in a call made in place (`in_call`) or running a locked goroutine; and
    /// we do not pull while spinning (Ms that spin must not sleep). Only a
    /// stall this long pays the two reads of its CPU clock.
    #[cfg(not(loom))]
    fn pull_preempted_home(&self, pause: bool) {
        let Some(mut seen) = self.pushed.get() else {
            return;
        };
        // SAFETY: every `Machine` stays in `Shared::machines` for the
        // runtime's life (see `Processor::owner`).
        let m = unsafe { seen.m.as_ref() };
        if m.inbox_drains.load(Relaxed) != seen.drains || m.inbox_len() == 0 {
            self.pushed.set(None);
            return;
        }
        let now = now_ns();
        match seen.cpu {
            _ if seen.since == 0 => seen.since = now,
            // First reading, or a stale one (we parked meanwhile): the
            // decision is about the last `PREEMPTED_HOME_CPU_NS`.
            None if now.saturating_sub(seen.since) >= PREEMPTED_HOME_NS => {
                seen.cpu = m.pin.cpu_time_ns().map(|c| (now, c));
                if seen.cpu.is_none() {
                    self.pushed.set(None);
                    return;
                }
            }
            Some((at, _)) if now.saturating_sub(at) > 2 * PREEMPTED_HOME_CPU_NS => {
                seen.cpu = m.pin.cpu_time_ns().map(|c| (now, c));
            }
            Some((at, cpu)) if now.saturating_sub(at) >= PREEMPTED_HOME_CPU_NS => {
                self.pushed.set(None);
                let ran = m
                    .pin
                    .cpu_time_ns()
                    .map_or(u64::MAX, |c| c.saturating_sub(cpu));
                if ran < (now - at) / 2
                    && !m.in_call.load(Relaxed)
                    && !self.spinning.get()
                    && !m.locked_hint.load(Relaxed)
                    && m.pin.pull_here()
                    && pause
                {
                    // Leave the core to it: a `sched_yield` would not when
                    // the kernel counts it ahead of us in CPU time. Once it
                    // ran here, its mask can go back (it has moved); if it
                    // did not, it restores the mask itself when it runs.
                    let before = m.pin.cpu_time_ns();
                    std::thread::sleep(PULL_PAUSE);
                    if before.is_some() && m.pin.cpu_time_ns() > before {
                        m.pin.release();
                    }
                }
                return;
            }
            _ => return,
        }
        self.pushed.set(Some(seen));
    }

    /// Half of `v`'s ring into ours (`p`, owned); the last of them to run now.
    fn steal_ring(&self, p: &Processor, v: &Processor) -> Option<Task> {
        self.steal_ring_at_most(p, v, u32::MAX)
    }

    /// `steal_ring`, at most `max` tasks (the oldest of `v`'s ring).
    fn steal_ring_at_most(&self, p: &Processor, v: &Processor, max: u32) -> Option<Task> {
        let before = p.runq.len();
        // SAFETY: we own `p`'s ring (the destination); `v` is another P.
        let t = unsafe { v.runq.steal_into(&p.runq, max) }?;
        let n = (p.runq.len() + 1).saturating_sub(before);
        p.count_steal_from(v, n as u64);
        if crate::trace::on() {
            self.trace_steal(p.id, v.id, n);
        }
        // SAFETY: ring items are owned task references.
        Some(unsafe { Task::from_raw(t) })
    }

    #[cold]
    fn trace_steal(&self, p: usize, victim: usize, n: usize) {
        self.shared.trace(
            p,
            crate::trace::Ev::Steal {
                victim: victim as u32,
                n: n as u32,
            },
        );
    }

    /// Shutdown: give the P back so teardown finds every P idle.
    fn drop_p_for_exit(&self) {
        if let Some(pi) = self.p.take() {
            // Queued work stays queued; teardown drains it.
            let _s = lock(&self.shared.sched);
            self.proc(pi).status.store(status::IDLE);
        }
        self.stop_spinning();
    }

    /// Stop spinning, if this M spins.
    pub(super) fn stop_spinning(&self) {
        if self.spinning.replace(false) {
            self.shared.spinning_end();
        }
    }

    /// P-less and idle: be the timer sleeper if timers are pending and nobody else
    /// is, otherwise park on the idle-M list until `wakep` hands us a P.
    fn park_idle(&self) {
        let shared = &*self.shared;
        // A request that raced the end of our last poll dies here: a flag
        // left set would keep every M's runtime calls on the slow path.
        preempt::clear(&self.m);
        #[cfg(not(loom))]
        self.trim_if_asked();
        #[cfg(not(loom))]
        self.pull_preempted_home(false);
        let next = shared.next_timer();
        #[cfg(not(loom))]
        let netpoll = shared.netpoll.active();
        #[cfg(loom)]
        let netpoll = false;
        #[cfg(not(loom))]
        let virtual_time = shared.virtual_clock.is_some();
        #[cfg(loom)]
        let virtual_time = false;
        if next != NEVER || netpoll || virtual_time {
            if next <= shared.clock_ns() {
                // Due already: run it on an idle P. If every P is busy, their Ms
                // run their own timers at their next schedule.
                if let Some(p) = shared.acquire_idle_p() {
                    self.p.set(Some(p));
                    return;
                }
            } else if self.try_sleep_on_timers() {
                return;
            }
        }
        if self.has_homed_work() {
            return;
        }
        if !shared.midleput(self.m.clone()) {
            return; // shutting down
        }
        // We are on the idle list until `wakep` pops us and hands us a P through
        // `nextp`; only that (or shutdown) ends the wait. Returning without a P
        // would let us push ourselves onto the list a second time.
        self.wait_for_nextp();
    }

    /// Park until handed a P (true) or the runtime shuts down (false). For an
    /// M that some `wakep` may pop (on the idle list, or taken out of the
    /// watcher role) or that is on the want-P list. Homed work arriving while
    /// we are on the idle list moves us: to an idle P, else to the want-P list
    /// (see "The thread rule"); if `wakep` popped us already, its P is coming.
    pub(super) fn wait_for_nextp(&self) -> bool {
        let shared = &*self.shared;
        // True once we are off the idle list (popped, or on the want-P list).
        let mut off_idle_list = false;
        // An M idle on the list this long may exit ("Idle Ms exit").
        let keep_alive = shared
            .config
            .thread_keep_alive
            .filter(|_| crate::park::REBINDABLE);
        // Real time, also in a virtual-time runtime.
        let mut retire_at =
            keep_alive.map(|d| std::time::Instant::now() + d.min(super::timers::MAX_WAIT));
        loop {
            if let Some((p, spinning)) = self.m.take_nextp() {
                self.p.set(Some(p));
                self.spinning.set(spinning);
                return true;
            }
            if shared.shutdown.load(Acquire) {
                return false;
            }
            #[cfg(not(loom))]
            self.trim_if_asked();
            if !off_idle_list && self.has_homed_work() {
                off_idle_list = true;
                let mut s = lock(&shared.sched);
                if shared.leave_idle_ms(&mut s, &self.m) {
                    if let Some(p) = shared.pidleget(&mut s) {
                        self.p.set(Some(p));
                        return true;
                    }
                    shared.want_p_push(&mut s, self.m.clone());
                }
                continue;
            }
            let stop =
                || shared.shutdown.load(Acquire) || (!off_idle_list && self.has_homed_work());
            match retire_at {
                Some(at) if !off_idle_list => {
                    if !self.m.parker.wait_until(stop, at) && std::time::Instant::now() >= at {
                        if self.try_retire() {
                            return false;
                        }
                        // Needed (goroutines homed here, or no more Ms than
                        // Ps): wait for work without a deadline; the next
                        // time we park idle, a new one starts.
                        retire_at = None;
                    }
                }
                _ => {
                    self.m.parker.wait(stop);
                }
            }
        }
    }

    /// The stack scavenger finished a run after a burst and asks every M
    /// to give back what its thread keeps of the burst (`Shared::heap_trims`,
    /// `blocking.rs`): the capacity its queues of homed goroutines grew to
    /// (a burst of 100,000 readied goroutines grew them to 65,536 slots,
    /// about 1.1 MiB in all), and the free top of its thread's glibc arena
    /// (`trim_thread_arena`). Called where an idle M parks or wakes
    /// without work; the scavenger wakes the idle ones for it.
    #[cfg(not(loom))]
    fn trim_if_asked(&self) {
        let asked = self.shared.heap_trims.load(Relaxed);
        if asked == self.heap_trims_seen.get() {
            return;
        }
        self.heap_trims_seen.set(asked);
        self.localq.borrow_mut().shrink_to(QUEUE_KEEP);
        self.m.shrink_inbox();
        super::blocking::trim_thread_arena();
    }

    /// Idle on the list for `thread_keep_alive`: exit this thread if it is
    /// not needed ("Idle Ms exit"). True if retired: the caller leaves the
    /// schedule loop.
    fn try_retire(&self) -> bool {
        let shared = &*self.shared;
        if self.m.homed.load(Relaxed) != 0 || self.is_locked() {
            return false; // goroutines live here: they can only run on this thread
        }
        let mut s = lock(&shared.sched);
        if shared.shutdown.load(Acquire) || shared.nthreads.load(Acquire) <= shared.nprocs() {
            return false;
        }
        if !shared.leave_idle_ms(&mut s, &self.m) {
            return false; // `wakep` popped us: a P is on its way
        }
        if !self.m.retire_if_unused() {
            shared.midle_return(&mut s, self.m.clone());
            return false;
        }
        // Nobody may wake us now (we are on no list, adoption is refused):
        // a stale token would count as a pending wake-up for ever
        // (`checkdead`), and a request would outlive its poll.
        self.m.parker.reset();
        preempt::clear(&self.m);
        // No hand-off waits for a thread that is gone (a stale candidate
        // pointing here would wait `HANDOFF_WAIT` for nothing).
        self.m.pless.store(false, Relaxed);
        // Nobody may pull this thread once a new one can bind the `Machine`.
        #[cfg(not(loom))]
        self.m.pin.unbind();
        shared.nthreads.fetch_sub(1, AcqRel);
        shared.retire_m(&mut s, self.m.clone());
        self.retired.set(true);
        true
    }

    /// "Ms take turns": if the M first in line on the want-P list has waited
    /// `M_SLICE` or longer, give it our P (with its queue and timers) and
    /// take our place in line if our own homed goroutines have work (the
    /// caller's loop, P-less, does that: `wait_for_p`). True if given.
    fn yield_p_to_waiter(&self, pi: usize) -> bool {
        let shared = &*self.shared;
        let overdue = || {
            let since = shared.want_p_since.load(Relaxed);
            since != 0 && now_ns().saturating_sub(since) >= M_SLICE.as_nanos() as u64
        };
        if !overdue() {
            return false;
        }
        let mut s = lock(&shared.sched);
        // Again under the lock, which `since` is written under: another M
        // may have served that waiter a moment ago, and a new one queued.
        if !overdue() {
            return false;
        }
        self.stop_spinning();
        self.p.set(None);
        self.m.pless.store(true, Relaxed);
        // Serves the first waiter (the list is not empty).
        shared.pidleput(&mut s, pi);
        true
    }

    /// "Hand-off to the readied goroutine's M": our last poll readied
    /// goroutine `g` homed on M `m` and then ended its chain (it parked or
    /// finished, and nothing waits in our `next`). On one P, Go would run
    /// `g` next in the time slice it inherits (`runnext`); the thread rule
    /// keeps it on `m`, so if `m` waits for a P, it gets ours, and `g` runs
    /// first there (`promote`), inheriting the slice. We then queue for a P
    /// ourselves if we have homed work (the caller's loop). True if handed.
    ///
    /// Without it, a goroutine pair split across two Ms by a retake (each
    /// message a cross-M ready) got one exchange per slice of whatever else
    /// the readier's M ran: the waiter got the P only after `M_SLICE`, at
    /// the readier's next schedule, and then ran behind its own M's queue.
    fn hand_off_to_readied(
        &self,
        pi: usize,
        m: ptr::NonNull<Machine>,
        g: ptr::NonNull<super::task::Header>,
    ) -> bool {
        if self.has_homed_next() || self.shared.idle_ps() != 0 {
            // Something of ours runs next with the slice; or a P is idle,
            // which the readied M takes itself.
            return false;
        }
        if self.proc(pi).slice_expired.load(Relaxed) {
            // The chain has held the P for a whole slice (sysmon marked
            // it expired): it ends here, as Go's `runnext` chain ends when
            // sysmon preempts. Our queues run next, and `g` waits its
            // turn on its own M, behind what its M had queued first (it
            // gets the P when we run out of work, or "Ms take turns").
            // Without this stop, a pair split across two Ms that share
            // one P passed it back and forth for good, and a goroutine
            // waiting in either M's inbox never ran (`tests/sysmon.rs`,
            // `split_pairs_share_one_p`: the hog pair's count 0 in 1 to
            // 2 tries of 10).
            return false;
        }
        // SAFETY: every M of this runtime stays in `Shared::machines` (an
        // `Arc`) for the runtime's life, and we are one of its Ms.
        let target = unsafe { m.as_ref() };
        if !target.pless.load(Relaxed) {
            return false; // it holds a P (`g` runs at its next schedule), or polls
        }
        // It is on its way to a list (our push woke it, or it just gave up
        // its P): wait for it there a moment — the alternative is to run
        // our own next goroutine, a whole time slice perhaps, first.
        // (loom: one look; the models have no stackful goroutines to home.)
        #[cfg(not(loom))]
        let until = now_ns() + HANDOFF_WAIT.as_nanos() as u64;
        #[cfg(loom)]
        let until = 0;
        loop {
            match self.hand_to_listed(pi, m, g) {
                Some(handed) => return handed,
                None if !target.pless.load(Relaxed) || now_ns() >= until => return false,
                // Let it run: on a busy machine it may wait for our core.
                None => std::thread::yield_now(),
            }
        }
    }

    /// `hand_off_to_readied`'s step: hand our P `pi` to the M at `m` if it
    /// is on the want-P list, the idle list, or the timer sleeper, with `g`
    /// at its inbox's front. `None` if it is none of those yet; `Some(false)`
    /// if `g` is not in its inbox (it took it already).
    fn hand_to_listed(
        &self,
        pi: usize,
        m: ptr::NonNull<Machine>,
        g: ptr::NonNull<super::task::Header>,
    ) -> Option<bool> {
        let shared = &*self.shared;
        {
            let mut s = lock(&shared.sched);
            // It waits for a P on the want-P list, or parks on the idle list
            // (woken by our push, it would move to the want-P list itself).
            let found = match shared.want_p_find(&s, m.as_ptr()) {
                Some(t) => Some((t, true)),
                None => shared.idle_m_find(&s, m.as_ptr()).map(|t| (t, false)),
            };
            if let Some((t, wants_p)) = found {
                // Under the scheduler lock it stays on its list (only a P
                // handed through the list takes it off): it is not running
                // `g`, nor taking it out of its inbox.
                if !t.promote(g) {
                    return Some(false);
                }
                if wants_p {
                    shared.want_p_remove(&mut s, &t);
                } else {
                    shared.leave_idle_ms(&mut s, &t);
                }
                self.give_p(pi, &t);
                return Some(true);
            }
        }
        // Or it is the timer sleeper, which no list holds. While it is
        // registered (under the sleeper lock, held until it has the P) it
        // has not yet looked for a P, and the first thing it does when it
        // stops sleeping is take one handed to it (`find_runnable`, P-less).
        // It stays registered after a hand-off until it wakes: an empty
        // `nextp` (read under the lock every such hand-off takes) says
        // nobody handed it one yet.
        let sl = lock(&shared.sleeper);
        match &*sl {
            Some(t) if ptr::eq(Arc::as_ptr(t), m.as_ptr()) && !t.has_nextp() => {
                if !t.promote(g) {
                    return Some(false);
                }
                self.give_p(pi, t);
                Some(true)
            }
            _ => None, // on its way to a list, or it took a P
        }
    }

    /// Pass our P `pi` (RUNNING, ours) to `target`, an M no list holds any
    /// more (caller holds the lock that kept it there), as `pidleput` passes
    /// a P to a waiter.
    fn give_p(&self, pi: usize, target: &Arc<Machine>) {
        self.stop_spinning();
        self.p.set(None);
        // Before the target runs: it may ready one of ours at once and look
        // for us (our thread may not run again for a while).
        self.m.pless.store(true, Relaxed);
        self.proc(pi).set_owner(target);
        target.start(pi, false);
    }

    /// Whether `next` holds a task (it is a `Cell`: look by moving it out
    /// and back).
    fn has_homed_next(&self) -> bool {
        let next = self.next.take();
        let some = next.is_some();
        self.next.set(next);
        some
    }

    /// P-less with homed goroutines to run: take an idle P, or join the want-P
    /// list and wait until an M hands us its P (`Shared::pidleput`).
    pub(super) fn wait_for_p(&self) {
        let shared = &*self.shared;
        {
            let mut s = lock(&shared.sched);
            if let Some(p) = shared.pidleget(&mut s) {
                self.p.set(Some(p));
                return;
            }
            if shared.shutdown.load(Acquire) {
                return;
            }
            shared.want_p_push(&mut s, self.m.clone());
        }
        self.wait_for_nextp();
    }

    /// Whether a homed task waits for this M. Every park loop checks it before
    /// it parks (the wake of a push is only a token).
    pub(super) fn has_homed_work(&self) -> bool {
        self.has_homed_next() || !self.localq.borrow().is_empty() || self.m.has_inbox()
    }

    /// The next homed task of the local queue, behind which the inbox is
    /// appended whenever it has something (so a goroutine that keeps yielding
    /// back onto `localq` cannot starve the inbox).
    fn homed_pop(&self) -> Option<Task> {
        let mut q = self.localq.borrow_mut();
        if self.m.has_inbox() {
            self.m.drain_inbox_into(&mut q);
        }
        q.pop_front()
    }

    /// The next homed task: `next` (inheriting the slice), else the local
    /// queue with the inbox appended.
    pub(super) fn take_homed(&self) -> Option<(Task, bool)> {
        if let Some(t) = self.next.take() {
            return Some((t, true));
        }
        if let Some(t) = self.m.take_handed() {
            return Some((t, true));
        }
        self.homed_pop().map(|t| (t, false))
    }

    /// Ready a task homed on this M, from this M's thread (`Shared::ready`).
    /// A netpoll batch (`Shared::inject`) goes to the local queue's tail, in
    /// order, instead.
    pub(super) fn ready_homed_here(&self, task: Task) {
        // (`inject` runs in scheduler code, never inside a poll, where our
        // P may have been retaken.)
        if let Some(p) = self
            .p
            .get()
            .map(|pi| &self.shared.procs[pi])
            .filter(|p| !self.in_poll.get() && p.injecting())
        {
            self.localq.borrow_mut().push_back(task);
            p.count_injected();
            return;
        }
        if let Some(old) = self.next.replace(Some(task)) {
            self.localq.borrow_mut().push_back(old);
        }
    }

    /// This M readied `g` into the inbox of `m`, another M of ours. If the
    /// current poll did it: the hand-off candidate (the last one wins, as in
    /// Go's `runnext`); not from inside an in-place syscall (the P is not
    /// ours to give then). And `m` is watched for not draining ("A
    /// preempted home", `pushed_to`).
    pub(super) fn readied_elsewhere(&self, m: &Machine, g: ptr::NonNull<super::task::Header>) {
        if (self.in_poll.get() && !self.in_syscall.get()) || self.in_top_timers.get() {
            self.handoff.set(Some((ptr::NonNull::from(m), g)));
        }
        #[cfg(not(loom))]
        self.pushed_to(m);
    }

    /// Exit at shutdown: cancel the goroutines homed on this M here, on their
    /// own thread — runnable ones (next, local queue, inbox) and parked ones
    /// (the owned list) — so that their stacks unwind on the thread they ran
    /// on ("The thread rule"). A goroutine homed here and woken later is
    /// complete already; an unstarted one adopted later has no frames, so
    /// teardown may cancel it on any thread.
    fn cancel_homed(&self) {
        let mut mine: Vec<Task> = self.next.take().into_iter().collect();
        mine.extend(self.localq.borrow_mut().drain(..));
        {
            let mut inbox = lock(&self.m.inbox);
            mine.extend(inbox.tasks.drain(..));
            self.m.inbox_len.store(0, SeqCst);
        }
        // Parked ones: only this M may run them, so nobody holds RUNNING.
        mine.extend(self.shared.owned.take_where(|h| h.is_homed_on(&self.m)));
        for t in mine {
            t.shutdown();
        }
    }

    /// Become the timer sleeper and park until the earliest timer. False if
    /// another M already is the sleeper.
    fn try_sleep_on_timers(&self) -> bool {
        let shared = &*self.shared;
        // With sockets registered, the sleeper waits in the netpoller —
        // once every P is idle. While another P runs, its M polls at its
        // schedule (step 5) and sysmon every 10 ms; a sleeper blocked in
        // epoll meanwhile would take the events one at a time, each a
        // thread wake-up (W12: 175k epoll_waits and 62k context switches
        // for 200k messages, against tokio's 4k and 2k).
        #[cfg(not(loom))]
        let via_poller = shared.netpoll.active() && shared.all_ps_idle();
        {
            let mut sl = lock(&shared.sleeper);
            if let Some(_m) = &*sl {
                // Another M sleeps. If it waits on its parker (it went to
                // sleep before any socket existed) while sockets now need a
                // poller, send it back round to wait in the poller.
                #[cfg(not(loom))]
                if via_poller && !_m.in_netpoll.load(SeqCst) {
                    _m.wake();
                }
                return false;
            }
            *sl = Some(self.m.clone());
            // Before `sleeper_until`: from here on a `timer_added` (which
            // reads `sleeper_until`) wakes the poller too (`Machine::wake`).
            #[cfg(not(loom))]
            self.m.in_netpoll.store(via_poller, SeqCst);
            shared.sleeper_until.store(NEVER, SeqCst);
        }
        let mut next = shared.next_timer();
        loop {
            shared.sleeper_until.store(next.max(1), SeqCst);
            let again = shared.next_timer();
            if again >= next {
                break;
            }
            next = again;
        }
        let now = now_ns();
        #[cfg(not(loom))]
        let waited_virtually = self.virtual_wait(next, via_poller);
        #[cfg(loom)]
        let waited_virtually = false;
        if !waited_virtually
            && next > now
            && !shared.shutdown.load(Acquire)
            && !self.has_homed_work()
        {
            #[cfg(not(loom))]
            if via_poller && next - now >= POLLER_MIN_SLEEP_NS {
                // Until the next timer (forever if none), or a wake.
                let timeout = (next != NEVER).then(|| Duration::from_nanos(next - now));
                if let Some(ready) = shared.netpoll.poll(timeout, now_ns) {
                    shared.inject(ready, None);
                }
            } else {
                // (The poller's timeouts are whole milliseconds: a sooner
                // timer is slept for on the parker, which `Machine::wake`
                // wakes as well; the network waits that long at most.)
                self.m.parker.wait_timeout(Duration::from_nanos(next - now));
            }
            #[cfg(loom)]
            self.m.parker.wait_timeout(Duration::from_nanos(next - now));
        }
        {
            let mut sl = lock(&shared.sleeper);
            shared.sleeper_until.store(0, SeqCst);
            *sl = None;
            #[cfg(not(loom))]
            self.m.in_netpoll.store(false, SeqCst);
            // A `timer_added` may have woken us after we stopped waiting; now that
            // we are unregistered (under the lock it wakes us under) nobody owes us
            // a wake, so drop that stale token: it must not cut short our next
            // park on the idle list.
            self.m.parker.reset();
        }
        true
    }

    /// The timer sleeper of a virtual-time runtime (`vtime.rs`, "When it
    /// moves"): wait while anything runs, take socket events the kernel
    /// has, else move the clock to the earliest timer `next`; report a
    /// stall when nothing can move. False: not a virtual runtime (sleep
    /// as usual).
    #[cfg(not(loom))]
    fn virtual_wait(&self, next: u64, via_poller: bool) -> bool {
        let shared = &*self.shared;
        let Some(vc) = &shared.virtual_clock else {
            return false;
        };
        if shared.shutdown.load(Acquire) || self.has_homed_work() {
            return true;
        }
        if !self.virtually_quiescent() {
            // Until the last P goes idle (`pidleput` wakes us), or a call in
            // flight ends (nobody wakes us for that: look again soon).
            vc.progressed();
            self.wait_real(via_poller, super::vtime::RECHECK);
            return true;
        }
        if shared.netpoll.active() {
            if let Some(ready) = shared.netpoll.poll(Some(Duration::ZERO), now_ns) {
                if !ready.is_empty() {
                    vc.progressed();
                    shared.inject(ready, None);
                    return true;
                }
            }
        }
        if next != NEVER {
            vc.advance_to(next);
            return true;
        }
        // Nothing in the runtime can move; a socket or a plain thread may.
        if vc.stalled(now_ns(), shared.virtual_polls()) {
            vc.report_stall(shared.stall_report());
        }
        self.wait_real(via_poller, super::vtime::RECHECK * 10);
        true
    }

    /// Every P idle, nothing queued anywhere, no call in flight: only a
    /// timer, a socket or a plain thread can wake anyone. The conditions
    /// are read one by one, without a lock; work moves between "a P held"
    /// and "counted busy" hand over hand (a syscall counts itself while its
    /// goroutine holds the P, and stops counting only once it has a P
    /// again or parked), so the count is read before and after the Ps:
    /// busy → P is caught by the first read, P → busy by the second.
    #[cfg(not(loom))]
    fn virtually_quiescent(&self) -> bool {
        let shared = &*self.shared;
        let Some(vc) = &shared.virtual_clock else {
            return false;
        };
        vc.busy.load(SeqCst) == 0
            && shared.all_ps_idle()
            && shared.global_len() == 0
            && shared.blocking.all_idle().is_some()
            && !lock(&shared.machines).iter().any(|m| m.has_inbox())
            && vc.busy.load(SeqCst) == 0
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

    /// Wait for real time `d` at most, in the poller if we registered as
    /// waiting there, else on our parker (both woken by `Machine::wake`).
    #[cfg(not(loom))]
    fn wait_real(&self, via_poller: bool, d: Duration) {
        let shared = &*self.shared;
        if via_poller {
            if let Some(ready) = shared.netpoll.poll(Some(d), now_ns) {
                shared.inject(ready, None);
            }
        } else {
            self.m.parker.wait_timeout(d);
        }
    }
}
