//! Tasks: one heap allocation per G holding the header (state word, vtable,
//! scheduler handle, owned-list links, join waker) and the stage (the future, then
//! its output).
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
//!   thread holding RUNNING, or by shutdown under the shard lock.

use std::alloc::Layout;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use super::alloc;
use super::state::{self, Idle, Notify, Run, State};
use super::Shared;
use crate::loom::cell::UnsafeCell;
use crate::loom::sync::Arc;

/// Identifies a goroutine or task within its runtime (Go's goid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub(crate) u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

pub(crate) struct Header {
    pub(crate) state: State,
    vtable: &'static Vtable,
    pub(crate) id: u64,
    pub(crate) shared: Arc<Shared>,
    /// Owned-list links, guarded by the owned-list shard lock.
    pub(crate) owned_prev: UnsafeCell<Option<NonNull<Header>>>,
    pub(crate) owned_next: UnsafeCell<Option<NonNull<Header>>>,
    pub(crate) owned_linked: UnsafeCell<bool>,
    join_waker: UnsafeCell<Option<Waker>>,
}

struct Vtable {
    poll: unsafe fn(NonNull<Header>) -> Polled,
    cancel: unsafe fn(NonNull<Header>),
    try_read_output: unsafe fn(NonNull<Header>, *mut (), &Waker),
    drop_output: unsafe fn(NonNull<Header>),
    dealloc: unsafe fn(NonNull<Header>),
}

#[repr(C)]
struct Cell<F: Future> {
    header: Header,
    stage: UnsafeCell<Stage<F>>,
}

enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// What the run of a task left for the scheduler to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Completed or parked; the run-queue reference is already released.
    Done,
    /// Woken while it ran: the scheduler must queue it again (the returned `Task`
    /// is the same run-queue reference).
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

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the reference we own keeps the allocation alive.
        unsafe { self.0.as_ref() }
    }

    /// Run the task once (poll, or cancel if aborted). Consumes this reference,
    /// or hands it back inside `Polled::Notified`.
    pub(crate) fn run(self) -> (Polled, Option<Task>) {
        let ptr = self.into_raw();
        // SAFETY: we own a run-queue reference; the task was NOTIFIED.
        let polled = unsafe { (ptr.as_ref().vtable.poll)(ptr) };
        match polled {
            Polled::Done => (Polled::Done, None),
            // SAFETY: the reference was kept by `poll` for resubmission.
            Polled::Notified => (Polled::Notified, Some(unsafe { Task::from_raw(ptr) })),
        }
    }

    /// Runtime shutdown: cancel the task if nobody is running it. Consumes the
    /// reference. The task may still be NOTIFIED in a run queue: that is sound
    /// because shutdown only runs once no M schedules any more (teardown after
    /// every M exited, or a push into the closed global queue), so the queue
    /// entry is only ever dropped, never run.
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

/// Allocate a task for `future`. Returns the run-queue reference and the join
/// handle.
pub(crate) fn new_task<F>(future: F, id: u64, shared: Arc<Shared>) -> (Task, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let cell = Cell {
        header: Header {
            state: State::new(),
            vtable: vtable::<F>(),
            id,
            shared,
            owned_prev: UnsafeCell::new(None),
            owned_next: UnsafeCell::new(None),
            owned_linked: UnsafeCell::new(false),
            join_waker: UnsafeCell::new(None),
        },
        stage: UnsafeCell::new(Stage::Running(future)),
    };
    let mem = alloc::alloc_task(Layout::new::<Cell<F>>()).cast::<Cell<F>>();
    // SAFETY: fresh memory with `Cell<F>`'s layout.
    unsafe { mem.as_ptr().write(cell) };
    let ptr = mem.cast::<Header>();
    (
        Task(ptr),
        JoinHandle {
            raw: ptr,
            _p: PhantomData,
        },
    )
}

fn vtable<F: Future + Send + 'static>() -> &'static Vtable
where
    F::Output: Send + 'static,
{
    &Vtable {
        poll: poll::<F>,
        cancel: cancel::<F>,
        try_read_output: try_read_output::<F>,
        drop_output: drop_output::<F>,
        dealloc: dealloc::<F>,
    }
}

