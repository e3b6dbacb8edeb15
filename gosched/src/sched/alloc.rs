//! Task memory: per-thread free lists of task-sized blocks, with a global depot
//! that moves them between threads in batches (Go's mcache / mcentral pattern,
//! for the one object the scheduler allocates per G).
//!
//! Why: a task is typically allocated on the M that spawns it and freed on the M
//! that completes it. With the system allocator that is a cross-thread free on
//! every task, and glibc's arena lock then ping-pongs between the two threads
//! (measured on W1: ~20% of the time in futex wake/wait under malloc/free).
//!
//! How:
//! - Sizes up to `MAX_SIZE` with alignment up to `ALIGN` are rounded up to a
//!   size class. Larger or more aligned tasks use the system allocator
//!   directly. Two families of classes: alignment up to `MALLOC_ALIGN` (what
//!   `malloc` gives anyway: every task we know of), in steps of 16 bytes up
//!   to 256, 32 up to 512 and 64 up to 1 KiB (Go's size classes are as
//!   fine: at most 1/8 of a block is rounding); and alignment up to `ALIGN`,
//!   in steps of 64. Asking glibc for 64-byte alignment takes its `memalign`
//!   path (a larger chunk, split, the front freed again): with every class
//!   at 64, a burst of 100,000 goroutines spent 5–6% of its CPU time there
//!   (W8, perf), when the caches are empty and every task comes from the
//!   system allocator. With steps of 64 for every class, a parked async task
//!   of 152 bytes took a 192-byte block (W7: 304 bytes per task against
//!   smol's 231).
//! - Each thread has, per class, a LIFO list of free blocks threaded through the
//!   blocks' first word (no allocation to hold them). `alloc` pops, `free` pushes.
//! - A list longer than `CACHE_MAX` hands `BATCH` blocks to the depot (one lock);
//!   an empty list takes a batch from the depot before falling back to the system
//!   allocator. So a producer/consumer pair of Ms reaches a steady state in which
//!   blocks circulate through the depot 32 at a time.
//! - A thread's blocks go to the depot when the thread exits. The depot keeps at
//!   most `DEPOT_MAX` batches per class; beyond that blocks go back to the system.
//!
//! Every block, cached or not, is allocated with the class's `Layout`, so a block
//! may be freed with `dealloc` by any path.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::{Cell, RefCell};

use crate::vthread::with_os_local;
use std::ptr::{self, NonNull};
use std::sync::Mutex;

const MAX_SIZE: usize = 1024;
/// Size classes of alignment `MALLOC_ALIGN`: 16 steps of 16 bytes (to 256),
/// 8 of 32 (to 512), 8 of 64 (to 1 KiB).
const NSMALL: usize = 16 + 8 + 8;
/// Size classes of alignment `ALIGN`: steps of `ALIGN` to `MAX_SIZE`.
const NALIGNED: usize = MAX_SIZE / ALIGN;
/// Classes: `NSMALL` of alignment `MALLOC_ALIGN`, then `NALIGNED` of `ALIGN`.
const NCLASSES: usize = NSMALL + NALIGNED;
const ALIGN: usize = 64;
/// The alignment glibc's `malloc` gives every block on 64-bit targets
/// (`2 * size_of::<usize>()`); a layout asking no more takes its fast path.
const MALLOC_ALIGN: usize = 2 * std::mem::size_of::<usize>();
const CACHE_MAX: usize = 64;
const BATCH: usize = 32;
const DEPOT_MAX: usize = 64;

/// A chain of free blocks linked through their first word.
#[derive(Clone, Copy)]
struct Chain {
    head: *mut u8,
    len: usize,
}

// SAFETY: a chain is exclusively owned memory.
unsafe impl Send for Chain {}

impl Chain {
    const EMPTY: Chain = Chain {
        head: ptr::null_mut(),
        len: 0,
    };

    /// # Safety
    /// `p` is a free block of this chain's class, at least one word long.
    unsafe fn push(&mut self, p: *mut u8) {
        // SAFETY: the block is free and ours; its first word holds the link.
        unsafe { (p as *mut *mut u8).write(self.head) };
        self.head = p;
        self.len += 1;
    }

    fn pop(&mut self) -> Option<*mut u8> {
        if self.head.is_null() {
            return None;
        }
        let p = self.head;
        // SAFETY: every block in the chain stores the next link in its first word.
        self.head = unsafe { (p as *mut *mut u8).read() };
        self.len -= 1;
        Some(p)
    }

