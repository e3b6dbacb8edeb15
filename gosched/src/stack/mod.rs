//! Goroutine stacks: slabs, guard pages, the per-runtime pool and the per-P
//! cache.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | layout, the pool's lists and states, carving, `alloc`/`free`, who writes what, dropping the pool |
//! | `guard.rs` | guard pages: `MADV_GUARD_INSTALL` in batches, or `mprotect` within the map budget |
//! | `reserve.rs` | promises: a goroutine is promised its stack at spawn, and the address-space headroom |
//! | `cache.rs` | the per-P cache (`StackCache`): spawning on a P takes no lock |
//! | `scavenge.rs` | the scavenger: free pages and empty slabs back to the OS, paced |
//! | `pace.rs` | the scavenger's CPU budget (a token bucket) |
//! | `overflow.rs` | the SIGSEGV/SIGBUS handler that names an overflowing goroutine |
//!
//! # Layout
//!
//! Stacks are carved from large anonymous slabs mapped with
//! `mmap(PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE|MAP_STACK)`.
//! A slab holds stacks of exactly one size class; `stride = guard + size`,
//! where `guard` is one page and `size` is the requested usable size rounded
//! up to whole pages (at least [`MIN_STACK_SIZE`]):
//!
//! ```text
//!  slab.start                                                   slab.end
//!  | guard | usable 0 ...... | guard | usable 1 ...... | ... (not yet carved)
//!  ^limit(0)        base(0) ^^limit(1)        base(1) ^
//! ```
//!
//! Stacks grow down, so each guard sits *below* its stack and catches the
//! overflow of that stack. [`Stack::limit`] includes the guard (corosensei's
//! contract), [`Stack::base`] is the exclusive top.
//!
//! With `MAP_NORESERVE` a slab costs address space only; a page costs memory
//! once it is touched. The first slab of a class holds 64 stacks and each
//! following one twice as many, capped at 1 GiB of address space per slab, so
//! a million 256 KiB stacks (260 GB of address space, which x86-64's 128 TiB
//! user half holds easily) need about 250 slabs, at most one kernel memory
//! map (VMA) each, far below `vm.max_map_count` (65530 by default; adjacent
//! slabs merge: `million_stacks_of_256k` counts the maps). A small program
//! stays small: its first slab is 64 × 260 KiB = 16 MiB of address space.
//! Slabs are also marked `MADV_NOHUGEPAGE`: with transparent huge pages set to
//! `always`, touching one byte of a stack could otherwise fault in 2 MiB.
//!
//! # Lists and states
//!
//! Every carved stack is in exactly one of these states:
//!
//! ```text
//!                 alloc (carve: guard installed)
//!   uncarved ─────────────────────────────────────▶ out ◀──── StackCache (per P)
//!                                                   │ ▲        get / put
//!                                      free / put   ▼ │ alloc
//!                                                   hot ─scavenge─▶ cold
//!                                                     ▲             │
//!                                                     └─── alloc ───┘
//! ```
//!
//! * **out** — owned by a goroutine or sitting in a per-P [`StackCache`]. The
//!   pool only counts it (per slab, so that dropping the pool knows which slabs
//!   are still in use).
//! * **hot** — free in the pool, pages still resident. LIFO per size class:
//!   the most recently freed stack is reused first (its pages are in cache).
//! * **cold** — free in the pool, usable pages released with
//!   `madvise(MADV_DONTNEED)` (the guard is left alone). Reusing a cold stack
//!   costs page faults but no syscall (mprotect mode: one `mprotect`).
//!
//! A slab whose carved stacks are all cold can leave the pool as a whole
//! (unmapped by the scavenger, `scavenge.rs`); its entry in the slab table is then
//! empty (`len == 0`) and reused by the next slab mapped.
//!
//! `alloc` prefers hot, then cold, then carves a new stack (mapping a new slab
//! when the current one is full). Freeing never makes a syscall: a freed
//! stack goes on the hot list, resident, however long the list grows.
//!
//! # Reservations
//!
//! (`reserve.rs`.) //! A goroutine takes its stack lazily, at its first run (a million spawned
//! goroutines that finish at once share a few stacks), but it is *promised*
//! one at spawn, so that `try_go` can refuse what would not get a stack and a
//! goroutine it accepted never dies at its first run for want of one.
//! Per size class the pool counts
//!
//! * `capacity` — stacks its mapped slabs hold, carved or not;
//! * `committed` — promises: goroutines spawned and not started, goroutines
//!   running (their stack is out), and per-P *credit* (promises a
//!   [`StackCache`] took in a batch of [`CREDIT_BATCH`] for the goroutines
//!   its P will spawn: spawning on a P costs no lock);
//!
//! and keeps `committed + slack <= capacity`, where `slack` is what the
//! per-P caches may hold between them (`procs * cache bound`).
//! [`StackPool::reserve`] maps slabs (address space only; carving stays
//! lazy) until the promise fits, and fails with the `mmap` error when the
//! address space is exhausted (an `RLIMIT_AS`, `ulimit -v`) or, in mprotect
//! mode, when the map budget is spent. A promise goes back with the
//! goroutine's stack ([`StackCache::put`]) or, if the goroutine never ran,
//! with [`StackPool::unreserve`].
//!
//! Why a goroutine with a promise always finds a stack: when it starts, the
//! free stacks of its class are `capacity - running`, of which the other
//! caches hold at most `slack`; `capacity - running >= committed + slack -
//! running > slack`, since its own promise is counted in `committed` but it
//! is not running yet. So the pool has a free stack or an uncarved one in a
//! mapped slab, and carving needs no new `mmap`. (A stack allocated without
//! a promise, as the unit tests do, can take that room; the runtime always
//! promises first.) Near an address-space limit, `reserve` halves its slab
//! size and leaves a headroom (a quarter of the limit, 256 MiB at least)
//! unmapped for the rest of the process (malloc and threads must not starve
//! because stacks took everything).
//!
//! # Who may write what
//!
//! * The pool's lists and slab table live under one `Mutex` (the global slow
//!   path; a P takes it only on a cache miss or overflow).
//! * A [`StackCache`] belongs to one P and is used by one thread at a time
//!   (`&mut self`), so it has no lock; it holds at most
//!   `clamp(8 MiB / stride, 2, 32)` stacks per size class and moves the older
//!   half to the pool when it overflows. Two others empty it, not on its
//!   P's thread: the scavenger flushes the cache of an idle P (under the
//!   scheduler lock, under which an idle P stays idle, and the pool's
//!   `cache_flush` lock), and runtime teardown drains every cache
//!   ([`StackCache::drain`], after every M exited, without the scheduler
//!   lock but under `cache_flush`). The flush checks the runtime's shutdown
//!   flag under both locks: teardown sets it before it drains, so a flush
//!   that takes `cache_flush` after a drain stops, and one that took it
//!   before ends before the drain starts. Lock order: scheduler, then
//!   `cache_flush`, then the pool's.
//! * The overflow registry (`overflow`) is written here when a slab is
//!   mapped or given back (`map_slab`, `unmap_fresh_slab`, the scavenger's
//!   `take_empty_slabs`: all under the pool lock, always before `munmap`)
//!   or unmapped by `Drop` (`&mut self`), and read lock-free by the
//!   SIGSEGV handler.
//! * [`GUARDED_STACKS`] (mprotect mode) is an atomic shared by all pools of
//!   the process, because the map limit is per process.
//!
//! # Dropping the pool
//!
//! `Drop for StackPool` unmaps every slab still mapped that has no stack
//! *out* (the scavenger may have returned others already) and removes
//! it from the overflow registry. A slab with a stack still out (a goroutine
//! still running, a [`StackCache`] not drained, or a [`Stack`] dropped
//! without [`StackPool::free`]) is leaked: it stays mapped and registered, so
//! that stack stays valid memory and keeps its guard. Leaking is safe;
//! unmapping memory a coroutine may still run on would not be. Drain every
//! cache before dropping the pool to get all memory back.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::num::NonZeroUsize;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use corosensei::stack::StackPointer;

