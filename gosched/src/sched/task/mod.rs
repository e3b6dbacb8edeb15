//! Tasks: one heap allocation per G holding the header (state word, vtable,
//! owned-list links, join waker), the scheduler handle and the stage (the future,
//! then its output).
//!
//! A task reaches its scheduler only through the `Schedule` trait (tokio's
//! pattern): the runtime's `Arc<Shared>` implements it, and this module's tests
//! run tasks on a plain queue, without a runtime.
//!
//! References (see `state.rs` for the bits): a new task starts with two — the
//! run-queue entry (`Task`) and the `JoinHandle`. Wakers hold one each. The first
//! time a poll returns `Pending`, the task is linked into the runtime's owned-task
//! list (which lets shutdown find parked tasks, like Go's `allgs`), which then
//! holds a reference until the task completes. A task that finishes in its first
//! poll — most short goroutines — never touches that list; before its first park
//! a task is always in a run queue or running, where shutdown finds it too.
//!
//! Who touches what:
//! - the stage: only the thread that set RUNNING (poll, cancel, store output), or
//!   after COMPLETE the owner of the output (JoinHandle, or the completer when no
//!   JoinHandle is interested);
//! - the join waker slot: per the JOIN_WAKER rule in `state.rs`;
//! - the owned links: only under the owned-list shard lock; `owned_linked` by the
//!   thread holding RUNNING, or by shutdown under the shard lock (teardown).

use std::alloc::Layout;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

mod join;
pub(crate) mod state;
#[cfg(test)]
mod tests;

pub use join::{JoinError, JoinHandle};

use super::alloc;
use super::machine::Machine;
use crate::loom::cell::UnsafeCell;
use state::{Idle, Notify, Run, State};

/// What a task needs from the scheduler that runs it (tokio's `Schedule`).
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// Queue a task whose state just became NOTIFIED (a wake-up or `abort`);
    /// `task` is the new run-queue reference.
    fn ready(&self, task: Task);
    /// The task parks for the first time: keep the reference in `task` so that
    /// shutdown can find it (Go's `allgs`). `Err` gives it back: the scheduler is
    /// shut down, and the caller cancels the task.
    ///
    /// On `Ok` the implementation sets the header's `owned_linked` flag (under
    /// the lock that guards its list; the caller holds RUNNING, which also covers
    /// the flag): `poll` binds only while it is clear, and `complete` calls
    /// `unbind` only while it is set. An implementation that takes a bound task
    /// back out (shutdown) clears it, or else its `unbind` returns false.
    fn bind(&self, task: Task) -> Result<(), Task>;
    /// The task completed: forget it. True if it was bound and the scheduler's
    /// reference now belongs to the caller; false if it was never bound, or
    /// shutdown already took it (and passed the reference to the completer).
    fn unbind(&self, task: NonNull<Header>) -> bool;
    /// Count a completion (for `num_goroutine`), and forget what the
    /// scheduler kept about the task (its name, for a named goroutine).
    fn completed(&self, header: &Header);
}