    /// Detach the first `n` blocks as their own chain.
    fn split(&mut self, n: usize) -> Chain {
        let mut out = Chain::EMPTY;
        for _ in 0..n {
            match self.pop() {
                // SAFETY: the block came from a chain of the same class.
                Some(p) => unsafe { out.push(p) },
                None => break,
            }
        }
        out
    }
}

static DEPOT: Mutex<[Vec<Chain>; NCLASSES]> = Mutex::new([const { Vec::new() }; NCLASSES]);

struct Cache {
    lists: [Chain; NCLASSES],
}

impl Drop for Cache {
    fn drop(&mut self) {
        for (c, list) in self.lists.iter_mut().enumerate() {
            while list.len > 0 {
                let batch = list.split(BATCH);
                give_to_depot(c, batch);
            }
        }
    }
}

thread_local! {
    /// The OS thread's cache (`vthread::with_os_local`): goroutines that spawn
    /// and free tasks share their M's, and no goroutine keeps one of its own.
    static CACHE: Cell<*mut RefCell<Cache>> = const { Cell::new(std::ptr::null_mut()) };
}

fn new_cache() -> RefCell<Cache> {
    RefCell::new(Cache {
        lists: [Chain::EMPTY; NCLASSES],
    })
}

fn class_of(layout: Layout) -> Option<usize> {
    // Under loom every model thread shares one OS thread (and so one cache):
    // use the system allocator directly there.
    if cfg!(loom) {
        return None;
    }
    size_class(layout)
}

/// The class of `layout`, if it has one (`class_of` without loom's opt-out).
fn size_class(layout: Layout) -> Option<usize> {
    if layout.size() == 0 || layout.size() > MAX_SIZE || layout.align() > ALIGN {
        return None;
    }
    let size = layout.size();
    Some(if layout.align() > MALLOC_ALIGN {
        NSMALL + (size - 1) / ALIGN
    } else if size <= 256 {
        (size - 1) / 16
    } else if size <= 512 {
        16 + (size - 257) / 32
    } else {
        24 + (size - 513) / 64
    })
}

fn class_layout(c: usize) -> Layout {
    let (size, align) = match c {
        0..16 => ((c + 1) * 16, MALLOC_ALIGN),
        16..24 => (256 + (c - 15) * 32, MALLOC_ALIGN),
        24..NSMALL => (512 + (c - 23) * 64, MALLOC_ALIGN),
        _ => ((c - NSMALL + 1) * ALIGN, ALIGN),
    };
    // SAFETY: non-zero size, power-of-two alignment, no overflow.
    unsafe { Layout::from_size_align_unchecked(size, align) }
}

fn give_to_depot(c: usize, batch: Chain) {
    let mut batch = batch;
    {
        let mut depot = DEPOT.lock().unwrap_or_else(|e| e.into_inner());
        if depot[c].len() < DEPOT_MAX {
            depot[c].push(batch);
            return;
        }
    }
    while let Some(p) = batch.pop() {
        // SAFETY: allocated with the class layout.
        unsafe { dealloc(p, class_layout(c)) };
    }
}

/// Give every block of the depot back to the system allocator (the stack
/// scavenger's last step after a burst: the depot may hold up to
/// `DEPOT_MAX * BATCH` blocks per class that nothing will reuse soon).
/// Thread caches keep theirs (at most `CACHE_MAX` per class and thread).
#[cfg(not(loom))]
pub(crate) fn trim_depot() {
    let all: Vec<(usize, Chain)> = {
        let mut depot = DEPOT.lock().unwrap_or_else(|e| e.into_inner());
        depot
            .iter_mut()
            .enumerate()
            .flat_map(|(c, chains)| chains.drain(..).map(move |ch| (c, ch)))
            .collect()
    };
    for (c, mut chain) in all {
        while let Some(p) = chain.pop() {
            // SAFETY: allocated with the class layout.
            unsafe { dealloc(p, class_layout(c)) };
        }
    }
}

