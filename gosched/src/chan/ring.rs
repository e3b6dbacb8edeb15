//! The buffer of a buffered channel: a bounded lock-free MPMC ring (Vyukov's
//! array queue, as in crossbeam's array channel), so that sends and receives
//! that neither park nor wake anyone never take the channel lock.
//!
//! # Protocol
//!
//! `head` and `tail` are positions `lap | index`: `index < cap` is the slot, and
//! `lap` (a multiple of `one_lap`) counts wrap-arounds. Between the index bits and
//! the lap bits sits `mark_bit`, set in `tail` only: once set, every push fails
//! (the channel is closed for sending). Each slot has a `stamp`:
//! - `stamp == tail` (for the slot `tail` points at): the slot is free for this
//!   lap; a pusher CASes `tail` forward, writes the value, then stores
//!   `stamp = tail + 1` (Release) — "full, for lap `lap`";
//! - `stamp == head + 1`: the slot holds a value; a popper CASes `head` forward,
//!   reads the value, then stores `stamp = head + one_lap` (Release) — "free,
//!   for the next lap".
//!
//! The CAS on `tail`/`head` gives each slot to one pusher/popper; the stamp's
//! Release/Acquire pair publishes the value. A full ring is `head + one_lap ==
//! tail`, an empty one `tail == head` (checked after a SeqCst fence, so a
//! concurrent operation is either seen or will be retried). A pusher that finds
//! a slot still being popped (or a popper that finds one still being pushed)
//! spins briefly: the other side is between its CAS and its stamp store.
//!
//! **Zero-sized `T`** (`chan::<()>`, Go's `chan struct{}`): there is nothing to
//! store, so there are no slots (any capacity up to `isize::MAX`, as in Go, with
//! no buffer memory). `tail` is then just the number of buffered values, with
//! `mark_bit` as its top bit, and `head` stays 0: a push CASes the count up and
//! forgets its value, a pop CASes it down and reads a value back from a dangling
//! pointer — exactly as `Vec` stores zero-sized values, so each value pushed is
//! popped (or dropped with the ring) once. The SeqCst CAS is the only access, so
//! it is both the publication (a pop's CAS reads from the push's) and the full
//! barrier the channel's Dekker pattern needs. `size_of::<T>() == 0` is a
//! constant per `T`: the branch costs the other element types nothing.
//!
//! **Capacity.** `new` fails (see `CapacityError`) instead of aborting when the
//! slots' bytes would exceed `isize::MAX` (out of range, as Go's `makechan`
//! panics "size out of range") or cannot be allocated.

use std::alloc::Layout;
use std::mem::{self, MaybeUninit};
use std::ptr::NonNull;

use super::error::CapacityError;
use crate::loom::cell::UnsafeCell;
use crate::loom::sync::atomic::{fence, AtomicUsize, Ordering::*};

struct Slot<T> {
    stamp: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// `push`'s refusal, with the value (tests).
#[cfg(test)]
pub(super) enum PushError<T> {
    Full(T),
    Closed(T),
}

/// Moves the value of `src` into `dst` bit for bit and leaves `src` `None`,
/// without dropping the value (it now lives at `dst`) and without a copy of
/// it on the stack.
///
/// # Safety
/// `src` holds a value; `dst` is valid for a write of one `T` and holds no
/// value that needs dropping.
#[inline(always)]
pub(super) unsafe fn move_out<T>(src: &mut Option<T>, dst: *mut T) {
    let Some(v) = src.as_mut() else {
        unreachable!("move_out without a value")
    };
    // SAFETY: `v` is a valid `T`, `dst` is valid for one `T` (the caller), and
    // they do not overlap (`dst` is not inside `src`, which is borrowed).
    unsafe { std::ptr::copy_nonoverlapping(v as *const T, dst, 1) };
    // Forget the moved value: overwrite it with `None` without dropping it.
    // SAFETY: `src` is valid for writes; its old value must not be dropped.
    unsafe { std::ptr::write(src, None) };
}

/// Why `push_from` left the value where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    Full,
    Closed,
}

/// The bytes kept free before `head`, between `head` and `tail`, and after
/// `tail`: two cache lines, the unit x86's adjacent-line prefetcher moves
/// (crossbeam's `CachePadded` is 128 bytes there for the same reason).
const SPACING: usize = 128;

/// A value with `SPACING` free bytes before it (never written nor read).
#[repr(C)]
struct Spaced<V> {
    _gap: [MaybeUninit<u8>; SPACING],
    v: V,
}

impl<V> std::ops::Deref for Spaced<V> {
    type Target = V;
    #[inline(always)]
    fn deref(&self) -> &V {
        &self.v
    }
}