/// Identifies a goroutine or task within its runtime (Go's goid): what
/// [`JoinHandle::id`](crate::JoinHandle::id) returns and the goroutine dump
/// prints. Ids are unique among one runtime's tasks, not across runtimes.
///
/// ```
/// let a = gosched::go(|| ());
/// let b = gosched::go(|| ());
/// let (ia, ib): (gosched::TaskId, gosched::TaskId) = (a.id(), b.id());
/// assert_ne!(ia, ib);
/// a.join().unwrap();
/// b.join().unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub(crate) u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Field order is fixed (`repr(C)`) so that what every poll and wake
/// touches — the state word, the vtable, the wait word — shares the cell's
/// first cache line with the scheduler handle (`Cell`); the rest is read at
/// spawn, first run, park and completion.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) state: State,
    vtable: &'static Vtable,
    /// Why and since when the task last parked (`sched/wait.rs`): cleared as
    /// each poll begins, set by a gosched future that returns `Pending`,
    /// read by dumps. A statistic: std atomic, outside loom's model.
    pub(crate) wait: std::sync::atomic::AtomicU64,
    pub(crate) id: u64,
    /// Owned-list links, guarded by the owned-list shard lock.
    pub(crate) owned_prev: UnsafeCell<Option<NonNull<Header>>>,
    pub(crate) owned_next: UnsafeCell<Option<NonNull<Header>>>,
    join_waker: UnsafeCell<Option<Waker>>,
    /// Where it was spawned: for the goroutine dump (`sched/wait.rs`).
    pub(crate) site: &'static std::panic::Location<'static>,
    /// The M this goroutine is locked to (`lock_os_thread`, `sched/lockos.rs`),
    /// if it holds the lock; `None` for async tasks and unlocked goroutines.
    /// Written only by the goroutine's own poll (lock and unlock); read by
    /// that poll, and by the M that takes the task off a run queue to run it
    /// (`startlockedm`): a read after a poll, so the write happens-before it
    /// through the state word (the poll's `transition_to_idle` and the
    /// waker's transition, or the poll's return to its M for `Notified`).
    lockedm: UnsafeCell<Option<Arc<Machine>>>,
    // The byte-sized fields last, together: scattered between the words
    // they padded the header from 96 to 104 bytes.
    pub(crate) owned_linked: UnsafeCell<bool>,
    /// A goroutine (not an async task). Fixed at spawn.
    pub(crate) goroutine: bool,
    /// A named goroutine: its name is in the scheduler's name table
    /// (`Shared::names`) until it completes. Fixed at spawn.
    pub(crate) named: bool,
}

impl Header {
    /// Lock the goroutine to `m` (`Some`) or unlock it (`None`), from its
    /// own poll.
    ///
    /// # Safety
    /// The caller is the task's running poll. Nobody else reads `lockedm`
    /// while the task runs (a wake during the poll only sets NOTIFIED), and
    /// the poll's end orders this write before any later dequeue.
    pub(crate) unsafe fn set_lockedm(&self, m: Option<Arc<Machine>>) {
        // SAFETY: the caller's contract.
        self.lockedm.with_mut(|h| unsafe { *h = m });
    }
}

struct Vtable {
    poll: unsafe fn(NonNull<Header>) -> Outcome,
    schedule: unsafe fn(NonNull<Header>),
    cancel: unsafe fn(NonNull<Header>),
    try_read_output: unsafe fn(NonNull<Header>, *mut (), &Waker),
    drop_output: unsafe fn(NonNull<Header>),
    dealloc: unsafe fn(NonNull<Header>),
}

/// One task's allocation. The task pointer (`NonNull<Header>`) points at
/// `header`, not at the cell: the scheduler handle comes first so that it shares
/// the first cache line (blocks are 64-byte aligned, `alloc.rs`) with the state
/// word and the vtable — a wake from another thread touches that line only.
#[repr(C)]
struct Cell<F: Future, S> {
    scheduler: S,
    header: Header,
    stage: UnsafeCell<Stage<F>>,
}

impl<F: Future, S> Cell<F, S> {
    const HEADER_OFFSET: usize = std::mem::offset_of!(Cell<F, S>, header);

    /// The cell of the task whose header is at `ptr`.
    fn from_header(ptr: NonNull<Header>) -> NonNull<Cell<F, S>> {
        // SAFETY: every `NonNull<Header>` of a task points `HEADER_OFFSET` bytes
        // into its `Cell<F, S>` allocation (`new_task`), so stepping back stays
        // inside it.
        unsafe { ptr.byte_sub(Self::HEADER_OFFSET) }.cast()
    }
}

enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// What the run of a task left for the scheduler to do (the harness tests'
/// view of `Ran`).
#[cfg(test)]
#[must_use = "a notified task must be queued again"]
pub(crate) enum Polled {
    /// Completed or parked; the run-queue reference is already released.
    Done,
    /// Woken while it ran: the scheduler must queue it again (this is the same
    /// run-queue reference).
    Notified(Task),
}

