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
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let g = rt.go(|| 40); // a goroutine's handle
/// let t = rt.spawn(async { 2 }); // a task's handle
/// // `.await` in async code; `join()` in a goroutine or on a thread.
/// let sum = rt.block_on(async move { g.await.unwrap() + t.await.unwrap() });
/// assert_eq!(sum, 42);
/// let done = gosched::chan::<u32>(1);
/// let tx = done.clone();
/// drop(rt.go(move || tx.send(7).unwrap())); // detached: it runs on
/// assert_eq!(done.recv(), Some(7));
/// ```
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
    ///
    /// ```
    /// let ch = gosched::chan::<()>(0);
    /// let rx = ch.clone();
    /// let h = gosched::go(move || rx.recv());
    /// assert!(!h.is_finished()); // parked until the channel closes
    /// ch.close();
    /// while !h.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(h.join().unwrap(), None);
    /// ```
    pub fn is_finished(&self) -> bool {
        self.header().state.load().is_complete()
    }

    /// The task's id (Go's goroutine id).
    ///
    /// Ids are unique within a runtime and appear in the goroutine dump.
    ///
    /// ```
    /// let a = gosched::go(|| ());
    /// let b = gosched::spawn(async {});
    /// assert_ne!(a.id(), b.id());
    /// a.join().unwrap();
    /// b.join().unwrap();
    /// ```
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
    ///
    /// ```
    /// let h = gosched::spawn(std::future::pending::<()>()); // never finishes
    /// h.abort();
    /// let err = h.join().unwrap_err();
    /// assert!(err.is_cancelled());
    /// ```
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
///
/// ```
/// let h = gosched::go(|| -> u32 { panic!("boom") });
/// let err = h.join().unwrap_err();
/// assert!(err.is_panic() && !err.is_cancelled());
/// assert_eq!(err.panic_message(), Some("boom"));
/// assert!(err.to_string().ends_with("panicked: boom"));
/// ```
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
    ///
    /// ```
    /// let h = gosched::spawn(std::future::pending::<()>());
    /// h.abort();
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked.
    ///
    /// ```
    /// let err = gosched::go(|| -> u32 { panic!("bad input") }).join().unwrap_err();
    /// assert!(err.is_panic());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The id of the task that failed.
    ///
    /// ```
    /// let h = gosched::go(|| -> u32 { panic!("oops") });
    /// let id = h.id();
    /// assert_eq!(h.join().unwrap_err().id(), id);
    /// ```
    pub fn id(&self) -> TaskId {
        TaskId(self.id)
    }

    /// The panic payload, or the error back if this is a cancellation. Pass it to
    /// `std::panic::resume_unwind` to propagate the panic.
    ///
    /// ```
    /// let err = gosched::go(|| -> u32 { std::panic::panic_any(7u32) }).join().unwrap_err();
    /// let payload = err.try_into_panic().unwrap();
    /// assert_eq!(payload.downcast_ref::<u32>(), Some(&7));
    ///
    /// let h = gosched::spawn(std::future::pending::<()>());
    /// h.abort();
    /// let cancelled = h.join().unwrap_err();
    /// assert!(cancelled.try_into_panic().unwrap_err().is_cancelled());
    /// ```
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
    ///
    /// ```
    /// let h = gosched::go(|| -> u32 { panic!("lost") });
    /// match h.join() {
    ///     Ok(v) => println!("{v}"),
    ///     Err(e) if e.is_panic() => {
    ///         let payload = e.into_panic(); // or std::panic::resume_unwind(payload)
    ///         assert_eq!(payload.downcast_ref::<&str>(), Some(&"lost"));
    ///     }
    ///     Err(e) => panic!("{e}"),
    /// }
    /// ```
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("JoinError::into_panic called on a cancellation")
    }

    /// The panic message when the payload is a string (`panic!("...")`).
    ///
    /// ```
    /// let err = gosched::go(|| -> u32 { panic!("code {}", 42) }).join().unwrap_err();
    /// assert_eq!(err.panic_message(), Some("code 42")); // a `String` payload
    /// let err = gosched::go(|| -> u32 { std::panic::panic_any(42) }).join().unwrap_err();
    /// assert_eq!(err.panic_message(), None); // not a string
    /// ```
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
