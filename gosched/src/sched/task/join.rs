//! `JoinHandle` (the owner's side of a task: its output, its waker slot, abort)
//! and `JoinError`.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use super::state::Notify;
use super::{drop_ref, Header, TaskId};

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
    pub(super) fn new(raw: NonNull<Header>) -> Self {
        JoinHandle {
            raw,
            _p: PhantomData,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the handle's reference keeps the task alive.
        unsafe { self.raw.as_ref() }
    }

    /// Whether the goroutine or task has finished (returned, panicked or been
    /// cancelled). Never blocks.
    pub fn is_finished(&self) -> bool {
        self.header().state.load().is_complete()
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
            // SAFETY: `Submit` gave us a new run-queue reference, passed on here.
            unsafe { (h.vtable.schedule)(self.raw) };
        }
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
        if out.is_pending() {
            crate::sched::wait::note(crate::sched::wait::WaitReason::Join, cx);
        }
        out
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        let h = self.header();
        let prev = h.state.unset_join_interest();
        if prev.is_complete() {
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