/// What the run of a task left, in more detail (the timeline, `crate::trace`).
#[must_use = "a notified task must be queued again"]
pub(crate) enum Ran {
    /// Parked, for this wait reason (`sched/wait.rs`); the run-queue reference
    /// is released.
    Parked(u8),
    /// Completed, panicked or cancelled; the reference is released.
    Finished,
    /// As `Polled::Notified`.
    Notified(Task),
}

/// The vtable's `poll` result: whether the run-queue reference was kept.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Parked (the wait reason the poll noted).
    Parked(u8),
    Finished,
    Notified,
}

/// An owned run-queue reference to a task (Go: a runnable G in a queue).
pub(crate) struct Task(NonNull<Header>);

// SAFETY: tasks are only created from `Send` futures, and all shared state in the
// header is atomics or guarded by the protocol in `state.rs`.
unsafe impl Send for Task {}

impl Task {
    pub(crate) fn into_raw(self) -> NonNull<Header> {
        ManuallyDrop::new(self).0
    }

    /// # Safety
    /// `ptr` must come from `Task::into_raw` (it carries one reference).
    pub(crate) unsafe fn from_raw(ptr: NonNull<Header>) -> Task {
        Task(ptr)
    }

    /// The M this goroutine is locked to (`lock_os_thread`), if any: only
    /// that M may run it.
    #[inline]
    pub(crate) fn lockedm(&self) -> Option<&Arc<Machine>> {
        // SAFETY: we hold the run-queue reference, so the task is not
        // running: its last write of `lockedm` (its own poll) happened-before
        // (see `Header::lockedm`), and nobody writes it until we run it.
        self.header().lockedm.with(|h| unsafe { (*h).as_ref() })
    }

    /// The task pointer, without giving up the reference.
    pub(crate) fn raw(&self) -> NonNull<Header> {
        self.0
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the reference we own keeps the allocation alive.
        unsafe { self.0.as_ref() }
    }

    /// Run the task once (poll, or cancel if aborted). Consumes this reference,
    /// or hands it back inside `Polled::Notified`.
    #[cfg(test)]
    pub(crate) fn run(self) -> Polled {
        match self.run_detailed() {
            Ran::Parked(_) | Ran::Finished => Polled::Done,
            Ran::Notified(t) => Polled::Notified(t),
        }
    }

    /// `run`, saying how a run that released the reference ended.
    pub(crate) fn run_detailed(self) -> Ran {
        let ptr = self.into_raw();
        // SAFETY: we own a run-queue reference; the task was NOTIFIED.
        match unsafe { (ptr.as_ref().vtable.poll)(ptr) } {
            Outcome::Parked(reason) => Ran::Parked(reason),
            Outcome::Finished => Ran::Finished,
            // SAFETY: the reference was kept by `poll` for resubmission.
            Outcome::Notified => Ran::Notified(unsafe { Task::from_raw(ptr) }),
        }
    }

