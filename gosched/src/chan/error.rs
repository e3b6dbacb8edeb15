//! Channel errors. Every error of a send gives the value back.

use std::fmt;

/// The channel is closed (or nobody can receive): the value comes back.
///
/// Returned by `send` and `send_async`, and by a `select!` send arm.
///
/// ```
/// let ch = gosched::chan::<String>(1);
/// ch.close().unwrap();
/// let err = ch.send("not lost".to_string()).unwrap_err();
/// assert_eq!(err.to_string(), "sending on a closed channel");
/// assert_eq!(err.0, "not lost");
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why `try_send` did not send; the value comes back.
///
/// ```
/// use gosched::chan::TrySendError;
/// let ch = gosched::chan::<i32>(0); // unbuffered, and no receiver waits
/// match ch.try_send(1) {
///     Err(TrySendError::Full(v)) => assert_eq!(v, 1),
///     other => panic!("unexpected: {other:?}"),
/// }
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The buffer is full (or, unbuffered, no receiver is waiting).
    Full(T),
    /// The channel is closed.
    Closed(T),
}

/// Why `send_timeout` did not send; the value comes back.
///
/// ```
/// use std::time::Duration;
/// use gosched::chan::SendTimeoutError;
/// let ch = gosched::chan::<i32>(1);
/// ch.close().unwrap();
/// let r = ch.send_timeout(1, Duration::from_secs(1)); // fails at once
/// assert_eq!(r, Err(SendTimeoutError::Closed(1)));
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// The timeout passed with no room in the buffer (unbuffered: no receiver).
    Timeout(T),
    /// The channel is closed (or nobody can receive).
    Closed(T),
}

/// Why `try_recv` returned nothing.
///
/// ```
/// use gosched::chan::TryRecvError;
/// let ch = gosched::chan::<i32>(1);
/// assert_eq!(ch.try_recv(), Err(TryRecvError::Empty)); // try again later
/// ch.close().unwrap();
/// assert_eq!(ch.try_recv(), Err(TryRecvError::Closed)); // nothing will come
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing buffered and no sender waiting.
    Empty,
    /// Closed and drained.
    Closed,
}

/// Why `recv_timeout` returned nothing.
///
/// ```
/// use std::time::Duration;
/// use gosched::chan::RecvTimeoutError;
/// let ch = gosched::chan::<i32>(1);
/// // Nobody sends: this waits the whole millisecond.
/// assert_eq!(ch.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
/// ch.close().unwrap();
/// assert_eq!(ch.recv_timeout(Duration::from_secs(1)), Err(RecvTimeoutError::Closed));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// The timeout passed with nothing to receive.
    Timeout,
    /// The channel is closed and drained.
    Closed,
}

/// `close` was called on a channel that was already closed (Go panics here).
///
/// ```
/// use gosched::chan::CloseError;
/// let ch = gosched::chan::<()>(0);
/// assert_eq!(ch.close(), Ok(()));
/// assert_eq!(ch.close(), Err(CloseError));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct CloseError;

/// The buffer of a channel could not be made: [`try_chan`](super::try_chan)
/// returns it, [`chan`](super::chan) panics with its message.
///
/// As in Go's `makechan`, the buffer's bytes (`cap` slots) must fit in the
/// address space (at most `isize::MAX` bytes) and be allocatable; a zero-sized
/// element type needs no buffer memory and accepts any `cap` up to `isize::MAX`.
///
/// ```
/// let e = gosched::chan::try_chan::<u64>(usize::MAX).unwrap_err();
/// assert!(e.is_out_of_range());
/// assert!(e.to_string().contains("capacity out of range"));
/// // A zero-sized type needs no buffer, but the capacity must still fit.
/// assert!(gosched::chan::try_chan::<()>(isize::MAX as usize).is_ok());
/// assert!(gosched::chan::try_chan::<()>(usize::MAX).is_err());
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct CapacityError {
    cap: usize,
    elem: &'static str,
    /// Bytes per buffer slot (the value and its sequence stamp); 0 for a
    /// zero-sized element type.
    slot_bytes: usize,
    /// Out of range (cannot fit at all), or the allocation failed.
    out_of_range: bool,
}

impl CapacityError {
    /// The capacity does not fit (its buffer would exceed `isize::MAX` bytes).
    pub(super) fn out_of_range<T>(cap: usize, slot_bytes: usize) -> Self {
        CapacityError {
            cap,
            elem: std::any::type_name::<T>(),
            slot_bytes,
            out_of_range: true,
        }
    }