/// # Safety
/// `ptr` points to a live `Cell<F>`.
unsafe fn cell<'a, F: Future>(ptr: NonNull<Header>) -> &'a Cell<F> {
    // SAFETY: `Cell` is repr(C) with the header first; the caller guarantees the type.
    unsafe { ptr.cast::<Cell<F>>().as_ref() }
}

unsafe fn poll<F: Future>(ptr: NonNull<Header>) -> Polled {
    // SAFETY: the vtable was built for this `F`; the run-queue reference keeps it alive.
    let cell = unsafe { cell::<F>(ptr) };
    match cell.header.state.transition_to_running() {
        Run::Poll => {}
        Run::Cancel => {
            // SAFETY: RUNNING is ours.
            unsafe { cancel::<F>(ptr) };
            return Polled::Done;
        }
    }
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
                if cell
                    .header
                    .shared
                    .owned
                    .insert(unsafe { Task::from_raw(ptr) })
                    .is_err()
                {
                    // The runtime has shut down: cancel now (`insert` released its
                    // reference).
                    // SAFETY: still RUNNING.
                    unsafe { cancel::<F>(ptr) };
                    return Polled::Done;
                }
            }
            match cell.header.state.transition_to_idle() {
                Idle::Parked => {
                    // SAFETY: the run-queue reference is released here.
                    unsafe { drop_ref(ptr) };
                    Polled::Done
                }
                Idle::Notified => Polled::Notified,
                Idle::Cancel => {
                    // SAFETY: still RUNNING.
                    unsafe { cancel::<F>(ptr) };
                    Polled::Done
                }
            }
        }
        Ok(Poll::Ready(out)) => {
            // SAFETY: RUNNING is ours.
            unsafe { complete::<F>(ptr, Ok(out)) };
            Polled::Done
        }
        Err(payload) => {
            let err = JoinError::panic(cell.header.id, payload);
            // SAFETY: RUNNING is ours.
            unsafe { complete::<F>(ptr, Err(err)) };
            Polled::Done
        }
    }
}

/// Drop the future and complete with `Cancelled`. The caller holds RUNNING and
/// one reference (run-queue, or on shutdown the owned list's or a queue's),
/// which this consumes through `complete`.
unsafe fn cancel<F: Future>(ptr: NonNull<Header>) {
    // SAFETY: caller guarantees the type and RUNNING.
    let cell = unsafe { cell::<F>(ptr) };
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
    unsafe { complete::<F>(ptr, Err(err)) };
}

/// Store the output, publish COMPLETE, wake the joiner, leave the owned list and
/// release the run-queue reference.
unsafe fn complete<F: Future>(ptr: NonNull<Header>, out: Result<F::Output, JoinError>) {
    // SAFETY: caller guarantees the type.
    let cell = unsafe { cell::<F>(ptr) };
    // Storing drops the future first (if still there), which may run user code.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: RUNNING gives exclusive access to the stage.
        cell.stage
            .with_mut(|s| unsafe { *s = Stage::Finished(out) })
    }));
    let snapshot = cell.header.state.transition_to_complete();
    if snapshot & state::JOIN_INTEREST == 0 {
        // Nobody will read the output: drop it here.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: with no JoinHandle, the completer owns the output.
            cell.stage.with_mut(|s| unsafe { *s = Stage::Consumed })
        }));
    } else if snapshot & state::JOIN_WAKER != 0 {
        cell.header.join_waker.with(|w| {
            // SAFETY: JOIN_WAKER was set when COMPLETE was published, so the
            // JoinHandle no longer writes the slot.
            if let Some(w) = unsafe { &*w } {
                w.wake_by_ref();
            }
        });
    }
    let shared = &cell.header.shared;
    shared.task_completed();
    // SAFETY: RUNNING was ours until COMPLETE; only this thread touches the flag
    // now (shutdown clears it under the shard lock when it unlinks a task, and
    // then it is the one completing it).
    let linked = cell.header.owned_linked.with(|l| unsafe { *l });
    if linked && shared.owned.remove(ptr) {
        // The owned list's reference and the run-queue reference.
        if cell.header.state.ref_dec_n(2) {
            // SAFETY: that was the last reference.
            unsafe { dealloc::<F>(ptr) };
        }
    } else {
        // Never parked, or shutdown unlinked it and passed us the list's
        // reference: release one.
        // SAFETY: we own one reference.
        unsafe { drop_ref(ptr) };
    }
}