pub(crate) mod overflow;
pub(crate) mod pace;

mod cache;
mod guard;
mod reserve;
mod scavenge;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use cache::StackCache;
#[allow(unused_imports)]
use cache::*;
#[allow(unused_imports)] // some are used only by tests or other cfgs
pub(crate) use guard::*;
use scavenge::*;

use overflow::SlabRegistration;

/// How slabs (and the guard probe) are mapped. `MAP_STACK` also implies
/// `VM_NOHUGEPAGE` on Linux ≥ 6.7.
const SLAB_MAP_FLAGS: libc::c_int =
    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK;

/// Default goroutine stack size: 256 KiB of reserved address space; only touched
/// pages cost memory (see `coro`'s module docs, "Stack size").
///
/// ```
/// assert_eq!(gosched::coro::DEFAULT_STACK_SIZE, 256 * 1024);
/// ```
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// Smallest usable stack; smaller requests are rounded up to it.
pub(crate) const MIN_STACK_SIZE: usize = 16 * 1024;
/// Largest usable stack (Go's limit on 64-bit systems is 1 GB as well).
pub(crate) const MAX_STACK_SIZE: usize = 1 << 30;

/// Stacks in the first slab of a size class; each further slab doubles.
const FIRST_SLAB_STACKS: usize = 64;
/// Cap on one slab's address space (not memory: the slab is `MAP_NORESERVE`).
const MAX_SLAB_BYTES: usize = 1 << 30;