/// Allocate memory for a task of `layout`.
pub(crate) fn alloc_task(layout: Layout) -> NonNull<u8> {
    let Some(c) = class_of(layout) else {
        // SAFETY: non-zero size (tasks always contain a header).
        let p = unsafe { alloc(layout) };
        return NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout));
    };
    let cached = with_os_local(&CACHE, new_cache, |cache| {
        let mut cache = cache.borrow_mut();
        let list = &mut cache.lists[c];
        if let Some(p) = list.pop() {
            return Some(p);
        }
        let batch = DEPOT.lock().unwrap_or_else(|e| e.into_inner())[c].pop();
        batch.and_then(|b| {
            *list = b;
            list.pop()
        })
    });
    if let Some(p) = cached {
        // SAFETY: cached blocks are non-null.
        return unsafe { NonNull::new_unchecked(p) };
    }
    let l = class_layout(c);
    // SAFETY: non-zero size.
    NonNull::new(unsafe { alloc(l) }).unwrap_or_else(|| handle_alloc_error(l))
}

/// Free memory from `alloc_task` with the same `layout`.
///
/// # Safety
/// `p` came from `alloc_task(layout)` and is not used afterwards.
pub(crate) unsafe fn free_task(p: NonNull<u8>, layout: Layout) {
    let Some(c) = class_of(layout) else {
        // SAFETY: allocated by `alloc` with this layout.
        unsafe { dealloc(p.as_ptr(), layout) };
        return;
    };
    with_os_local(&CACHE, new_cache, |cache| {
        let mut cache = cache.borrow_mut();
        let list = &mut cache.lists[c];
        // SAFETY: a free block of class `c`.
        unsafe { list.push(p.as_ptr()) };
        if list.len > CACHE_MAX {
            let batch = list.split(BATCH);
            drop(cache);
            give_to_depot(c, batch);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size and alignment a class takes maps to a class whose block
    /// holds it with at most 1/8 of the block (16 bytes below 128) rounding,
    /// and the classes are distinct and increasing within each family.
    #[test]
    fn size_classes_fit_tightly() {
        for align in [1, 8, 16, 32, 64] {
            for size in 1..=MAX_SIZE {
                let l = Layout::from_size_align(size, align).unwrap();
                let c = size_class(l).unwrap();
                let b = class_layout(c);
                assert!(
                    b.size() >= size && b.align() >= align,
                    "{size}/{align}: {b:?}"
                );
                let slack = b.size() - size;
                if align <= MALLOC_ALIGN {
                    assert!(slack < 16 || slack * 8 <= b.size(), "{size}: {b:?}");
                } else {
                    assert!(slack < ALIGN, "{size}/{align}: {b:?}");
                }
            }
        }
        for c in 1..NCLASSES {
            if c != NSMALL {
                assert!(class_layout(c).size() > class_layout(c - 1).size());
            }
            assert_eq!(size_class(class_layout(c)), Some(c), "class {c}");
        }
        assert_eq!(class_layout(NSMALL - 1).size(), MAX_SIZE);
        assert_eq!(class_layout(NCLASSES - 1).size(), MAX_SIZE);
    }

    #[test]
    fn blocks_flow_between_threads() {
        let l = Layout::from_size_align(200, 8).unwrap();
        let blocks: Vec<usize> = (0..1000).map(|_| alloc_task(l).as_ptr() as usize).collect();
        for &b in &blocks {
            // SAFETY: fresh, writable blocks of at least 200 bytes.
            unsafe { ptr::write_bytes(b as *mut u8, 0xAB, 200) };
        }
        // Free on another thread, reallocate here: the depot hands them back.
        std::thread::spawn(move || {
            for b in blocks {
                // SAFETY: each block came from alloc_task(l) and is freed once.
                unsafe { free_task(NonNull::new(b as *mut u8).unwrap(), l) };
            }
        })
        .join()
        .unwrap();
        let again: Vec<_> = (0..1000).map(|_| alloc_task(l)).collect();
        for p in again {
            // SAFETY: as above.
            unsafe { free_task(p, l) };
        }
        // Over-aligned tasks have classes of their own, whose blocks keep
        // the alignment, from the system or the cache.
        let aligned = Layout::from_size_align(200, 64).unwrap();
        for _ in 0..2 {
            let ps: Vec<_> = (0..100).map(|_| alloc_task(aligned)).collect();
            for p in ps {
                assert_eq!(p.as_ptr() as usize % 64, 0);
                // SAFETY: allocated with `aligned`.
                unsafe { free_task(p, aligned) };
            }
        }
        let big = Layout::from_size_align(4096, 8).unwrap();
        let p = alloc_task(big);
        // SAFETY: allocated with `big`.
        unsafe { free_task(p, big) };
    }
}
