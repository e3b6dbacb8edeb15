//! Channel errors. Every error of a send gives the value back.

use std::fmt;

/// The channel is closed (or nobody can receive): the value comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why `try_send` did not send; the value comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The buffer is full (or, unbuffered, no receiver is waiting).
    Full(T),
    /// The channel is closed.
    Closed(T),
}

/// Why `send_timeout` did not send; the value comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    Timeout(T),
    Closed(T),
}

/// Why `try_recv` returned nothing.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing buffered and no sender waiting.
    Empty,
    /// Closed and drained.
    Closed,
}

/// Why `recv_timeout` returned nothing.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    Timeout,
    Closed,
}

/// `close` was called on a channel that was already closed (Go panics here).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct CloseError;

/// The buffer of a channel could not be made: [`try_chan`](super::try_chan)
/// returns it, [`chan`](super::chan) panics with its message.
///
/// As in Go's `makechan`, the buffer's bytes (`cap` slots) must fit in the
/// address space (at most `isize::MAX` bytes) and be allocatable; a zero-sized
/// element type needs no buffer memory and accepts any `cap` up to `isize::MAX`.
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
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// True if the capacity can never fit (its buffer would exceed `isize::MAX`
    /// bytes); false if it fits but the memory could not be allocated.
    pub fn is_out_of_range(&self) -> bool {
        self.out_of_range
    }
}

impl<T> SendError<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> TrySendError<T> {
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Closed(v) => v,
        }
    }
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }
    pub fn is_closed(&self) -> bool {
        matches!(self, TrySendError::Closed(_))
    }
}

impl<T> SendTimeoutError<T> {
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