/// Bound of a class's hot list, in stacks and in bytes (the smaller wins,
/// never below [`HOT_MIN_STACKS`]).
const HOT_MAX_STACKS: usize = 256;
const HOT_MAX_BYTES: usize = 64 << 20;
const HOT_MIN_STACKS: usize = 4;

static NEXT_POOL_ID: AtomicU32 = AtomicU32::new(1);

/// The system page size (`sysconf(_SC_PAGESIZE)`), read once.
pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let cached = PAGE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 { page as usize } else { 4096 };
    assert!(
        page.is_power_of_two(),
        "page size {page} is not a power of two"
    );
    PAGE.store(page, Ordering::Relaxed);
    page
}

/// Rounds a requested stack size to what the pool hands out: whole pages, at
/// least [`MIN_STACK_SIZE`].
pub(crate) fn round_size(size: usize) -> Result<usize, StackError> {
    if size > MAX_STACK_SIZE {
        return Err(StackError::TooLarge {
            requested: size,
            max: MAX_STACK_SIZE,
        });
    }
    let page = page_size();
    Ok((size.max(MIN_STACK_SIZE) + page - 1) & !(page - 1))
}

/// Why a stack could not be allocated (inside
/// [`SpawnError::Stack`](crate::SpawnError::Stack)); its message names the
/// limit and how to raise it.
///
/// ```
/// use gosched::coro::{Go, StackError};
/// use gosched::SpawnError;
/// // 2 GiB is above the largest stack a goroutine may ask for.
/// let err = Go::new().stack_size(2 << 30).try_spawn(|| ()).unwrap_err();
/// let SpawnError::Stack(StackError::TooLarge { requested, max }) = err else {
///     panic!("expected TooLarge, got {err}");
/// };
/// assert!(requested > max);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum StackError {
    /// mprotect-guard mode only (kernels without `MADV_GUARD_INSTALL`): one
    /// more guarded stack would exceed the kernel's per-process limit on
    /// memory maps, `vm.max_map_count`.
    MapCountExhausted {
        /// The limit read from `/proc/sys/vm/max_map_count`.
        max_map_count: usize,
        /// Guarded stacks already alive in this process.
        guarded_stacks: usize,
    },
    /// `mmap` of a new slab failed.
    Mmap(io::Error),
    /// Installing a guard page failed.
    Guard(io::Error),
    /// The requested stack size is above the maximum.
    TooLarge {
        /// Requested usable bytes.
        requested: usize,
        /// The maximum usable bytes.
        max: usize,
    },
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::MapCountExhausted {
                max_map_count,
                guarded_stacks,
            } => write!(
                f,
                "cannot allocate a guarded goroutine stack: this kernel lacks \
                 MADV_GUARD_INSTALL (Linux 6.13+), so each stack's guard page costs 2 memory \
                 maps, and {guarded_stacks} guarded stacks already use the budget allowed by \
                 vm.max_map_count = {max_map_count}; raise the limit, e.g. \
                 `sysctl -w vm.max_map_count={}` (as root; persist it in /etc/sysctl.conf), \
                 or keep fewer goroutines alive at once",
                max_map_count.saturating_mul(4).max(262_144)
            ),
            StackError::Mmap(e) => write!(
                f,
                "cannot map goroutine stack memory: {e}; the address space for stacks is \
                 exhausted (an address-space limit such as `ulimit -v`?): keep fewer \
                 goroutines alive at once, or give them smaller stacks \
                 (`Go::stack_size`, `Builder::stack_size`)"
            ),
            StackError::Guard(e) => write!(f, "cannot install a goroutine stack guard page: {e}"),
            StackError::TooLarge { requested, max } => write!(
                f,
                "goroutine stack size {requested} bytes is larger than the maximum {max} bytes"
            ),
        }
    }
}

impl std::error::Error for StackError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StackError::Mmap(e) | StackError::Guard(e) => Some(e),
            _ => None,
        }
    }
}

/// One guarded goroutine stack: `[guard page][usable bytes]`, guard below.
///
/// Plain addresses: the memory belongs to the pool's slab. Give it back with
/// [`StackPool::free`] or [`StackCache::put`]; a `Stack` that is just dropped
/// is leaked (its slab then outlives the pool; see the top of this file).
#[derive(Debug)]
pub(crate) struct Stack {
    /// Lowest address, start of the guard page.
    limit: NonZeroUsize,
    /// Highest address (exclusive): the initial stack pointer.
    base: NonZeroUsize,
    /// Guard bytes (one page).
    guard: u32,
    /// Index of the slab in its pool.
    slab: u32,
    /// Id of the owning pool (checked on free).
    pool: u32,
}