/// Receivers write `head`, senders `tail`, and both read the fields in
/// front: each group has `SPACING` bytes to itself on either side, so no
/// cache line (nor prefetched pair of lines) holds two of them, and none
/// holds a neighbour in the heap. Spaced rather than aligned (`CachePadded`
/// is 128-aligned): an alignment over 16 sends every channel's ring through
/// glibc's `memalign` path (a larger chunk, split, the front freed again),
/// a third of `time::after`'s allocator time (T1, `perf`).
#[repr(C)]
pub(super) struct Ring<T> {
    _front: [MaybeUninit<u8>; SPACING],
    slots: Box<[Slot<T>]>,
    cap: usize,
    one_lap: usize,
    mark_bit: usize,
    head: Spaced<AtomicUsize>,
    tail: Spaced<AtomicUsize>,
    _end: [MaybeUninit<u8>; SPACING],
}

// SAFETY: values move between threads through the ring (`T: Send`); a slot's value
// is accessed only by the one thread that won the CAS for it (see the protocol).
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Ring<T> {}

/// Wait for a thread that is between its CAS and its stamp store.
#[inline]
fn spin(step: &mut u32) {
    #[cfg(loom)]
    {
        let _ = step;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if *step < 6 {
            for _ in 0..1u32 << *step {
                std::hint::spin_loop();
            }
            *step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

impl<T> Ring<T> {
    /// A ring of `cap > 0` slots, or why it cannot be made. Built in its box:
    /// the gaps stay unwritten and the ring is not moved (it is 568 bytes:
    /// building it on the stack cost two copies, 7% of `time::after`).
    pub(super) fn new(cap: usize) -> Result<Box<Self>, CapacityError> {
        assert!(cap > 0);
        let ring = |slots: Box<[Slot<T>]>, one_lap: usize, mark_bit: usize| {
            let mut b = Box::<Self>::new_uninit();
            let p = b.as_mut_ptr();
            // SAFETY: `p` is valid for writes of a `Ring<T>`; every field but
            // the gaps is written here, and the gaps are `MaybeUninit` bytes
            // that nothing reads, so the box then holds a valid `Ring<T>`.
            unsafe {
                std::ptr::addr_of_mut!((*p).slots).write(slots);
                std::ptr::addr_of_mut!((*p).cap).write(cap);
                std::ptr::addr_of_mut!((*p).one_lap).write(one_lap);
                std::ptr::addr_of_mut!((*p).mark_bit).write(mark_bit);
                std::ptr::addr_of_mut!((*p).head.v).write(AtomicUsize::new(0));
                std::ptr::addr_of_mut!((*p).tail.v).write(AtomicUsize::new(0));
                b.assume_init()
            }
        };
        if Self::ZST {
            // `tail` is a count in `0..=cap` below the top bit, the mark.
            let mark_bit = 1 << (usize::BITS - 1);
            if cap >= mark_bit {
                return Err(CapacityError::out_of_range::<T>(cap, 0));
            }
            // `one_lap` is unused for zero-sized values.
            return Ok(ring(Box::default(), 0, mark_bit));
        }
        let slot_bytes = mem::size_of::<Slot<T>>();
        let out_of_range = || CapacityError::out_of_range::<T>(cap, slot_bytes);
        // The bytes must fit (a slot is at least 2 words here, so this also
        // leaves positions room for the index, the mark bit and 2+ lap bits).
        Layout::array::<Slot<T>>(cap).map_err(|_| out_of_range())?;
        let mark_bit = (cap + 1).next_power_of_two();
        let one_lap = mark_bit.checked_mul(2).ok_or_else(out_of_range)?;
        let mut slots = Vec::new();
        slots
            .try_reserve_exact(cap)
            .map_err(|_| CapacityError::alloc_failed::<T>(cap, slot_bytes))?;
        // Each slot's stamp is written in place and its value left
        // uninitialised: building a `Slot` and pushing it would copy a
        // `T`-sized slot through the stack for each one. (loom's `UnsafeCell`
        // needs its constructor: the model build keeps the plain loop.)
        #[cfg(not(loom))]
        {
            let base: *mut Slot<T> = slots.as_mut_ptr();
            for i in 0..cap {
                // SAFETY: `i < cap`, the reserved capacity.
                unsafe { std::ptr::addr_of_mut!((*base.add(i)).stamp).write(AtomicUsize::new(i)) };
            }
            // SAFETY: every slot's `stamp` is initialised, and `value` (an
            // `UnsafeCell<MaybeUninit<T>>`) is valid uninitialised.
            unsafe { slots.set_len(cap) };
        }
        #[cfg(loom)]
        slots.extend((0..cap).map(|i| Slot {
            stamp: AtomicUsize::new(i),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }));
        Ok(ring(slots.into_boxed_slice(), one_lap, mark_bit))
    }

    /// Zero-sized values: no slots, `tail` counts (see the protocol).
    const ZST: bool = mem::size_of::<T>() == 0;

    /// The position after `pos`.
    #[inline]
    fn next(&self, pos: usize) -> usize {
        let index = pos & (self.mark_bit - 1);
        let lap = pos & !(self.one_lap - 1);
        if index + 1 < self.cap {
            pos + 1
        } else {
            lap.wrapping_add(self.one_lap)
        }
    }

    /// Push by value (tests).
    #[cfg(test)]
    pub(super) fn push(&self, v: T) -> Result<(), PushError<T>> {
        let mut src = Some(v);
        self.push_from(&mut src).map_err(|why| {
            let v = src.take().expect("a refused push keeps its value");
            match why {
                Refused::Full => PushError::Full(v),
                Refused::Closed => PushError::Closed(v),
            }
        })
    }

    /// Moves the value out of `src` (which holds one) into the ring, bit for
    /// bit, with no copy of it on the stack ("Moving values", `core.rs`);
    /// `src` is left `None`. Refused: `src` keeps the value.
    pub(super) fn push_from(&self, src: &mut Option<T>) -> Result<(), Refused> {
        debug_assert!(src.is_some(), "push_from without a value");
        if Self::ZST {
            return self.push_zst(src);
        }
        let mut step = 0;
        let mut tail = self.tail.load(Relaxed);
        loop {
            if tail & self.mark_bit != 0 {
                return Err(Refused::Closed);
            }
            let index = tail & (self.mark_bit - 1);
            let slot = &self.slots[index];
            let stamp = slot.stamp.load(Acquire);
            if tail == stamp {
                match self
                    .tail
                    .compare_exchange_weak(tail, self.next(tail), SeqCst, Relaxed)
                {
                    Ok(_) => {
                        // SAFETY: the CAS gave us this slot for this lap; nobody
                        // reads it before the stamp store below. `src` holds a
                        // value, which `move_out` moves into the slot.
                        slot.value
                            .with_mut(|p| unsafe { move_out(src, (*p).as_mut_ptr()) });
                        slot.stamp.store(tail + 1, Release);
                        return Ok(());
                    }
                    Err(t) => tail = t,
                }
            } else if stamp.wrapping_add(self.one_lap) == tail + 1 {
                // The slot still holds last lap's value: full, unless a pop is
                // in progress.
                fence(SeqCst);
                let head = self.head.load(Relaxed);
                if head.wrapping_add(self.one_lap) == tail {
                    return Err(Refused::Full);
                }
                spin(&mut step);
                tail = self.tail.load(Relaxed);
            } else {
                spin(&mut step);
                tail = self.tail.load(Relaxed);
            }
        }
    }

    /// Pop by value.
    pub(super) fn pop(&self) -> Option<T> {
        let mut out = None;
        self.pop_into(&mut out);
        out
    }

    /// Pops the oldest value into `out` (which is `None`); false if empty.
    pub(super) fn pop_into(&self, out: &mut Option<T>) -> bool {
        debug_assert!(out.is_none(), "pop_into over a value");
        if Self::ZST {
            return self.pop_zst(out);
        }
        let mut step = 0;
        let mut head = self.head.load(Relaxed);
        loop {
            let index = head & (self.mark_bit - 1);
            let slot = &self.slots[index];
            let stamp = slot.stamp.load(Acquire);
            if head + 1 == stamp {
                match self
                    .head
                    .compare_exchange_weak(head, self.next(head), SeqCst, Relaxed)
                {
                    Ok(_) => {
                        // SAFETY: the CAS gave us this slot's value (published by
                        // the pusher's Release stamp store, read with Acquire).
                        slot.value
                            .with(|p| unsafe { *out = Some((*p).assume_init_read()) });
                        slot.stamp.store(head.wrapping_add(self.one_lap), Release);
                        return true;
                    }
                    Err(h) => head = h,
                }
            } else if stamp == head {
                // Empty, unless a push is in progress.
                fence(SeqCst);
                let tail = self.tail.load(Relaxed);
                if tail & !self.mark_bit == head {
                    return false;
                }
                spin(&mut step);
                head = self.head.load(Relaxed);
            } else {
                spin(&mut step);
                head = self.head.load(Relaxed);
            }
        }
    }

    /// `push` for a zero-sized `T`: count it in.
    fn push_zst(&self, src: &mut Option<T>) -> Result<(), Refused> {
        let mut tail = self.tail.load(Relaxed);
        loop {
            if tail & self.mark_bit != 0 {
                return Err(Refused::Closed);
            }
            if tail == self.cap {
                // Full, unless a pop is in progress (as in `push`).
                fence(SeqCst);
                let now = self.tail.load(Relaxed);
                if now == tail {
                    return Err(Refused::Full);
                }
                tail = now;
                continue;
            }
            match self
                .tail
                .compare_exchange_weak(tail, tail + 1, SeqCst, Relaxed)
            {
                Ok(_) => {
                    // Stored "at a dangling address", as `Vec` stores zero-sized
                    // values: `pop_zst` reads it back.
                    mem::forget(src.take());
                    return Ok(());
                }
                Err(t) => tail = t,
            }
        }
    }

    /// `pop` for a zero-sized `T`: count one out.
    fn pop_zst(&self, out: &mut Option<T>) -> bool {
        let mut tail = self.tail.load(Relaxed);
        loop {
            if tail & !self.mark_bit == 0 {
                // Empty, unless a push is in progress (as in `pop`).
                fence(SeqCst);
                let now = self.tail.load(Relaxed);
                if now & !self.mark_bit == 0 {
                    return false;
                }
                tail = now;
                continue;
            }
            match self
                .tail
                .compare_exchange_weak(tail, tail - 1, SeqCst, Relaxed)
            {
                Ok(_) => {
                    // SAFETY: `T` is zero-sized, so reading one from a dangling,
                    // aligned pointer is a valid (empty) read, and the count we took
                    // stands for one value a `push_zst` forgot (moved in): reading
                    // it back moves that value out, once — as `Vec` does.
                    *out = Some(unsafe { NonNull::<T>::dangling().as_ptr().read() });
                    return true;
                }
                Err(t) => tail = t,
            }
        }
    }

    /// Make every later push fail. Returns false if it was already marked.
    pub(super) fn mark(&self) -> bool {
        self.tail.fetch_or(self.mark_bit, SeqCst) & self.mark_bit == 0
    }

    pub(super) fn is_marked(&self) -> bool {
        self.tail.load(SeqCst) & self.mark_bit != 0
    }

    pub(super) fn len(&self) -> usize {
        if Self::ZST {
            return self.tail.load(SeqCst) & !self.mark_bit;
        }
        loop {
            let tail = self.tail.load(SeqCst);
            let head = self.head.load(SeqCst);
            if self.tail.load(SeqCst) == tail {
                let hix = head & (self.mark_bit - 1);
                let tix = tail & (self.mark_bit - 1);
                return if hix < tix {
                    tix - hix
                } else if hix > tix {
                    self.cap - hix + tix
                } else if (tail & !self.mark_bit) == head {
                    0
                } else {
                    self.cap
                };
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        if Self::ZST {
            return self.len() == 0;
        }
        let head = self.head.load(SeqCst);
        let tail = self.tail.load(SeqCst);
        tail & !self.mark_bit == head
    }

    pub(super) fn is_full(&self) -> bool {
        if Self::ZST {
            return self.len() == self.cap;
        }
        let tail = self.tail.load(SeqCst);
        let head = self.head.load(SeqCst);
        head.wrapping_add(self.one_lap) == tail & !self.mark_bit
    }
}

impl<T> Drop for Ring<T> {
    /// Drops the values left in place: moving each out (`pop`) would give
    /// the drop glue of every channel a `T`-sized temporary on the stack —
    /// 64 KiB for Go's largest element, on a goroutine's 256 KiB stack, in
    /// whichever goroutine drops the last handle (it overflowed in release
    /// builds).
    fn drop(&mut self) {
        if !mem::needs_drop::<T>() {
            return;
        }
        if Self::ZST {
            while self.pop().is_some() {} // (no bytes to copy)
            return;
        }
        // `&mut self`: no push or pop is in progress, every slot from head
        // to tail holds a value.
        let len = self.len();
        let mut pos = self.head.load(Relaxed);
        for _ in 0..len {
            let index = pos & (self.mark_bit - 1);
            // SAFETY: slots from head on, `len` of them, hold initialised
            // values that nobody else can reach any more; each is dropped
            // once.
            self.slots[index]
                .value
                .with_mut(|p| unsafe { (*p).assume_init_drop() });
            pos = self.next(pos);
        }
    }
}

#[cfg(all(test, not(loom)))]
impl<T> Ring<T> {
    /// Offsets of the read-mostly fields' end, `head`, `tail` and the end
    /// (layout test).
    pub(super) fn layout() -> [usize; 4] {
        [
            mem::offset_of!(Ring<T>, mark_bit) + mem::size_of::<usize>(),
            mem::offset_of!(Ring<T>, head) + mem::offset_of!(Spaced<AtomicUsize>, v),
            mem::offset_of!(Ring<T>, tail) + mem::offset_of!(Spaced<AtomicUsize>, v),
            mem::size_of::<Ring<T>>(),
        ]
    }
}