unsafe fn try_read_output<F: Future>(ptr: NonNull<Header>, dst: *mut (), waker: &Waker) {
    // SAFETY: caller guarantees the type; the JoinHandle's reference keeps it alive.
    let cell = unsafe { cell::<F>(ptr) };
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
    if s & state::COMPLETE != 0 {
        return true;
    }
    let res = if s & state::JOIN_WAKER == 0 {
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
            debug_assert!(s & state::COMPLETE != 0);
            true
        }
    }
}

fn set_join_waker(h: &Header, waker: &Waker) -> Result<(), usize> {
    // SAFETY: JOIN_WAKER is clear: the JoinHandle owns the slot.
    h.join_waker
        .with_mut(|w| unsafe { *w = Some(waker.clone()) });
    h.state.set_join_waker()
}

unsafe fn drop_output<F: Future>(ptr: NonNull<Header>) {
    // SAFETY: caller guarantees the type.
    let cell = unsafe { cell::<F>(ptr) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the JoinHandle saw COMPLETE while dropping its interest: it owns the output.
        cell.stage.with_mut(|s| unsafe { *s = Stage::Consumed })
    }));
}

unsafe fn dealloc<F: Future>(ptr: NonNull<Header>) {
    let cell = ptr.cast::<Cell<F>>();
    // SAFETY: last reference: we own the cell; it came from `alloc_task` with
    // `Cell<F>`'s layout.
    unsafe {
        ptr::drop_in_place(cell.as_ptr());
        alloc::free_task(cell.cast(), Layout::new::<Cell<F>>());
    }
}

// ---- Waker ---------------------------------------------------------------

static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

fn raw_waker(ptr: NonNull<Header>) -> RawWaker {
    RawWaker::new(ptr.as_ptr() as *const (), &WAKER_VTABLE)
}

unsafe fn waker_clone(p: *const ()) -> RawWaker {
    // SAFETY: a waker's pointer is a live task header.
    let h = unsafe { &*(p as *const Header) };
    h.state.ref_inc();
    raw_waker(NonNull::from(h))
}

unsafe fn waker_wake(p: *const ()) {
    // Wake through our reference first (it keeps the task, and so `shared`, alive
    // during `schedule`), then release it.
    // SAFETY: the waker owns one reference, released once, last.
    unsafe {
        waker_wake_by_ref(p);
        drop_ref(NonNull::new_unchecked(p as *mut Header));
    }
}

unsafe fn waker_wake_by_ref(p: *const ()) {
    // SAFETY: a waker's pointer is a live task header.
    let ptr = unsafe { NonNull::new_unchecked(p as *mut Header) };
    let h = unsafe { ptr.as_ref() };
    if h.state.transition_to_notified_by_ref() == Notify::Submit {
        h.shared.schedule(Task(ptr), false);
    }
}

unsafe fn waker_drop(p: *const ()) {
    // SAFETY: the waker owns one reference.
    unsafe { drop_ref(NonNull::new_unchecked(p as *mut Header)) }
}

// ---- JoinHandle ------------------------------------------------------------

/// An owned permission to wait for a goroutine or task and take its result.
///
/// It is a `Future` (`.await` it in async code) and has a blocking
/// [`join`](JoinHandle::join) that parks the calling goroutine (or the calling OS
/// thread outside the runtime). Dropping it detaches: the goroutine or task runs
/// on and its output is dropped.
pub struct JoinHandle<T> {
    raw: NonNull<Header>,
    _p: PhantomData<T>,
}