    /// The allocator could not provide the buffer.
    pub(super) fn alloc_failed<T>(cap: usize, slot_bytes: usize) -> Self {
        CapacityError {
            cap,
            elem: std::any::type_name::<T>(),
            slot_bytes,
            out_of_range: false,
        }
    }

    /// The capacity that was asked for.
    ///
    /// ```
    /// let e = gosched::chan::try_chan::<u32>(usize::MAX / 2).unwrap_err();
    /// assert_eq!(e.capacity(), usize::MAX / 2);
    /// ```
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// True if the capacity can never fit (its buffer would exceed `isize::MAX`
    /// bytes); false if it fits but the memory could not be allocated.
    ///
    /// ```
    /// let e = gosched::chan::try_chan::<[u8; 1024]>(usize::MAX / 512).unwrap_err();
    /// assert!(e.is_out_of_range()); // no smaller machine would help
    /// ```
    pub fn is_out_of_range(&self) -> bool {
        self.out_of_range
    }
}

impl<T> SendError<T> {
    /// The value that could not be sent.
    ///
    /// ```
    /// let ch = gosched::chan::<Vec<u8>>(1);
    /// ch.close().unwrap();
    /// let back = ch.send(vec![1, 2]).unwrap_err().into_inner();
    /// assert_eq!(back, [1, 2]);
    /// ```
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> TrySendError<T> {
    /// The value that could not be sent, whatever the reason.
    ///
    /// ```
    /// let ch = gosched::chan::<&str>(0);
    /// let e = ch.try_send("x").unwrap_err();
    /// assert_eq!(e.into_inner(), "x");
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Closed(v) => v,
        }
    }

    /// No room now (a later send may succeed).
    ///
    /// ```
    /// let ch = gosched::chan::<i32>(1);
    /// ch.try_send(1).unwrap();
    /// assert!(ch.try_send(2).unwrap_err().is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// The channel is closed (no send will ever succeed).
    ///
    /// ```
    /// let ch = gosched::chan::<i32>(1);
    /// ch.close().unwrap();
    /// assert!(ch.try_send(1).unwrap_err().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self, TrySendError::Closed(_))
    }
}

impl<T> SendTimeoutError<T> {
    /// The value that could not be sent, whatever the reason.
    ///
    /// ```
    /// use std::time::Duration;
    /// let ch = gosched::chan::<i32>(1);
    /// ch.close().unwrap();
    /// let e = ch.send_timeout(7, Duration::from_secs(1)).unwrap_err();
    /// assert_eq!(e.into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v) | SendTimeoutError::Closed(v) => v,
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}
impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed channel")
    }
}
impl<T> std::error::Error for SendError<T> {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}
impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Closed(_) => f.write_str("sending on a closed channel"),
        }
    }
}
impl<T> std::error::Error for TrySendError<T> {}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}
impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("timed out sending on a channel"),
            SendTimeoutError::Closed(_) => f.write_str("sending on a closed channel"),
        }
    }
}
impl<T> std::error::Error for SendTimeoutError<T> {}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Closed => f.write_str("receiving on a closed, drained channel"),
        }
    }
}
impl std::error::Error for TryRecvError {}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out receiving on a channel"),
            RecvTimeoutError::Closed => f.write_str("receiving on a closed, drained channel"),
        }
    }
}
impl std::error::Error for RecvTimeoutError {}

impl fmt::Display for CloseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("close of a closed channel")
    }
}
impl std::error::Error for CloseError {}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CapacityError {
            cap,
            elem,
            slot_bytes,
            out_of_range,
        } = *self;
        write!(f, "gosched::chan::<{elem}>({cap}): ")?;
        if slot_bytes == 0 {
            write!(
                f,
                "capacity out of range (a channel of a zero-sized type holds at most \
                 isize::MAX = {} values); use a smaller capacity",
                isize::MAX
            )
        } else if out_of_range {
            write!(
                f,
                "capacity out of range (the buffer, {slot_bytes} bytes a slot, must fit in \
                 isize::MAX bytes); use a smaller capacity"
            )
        } else {
            write!(
                f,
                "cannot allocate the buffer ({} bytes: {cap} slots of {slot_bytes} bytes); \
                 use a smaller capacity, or try_chan to handle the error",
                cap as u128 * slot_bytes as u128
            )
        }
    }
}
impl std::error::Error for CapacityError {}