    /// Runtime shutdown: cancel the task if nobody is running it. Consumes the
    /// reference. The task may still be NOTIFIED in a run queue: that is sound
    /// because shutdown only runs where nobody will schedule the task any more
    /// (teardown after every M exited, a push into the closed global queue, or
    /// an exiting locked M cancelling the goroutine handed to it, which no
    /// other M may run), so the queue entry is only ever dropped, never run.
    pub(crate) fn shutdown(self) {
        let ptr = self.into_raw();
        // SAFETY: we own a reference.
        let h = unsafe { ptr.as_ref() };
        if h.state.transition_to_shutdown() {
            // SAFETY: we hold RUNNING now; `cancel` completes the task, which
            // consumes our reference (the owned list's, already unlinked).
            unsafe { (h.vtable.cancel)(ptr) };
        } else {
            // Running or complete: its runner finishes it; release our reference.
            // SAFETY: we own one reference.
            unsafe { drop_ref(ptr) };
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { drop_ref(self.0) }
    }
}

/// Release one reference; free the task when it was the last.
///
/// # Safety
/// The caller owns one reference to `ptr` and does not use it afterwards.
pub(crate) unsafe fn drop_ref(ptr: NonNull<Header>) {
    // SAFETY: the reference keeps the header alive until the decrement.
    let h = unsafe { ptr.as_ref() };
    if h.state.ref_dec() {
        // SAFETY: last reference: nobody else can reach the task.
        unsafe { (h.vtable.dealloc)(ptr) }
    }
}

/// What a spawn says about the task it makes.
#[derive(Clone, Copy)]
pub(crate) struct SpawnInfo {
    /// A goroutine, not an async task.
    pub(crate) goroutine: bool,
    /// The user's call to `go` / `spawn` (`#[track_caller]`).
    pub(crate) site: &'static std::panic::Location<'static>,
    /// Named (`Go::name`): the spawner put the name in `Shared::names`.
    pub(crate) named: bool,
}

impl SpawnInfo {
    /// An async task spawned at `site`.
    pub(crate) fn task(site: &'static std::panic::Location<'static>) -> Self {
        SpawnInfo {
            goroutine: false,
            site,
            named: false,
        }
    }
}

/// Allocate a task for `future`. Returns the run-queue reference and the join
/// handle.
pub(crate) fn new_task<F, S>(
    future: F,
    id: u64,
    info: SpawnInfo,
    scheduler: S,
) -> (Task, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let cell = Cell {
        header: Header {
            state: State::new(),
            vtable: vtable::<F, S>(),
            id,
            owned_prev: UnsafeCell::new(None),
            owned_next: UnsafeCell::new(None),
            owned_linked: UnsafeCell::new(false),
            join_waker: UnsafeCell::new(None),
            goroutine: info.goroutine,
            named: info.named,
            site: info.site,
            wait: std::sync::atomic::AtomicU64::new(0),
            lockedm: UnsafeCell::new(None),
        },
        scheduler,
        stage: UnsafeCell::new(Stage::Running(future)),
    };
    let mem = alloc::alloc_task(Layout::new::<Cell<F, S>>()).cast::<Cell<F, S>>();
    // SAFETY: fresh memory with `Cell<F, S>`'s layout.
    unsafe { mem.as_ptr().write(cell) };
    // SAFETY: in bounds of the allocation just written; derived from `mem`, so it
    // keeps the whole allocation's provenance (`from_header` steps back).
    let ptr = unsafe { mem.byte_add(Cell::<F, S>::HEADER_OFFSET) }.cast::<Header>();
    (Task(ptr), JoinHandle::new(ptr))
}

fn vtable<F, S>() -> &'static Vtable
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    &Vtable {
        poll: poll::<F, S>,
        schedule: schedule::<F, S>,
        cancel: cancel::<F, S>,
        try_read_output: try_read_output::<F, S>,
        drop_output: drop_output::<F, S>,
        dealloc: dealloc::<F, S>,
    }
}

/// # Safety
/// `ptr` points to a live `Cell<F, S>`.
unsafe fn cell<'a, F: Future, S>(ptr: NonNull<Header>) -> &'a Cell<F, S> {
    // SAFETY: the caller guarantees the type; the task is alive.
    unsafe { Cell::<F, S>::from_header(ptr).as_ref() }
}

/// Hand a task that was just notified to its scheduler.
///
/// # Safety
/// `ptr` is a live `Cell<F, S>` and the caller passes on one run-queue reference
/// (the one `transition_to_notified_*` added).
unsafe fn schedule<F: Future, S: Schedule>(ptr: NonNull<Header>) {
    // SAFETY: the caller guarantees the type; the reference keeps it alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    cell.scheduler.ready(Task(ptr));
}