// SAFETY: the handle only moves `T` out once it is complete, and `T: Send` is
// required by every constructor.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only reads the state word.
unsafe impl<T: Send> Sync for JoinHandle<T> {}
impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    fn header(&self) -> &Header {
        // SAFETY: the handle's reference keeps the task alive.
        unsafe { self.raw.as_ref() }
    }

    /// Whether the goroutine or task has finished (returned, panicked or been
    /// cancelled). Never blocks.
    pub fn is_finished(&self) -> bool {
        self.header().state.load() & state::COMPLETE != 0
    }

    /// The task's id (Go's goroutine id).
    pub fn id(&self) -> TaskId {
        TaskId(self.header().id)
    }

    /// Cancel the task: its future is dropped at the next point where it is not
    /// running, and the handle yields `Err(JoinError)` with
    /// [`is_cancelled`](JoinError::is_cancelled). A task that already finished is
    /// unaffected.
    ///
    /// Meant for async tasks. On a goroutine it unwinds the goroutine's stack at
    /// its current blocking call (running its destructors, as a panic would);
    /// a goroutine that never blocks is never cancelled.
    pub fn abort(&self) {
        let h = self.header();
        if h.state.transition_to_notified_and_cancel() == Notify::Submit {
            h.shared.schedule(Task(self.raw), false);
        }
    }

    /// Wait for the result, blocking the calling goroutine (only the G parks, the
    /// M runs other work) or, outside the runtime, the calling thread.
    ///
    /// # Panics
    /// When called from inside an async task (use `.await` there).
    pub fn join(self) -> Result<T, JoinError> {
        crate::block_on(self)
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
        // SAFETY: the vtable's output type is `T` (fixed at construction); `out`
        // is the matching destination.
        unsafe {
            (self.header().vtable.try_read_output)(
                self.raw,
                &mut out as *mut Poll<Result<T, JoinError>> as *mut (),
                cx.waker(),
            )
        };
        out
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        let h = self.header();
        let prev = h.state.unset_join_interest();
        if prev & state::COMPLETE != 0 {
            // SAFETY: complete, and the interest was ours: the output is ours.
            unsafe { (h.vtable.drop_output)(self.raw) };
        }
        // SAFETY: release the handle's reference.
        unsafe { drop_ref(self.raw) };
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("finished", &self.is_finished())
            .finish()
    }
}

// ---- JoinError ---------------------------------------------------------------

/// Why a goroutine or task produced no value: it panicked (the payload is kept)
/// or it was cancelled (`abort`, or the runtime shut down first).
pub struct JoinError {
    id: u64,
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    pub(crate) fn cancelled(id: u64) -> Self {
        JoinError {
            id,
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn panic(id: u64, payload: Box<dyn Any + Send + 'static>) -> Self {
        JoinError {
            id,
            repr: Repr::Panic(payload),
        }
    }

    /// The task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The id of the task that failed.
    pub fn id(&self) -> TaskId {
        TaskId(self.id)
    }

    /// The panic payload, or the error back if this is a cancellation. Pass it to
    /// `std::panic::resume_unwind` to propagate the panic.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(p) => Ok(p),
            Repr::Cancelled => Err(self),
        }
    }

    /// The panic payload.
    ///
    /// # Panics
    /// If the task was cancelled rather than panicking.
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("JoinError::into_panic called on a cancellation")
    }

    /// The panic message when the payload is a string (`panic!("...")`).
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(p) => p
                .downcast_ref::<&'static str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())),
            Repr::Cancelled => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "task {} was cancelled", self.id),
            Repr::Panic(_) => match self.panic_message() {
                Some(m) => write!(f, "task {} panicked: {m}", self.id),
                None => write!(f, "task {} panicked", self.id),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({})", self.id),
            Repr::Panic(_) => write!(
                f,
                "JoinError::Panic({}, {:?})",
                self.id,
                self.panic_message()
            ),
        }
    }
}

impl std::error::Error for JoinError {}