impl Stack {
    /// Usable bytes (the guard excluded).
    pub(crate) fn size(&self) -> usize {
        self.base.get() - self.limit.get() - self.guard as usize
    }

    /// Id of the pool that allocated it (the only one it may be freed to).
    pub(crate) fn pool_id(&self) -> u32 {
        self.pool
    }
}

// SAFETY: `limit..base` is a mapping owned by this `Stack` while it is out of
// the pool (the pool hands each stack to one owner at a time and does not
// unmap a slab with stacks out). `limit..limit+guard` is a guard page
// (installed before the stack was handed out, see `StackPool::alloc`); the
// usable part is at least MIN_STACK_SIZE (16 KiB > corosensei's 4 KiB), and
// both addresses are page-aligned, hence aligned to STACK_ALIGNMENT.
unsafe impl corosensei::stack::Stack for Stack {
    #[inline]
    fn base(&self) -> StackPointer {
        self.base
    }

    #[inline]
    fn limit(&self) -> StackPointer {
        self.limit
    }
}

/// Counters of one pool, for tests and introspection (`trace/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // read by tests and the runtime's stats snapshot
pub(crate) struct StackPoolStats {
    /// The guard mechanism in use.
    pub(crate) guard_mode: GuardMode,
    /// Slabs mapped (leaked ones included).
    pub(crate) slabs: usize,
    /// Slabs the scavenger gave back to the OS (all their stacks cold).
    pub(crate) slabs_returned: usize,
    /// Address space of those slabs, in bytes.
    pub(crate) mapped_bytes: usize,
    /// Size classes seen.
    pub(crate) size_classes: usize,
    /// Stacks carved from the slabs still mapped (each has its guard);
    /// returned slabs' stacks are no longer counted.
    pub(crate) carved: usize,
    /// Stacks out of the pool (running goroutines and per-P caches).
    pub(crate) outstanding: usize,
    /// Free stacks with resident pages.
    pub(crate) free_hot: usize,
    /// Free stacks whose pages were released.
    pub(crate) free_cold: usize,
    /// mprotect mode: guards installed by all pools of the process.
    pub(crate) guarded_stacks: usize,
    /// Stacks the mapped slabs hold, carved or not.
    pub(crate) capacity: usize,
    /// Stacks promised to goroutines (`reserve`).
    pub(crate) committed: usize,
}

/// Tunables of a pool; `StackPool::new` uses [`PoolConfig::default`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolConfig {
    pub(crate) guard_mode: GuardMode,
    /// How madvise-mode guards are installed (ignored in mprotect mode).
    pub(crate) guard_install: GuardInstall,
    /// The map limit used in mprotect mode.
    pub(crate) max_map_count: usize,
    /// Maps left to the rest of the process in mprotect mode.
    pub(crate) map_margin: usize,
    pub(crate) hot_max_stacks: usize,
    pub(crate) hot_max_bytes: usize,
    pub(crate) first_slab_stacks: usize,
    pub(crate) max_slab_bytes: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        let max_map_count = max_map_count();
        PoolConfig {
            guard_mode: guard_mode(),
            guard_install: guard_install(),
            max_map_count,
            map_margin: (max_map_count / MAP_MARGIN_DIV).max(MAP_MARGIN_MIN),
            hot_max_stacks: HOT_MAX_STACKS,
            hot_max_bytes: HOT_MAX_BYTES,
            first_slab_stacks: FIRST_SLAB_STACKS,
            max_slab_bytes: MAX_SLAB_BYTES,
        }
    }
}

/// A free stack in a pool list.
#[derive(Clone, Copy, Debug)]
struct Slot {
    limit: usize,
    slab: u32,
    /// The pool's scavenge generation when the stack became free (hot).
    gen: u32,
    /// Whether the guard is installed. Always true in madvise mode; false
    /// for cold stacks in mprotect mode (unless removing it failed).
    guarded: bool,
}