unsafe fn poll<F: Future, S: Schedule>(ptr: NonNull<Header>) -> Outcome {
    // SAFETY: the vtable was built for this `F`; the run-queue reference keeps it alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    match cell.header.state.transition_to_running() {
        Run::Poll => {}
        Run::Cancel => {
            // SAFETY: RUNNING is ours.
            unsafe { cancel::<F, S>(ptr) };
            return Outcome::Finished;
        }
    }
    // No wait reason until a gosched future of this poll notes one
    // (`sched/wait.rs`): a plain store to a line the CAS above just took.
    cell.header
        .wait
        .store(0, std::sync::atomic::Ordering::Relaxed);
    // A waker borrowed for the poll: it does not own a reference (the run-queue
    // reference we hold outlives the poll); `clone` on it takes a real one.
    // SAFETY: `ptr` is a live task for the duration of the poll.
    let waker = ManuallyDrop::new(unsafe { Waker::from_raw(raw_waker(ptr)) });
    let mut cx = Context::from_waker(&waker);
    let res = catch_unwind(AssertUnwindSafe(|| {
        cell.stage.with_mut(|stage| {
            // SAFETY: RUNNING gives exclusive access to the stage; the future is
            // never moved out while `Running` (it lives in the heap cell).
            match unsafe { &mut *stage } {
                // SAFETY: pinned in the heap cell (see above).
                Stage::Running(fut) => unsafe { Pin::new_unchecked(fut) }.poll(&mut cx),
                _ => unreachable!("polled a finished task"),
            }
        })
    }));
    match res {
        Ok(Poll::Pending) => {
            // SAFETY: RUNNING is ours: we may read and set `owned_linked`.
            let linked = cell.header.owned_linked.with(|l| unsafe { *l });
            if !linked {
                // First park: from now on only wakers reach the task, so shutdown
                // must be able to find it. The list takes a reference of its own.
                cell.header.state.ref_inc();
                // SAFETY: we own the new reference; RUNNING lets us set the flag.
                if let Err(refused) = cell.scheduler.bind(unsafe { Task::from_raw(ptr) }) {
                    // The runtime has shut down: release the reference it gave
                    // back, and cancel now.
                    drop(refused);
                    // SAFETY: still RUNNING.
                    unsafe { cancel::<F, S>(ptr) };
                    return Outcome::Finished;
                }
            }
            // Why it parks, read while the header is surely alive (after
            // `drop_ref` it may be gone).
            let reason =
                super::wait::reason_of(cell.header.wait.load(std::sync::atomic::Ordering::Relaxed));
            // A goroutine's `yield_now` recorded itself in the M's context
            // instead of waking its task (`coro::yield_goroutine`); an
            // async task's wakes itself (no thread-local read for its parks).
            let yielded = cell.header.goroutine && super::context::yield_marked();
            match cell.header.state.transition_to_idle(yielded) {
                Idle::Parked => {
                    // SAFETY: the run-queue reference is released here.
                    unsafe { drop_ref(ptr) };
                    Outcome::Parked(reason)
                }
                Idle::Notified => Outcome::Notified,
                Idle::Cancel => {
                    // SAFETY: still RUNNING.
                    unsafe { cancel::<F, S>(ptr) };
                    Outcome::Finished
                }
            }
        }
        Ok(Poll::Ready(out)) => {
            // SAFETY: RUNNING is ours.
            unsafe { complete::<F, S>(ptr, Ok(out)) };
            Outcome::Finished
        }
        Err(payload) => {
            let err = JoinError::panic(cell.header.id, payload);
            // SAFETY: RUNNING is ours.
            unsafe { complete::<F, S>(ptr, Err(err)) };
            Outcome::Finished
        }
    }
}

/// Drop the future and complete with `Cancelled`. The caller holds RUNNING and
/// one reference (run-queue, or on shutdown the owned list's or a queue's),
/// which this consumes through `complete`.
unsafe fn cancel<F: Future, S: Schedule>(ptr: NonNull<Header>) {
    // SAFETY: caller guarantees the type and RUNNING.
    let cell = unsafe { cell::<F, S>(ptr) };
    let id = cell.header.id;
    // Dropping a future runs user code (for a goroutine: unwinding its stack).
    let err = match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: RUNNING gives exclusive access to the stage.
        cell.stage.with_mut(|s| unsafe { *s = Stage::Consumed })
    })) {
        Ok(()) => JoinError::cancelled(id),
        Err(p) => JoinError::panic(id, p),
    };
    // SAFETY: RUNNING is ours.
    unsafe { complete::<F, S>(ptr, Err(err)) };
}