/// A mapped slab, or (`len == 0`) the empty entry of one given back to the
/// OS, whose index a new slab reuses (`PoolInner::returned`).
struct Slab {
    start: usize,
    len: usize,
    stride: usize,
    /// Stacks carved so far: `start + i * stride` for `i < carved`.
    carved: usize,
    capacity: usize,
    /// Stacks of this slab that are out of the pool.
    outstanding: usize,
    /// Carved stacks of this slab on their class's cold list.
    cold: usize,
    /// mprotect mode: guards installed in this slab.
    guarded: usize,
    /// madvise mode: the stacks `i < guards_to` have their guard (installed
    /// ahead of carving, [`GUARD_BATCH`] at a time).
    guards_to: usize,
    /// madvise mode: a carver is installing the next batch of guards with
    /// the pool lock released (`guards_ahead_due`); the slab is not
    /// returned meanwhile.
    installing: bool,
    registration: Option<SlabRegistration>,
}

impl Slab {
    /// The entry of a slab given back to the OS.
    const EMPTY: Slab = Slab {
        start: 0,
        len: 0,
        stride: 0,
        carved: 0,
        capacity: 0,
        outstanding: 0,
        cold: 0,
        guarded: 0,
        guards_to: 0,
        installing: false,
        registration: None,
    };

    fn is_mapped(&self) -> bool {
        self.len != 0
    }
}

struct SizeClass {
    size: usize,
    stride: usize,
    /// LIFO: push and pop at the back; trim from the front (oldest; the
    /// stacks of a flushed idle P cache are pushed there, `free_batch_aged`).
    hot: VecDeque<Slot>,
    cold: Vec<Slot>,
    hot_limit: usize,
    /// The slab new stacks are carved from.
    carving: Option<u32>,
    /// Slabs mapped for reservations and not carved from yet.
    spare: Vec<u32>,
    next_slab_stacks: usize,
    /// Stacks the mapped slabs of this class hold, carved or not.
    capacity: usize,
    /// Stacks promised to goroutines: spawned and not yet started, running,
    /// and per-P credits (see "Reservations" at the top of this file).
    committed: usize,
}

struct PoolInner {
    classes: Vec<SizeClass>,
    slabs: Vec<Slab>,
    /// Scavenge generation: scavenger steps so far.
    gen: u32,
    /// A scavenger is running or asked for (see `free_batch`).
    scavenging: bool,
    /// Indices of `slabs` whose slab went back to the OS, for reuse.
    returned: Vec<u32>,
    /// Slabs given back to the OS so far.
    slabs_returned: usize,
    /// Stacks handed out so far (`hand_out`), and the count the previous
    /// scavenger step saw: equal when no stack left the pool during the
    /// last period (the pool is *quiet*, see "Scavenging").
    handed_out: u64,
    handed_out_seen: u64,
    /// Slabs taken out of the pool whose mapping is being given back a
    /// piece per syscall, across steps when a step's CPU budget runs out
    /// (`unmap_slabs`; "Pacing").
    unmapping: Vec<Unmap>,
}

/// The per-runtime stack pool. See the top of this file.
pub(crate) struct StackPool {
    inner: Mutex<PoolInner>,
    /// Per-P caches that may hold this pool's free stacks (the runtime's
    /// procs): their bound is kept free of reservations (`slack`).
    caches: AtomicUsize,
    /// `process_madvise` failed outright after the probe worked: guards go
    /// in one `madvise` per carve from then on (`install_guards`).
    vector_failed: AtomicBool,
    /// Held by whoever empties per-P caches from outside their P: the
    /// scavenger's flush of idle Ps' caches and runtime teardown's drain
    /// (`StackCache::drain`), which does not take the scheduler lock (see
    /// "Who may write what").
    cache_flush: Mutex<()>,
    /// The scavenger's CPU-time bucket, made at its first step and kept
    /// across runs (`pace.rs`).
    pace: Mutex<pace::Pace>,
    config: PoolConfig,
    page: usize,
    id: u32,
}

impl StackPool {
    /// A pool with the default configuration.
    pub(crate) fn new() -> StackPool {
        StackPool::with_config(PoolConfig::default())
    }

    /// This pool's id (what [`Stack::pool_id`] names).
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// A pool with explicit tunables.
    pub(crate) fn with_config(config: PoolConfig) -> StackPool {
        StackPool {
            inner: Mutex::new(PoolInner {
                classes: Vec::new(),
                slabs: Vec::new(),
                gen: 0,
                scavenging: false,
                returned: Vec::new(),
                slabs_returned: 0,
                handed_out: 0,
                handed_out_seen: 0,
                unmapping: Vec::new(),
            }),
            pace: Mutex::new(pace::Pace::new()),
            caches: AtomicUsize::new(0),
            vector_failed: AtomicBool::new(false),
            cache_flush: Mutex::new(()),
            config,
            page: page_size(),
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolInner> {
        // Nothing panics while the lock is held except invariant checks that
        // fire before any list is modified, so a poisoned pool is consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands out a guarded stack of at least `size` usable bytes (rounded up
    /// to pages, at least [`MIN_STACK_SIZE`]). Prefers a hot free stack of
    /// that size, then a cold one, then carves a new one.
    pub(crate) fn alloc(&self, size: usize) -> Result<Stack, StackError> {
        let size = round_size(size)?;
        let mut inner = self.lock();
        let ci = self.class_index(&mut inner, size);
        if let Some(slot) = inner.classes[ci].hot.pop_back() {
            debug_assert!(slot.guarded);
            return Ok(self.hand_out(&mut inner, ci, slot));
        }
        if let Some(mut slot) = inner.classes[ci].cold.pop() {
            inner.slabs[slot.slab as usize].cold -= 1;
            if !slot.guarded {
                if let Err(e) = self.guard_slot(&mut inner, slot.limit, slot.slab) {
                    inner.slabs[slot.slab as usize].cold += 1;
                    inner.classes[ci].cold.push(slot);
                    return Err(e);
                }
                slot.guarded = true;
            }
            return Ok(self.hand_out(&mut inner, ci, slot));
        }
        let stack = self.carve(&mut inner, ci)?;
        if let Some(ahead) = self.guards_ahead_due(&mut inner, ci) {
            drop(inner);
            self.install_ahead(ahead);
        }
        Ok(stack)
    }

    /// Gives a stack back to the pool (onto its class's hot list). True if
    /// the caller should start a scavenger (see `free_batch`).
    pub(crate) fn free(&self, stack: Stack) -> bool {
        self.free_batch(std::iter::once(stack))
    }

    /// Gives several stacks back under one lock acquisition, onto their
    /// classes' hot lists: resident, no syscall ("Scavenging"). Returns true
    /// when a hot list is over its bound and no scavenger runs yet: the
    /// caller then starts one (`Shared::scavenge_stacks_soon`), which calls
    /// [`scavenge_within`](Self::scavenge_within) until it returns false.
    #[must_use = "start a scavenger when asked to"]
    pub(crate) fn free_batch(&self, stacks: impl IntoIterator<Item = Stack>) -> bool {
        self.free_batch_aged(stacks, false)
    }

    /// `free_batch`; with `old`, the stacks count as free for two whole
    /// periods already (the cache of an idle P, flushed by the scavenger:
    /// `StackCache::flush_idle`), old enough for every rule of the next
    /// step: it may return their slab, or release them even within the
    /// bound if that step is the sweep (else a flush at the sweep would
    /// leave them resident once the scavenger ends). They go to the front
    /// of the hot list, with the oldest, and are reused last.
    fn free_batch_aged(&self, stacks: impl IntoIterator<Item = Stack>, old: bool) -> bool {
        let mut inner = self.lock();
        let gen = if old {
            inner.gen.wrapping_sub(2)
        } else {
            inner.gen
        };
        let mut over = false;
        for stack in stacks {
            assert_eq!(
                stack.pool, self.id,
                "stack freed to a pool that did not allocate it"
            );
            let size = stack.size();
            let slab = &mut inner.slabs[stack.slab as usize];
            let limit = stack.limit.get();
            assert!(
                slab.is_mapped()
                    && limit >= slab.start
                    && (limit - slab.start) % slab.stride == 0
                    && (limit - slab.start) / slab.stride < slab.carved
                    && slab.stride == size + self.page,
                "stack does not belong to its slab"
            );
            slab.outstanding -= 1;
            let ci = inner
                .classes
                .iter()
                .position(|c| c.size == size)
                .expect("size class of a carved stack");
            let class = &mut inner.classes[ci];
            let slot = Slot {
                limit,
                slab: stack.slab,
                guarded: true,
                gen,
            };
            // The list stays ordered oldest first, which the scavenger's
            // loops rely on (they take from the front while it is old).
            if old {
                class.hot.push_front(slot);
            } else {
                class.hot.push_back(slot);
            }
            over |= class.hot.len() > class.hot_limit;
        }
        if over && !inner.scavenging {
            inner.scavenging = true;
            return true;
        }
        false
    }

    /// A snapshot of the pool's counters.
    #[allow(dead_code)] // used by tests and the runtime's stats snapshot
    pub(crate) fn stats(&self) -> StackPoolStats {
        let inner = self.lock();
        StackPoolStats {
            guard_mode: self.config.guard_mode,
            slabs: inner.slabs.iter().filter(|s| s.is_mapped()).count(),
            slabs_returned: inner.slabs_returned,
            mapped_bytes: inner.slabs.iter().map(|s| s.len).sum::<usize>()
                + inner.unmapping.iter().map(|u| u.len).sum::<usize>(),
            size_classes: inner.classes.len(),
            carved: inner.slabs.iter().map(|s| s.carved).sum(),
            outstanding: inner.slabs.iter().map(|s| s.outstanding).sum(),
            free_hot: inner.classes.iter().map(|c| c.hot.len()).sum(),
            free_cold: inner.classes.iter().map(|c| c.cold.len()).sum(),
            guarded_stacks: GUARDED_STACKS.load(Ordering::Relaxed),
            capacity: inner.classes.iter().map(|c| c.capacity).sum(),
            committed: inner.classes.iter().map(|c| c.committed).sum(),
        }
    }

    fn class_index(&self, inner: &mut PoolInner, size: usize) -> usize {
        if let Some(i) = inner.classes.iter().position(|c| c.size == size) {
            return i;
        }
        let stride = size + self.page;
        let hot_limit = (self.config.hot_max_bytes / stride)
            .min(self.config.hot_max_stacks)
            .max(HOT_MIN_STACKS);
        inner.classes.push(SizeClass {
            size,
            stride,
            hot: VecDeque::new(),
            cold: Vec::new(),
            hot_limit,
            carving: None,
            spare: Vec::new(),
            next_slab_stacks: self.config.first_slab_stacks.max(1),
            capacity: 0,
            committed: 0,
        });
        inner.classes.len() - 1
    }

    fn hand_out(&self, inner: &mut PoolInner, ci: usize, slot: Slot) -> Stack {
        debug_assert!(slot.guarded, "a stack is never handed out without a guard");
        inner.slabs[slot.slab as usize].outstanding += 1;
        inner.handed_out = inner.handed_out.wrapping_add(1);
        let stride = inner.classes[ci].stride;
        Stack {
            limit: NonZeroUsize::new(slot.limit).expect("slab address is not null"),
            base: NonZeroUsize::new(slot.limit + stride).expect("slab address is not null"),
            guard: self.page as u32,
            slab: slot.slab,
            pool: self.id,
        }
    }

    /// Carves the next stack of class `ci`: from the slab being carved, else
    /// a spare slab mapped by `reserve`, else a new slab (only an
    /// allocation without a reservation gets that far).
    fn carve(&self, inner: &mut PoolInner, ci: usize) -> Result<Stack, StackError> {
        let slab_idx = match inner.classes[ci].carving {
            Some(i) if inner.slabs[i as usize].carved < inner.slabs[i as usize].capacity => i,
            _ => {
                let next = match inner.classes[ci].spare.pop() {
                    Some(i) => i,
                    None => {
                        let stacks = inner.classes[ci].next_slab_stacks;
                        self.map_slab(inner, ci, stacks)?
                    }
                };
                inner.classes[ci].carving = Some(next);
                next
            }
        };
        let slab = &inner.slabs[slab_idx as usize];
        let limit = slab.start + slab.carved * slab.stride;
        match self.config.guard_mode {
            GuardMode::Madvise => self.guard_ahead(&mut inner.slabs[slab_idx as usize])?,
            GuardMode::Mprotect => self.guard_slot(inner, limit, slab_idx)?,
        }
        inner.slabs[slab_idx as usize].carved += 1;
        let slot = Slot {
            limit,
            slab: slab_idx,
            guarded: true,
            gen: 0,
        };
        Ok(self.hand_out(inner, ci, slot))
    }

    /// Maps a slab of (up to) `stacks` stacks for class `ci`; the caller makes
    /// it the carving slab or a spare. Each slab doubles the next one's
    /// size, up to `max_slab_bytes`.
    fn map_slab(&self, inner: &mut PoolInner, ci: usize, stacks: usize) -> Result<u32, StackError> {
        let class = &inner.classes[ci];
        let stride = class.stride;
        let stacks = stacks.min(self.config.max_slab_bytes / stride).max(1);
        let len = stacks * stride;
        let slab_idx = match inner.returned.last() {
            Some(&i) => i,
            None => u32::try_from(inner.slabs.len()).map_err(|_| {
                StackError::Mmap(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "too many stack slabs",
                ))
            })?,
        };
        // SAFETY: a fresh private anonymous mapping at an address of the
        // kernel's choice; no existing memory is affected.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                SLAB_MAP_FLAGS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(StackError::Mmap(io::Error::last_os_error()));
        }
        // No huge pages: one touched byte would cost 2 MiB. Failure (THP not
        // built in) is harmless, so the result is ignored.
        // SAFETY: advice on our own fresh mapping; it changes no contents.
        unsafe { libc::madvise(map, len, libc::MADV_NOHUGEPAGE) };
        let start = map as usize;
        let registration = overflow::register_slab(start, start + len, stride, self.page);
        let slab = Slab {
            start,
            len,
            stride,
            carved: 0,
            capacity: stacks,
            outstanding: 0,
            cold: 0,
            guarded: 0,
            guards_to: 0,
            installing: false,
            registration,
        };
        if slab_idx as usize == inner.slabs.len() {
            inner.slabs.push(slab);
        } else {
            inner.returned.pop();
            inner.slabs[slab_idx as usize] = slab;
        }
        let class = &mut inner.classes[ci];
        class.capacity += stacks;
        class.next_slab_stacks = class.next_slab_stacks.max(stacks.saturating_mul(2));
        Ok(slab_idx)
    }

    /// Takes back the slab `map_slab` just mapped for `reserve` (nothing was
    /// carved from it, nothing refers to it).
    fn unmap_fresh_slab(&self, inner: &mut PoolInner, ci: usize, slab_idx: u32) {
        let mut slab = if slab_idx as usize + 1 == inner.slabs.len() {
            let Some(slab) = inner.slabs.pop() else {
                return;
            };
            slab
        } else {
            inner.returned.push(slab_idx);
            std::mem::replace(&mut inner.slabs[slab_idx as usize], Slab::EMPTY)
        };
        debug_assert_eq!(slab.carved, 0);
        if let Some(registration) = slab.registration.take() {
            overflow::unregister_slab(registration);
        }
        // SAFETY: the whole mapping of a slab mapped a moment ago under this
        // lock; no stack was carved from it, so nothing uses it.
        unsafe { libc::munmap(slab.start as *mut libc::c_void, slab.len) };
        inner.classes[ci].capacity -= slab.capacity;
    }

    /// Stacks of stride `stride` that the per-P caches may hold between
    /// them: kept out of reservations, so that a goroutine whose own P's
    /// cache is empty always finds its stack in the pool.
    fn slack(&self, stride: usize) -> usize {
        self.caches.load(Ordering::Relaxed) * cache_limit(stride)
    }

    /// The runtime has `n` per-P caches (its procs).
    pub(crate) fn set_caches(&self, n: usize) {
        self.caches.store(n, Ordering::Relaxed);
    }
}

impl Drop for StackPool {
    /// Unmaps every slab with no stack out; leaks (keeps mapped and
    /// registered) the others. See the top of this file.
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if self.config.guard_mode == GuardMode::Mprotect {
            // Promises of goroutines that were leaked, never run nor dropped.
            let left: usize = inner.classes.iter().map(|c| c.committed).sum();
            GUARDS_COMMITTED.fetch_sub(left, Ordering::Relaxed);
        }
        for slab in &mut inner.slabs {
            if slab.outstanding != 0 || !slab.is_mapped() {
                continue;
            }
            if let Some(registration) = slab.registration.take() {
                overflow::unregister_slab(registration);
            }
            // SAFETY: the whole slab mapping, created by `map_slab`. No stack
            // of it is out, so no coroutine runs on it, and the pool (the only
            // other user) is being dropped.
            unsafe { libc::munmap(slab.start as *mut libc::c_void, slab.len) };
            GUARDED_STACKS.fetch_sub(slab.guarded, Ordering::Relaxed);
        }
        // What a paced scavenger left to unmap.
        let mut unmapping = std::mem::take(&mut inner.unmapping);
        let left = self.unmap_slabs(&mut unmapping, &mut || true, true);
        debug_assert!(left.is_empty());
    }
}

/// Runs a syscall wrapper until it succeeds or fails with something other
/// than EINTR/EAGAIN (a bounded number of times).
fn retry_eintr(mut f: impl FnMut() -> libc::c_int) -> io::Result<()> {
    let mut tries = 0;
    loop {
        if f() == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        tries += 1;
        match e.raw_os_error() {
            Some(libc::EINTR) | Some(libc::EAGAIN) if tries < 100 => continue,
            _ => return Err(e),
        }
    }
}

/// `AtomicUsize::fetch_update` (Relaxed), which newer toolchains deprecate
/// for a name not yet stable on ours: stores `f(old)`, retrying with the new
/// value when another thread changed it meanwhile; `Ok(old)`, or `Err(old)`
/// once `f` returns `None`.
fn update_relaxed(
    a: &AtomicUsize,
    mut f: impl FnMut(usize) -> Option<usize>,
) -> Result<usize, usize> {
    let mut old = a.load(Ordering::Relaxed);
    loop {
        let new = f(old).ok_or(old)?;
        match a.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Ok(old),
            Err(now) => old = now,
        }
    }
}