/// Store the output, publish COMPLETE, wake the joiner, leave the owned list and
/// release the run-queue reference.
unsafe fn complete<F: Future, S: Schedule>(
    ptr: NonNull<Header>,
    out: Result<F::Output, JoinError>,
) {
    // SAFETY: caller guarantees the type.
    let cell = unsafe { cell::<F, S>(ptr) };
    // Storing drops the future first (if still there), which may run user code.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: RUNNING gives exclusive access to the stage.
        cell.stage
            .with_mut(|s| unsafe { *s = Stage::Finished(out) })
    }));
    // A goroutine that ended (or was cancelled) holding `lock_os_thread`
    // lets go of its M.
    // SAFETY: RUNNING: `lockedm` is ours to write (see `Header::lockedm`).
    drop(cell.header.lockedm.with_mut(|h| unsafe { (*h).take() }));
    // Counted before COMPLETE is published: once a join returns, the task no
    // longer counts in `num_goroutine`.
    cell.scheduler.completed(&cell.header);
    let snapshot = cell.header.state.transition_to_complete();
    if !snapshot.is_join_interested() {
        // Nobody will read the output: drop it here.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: with no JoinHandle, the completer owns the output.
            cell.stage.with_mut(|s| unsafe { *s = Stage::Consumed })
        }));
    } else if snapshot.has_join_waker() {
        cell.header.join_waker.with(|w| {
            // SAFETY: JOIN_WAKER was set when COMPLETE was published, so the
            // JoinHandle no longer writes the slot.
            if let Some(w) = unsafe { &*w } {
                super::fault::guarded("a task completed and woke its JoinHandle", || {
                    w.wake_by_ref()
                });
            }
        });
    }
    // SAFETY: RUNNING was ours until COMPLETE; only this thread touches the flag
    // now (shutdown clears it under the shard lock when it unlinks a task, and
    // then it is the one completing it).
    let linked = cell.header.owned_linked.with(|l| unsafe { *l });
    if linked && cell.scheduler.unbind(ptr) {
        // The owned list's reference and the run-queue reference.
        if cell.header.state.ref_dec_n(2) {
            // SAFETY: that was the last reference.
            unsafe { dealloc::<F, S>(ptr) };
        }
    } else {
        // Never parked, or shutdown unlinked it and passed us the list's
        // reference: release one.
        // SAFETY: we own one reference.
        unsafe { drop_ref(ptr) };
    }
}

unsafe fn try_read_output<F: Future, S>(ptr: NonNull<Header>, dst: *mut (), waker: &Waker) {
    // SAFETY: caller guarantees the type; the JoinHandle's reference keeps it alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    if !can_read_output(&cell.header, waker) {
        return;
    }
    let out = cell.stage.with_mut(|s| {
        // SAFETY: COMPLETE is set and JOIN_INTEREST is ours: the output is ours.
        match std::mem::replace(unsafe { &mut *s }, Stage::Consumed) {
            Stage::Finished(out) => out,
            _ => panic!("JoinHandle polled after it returned Ready"),
        }
    });
    // SAFETY: `dst` is a `*mut Poll<Result<F::Output, JoinError>>` from JoinHandle::poll.
    unsafe { *(dst as *mut Poll<Result<F::Output, JoinError>>) = Poll::Ready(out) };
}

fn can_read_output(h: &Header, waker: &Waker) -> bool {
    let s = h.state.load();
    if s.is_complete() {
        return true;
    }
    let res = if !s.has_join_waker() {
        set_join_waker(h, waker)
    } else {
        // SAFETY: JOIN_WAKER set and not COMPLETE: the slot is stable; reading it
        // is allowed (the completer only reads it too).
        let same = h
            .join_waker
            .with(|w| unsafe { &*w }.as_ref().is_some_and(|w| w.will_wake(waker)));
        if same {
            return false;
        }
        h.state
            .unset_join_waker()
            .and_then(|()| set_join_waker(h, waker))
    };
    match res {
        Ok(()) => false,
        Err(s) => {
            debug_assert!(s.is_complete());
            true
        }
    }
}

fn set_join_waker(h: &Header, waker: &Waker) -> Result<(), state::Snapshot> {
    // SAFETY: JOIN_WAKER is clear: the JoinHandle owns the slot.
    h.join_waker
        .with_mut(|w| unsafe { *w = Some(waker.clone()) });
    h.state.set_join_waker()
}

unsafe fn drop_output<F: Future, S>(ptr: NonNull<Header>) {
    // SAFETY: caller guarantees the type.
    let cell = unsafe { cell::<F, S>(ptr) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the JoinHandle saw COMPLETE while dropping its interest: it owns the output.
        cell.stage.with_mut(|s| unsafe { *s = Stage::Consumed })
    }));
}

unsafe fn dealloc<F: Future, S>(ptr: NonNull<Header>) {
    let cell = Cell::<F, S>::from_header(ptr);
    // SAFETY: last reference: we own the cell; it came from `alloc_task` with
    // `Cell<F, S>`'s layout.
    unsafe {
        ptr::drop_in_place(cell.as_ptr());
        alloc::free_task(cell.cast(), Layout::new::<Cell<F, S>>());
    }
}

// ---- Waker ---------------------------------------------------------------

static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

/// The task a waker belongs to, if it is one of ours (the waker the harness
/// lends a poll, or a clone of it): gosched futures note their wait reason
/// there (`sched/wait.rs`).
#[inline]
pub(crate) fn header_of(waker: &Waker) -> Option<&Header> {
    if ptr::eq(waker.vtable(), &WAKER_VTABLE) {
        // SAFETY: a waker with our vtable carries a live task header (it
        // holds a reference, or borrows the poll's run-queue reference),
        // alive at least as long as the waker is borrowed.
        Some(unsafe { &*(waker.data() as *const Header) })
    } else {
        None
    }
}

/// Cancel, from inside its own poll, the task that `cx` belongs to: once the
/// poll returns `Pending` the future is dropped and the task's `JoinHandle`
/// yields a cancellation (as if `abort` had been called). False if `cx` is not
/// one of our tasks' (then nothing happens).
#[cfg(not(loom))]
pub(crate) fn cancel_current(cx: &Context<'_>) -> bool {
    match header_of(cx.waker()) {
        Some(h) => {
            // RUNNING: the transition only marks it; `transition_to_idle` after
            // this poll sees CANCELLED and cancels it.
            let n = h.state.transition_to_notified_and_cancel();
            debug_assert!(
                n == Notify::DoNothing,
                "cancel_current outside the task's poll"
            );
            true
        }
        None => false,
    }
}

fn raw_waker(ptr: NonNull<Header>) -> RawWaker {
    RawWaker::new(ptr.as_ptr() as *const (), &WAKER_VTABLE)
}

unsafe fn waker_clone(p: *const ()) -> RawWaker {
    // SAFETY: a waker's pointer is a live task header.
    unsafe { &*(p as *const Header) }.state.ref_inc();
    // The clone keeps `p` itself, not a pointer re-derived from a `&Header`:
    // that would narrow its provenance to the header, and `from_header` steps
    // back to the whole cell (Miri's Stacked Borrows reported exactly that).
    // SAFETY: `p` is non-null (a live task header).
    raw_waker(unsafe { NonNull::new_unchecked(p as *mut Header) })
}

unsafe fn waker_wake(p: *const ()) {
    // Wake through our reference first (it keeps the task, and so its scheduler,
    // alive during `schedule`), then release it.
    // SAFETY: the waker owns one reference, released once, last.
    unsafe {
        waker_wake_by_ref(p);
        drop_ref(NonNull::new_unchecked(p as *mut Header));
    }
}

unsafe fn waker_wake_by_ref(p: *const ()) {
    // SAFETY: a waker's pointer is a live task header.
    let ptr = unsafe { NonNull::new_unchecked(p as *mut Header) };
    // SAFETY: as above: the caller's reference keeps it alive.
    let h = unsafe { ptr.as_ref() };
    if h.state.transition_to_notified_by_ref() == Notify::Submit {
        // SAFETY: `Submit` gave us a new run-queue reference, passed on here.
        unsafe { (h.vtable.schedule)(ptr) };
    }
}

unsafe fn waker_drop(p: *const ()) {
    // SAFETY: the waker owns one reference.
    unsafe { drop_ref(NonNull::new_unchecked(p as *mut Header)) }
}
