//! Goroutine stacks: slabs, guard pages, the per-runtime pool and the per-P
//! cache.
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
//! map (VMA) each, far below `vm.max_map_count` (65530 by default). Measured
//! on Linux 6.18 (`million_stacks_of_256k`): 1,000,000 stacks, 254 slabs, 40
//! maps in the whole process (adjacent slabs merge). A small program stays
//! small: its first slab is 64 × 260 KiB = 16 MiB of address space.
//! Slabs are also marked `MADV_NOHUGEPAGE`: with transparent huge pages set to
//! `always`, touching one byte of a stack could otherwise fault in 2 MiB.
//!
//! # Guards
//!
//! A guard page is installed when a stack is *carved* (handed out the first
//! time), or a little ahead of that, never when a slab is mapped. Two
//! mechanisms, chosen once per process by [`guard_mode`]:
//!
//! * [`GuardMode::Madvise`] — `MADV_GUARD_INSTALL` (Linux ≥ 6.13) writes a
//!   guard marker into the page table. It does not split the VMA, so a slab
//!   stays one map however many guards it has. The guard stays for the
//!   slab's whole life; free stacks keep it. Guards are installed in
//!   batches ([`guard_install`], probed once): when the carving reaches a
//!   stack without a guard, one `process_madvise(PIDFD_SELF, iov, n,
//!   MADV_GUARD_INSTALL)` installs the guards of the next [`GUARD_BATCH`]
//!   (64) stacks of the slab (`Slab::guards_to`), so one carve in 64 makes a
//!   syscall. Without `process_madvise` on oneself (kernel < 6.13, seccomp;
//!   a `pidfd_open` descriptor is tried before giving up), in a forked
//!   child holding its parent's descriptor, or with
//!   `GOSCHED_STACK_GUARD=madvise`: one `madvise` per carved stack. Why 64
//!   and not the whole slab when it is first carved: a call costs less per
//!   guard with more iovecs (C loop on Linux 6.18, 100,000 guards in 1 GiB
//!   slabs of 260 KiB stacks, best of 3: one `madvise` each 1,178 ns/guard;
//!   `process_madvise` of 16: 927 ns, of 64: 773 ns, of 256: 662 ns, of
//!   1024: 878 ns; most of the rest is page-table allocation, once per
//!   2 MiB, which the stacks' first touch would pay anyway), but a whole
//!   slab (up to 4,033 stacks of 256 KiB, 65,000 of 16 KiB) would make the
//!   goroutine that carves its first stack pay for thousands of guards that
//!   may never be used. Measured (`bench/scripts/ab.py`, 9 interleaved runs
//!   on a quiet 16-core machine, procs 2): W7 time to park 100,000
//!   goroutines 308 → 247 ms against the previous version (per-stack
//!   `madvise`); this version with `GOSCHED_STACK_GUARD=madvise` 264 ms;
//!   1,024 per call instead of 64: W7 1.05×, W13 1.04×, W1 0.94×, all
//!   within the noise. Once half of a batch is carved, the carver installs
//!   the next batch with the pool lock released (`guards_ahead_due`,
//!   `install_ahead`; the slab is not returned meanwhile): the call takes
//!   some 50 µs, and under the lock the other Ms that wanted a stack slept
//!   on it (4% of W7's CPU time in futex calls). Only a slab's first batch,
//!   or a carve that outruns the installer, installs under the lock.
//!   `ab.py`, 10 interleaved runs on the 2-core box: W7 time to park
//!   0.77×, W8 0.88×, W13 0.92×, W1 and W2 unchanged.
//! * [`GuardMode::Mprotect`] — the fallback when the probe `madvise` fails
//!   (`EINVAL`: kernel < 6.13; any other error is treated alike, since the
//!   fallback works everywhere), or when `GOSCHED_STACK_GUARD=mprotect` is set:
//!   `mprotect(PROT_NONE)` splits the slab's VMA around every guard, i.e.
//!   about 2 maps per guarded stack. A process-wide count of installed
//!   mprotect guards ([`GUARDED_STACKS`]) is kept, and a stack whose guard
//!   would make `2 * guarded + margin` exceed `/proc/sys/vm/max_map_count`
//!   (read once; `margin = max(1024, max_map_count / 8)` is left for the rest
//!   of the process: libraries, thread stacks, malloc arenas) is refused with
//!   [`StackError::MapCountExhausted`], whose message names the sysctl
//!   (reservations, below, stay within the same budget). Cold stacks
//!   (below) give their guard back (`mprotect(RW)`, the VMAs merge again) and
//!   get it reinstalled when reused.
//!
//! A stack is never handed out without a guard: every path into
//! [`StackPool::alloc`] either finds a guarded free stack or installs the guard
//! first and fails if that fails.
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
//! (unmapped by the scavenger, below); its entry in the slab table is then
//! empty (`len == 0`) and reused by the next slab mapped.
//!
//! `alloc` prefers hot, then cold, then carves a new stack (mapping a new slab
//! when the current one is full). Freeing never makes a syscall: a freed
//! stack goes on the hot list, resident, however long the list grows.
//!
//! # Scavenging
//!
//! Pages go back to the OS off the spawn and exit paths, as Go's background
//! scavenger does. When a free leaves a class's hot list over its bound —
//! `clamp(64 MiB / stride, 4, 256)` stacks — `free_batch` asks its caller to
//! start a scavenger (once: `PoolInner::scavenging`), which runs on a thread
//! of the runtime's blocking pool (`Shared::scavenge_stacks_soon`,
//! `sched/blocking.rs`) and calls [`StackPool::scavenge_within`] every
//! 250 ms or later (a *step*, paced: "Pacing" below) until it returns
//! false. The pool counts the stacks it hands out
//! (`handed_out`, under the lock it holds anyway); a step that finds the
//! count unchanged since the previous step is *quiet*: no stack left the
//! pool for a whole period, so the burst is over. A step:
//!
//! 1. (Quiet steps only.) The driver first empties the per-P caches of the
//!    idle Ps into the pool (`Shared::flush_idle_stack_caches`,
//!    [`StackCache::flush_idle`]): their stacks count as free for two
//!    periods already, and their promises go back. Then whole-slab return
//!    (below) takes every slab whose stacks are all free since before the
//!    previous step, and unmaps it: `munmap` frees its resident pages and
//!    its page tables in one pass, with no `MADV_DONTNEED` before it.
//! 2. Releases up to 8,192 of the oldest hot stacks beyond the bound that
//!    have been free since before the previous step (`MADV_DONTNEED`),
//!    sorted by address, with one `madvise` per run of adjacent stacks of a
//!    slab (one syscall and one TLB shootdown for many stacks); the range
//!    covers the guard pages between them, whose `MADV_GUARD_INSTALL`
//!    markers survive `MADV_DONTNEED` (a test reads one after a scavenge and
//!    must fault). mprotect mode keeps one `madvise` + `mprotect` per stack
//!    (its guards must be given back).
//! 3. A step with nothing to do in 1 and 2 and no list over its bound is the
//!    last (the sweep): it also releases the stacks within the bounds that
//!    stayed free for two whole periods (unused for a while: Go's scavenger
//!    returns those), returns the slabs that are then empty, and shrinks the
//!    free lists that grew with the burst (100,000 entries are 2.3 MiB
//!    each); then the scavenger ends, after trimming the task allocator's
//!    depot and the C heap (`sched/blocking.rs`, `trim_heap`). Nothing ticks
//!    after that: a later free over a bound starts a new scavenger.
//!
//! The syscalls run outside the pool lock; the stacks and slabs being
//! released are in no list meanwhile. Batching the release (`gosched-bench
//! w13 w8`, interleaved A/B against freeing with a `madvise` per stack past
//! the bound, 5 reps): W13 churn 354 → 191 ms/round, W8 100,000 sleeps
//! 547 → 170 ms, W2 0.74×, W1 1.01×.
//!
//! **Whole-slab return** (`take_empty_slabs`). A slab whose carved stacks
//! are all cold, hot and free since before the previous step, or being
//! released in that step (so none is out, none in a per-P cache, none freed
//! during the last period) is taken out of the pool under the lock (its
//! stacks leave the hot and cold lists, its capacity leaves the class, it
//! leaves the overflow registry) and unmapped once the lock is released,
//! which also frees its page tables: a guard marker keeps its page-table
//! page alive, so 100,000 parked 256 KiB stacks hold about 48 MiB of page
//! tables (VmPTE, not counted in VmRSS) that `MADV_DONTNEED` never frees. A
//! slab stays when a stack of it is out (a goroutine's, or in the cache of a
//! P that is not idle), when it is its class's carving slab with uncarved
//! room, when the class's promises need it (`committed + slack` must still
//! fit in the remaining capacity, see "Reservations"), or when it was never
//! carved (a spare mapped for promises costs address space, no memory).
//!
//! Only quiet steps and the sweep return slabs, because a burst that is not
//! over would map, guard and fault them in again: in W13 (rounds of 100,000
//! goroutines back to back, the scavenger running between them) every
//! period hands out stacks, and a version that returned slabs at every step
//! cost 1.30× per round (145 → 189 ms, same-run medians). A program whose
//! bursts come further apart than a period pays that at each burst (a new
//! slab, its guards, its page tables): the price of giving the memory back,
//! which Go pays too (its freed stack spans go back to the heap and, later,
//! to the OS).
//!
//! Why the flush: nothing else empties the cache of a P that goes idle (its
//! next spawn takes the stacks back at no cost), and a cached stack pins its
//! slab. Before it, a review measured 5–8 of 8 slabs kept after 6,000 parked
//! 64 KiB goroutines ended (2 Ps), and `tests/stack_idle_return.rs` finds
//! the caches' 52 stacks of a 20,000-goroutine burst still out 10 s later.
//! The flush runs under the scheduler lock (an idle P stays idle under it,
//! as `kill_p` relies on) and the pool's `cache_flush` lock (see "Who may
//! write what").
//!
//! Measured (`examples/burst_rss.rs`: 100,000 goroutines park at once, are
//! released and joined, then the process idles; 2 Ps, on a 2-core VM shared
//! with other work; 19 runs interleaved with as many of the previous
//! version): RSS 2.4–2.7 MiB before the burst, 430–460 MiB at its peak;
//! 750–1,000 ms after it 3.9–4.4 MiB in 14 runs (the issue's target, within
//! 2× of the level before within 5 s, met) and 7.6–9.0 MiB in 5 (missed,
//! see below), where the previous version held 320–370 MiB at 1 s and
//! 5.4–10.7 MiB from 4 s on (never within 2×). The scavenger thread used
//! 54–98 ms of CPU in the 6 s after the burst (the whole process 1.0–1.7%
//! of a core; 1.2–1.5% in 8 runs while the machine was quiet) against
//! 96–203 ms (1.7–3.5%) before. What is left is the kernel freeing the
//! burst's memory (perf: `munmap`'s page-table walk over the slabs and its
//! page freeing, 80%; `madvise`, mostly `malloc_trim`'s freeing the tasks'
//! and channels' pages, 16%; user space under 2%). A C program that touches
//! one page of each of 100,000 such stacks and unmaps them needs 38–53 ms
//! for that on the same machine (12–14 ms of it the page tables), and
//! `malloc_trim` takes 8–21 ms, so about 1% of a core over 6 s is what
//! freeing this much memory costs at all; spreading the work over more time
//! would not lower the total. Go 1.27 (`GOMAXPROCS=2`) still held
//! 276–279 MiB 200 s after the same burst (0.1–0.2% of a core: it had not
//! started to give anything back).
//!
//! The free lists are shrunk in place, never freed whole (`drop_quietly`):
//! glibc's `free` of a block it had mapped (the 3 MiB hot list, freed empty
//! at the sweep) raised its trim threshold to 6 MiB for the rest of the
//! process, and a thread arena then kept up to that much free memory
//! resident (4.6 MiB measured).
//!
//! What stayed above 2× in those 5 runs was the C heap, not stacks: each
//! parked goroutine's channel waiter (88 bytes, `chan/core.rs`) is
//! allocated in the glibc arena of the M that ran it and freed into that
//! arena's fastbins; glibc's `malloc_trim` (2.36) merges them into the
//! arena's top chunk but never trims the top of a thread arena (a C test:
//! 100,000 48-byte blocks freed and two `malloc_trim`s leave 7 MiB
//! resident); only a free of a block of 64 KiB or more in that arena
//! does. So when a scavenger run ends, it asks every M to trim
//! (`Shared::heap_trims`, waking the idle ones): each frees a 96 KiB block
//! from its own arena (`blocking.rs`, `trim_thread_arena`).
//! Since (16 runs, quiet machine): 3.1–3.8 MiB 6 s after the burst (2.4–2.7
//! before), within 2× from 750–1,000 ms on in all 16; the idle phase 1.0–1.4%
//! of a core, the Ms' trims 0.1–0.6 ms of it.
//!
//! ## Pacing
//!
//! All that kernel work is paced (`pace.rs`): the scavenger may use 1% of
//! the CPU time of the runtime's procs, as Go's (`scavengePercent`, which
//! Go also counts as wall time × GOMAXPROCS), through a token bucket of CPU
//! time kept across runs. A step reads its thread's CPU clock after each
//! syscall — a `madvise` run, or a piece of a slab's `munmap` of at most
//! [`UNMAP_PIECE`] — and stops when its credit is spent: the stacks it did
//! not release stay hot, the pieces it did not unmap wait in
//! `PoolInner::unmapping` and go first at the next step. What a step used
//! beyond its credit (the overshoot of one syscall, or the trims at the end
//! of a run, which cannot be split) is paid back by a longer sleep. The
//! bucket holds at most one second's worth, so a small burst is returned
//! in one step and a large one at the rate. mprotect mode unmaps whole
//! slabs unpaced: their guards count against the map budget until they are
//! gone, and promised stacks rely on getting them back (a review found a
//! promised goroutine failing with `MapCountExhausted` while paced slabs
//! waited). Before, a quiet step unmapped
//! every empty slab at once: the 100,000-goroutine burst's 45–65 ms of
//! kernel work in one step, and a burst of a million goroutines some 0.6 s
//! of a core in one go.
//!
//! Measured (`examples/burst_rss.rs`, 14 runs, quiet machine, 2 procs):
//! RSS within 2× of the level before the burst from 2.25–3.25 s after it
//! (was 0.75–1.0 s); the busiest second of the idle phase (6 of the runs)
//! 35.7–36.2 ms of CPU (the bucket's second plus the rate: 1.8% of the 2 procs, 3.6% of one
//! core; was 60–80 ms in one step), then 5.2–5.7 ms per 250 ms step
//! (1% of the 2 procs) until the sweep; the whole idle phase 67–86 ms in
//! 6 s (1.1–1.4% of one core, 0.6–0.7% of the 2 procs), about what it was
//! unpaced: spreading the work does not lower it.
//!
//! `MADV_DONTNEED` rather than `MADV_FREE`: the pages go at once, so RSS
//! visibly follows the live goroutines (`MADV_FREE` keeps them counted until
//! memory pressure), and a reused stack reads back zeros either way.
//!
//! Why these bounds: a hot stack holds the pages its last goroutine touched
//! (usually a few, at most the whole stack), so 64 MiB per class bounds the
//! idle RSS the pool keeps for fast reuse; 256 stacks is plenty to absorb
//! bursts of short goroutines. The per-P cache is smaller (8 MiB / 32 stacks
//! per class) because there is one per P.
//!
//! # Reservations
//!
//! A goroutine takes its stack lazily, at its first run (a million spawned
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

use overflow::SlabRegistration;

/// `madvise` advice installing guard markers (Linux 6.13); not in libc 0.2.191.
/// (`MADV_GUARD_REMOVE` is 103; it is not needed: guards live as long as
/// their slab.)
pub(crate) const MADV_GUARD_INSTALL: libc::c_int = 102;

/// `pidfd` naming the calling process in `process_madvise` (Linux 6.15,
/// `PIDFD_SELF_THREAD_GROUP`): no descriptor to open, and still right in a
/// forked child. Not in libc 0.2.191.
const PIDFD_SELF: libc::c_int = -10001;

/// Guards installed ahead of carving, with one `process_madvise` (see
/// "Guards" at the top).
const GUARD_BATCH: usize = 64;

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

/// Bound of one size class in a per-P cache.
const CACHE_MAX_STACKS: usize = 32;
const CACHE_MAX_BYTES: usize = 8 << 20;
const CACHE_MIN_STACKS: usize = 2;

/// mprotect mode: maps left to the rest of the process are
/// `max(MAP_MARGIN_MIN, max_map_count / MAP_MARGIN_DIV)`.
const MAP_MARGIN_MIN: usize = 1024;
const MAP_MARGIN_DIV: usize = 8;

/// mprotect mode: guards currently installed by all pools of the process
/// (each costs about two maps, and the map limit is per process).
static GUARDED_STACKS: AtomicUsize = AtomicUsize::new(0);

/// mprotect mode: stacks promised by all pools of the process (each may need
/// a guard; see "Reservations").
static GUARDS_COMMITTED: AtomicUsize = AtomicUsize::new(0);

static NEXT_POOL_ID: AtomicU32 = AtomicU32::new(1);

/// How guard pages are made. See the top of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuardMode {
    /// `madvise(MADV_GUARD_INSTALL)`: no VMA split, no map cost.
    Madvise,
    /// `mprotect(PROT_NONE)`: two maps per guarded stack.
    Mprotect,
}

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

/// Two fresh pages for a probe (`guard_mode`, `guard_install`); the caller
/// unmaps them. `None` if they cannot be mapped.
fn scratch_pages(page: usize) -> Option<*mut libc::c_void> {
    // SAFETY: a fresh private anonymous mapping; no existing memory is
    // affected.
    let map = unsafe {
        libc::mmap(
            ptr::null_mut(),
            2 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            SLAB_MAP_FLAGS,
            -1,
            0,
        )
    };
    (map != libc::MAP_FAILED).then_some(map)
}

/// The guard mechanism of this process, probed once: map two pages and try
/// `MADV_GUARD_INSTALL` on the first. `GOSCHED_STACK_GUARD=mprotect` forces
/// the fallback (to test it on a new kernel).
pub(crate) fn guard_mode() -> GuardMode {
    static MODE: OnceLock<GuardMode> = OnceLock::new();
    *MODE.get_or_init(|| {
        if std::env::var_os("GOSCHED_STACK_GUARD").is_some_and(|v| v == "mprotect") {
            return GuardMode::Mprotect;
        }
        let page = page_size();
        let Some(map) = scratch_pages(page) else {
            // Cannot even probe: the fallback is always correct.
            return GuardMode::Mprotect;
        };
        // SAFETY: `map` is our own 2-page mapping from above; the advice only
        // changes that page's page-table entries.
        let ok = unsafe { libc::madvise(map, page, MADV_GUARD_INSTALL) } == 0;
        // SAFETY: unmapping exactly the mapping created above, which nothing
        // else references.
        unsafe { libc::munmap(map, 2 * page) };
        // EINVAL means "unknown advice" (kernel < 6.13). Any other failure
        // also sends us to the fallback, which works everywhere.
        if ok {
            GuardMode::Madvise
        } else {
            GuardMode::Mprotect
        }
    })
}

/// How madvise-mode guards are installed, probed once per process (see
/// "Guards" at the top).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuardInstall {
    /// `process_madvise(pidfd, iov, n, MADV_GUARD_INSTALL)`: the guards of
    /// up to [`GUARD_BATCH`] stacks in one call. `pid` is the process the
    /// descriptor names (0 for [`PIDFD_SELF`]); a forked child, whose
    /// inherited descriptor names its parent, installs one at a time.
    Vector {
        pidfd: libc::c_int,
        pid: libc::pid_t,
    },
    /// `madvise(MADV_GUARD_INSTALL)`, one guard per call, as each stack is
    /// carved (no `process_madvise`, or `GOSCHED_STACK_GUARD=madvise`).
    PerPage,
}

/// The way this process installs madvise-mode guards, probed once: a
/// `process_madvise` of `MADV_GUARD_INSTALL` on a scratch page through
/// [`PIDFD_SELF`], else through a `pidfd_open` descriptor of this process;
/// else (kernel < 6.13 for `process_madvise` of any advice on oneself, or a
/// seccomp filter) [`GuardInstall::PerPage`].
pub(crate) fn guard_install() -> GuardInstall {
    static HOW: OnceLock<GuardInstall> = OnceLock::new();
    *HOW.get_or_init(|| {
        if guard_mode() != GuardMode::Madvise
            || std::env::var_os("GOSCHED_STACK_GUARD").is_some_and(|v| v == "madvise")
        {
            return GuardInstall::PerPage;
        }
        let page = page_size();
        let Some(map) = scratch_pages(page) else {
            return GuardInstall::PerPage;
        };
        let works = |pidfd: libc::c_int| {
            let iov = libc::iovec {
                iov_base: map,
                iov_len: page,
            };
            // SAFETY: advice on the first page of our own scratch mapping;
            // the kernel only reads the one iovec.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_process_madvise,
                    pidfd,
                    &iov as *const libc::iovec,
                    1usize,
                    MADV_GUARD_INSTALL,
                    0u32,
                )
            };
            r == page as libc::c_long
        };
        let how = if works(PIDFD_SELF) {
            GuardInstall::Vector {
                pidfd: PIDFD_SELF,
                pid: 0,
            }
        } else {
            // SAFETY: getpid has no preconditions; pidfd_open only returns
            // a new descriptor (close-on-exec) or an error.
            let (pid, fd) = unsafe {
                let pid = libc::getpid();
                (
                    pid,
                    libc::syscall(libc::SYS_pidfd_open, pid, 0u32) as libc::c_int,
                )
            };
            if fd >= 0 && works(fd) {
                // The descriptor stays open for the life of the process.
                GuardInstall::Vector { pidfd: fd, pid }
            } else {
                if fd >= 0 {
                    // SAFETY: the descriptor opened just above, used by nothing else.
                    unsafe { libc::close(fd) };
                }
                GuardInstall::PerPage
            }
        };
        // SAFETY: unmapping exactly the scratch mapping created above.
        unsafe { libc::munmap(map, 2 * page) };
        how
    })
}

/// `/proc/sys/vm/max_map_count`, read once (65530, the kernel default, when
/// it cannot be read).
pub(crate) fn max_map_count() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(65530)
    })
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

/// The guards a carver installs with the pool lock released: stacks
/// `from..to` of slab `slab` (at `start`, `stride` apart).
#[derive(Debug, Clone, Copy)]
struct GuardsAhead {
    slab: u32,
    start: usize,
    stride: usize,
    from: usize,
    to: usize,
}

/// A slab (or what is left of it) to unmap: out of every list and of the
/// slab table, so nothing else refers to it.
#[derive(Debug, Clone, Copy)]
struct Unmap {
    start: usize,
    len: usize,
    /// Its stride: pieces end on a stack's boundary (in mprotect mode, a
    /// mapping's boundary, so no piece splits a mapping in two).
    stride: usize,
    /// mprotect guards it holds, uncounted once the last piece is gone.
    guarded: usize,
}

/// At most this much address space per `munmap` when a slab goes back
/// (rounded down to whole stacks, at least one): the unit of work a paced
/// step checks its budget after. With one page resident per 256 KiB stack
/// a piece frees 256 pages; with every page resident, 16,384 (some 8 ms).
const UNMAP_PIECE: usize = 64 << 20;

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

    /// madvise mode, after a carve (lock held): when the class's carving
    /// slab has at most half a batch of guarded stacks left to carve and
    /// nobody is installing more, the caller installs the next
    /// [`GUARD_BATCH`] with the lock released ([`install_ahead`]): a
    /// `process_madvise` of 64 guards takes some 50 µs, and under the lock
    /// it made the other Ms that wanted a stack sleep on it (W7: 100,000
    /// goroutines, each carving its stack at its first run, 4% of the CPU
    /// time in futex calls). A carve that reaches an unguarded stack still
    /// installs under the lock (`guard_ahead`: the first stacks of a slab,
    /// or a burst that outruns the installer); installing a guard twice is
    /// harmless.
    ///
    /// [`install_ahead`]: Self::install_ahead
    fn guards_ahead_due(&self, inner: &mut PoolInner, ci: usize) -> Option<GuardsAhead> {
        if self.config.guard_mode != GuardMode::Madvise
            || !matches!(self.config.guard_install, GuardInstall::Vector { .. })
            || self.vector_failed.load(Ordering::Relaxed)
        {
            return None;
        }
        let idx = inner.classes[ci].carving?;
        let slab = &mut inner.slabs[idx as usize];
        if slab.installing
            || slab.guards_to >= slab.capacity
            || slab.guards_to - slab.carved.min(slab.guards_to) > GUARD_BATCH / 2
        {
            return None;
        }
        slab.installing = true;
        Some(GuardsAhead {
            slab: idx,
            start: slab.start,
            stride: slab.stride,
            from: slab.guards_to,
            to: (slab.guards_to + GUARD_BATCH).min(slab.capacity),
        })
    }

    /// Installs what [`guards_ahead_due`](Self::guards_ahead_due) chose,
    /// lock not held, then records it. A failure records nothing: the carve
    /// that reaches those stacks installs their guards itself, and reports
    /// the error.
    fn install_ahead(&self, ahead: GuardsAhead) {
        let installed = self
            .install_guards(ahead.start, ahead.stride, ahead.from, ahead.to)
            .unwrap_or(0);
        let mut inner = self.lock();
        let slab = &mut inner.slabs[ahead.slab as usize];
        debug_assert!(slab.installing && slab.start == ahead.start);
        slab.installing = false;
        slab.guards_to = slab.guards_to.max(ahead.from + installed);
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

    /// Whether no stack left the pool since the previous scavenger step
    /// (the step then takes whole slabs first): the scavenger then also
    /// flushes the caches of idle Ps (`StackCache::flush_idle`).
    pub(crate) fn quiet(&self) -> bool {
        let inner = self.lock();
        inner.handed_out == inner.handed_out_seen
    }

    /// Serializes emptying per-P caches from outside their P: the
    /// scavenger's flush of idle Ps (`StackCache::flush_idle`, which takes
    /// the guard) and teardown's `StackCache::drain`. Lock order: the
    /// scheduler lock, then this one, then the pool's.
    pub(crate) fn lock_cache_flush(&self) -> MutexGuard<'_, ()> {
        self.cache_flush.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The scavenger `free_batch` asked for could not be started: a later
    /// free over a bound asks again.
    pub(crate) fn scavenger_not_started(&self) {
        self.lock().scavenging = false;
    }

    /// The scavenger's CPU-time bucket (`pace.rs`), kept across its runs;
    /// the scavenger's loop (`sched/blocking.rs`) drives it with the
    /// runtime's clock.
    pub(crate) fn pace(&self) -> MutexGuard<'_, pace::Pace> {
        self.pace.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One step of the scavenger. When the pool is quiet (no stack left it
    /// during the last period), it first gives back to the OS (`munmap`)
    /// every slab whose stacks are all free since before the previous step
    /// (`take_empty_slabs`), with no `MADV_DONTNEED` before. Then it
    /// releases (`MADV_DONTNEED`) up to `max` hot stacks beyond their
    /// class's bound that have been free since before the previous step,
    /// oldest first, adjacent ones of a slab in one call. Once no list is
    /// over its bound, one last step (the sweep) also releases, within the
    /// bounds, the stacks free for two whole periods, returns the slabs
    /// that became empty, and shrinks the lists. Returns whether to call
    /// again after a period; false ends the scavenger (a later
    /// `free_batch` over a bound asks for a new one). See "Scavenging" at
    /// the top. Unpaced: the whole step's work (tests).
    #[cfg(test)]
    pub(crate) fn scavenge(&self, max: usize) -> bool {
        self.scavenge_within(max, &mut || true)
    }

    /// [`scavenge`](Self::scavenge), paced: `go_on` is asked after each
    /// syscall (`madvise` run, `munmap` piece) whether the step may go on
    /// ("Pacing"); the stacks it did not get to go back to their hot lists,
    /// the slab pieces it did not unmap wait in `unmapping` for the next
    /// step, which does them first.
    pub(crate) fn scavenge_within(&self, max: usize, go_on: &mut dyn FnMut() -> bool) -> bool {
        // (class index, stride, slot) of the stacks to release.
        let mut release: Vec<(usize, usize, Slot)> = Vec::new();
        let mut sweep = false;
        let mut unmap;
        {
            let mut inner = self.lock();
            let cur = inner.gen;
            inner.gen = cur.wrapping_add(1);
            let quiet = inner.handed_out == inner.handed_out_seen;
            inner.handed_out_seen = inner.handed_out;
            // What an earlier step left unmapped (unmapped after this
            // step's releases, before its new slabs).
            unmap = std::mem::take(&mut inner.unmapping);
            if quiet {
                // The burst is over (nothing was taken for a whole
                // period): whole slabs go first, their pages and page
                // tables in one `munmap` each.
                let more = self.take_empty_slabs(&mut inner, &mut release, cur);
                unmap.extend(more);
            }
            for ci in 0..inner.classes.len() {
                let class = &mut inner.classes[ci];
                while class.hot.len() > class.hot_limit && release.len() < max {
                    // Freed during the last period: still warm, maybe reused soon.
                    if class.hot.front().is_none_or(|s| s.gen == cur) {
                        break;
                    }
                    if let Some(slot) = class.hot.pop_front() {
                        release.push((ci, class.stride, slot));
                    }
                }
            }
            if release.is_empty() && unmap.is_empty() {
                let more = inner.classes.iter().any(|c| c.hot.len() > c.hot_limit);
                if more {
                    return true;
                }
                // The burst is over: a last sweep takes, within the bound
                // too, the stacks that stayed free for two whole periods
                // (unused for a while: Go's scavenger returns those), then
                // the scavenger ends.
                for ci in 0..inner.classes.len() {
                    let class = &mut inner.classes[ci];
                    while release.len() < max
                        && class
                            .hot
                            .front()
                            .is_some_and(|s| cur.wrapping_sub(s.gen) >= 2)
                    {
                        if let Some(slot) = class.hot.pop_front() {
                            release.push((ci, class.stride, slot));
                        }
                    }
                }
                sweep = true;
                unmap = self.take_empty_slabs(&mut inner, &mut release, cur);
                // After the burst: the lists that grew with it shrink.
                for class in &mut inner.classes {
                    shrink_list(&mut class.hot);
                    shrink_list(&mut class.cold);
                }
                if release.is_empty() && unmap.is_empty() {
                    inner.scavenging = false;
                    return false;
                }
            }
        }
        // Syscalls outside the lock; these stacks and slabs are in no list
        // meanwhile.
        let released = self.release_runs(&mut release, go_on);
        // A step's first syscall always runs (it makes progress); after a
        // `madvise` run the budget is asked before the first piece too.
        let left = if self.config.guard_mode == GuardMode::Mprotect {
            // Not paced: a slab's mprotect guards count against the map
            // budget (`GUARDED_STACKS`) until it is unmapped, and
            // `reserve`'s promises rely on getting them back at once. (With
            // pacing, a quiet step that left slabs pending for seconds made
            // a promised goroutine fail at its first run with
            // `MapCountExhausted`: found in review.)
            self.unmap_slabs(&mut unmap, &mut || true, true)
        } else {
            self.unmap_slabs(&mut unmap, go_on, release.is_empty())
        };
        let mut inner = self.lock();
        for &(ci, _, slot) in &release[..released] {
            self.make_cold(&mut inner, ci, slot);
        }
        // Out of budget: the rest stay hot (the oldest, so the next step
        // takes them first).
        for &(ci, _, slot) in release[released..].iter().rev() {
            inner.classes[ci].hot.push_front(slot);
        }
        debug_assert!(inner.unmapping.is_empty(), "one scavenger at a time");
        inner.unmapping = left;
        let unfinished = released < release.len();
        drop_quietly(release);
        // After a sweep the scavenger ends unless a list went over its bound
        // again meanwhile or the budget ran out; after a release beyond the
        // bounds or a quiet step it goes on (at least to the sweep).
        let more = !sweep
            || unfinished
            || !inner.unmapping.is_empty()
            || inner.classes.iter().any(|c| c.hot.len() > c.hot_limit);
        inner.scavenging = more;
        more
    }

    /// Whole-slab return (lock held; at a quiet step or the sweep: the
    /// burst is over, so the next one is not about to carve these stacks
    /// again): finds the slabs whose carved stacks are all either cold, in
    /// `release`, or hot and free since before the previous step (`gen !=
    /// cur`), so none is out (in a goroutine or a per-P cache) and none was
    /// freed during the last period; takes them out of every list and of
    /// `release`, and returns them (start, length, mprotect guards) for
    /// [`unmap_slabs`](Self::unmap_slabs) to unmap once the lock is
    /// released (their resident pages go with the mapping). A slab stays
    /// when
    ///
    /// * it is its class's carving slab with uncarved room (the next burst
    ///   carves from it without a new map), or
    /// * its class's promises need it: `committed + slack` must still fit
    ///   in the remaining `capacity` ("Reservations").
    ///
    /// Slabs never carved (spares mapped by `reserve`) cost no memory and
    /// stay too. Sorts `release` by address.
    fn take_empty_slabs(
        &self,
        inner: &mut PoolInner,
        release: &mut Vec<(usize, usize, Slot)>,
        cur: u32,
    ) -> Vec<Unmap> {
        release.sort_unstable_by_key(|(_, _, s)| s.limit);
        // Per slab index: its stacks free and old enough (in `release`, or
        // hot and free since before the previous step).
        let mut free_old = vec![0usize; inner.slabs.len()];
        for (_, _, slot) in release.iter() {
            free_old[slot.slab as usize] += 1;
        }
        for class in &inner.classes {
            for slot in class.hot.iter().filter(|s| s.gen != cur) {
                free_old[slot.slab as usize] += 1;
            }
        }
        let mut unmap = Vec::new();
        // Per slab index: taken out now. Per class: cold stacks to drop.
        let mut gone = vec![false; inner.slabs.len()];
        let mut cold_gone = vec![0usize; inner.classes.len()];
        let mut hot_gone = vec![false; inner.classes.len()];
        for (idx, &free) in free_old.iter().enumerate() {
            let slab = &inner.slabs[idx];
            if !slab.is_mapped() || slab.carved == 0 || slab.outstanding != 0 || slab.installing {
                continue;
            }
            if slab.cold + free != slab.carved {
                continue; // some stacks were freed during the last period
            }
            let idx = idx as u32;
            let Some(ci) = inner.classes.iter().position(|c| c.stride == slab.stride) else {
                continue;
            };
            let class = &inner.classes[ci];
            if class.carving == Some(idx) && slab.carved < slab.capacity {
                continue;
            }
            let slack = self.slack(class.stride);
            if class.capacity - slab.capacity < class.committed + slack {
                continue;
            }
            let slab = std::mem::replace(&mut inner.slabs[idx as usize], Slab::EMPTY);
            let class = &mut inner.classes[ci];
            if class.carving == Some(idx) {
                class.carving = None;
            }
            class.capacity -= slab.capacity;
            cold_gone[ci] += slab.cold;
            hot_gone[ci] |= slab.cold != slab.carved;
            if let Some(registration) = slab.registration {
                overflow::unregister_slab(registration);
            }
            inner.returned.push(idx);
            inner.slabs_returned += 1;
            unmap.push(Unmap {
                start: slab.start,
                len: slab.len,
                stride: slab.stride,
                guarded: slab.guarded,
            });
            gone[idx as usize] = true;
        }
        if unmap.is_empty() {
            return unmap;
        }
        for ((class, cold), hot) in inner.classes.iter_mut().zip(cold_gone).zip(hot_gone) {
            if cold != 0 {
                let before = class.cold.len();
                class.cold.retain(|s| !gone[s.slab as usize]);
                debug_assert_eq!(before - class.cold.len(), cold);
            }
            if hot {
                class.hot.retain(|s| !gone[s.slab as usize]);
            }
        }
        release.retain(|(_, _, s)| !gone[s.slab as usize]);
        unmap
    }

    /// Unmaps the slabs `take_empty_slabs` took out of the pool (lock not
    /// held), from the front, a piece of at most [`UNMAP_PIECE`] per
    /// `munmap`, asking `go_on` before each piece (but the first, when
    /// `first_free`: nothing else ran in this step); returns what is left.
    fn unmap_slabs(
        &self,
        unmap: &mut [Unmap],
        go_on: &mut dyn FnMut() -> bool,
        first_free: bool,
    ) -> Vec<Unmap> {
        let mut i = 0;
        let mut asked = !first_free;
        while i < unmap.len() {
            if asked && !go_on() {
                break;
            }
            asked = true;
            let u = &mut unmap[i];
            let piece = if u.len <= UNMAP_PIECE {
                u.len
            } else {
                (UNMAP_PIECE / u.stride).max(1) * u.stride
            };
            // SAFETY: the front of a slab's mapping that `take_empty_slabs`
            // took out of the pool (or what an earlier step left of it):
            // none of its stacks is out (no goroutine, no per-P cache holds
            // one) and none is in a list, so nothing uses or can hand out
            // this memory; it left the overflow registry first. `piece` is a
            // whole number of stacks (unmapping from the front never splits
            // a mapping in two, so it cannot raise the map count).
            let r = unsafe { libc::munmap(u.start as *mut libc::c_void, piece) };
            if r != 0 {
                // ENOMEM (splitting a mapping would pass
                // vm.max_map_count): the rest of the slab stays mapped and
                // is leaked: nothing refers to it and its pages were
                // released, but its mprotect guards still cost maps, so
                // they stay counted.
                i += 1;
            } else if piece == u.len {
                GUARDED_STACKS.fetch_sub(u.guarded, Ordering::Relaxed);
                i += 1;
            } else {
                u.start += piece;
                u.len -= piece;
            }
        }
        unmap[i..].to_vec()
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

    /// Promises `want` stacks of `size` usable bytes (at least one, fewer if
    /// only fewer fit) to goroutines not started yet, mapping slabs until
    /// they fit; returns how many were promised. Fails with the error a
    /// stack allocation would meet: the address space (`mmap`) or, in
    /// mprotect mode, the map budget. See "Reservations" at the top.
    pub(crate) fn reserve(&self, size: usize, want: usize) -> Result<usize, StackError> {
        let size = round_size(size)?;
        let want = want.max(1);
        let mut inner = self.lock();
        let ci = self.class_index(&mut inner, size);
        let slack = self.slack(inner.classes[ci].stride);
        loop {
            let class = &inner.classes[ci];
            let free = class.capacity.saturating_sub(class.committed + slack);
            if free > 0 {
                let grant = self.reserve_guards(want.min(free))?;
                inner.classes[ci].committed += grant;
                return Ok(grant);
            }
            // Map a slab big enough for the promise, but leave `headroom()`
            // of address space to the rest of the process (malloc arenas,
            // thread stacks): stacks must not starve it. Near a limit, halve
            // the size until a slab fits with the headroom beside it. (The
            // probe is two syscalls per slab map; slabs double, so maps are
            // rare.)
            let need = class.committed + slack + 1 - class.capacity;
            let mut stacks = class.next_slab_stacks.max(need);
            let slab = loop {
                let err = match self.map_slab(&mut inner, ci, stacks) {
                    Ok(slab) if headroom_left() => break slab,
                    Ok(slab) => {
                        self.unmap_fresh_slab(&mut inner, ci, slab);
                        StackError::Mmap(io::Error::from_raw_os_error(libc::ENOMEM))
                    }
                    Err(e) => e,
                };
                if stacks <= need {
                    return Err(err);
                }
                stacks = (stacks / 2).max(need);
                // Later reservations start from the smaller size.
                inner.classes[ci].next_slab_stacks = stacks;
            };
            inner.classes[ci].spare.push(slab);
        }
    }

    /// Takes back `n` promises of `reserve` (goroutines that ended or were
    /// dropped before they started, surplus per-P credit).
    pub(crate) fn unreserve(&self, size: usize, n: usize) {
        if n == 0 {
            return;
        }
        let mut inner = self.lock();
        let Some(class) = inner.classes.iter_mut().find(|c| c.size == size) else {
            debug_assert!(false, "unreserve of a class never reserved");
            return;
        };
        debug_assert!(class.committed >= n, "more stacks unreserved than reserved");
        let n = n.min(class.committed);
        class.committed -= n;
        if self.config.guard_mode == GuardMode::Mprotect {
            GUARDS_COMMITTED.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// mprotect mode: `grant` stacks more (at least one) within the map
    /// budget, counting every pool's promises and this pool's caches.
    /// Reservations are not limited by guards in madvise mode.
    fn reserve_guards(&self, grant: usize) -> Result<usize, StackError> {
        if self.config.guard_mode == GuardMode::Madvise {
            return Ok(grant);
        }
        let budget = self
            .config
            .max_map_count
            .saturating_sub(self.config.map_margin)
            / 2;
        let held = self.caches.load(Ordering::Relaxed) * CACHE_MAX_STACKS;
        let mut granted = 0;
        update_relaxed(&GUARDS_COMMITTED, |c| {
            granted = budget.saturating_sub(c + held).min(grant);
            (granted > 0).then_some(c + granted)
        })
        .map_err(|_| self.map_count_error())?;
        Ok(granted)
    }

    /// Installs the guard page at `limit` (the lowest page of a carved or
    /// cold stack of slab `slab`), within the map budget in mprotect mode.
    /// (madvise mode carves through `guard_ahead`, which batches.)
    fn guard_slot(&self, inner: &mut PoolInner, limit: usize, slab: u32) -> Result<(), StackError> {
        match self.config.guard_mode {
            GuardMode::Madvise => {
                // SAFETY: `limit` is the first page of a stack slot inside our
                // slab, which is not handed out: nobody uses this page.
                retry_eintr(|| unsafe {
                    libc::madvise(limit as *mut libc::c_void, self.page, MADV_GUARD_INSTALL)
                })
                .map_err(StackError::Guard)
            }
            GuardMode::Mprotect => {
                if !self.reserve_guard() {
                    // Give back the guards of every hot stack, then retry.
                    self.cool_all_hot(inner);
                    if !self.reserve_guard() {
                        return Err(self.map_count_error());
                    }
                }
                // SAFETY: as above; PROT_NONE on a page nobody uses.
                let r = retry_eintr(|| unsafe {
                    libc::mprotect(limit as *mut libc::c_void, self.page, libc::PROT_NONE)
                });
                match r {
                    Ok(()) => {
                        inner.slabs[slab as usize].guarded += 1;
                        Ok(())
                    }
                    Err(e) => {
                        GUARDED_STACKS.fetch_sub(1, Ordering::Relaxed);
                        if e.raw_os_error() == Some(libc::ENOMEM) {
                            // The split would exceed the map limit.
                            Err(self.map_count_error())
                        } else {
                            Err(StackError::Guard(e))
                        }
                    }
                }
            }
        }
    }

    /// madvise mode: makes sure the next stack to carve from `slab` has its
    /// guard. With [`GuardInstall::Vector`] the guards of the next
    /// [`GUARD_BATCH`] stacks go in with one `process_madvise`, so only one
    /// carve in 64 makes a syscall; per page otherwise.
    fn guard_ahead(&self, slab: &mut Slab) -> Result<(), StackError> {
        let next = slab.carved;
        if next < slab.guards_to {
            return Ok(());
        }
        let end = match self.config.guard_install {
            GuardInstall::Vector { .. } => (next + GUARD_BATCH).min(slab.capacity),
            GuardInstall::PerPage => next + 1,
        };
        let installed = self.install_guards(slab.start, slab.stride, next, end)?;
        slab.guards_to = next + installed;
        Ok(())
    }

    /// Installs the guards of the stacks `from..to` of a slab at `start`.
    /// Only their guard pages are touched, which no stack uses (with the
    /// lock released, `install_ahead`, some of those stacks may be carved
    /// and running meanwhile: their usable pages are not in the range).
    /// Returns how many, counted from `from`: at least one, or the error of
    /// the first.
    fn install_guards(
        &self,
        start: usize,
        stride: usize,
        from: usize,
        to: usize,
    ) -> Result<usize, StackError> {
        let per_page = |i: usize| {
            // SAFETY: the guard page of a stack slot inside our slab:
            // nobody uses this page; the advice only writes a guard marker
            // into its page-table entry.
            retry_eintr(|| unsafe {
                libc::madvise(
                    (start + i * stride) as *mut libc::c_void,
                    self.page,
                    MADV_GUARD_INSTALL,
                )
            })
            .map_err(StackError::Guard)
        };
        let GuardInstall::Vector { pidfd, pid } = self.config.guard_install else {
            per_page(from)?;
            return Ok(1);
        };
        if self.vector_failed.load(Ordering::Relaxed) {
            // `process_madvise` failed outright after the probe worked (the
            // descriptor was closed behind our back, a seccomp filter came
            // later): one guard per carve from then on.
            per_page(from)?;
            return Ok(1);
        }
        // SAFETY: getpid has no preconditions.
        if pid != 0 && pid != unsafe { libc::getpid() } {
            // A forked child: the inherited pidfd names the parent.
            per_page(from)?;
            return Ok(1);
        }
        let iov: Vec<libc::iovec> = (from..to)
            .map(|i| libc::iovec {
                iov_base: (start + i * stride) as *mut libc::c_void,
                iov_len: self.page,
            })
            .collect();
        let want = iov.len() * self.page;
        let mut done = 0;
        let mut tries = 0;
        let mut last_err = None;
        while done < want {
            let first = done / self.page;
            // SAFETY: every iovec is the guard page of a stack slot of our
            // slab (as in `per_page`). `pidfd` names this
            // process unless the application closed it and its number was
            // reused: the kernel refuses this advice on another process's
            // memory (EINVAL), so at worst the call fails. It only reads
            // the `iov.len() - first` iovecs (at most GUARD_BATCH, below
            // IOV_MAX).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_process_madvise,
                    pidfd,
                    iov[first..].as_ptr(),
                    iov.len() - first,
                    MADV_GUARD_INSTALL,
                    0u32,
                )
            };
            if r > 0 {
                // Whole iovecs only: each is one page (none: no progress).
                let pages = r as usize / self.page;
                if pages == 0 {
                    break;
                }
                done += pages * self.page;
                continue;
            }
            let e = io::Error::last_os_error();
            last_err = e.raw_os_error();
            tries += 1;
            if r < 0 && matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) && tries < 100
            {
                continue;
            }
            break;
        }
        if done == 0 {
            if matches!(
                last_err,
                Some(libc::EBADF | libc::EINVAL | libc::ENOSYS | libc::EPERM | libc::ESRCH)
            ) {
                self.vector_failed.store(true, Ordering::Relaxed);
            }
            // The one that matters is the stack about to be carved: get
            // its own error (or its guard) from a plain madvise.
            per_page(from)?;
            return Ok(1);
        }
        Ok(done / self.page)
    }

    fn map_count_error(&self) -> StackError {
        StackError::MapCountExhausted {
            max_map_count: self.config.max_map_count,
            guarded_stacks: GUARDED_STACKS.load(Ordering::Relaxed),
        }
    }

    /// mprotect mode: counts one more guard if `2 * guards + margin` stays
    /// within the map limit.
    fn reserve_guard(&self) -> bool {
        let max = self.config.max_map_count;
        let margin = self.config.map_margin;
        update_relaxed(&GUARDED_STACKS, |g| {
            let next = g + 1;
            (next.saturating_mul(2).saturating_add(margin) <= max).then_some(next)
        })
        .is_ok()
    }

    /// Releases the usable pages of a free stack and, in mprotect mode, its
    /// guard. Called without the lock held (or with it, by `cool_all_hot`);
    /// the stack is in no list.
    fn release_pages(&self, slot: &mut Slot, size: usize) {
        // SAFETY: the usable part of a free stack: no goroutine runs on it
        // and no list hands it out while we hold `slot`. DONTNEED on private
        // anonymous memory just drops the pages (they read back as zeros).
        unsafe {
            libc::madvise(
                (slot.limit + self.page) as *mut libc::c_void,
                size,
                libc::MADV_DONTNEED,
            )
        };
        if self.config.guard_mode == GuardMode::Mprotect {
            // SAFETY: the guard page of that same free stack; making it
            // accessible again lets the kernel merge the VMAs around it.
            let r = unsafe {
                libc::mprotect(
                    slot.limit as *mut libc::c_void,
                    self.page,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if r == 0 {
                slot.guarded = false;
            }
        }
    }

    /// Releases the pages of free stacks `(class, stride, slot)` that are in
    /// no list: in madvise mode, runs of adjacent stacks of one slab in one
    /// call each (the range covers the guard pages between them; guard
    /// markers survive MADV_DONTNEED: checked on Linux 6.18, and by a test
    /// here), so a burst of 100,000 stacks freed together costs a few
    /// hundred calls, not 100,000; in mprotect mode one stack at a time
    /// (each guard is reset). Sorts `release` by address. Asks `go_on`
    /// after each call whether to go on; returns how many stacks (from the
    /// front, in address order) it released.
    fn release_runs(
        &self,
        release: &mut [(usize, usize, Slot)],
        go_on: &mut dyn FnMut() -> bool,
    ) -> usize {
        release.sort_unstable_by_key(|(_, _, s)| s.limit);
        if self.config.guard_mode != GuardMode::Madvise {
            for (i, (_, stride, slot)) in release.iter_mut().enumerate() {
                self.release_pages(slot, *stride - self.page);
                if !go_on() {
                    return i + 1;
                }
            }
            return release.len();
        }
        let mut i = 0;
        while i < release.len() {
            let (_, stride, first) = release[i];
            let mut j = i + 1;
            while j < release.len()
                && release[j].2.slab == first.slab
                && release[j].2.limit == release[j - 1].2.limit + stride
            {
                j += 1;
            }
            let start = first.limit + self.page;
            let end = release[j - 1].2.limit + stride;
            // SAFETY: the usable parts (and guards between them) of free
            // stacks that no goroutine runs on and no list hands out while
            // we hold them; DONTNEED on private anonymous memory just drops
            // the pages (they read back as zeros).
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
            i = j;
            if i < release.len() && !go_on() {
                break;
            }
        }
        i
    }

    /// Puts a released stack on its class's cold list (lock held).
    fn make_cold(&self, inner: &mut PoolInner, ci: usize, slot: Slot) {
        if self.config.guard_mode == GuardMode::Mprotect && !slot.guarded {
            inner.slabs[slot.slab as usize].guarded -= 1;
            GUARDED_STACKS.fetch_sub(1, Ordering::Relaxed);
        }
        inner.slabs[slot.slab as usize].cold += 1;
        inner.classes[ci].cold.push(slot);
    }

    /// Give back the pages of every free stack (runtime shutdown): RSS drops to
    /// what stacks still out use; the address space stays until the pool drops.
    pub(crate) fn trim(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.cool_all_hot(&mut inner);
        // Slabs a paced scavenger left pending still hold their pages.
        let mut pending = std::mem::take(&mut inner.unmapping);
        drop(inner);
        let left = self.unmap_slabs(&mut pending, &mut || true, true);
        debug_assert!(left.is_empty());
    }

    /// mprotect mode, out of map budget: moves every hot stack to cold,
    /// which gives their guards (and maps) back.
    fn cool_all_hot(&self, inner: &mut PoolInner) {
        let mut release = Vec::new();
        for ci in 0..inner.classes.len() {
            let stride = inner.classes[ci].stride;
            release.extend(inner.classes[ci].hot.drain(..).map(|s| (ci, stride, s)));
        }
        self.release_runs(&mut release, &mut || true);
        for (ci, _, slot) in release {
            self.make_cold(inner, ci, slot);
        }
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

/// How many stack promises a per-P cache takes from the pool at once, and
/// keeps (twice that at most) for the goroutines spawned on its P.
const CREDIT_BATCH: usize = 32;

/// Most stacks of stride `stride` one per-P cache holds.
fn cache_limit(stride: usize) -> usize {
    (CACHE_MAX_BYTES / stride).clamp(CACHE_MIN_STACKS, CACHE_MAX_STACKS)
}

/// Capacity a free list keeps however much it shrinks (see
/// [`drop_quietly`]: the lists are never freed whole while the pool lives).
const LIST_MIN_CAPACITY: usize = 64;

/// Gives back most of a list's spare capacity once it holds a quarter or
/// less of it (a burst of 100,000 stacks grows a list to 2.3 MiB). It
/// shrinks in place (`realloc`), never to nothing: see [`drop_quietly`].
fn shrink_list<L: ShrinkList>(list: &mut L) {
    let (len, cap) = (list.len(), list.capacity());
    if cap > 4 * LIST_MIN_CAPACITY && len < cap / 4 {
        list.shrink_to((len * 2).max(LIST_MIN_CAPACITY));
    }
}

/// Drops a scavenger buffer without handing glibc a large block to `free`.
/// glibc serves a block over its mmap threshold (128 KiB at first) with its
/// own `mmap`, and `free` of such a block raises the mmap threshold to its
/// size and the trim threshold to twice that, for the rest of the process;
/// a thread arena then keeps up to that much free memory resident at its
/// top, which `malloc_trim` does not give back (measured: the hot list of
/// a 100,000-stack burst, 3 MiB, freed empty at the sweep, left 4.6 MiB of
/// free memory resident in a thread arena after the burst). `realloc` to a
/// small size (glibc: `mremap`) changes no threshold, and freeing the small
/// rest then changes none either. Harmless with other allocators.
fn drop_quietly<T>(mut buf: Vec<T>) {
    buf.clear();
    buf.shrink_to(1);
}

/// The free lists' operations [`shrink_list`] needs.
trait ShrinkList {
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn shrink_to(&mut self, cap: usize);
}

impl<T> ShrinkList for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
    fn shrink_to(&mut self, cap: usize) {
        Vec::shrink_to(self, cap)
    }
}

impl<T> ShrinkList for VecDeque<T> {
    fn len(&self) -> usize {
        VecDeque::len(self)
    }
    fn capacity(&self) -> usize {
        VecDeque::capacity(self)
    }
    fn shrink_to(&mut self, cap: usize) {
        VecDeque::shrink_to(self, cap)
    }
}

/// Least address space that `reserve` leaves free for the rest of the
/// process once a map has failed (an address-space limit is near). A
/// quarter of the limit when that is more: every new thread may need a
/// malloc arena (glibc reserves 64 MiB per arena and maps 128 MiB while it
/// aligns one) and its own stack, and 128 MiB proved too little under
/// `ulimit -v 1G` (a thread started after the stacks had filled the space
/// failed an 88-byte allocation about once in 20 runs).
const HEADROOM_MIN: usize = 256 << 20;

/// The headroom for the current address-space limit: `max(HEADROOM_MIN,
/// limit / 4)`.
fn headroom() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscall filling a valid struct.
    let quarter = if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
    {
        usize::try_from(lim.rlim_cur / 4).unwrap_or(usize::MAX)
    } else {
        0
    };
    quarter.max(HEADROOM_MIN)
}

/// Whether [`headroom`] bytes could still be mapped (probed with a
/// `PROT_NONE` mapping, unmapped at once).
fn headroom_left() -> bool {
    let len = headroom();
    // SAFETY: a fresh inaccessible anonymous mapping; nothing else is affected.
    let probe = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if probe == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: exactly the probe mapping above, which nothing references.
    unsafe { libc::munmap(probe, len) };
    true
}

/// A per-P cache of free stacks and of stack promises (credit). Owned by one
/// `Processor` and used by one thread at a time, so no locking; the pool is
/// the slow path.
pub(crate) struct StackCache {
    classes: Vec<CacheClass>,
}

struct CacheClass {
    size: usize,
    limit: usize,
    /// LIFO: the most recently freed stack is reused first.
    stacks: Vec<Stack>,
    /// Promises taken from the pool (`StackPool::reserve`) and not yet given
    /// to a goroutine.
    credit: usize,
}

impl StackCache {
    pub(crate) fn new() -> Self {
        StackCache {
            classes: Vec::new(),
        }
    }

    fn class(&mut self, size: usize) -> &mut CacheClass {
        let i = match self.classes.iter().position(|c| c.size == size) {
            Some(i) => i,
            None => {
                let limit = cache_limit(size + page_size());
                self.classes.push(CacheClass {
                    size,
                    limit,
                    stacks: Vec::with_capacity(limit + 1),
                    credit: 0,
                });
                self.classes.len() - 1
            }
        };
        &mut self.classes[i]
    }

    /// Promises a stack of `size` usable bytes to a goroutine being spawned:
    /// from this cache's credit, else a batch from the pool. The goroutine
    /// gives the promise back with its stack ([`put`](Self::put)) or, if it
    /// never ran, with [`StackPool::unreserve`].
    pub(crate) fn reserve(&mut self, pool: &StackPool, size: usize) -> Result<(), StackError> {
        let size = round_size(size)?;
        let class = self.class(size);
        if class.credit == 0 {
            class.credit = pool.reserve(size, CREDIT_BATCH)?;
        }
        class.credit -= 1;
        Ok(())
    }

    /// A stack of `size` usable bytes (rounded like [`StackPool::alloc`]):
    /// a cached one of exactly that size, else one from the pool.
    pub(crate) fn get(&mut self, pool: &StackPool, size: usize) -> Result<Stack, StackError> {
        let size = round_size(size)?;
        if let Some(class) = self.classes.iter_mut().find(|c| c.size == size) {
            if let Some(stack) = class.stacks.pop() {
                return Ok(stack);
            }
        }
        pool.alloc(size)
    }

    /// Caches a finished goroutine's stack and takes back its promise; when
    /// the class overflows, the older half of the stacks goes to the pool,
    /// and credit above twice a batch goes back too. True if the caller
    /// should start a scavenger (`StackPool::free_batch`).
    #[must_use = "start a scavenger when asked to"]
    pub(crate) fn put(&mut self, pool: &StackPool, stack: Stack) -> bool {
        debug_assert_eq!(
            stack.pool, pool.id,
            "stack put into the cache of another pool"
        );
        let size = stack.size();
        let class = self.class(size);
        class.stacks.push(stack);
        let mut scavenge = false;
        if class.stacks.len() > class.limit {
            let half = class.stacks.len() / 2;
            scavenge = pool.free_batch(class.stacks.drain(..half));
        }
        class.credit += 1;
        if class.credit > 2 * CREDIT_BATCH {
            pool.unreserve(size, class.credit - CREDIT_BATCH);
            class.credit = CREDIT_BATCH;
        }
        scavenge
    }

    /// Gives every cached stack and all credit back to the pool (shutdown:
    /// no scavenger is started; the caller trims the pool). The caller
    /// holds the pool's `cache_flush` guard, taken before it borrowed the
    /// cache: a scavenger may be flushing idle Ps' caches at the same time
    /// (`flush_idle`), and teardown holds no scheduler lock.
    pub(crate) fn drain(&mut self, pool: &StackPool, _flush: &MutexGuard<'_, ()>) {
        let _ = self.drain_live(pool);
    }

    /// The scavenger, at a quiet step, on the cache of a P that is idle
    /// (the caller holds the scheduler lock, under which an idle P stays
    /// idle, and the guard of [`StackPool::lock_cache_flush`]): every
    /// cached stack goes back to the pool as if freed two periods ago, so
    /// that this step may return its slab (cached stacks pin their slabs),
    /// and the credit goes back too (promises pin capacity).
    /// The P takes new credit and stacks from the pool when it runs again.
    pub(crate) fn flush_idle(&mut self, pool: &StackPool, _flush: &MutexGuard<'_, ()>) {
        for class in &mut self.classes {
            // No scavenger is asked for: one is running (the caller), and
            // `scavenging` stays set until it ends.
            let _ = pool.free_batch_aged(class.stacks.drain(..), true);
            pool.unreserve(class.size, std::mem::take(&mut class.credit));
        }
    }

    /// `drain` on a live runtime (a P that `set_procs` retires): true if the
    /// pool asks for a scavenger (the caller must start one, as `put`'s
    /// callers do, or the pool never asks again).
    pub(crate) fn drain_live(&mut self, pool: &StackPool) -> bool {
        let mut scavenge = false;
        for class in &mut self.classes {
            scavenge |= pool.free_batch(class.stacks.drain(..));
            pool.unreserve(class.size, std::mem::take(&mut class.credit));
        }
        scavenge
    }

    /// Stacks currently cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.classes.iter().map(|c| c.stacks.len()).sum()
    }
}

impl Default for StackCache {
    fn default() -> Self {
        Self::new()
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The tests of this file (and overflow.rs) that map memory run one at a
    /// time: some inspect the address space (maps, residency) or the
    /// process-wide guard count.
    pub(crate) fn serial() -> MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Environment variable selecting a child role (see [`run_child`]).
    pub(crate) const CHILD_ENV: &str = "GOSCHED_CORO_TEST_CHILD";

    /// Re-executes this test binary to run only the test `<module>::child`
    /// (pass `module_path!()`), with [`CHILD_ENV`] set to `mode`. Checks that
    /// need a quiet address space, or that crash, run there.
    pub(crate) fn run_child(module: &str, mode: &str) -> std::process::Output {
        let path = format!("{module}::child");
        // Test names omit the crate name.
        let name = path
            .split_once("::")
            .map_or(path.as_str(), |(_, rest)| rest);
        std::process::Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, mode)
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .output()
            .unwrap()
    }

    /// Asserts that a child exited successfully after really running its test.
    pub(crate) fn assert_child_passed(out: &std::process::Output) {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{:?}\n{stdout}\n{stderr}",
            out.status
        );
    }

    /// The child role; does nothing in a normal test run.
    #[test]
    fn child() {
        let Ok(mode) = std::env::var(CHILD_ENV) else {
            return;
        };
        match mode.as_str() {
            "guard-after-scavenge" => {
                let pool = StackPool::with_config(PoolConfig {
                    hot_max_stacks: 4,
                    ..PoolConfig::default()
                });
                let stacks: Vec<_> = (0..16).map(|_| pool.alloc(16 * 1024).unwrap()).collect();
                for s in &stacks {
                    touch(s);
                }
                // A guard in the middle of a run of adjacent free stacks.
                let guard = stacks[2].limit.get();
                let _ = pool.free_batch(stacks);
                let mut steps = 0;
                while pool.scavenge(usize::MAX) {
                    steps += 1;
                    assert!(steps < 10, "the scavenger never ends");
                }
                assert!(pool.stats().free_cold >= 12);
                eprintln!("scavenged; reading a guard");
                // SAFETY: deliberately reads a guard page: must fault.
                let v = unsafe { ptr::read_volatile(guard as *const u8) };
                eprintln!("read {v}: the guard is gone");
            }
            "guard-of-batch" | "guard-per-page" => {
                // Guards installed ahead of carving (one process_madvise for
                // 64 stacks), or one madvise per carved stack: the guard of
                // the first stack of the second batch must fault.
                let guard_install = if mode == "guard-per-page" {
                    GuardInstall::PerPage
                } else {
                    guard_install()
                };
                let pool = StackPool::with_config(PoolConfig {
                    guard_install,
                    ..PoolConfig::default()
                });
                let stacks: Vec<_> = (0..GUARD_BATCH + 2)
                    .map(|_| pool.alloc(16 * 1024).unwrap())
                    .collect();
                let guard = stacks[GUARD_BATCH].limit.get();
                eprintln!("carved; reading a guard ({guard_install:?})");
                // SAFETY: deliberately reads a guard page: must fault.
                let v = unsafe { ptr::read_volatile(guard as *const u8) };
                eprintln!("read {v}: the guard is missing");
            }
            "guard-ahead" => {
                // Half a batch carved: the next batch's guards went in with
                // the lock released (`install_ahead`), before any carve
                // reached them: the guard of a stack not carved yet faults.
                let pool = StackPool::with_config(PoolConfig {
                    guard_install: guard_install(),
                    first_slab_stacks: 1024,
                    ..PoolConfig::default()
                });
                let stacks: Vec<_> = (0..GUARD_BATCH / 2 + 1)
                    .map(|_| pool.alloc(16 * 1024).unwrap())
                    .collect();
                let inner = pool.lock();
                let slab = &inner.slabs[stacks[0].slab as usize];
                assert_eq!(slab.guards_to, 2 * GUARD_BATCH);
                let guard = slab.start + (GUARD_BATCH + GUARD_BATCH / 2) * slab.stride;
                drop(inner);
                eprintln!("carved; reading a guard");
                // SAFETY: deliberately reads a guard page: must fault.
                let v = unsafe { ptr::read_volatile(guard as *const u8) };
                eprintln!("read {v}: the guard is missing");
            }
            "slab-return" => {
                // No other test runs in this process, so nothing can map the
                // holes between munmap and the check.
                let pool = StackPool::with_config(PoolConfig {
                    first_slab_stacks: 4,
                    hot_max_stacks: 4,
                    ..PoolConfig::default()
                });
                let stacks: Vec<_> = (0..4 + 8 + 10)
                    .map(|_| pool.alloc(16 * 1024).unwrap())
                    .collect();
                for s in &stacks {
                    touch(s);
                }
                let ranges = slab_range(&pool);
                assert_eq!(ranges.len(), 3);
                let _ = pool.free_batch(stacks);
                let mut steps = 0;
                while pool.scavenge(usize::MAX) {
                    steps += 1;
                    assert!(steps < 10, "the scavenger never ends");
                }
                // The two full slabs went back; the one being carved stays.
                let st = pool.stats();
                assert_eq!((st.slabs, st.slabs_returned), (1, 2), "{st:?}");
                for &(lo, hi) in &ranges[..2] {
                    let err = resident_pages(lo, hi - lo).unwrap_err();
                    assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{lo:#x}-{hi:#x}");
                    assert_eq!(maps_overlapping(lo, hi), 0);
                    assert!(overflow::lookup_guard(lo).is_none());
                }
            }
            "pool-drop" => {
                // No other test runs in this process, so nothing can map the
                // holes between munmap and the check.
                let pool = StackPool::new();
                let a = pool.alloc(16 * 1024).unwrap();
                let b = pool.alloc(64 * 1024).unwrap();
                touch(&a);
                touch(&b);
                let ranges = slab_range(&pool);
                assert_eq!(ranges.len(), 2);
                let _ = pool.free(a);
                let _ = pool.free(b);
                drop(pool);
                for (lo, hi) in ranges {
                    let err = resident_pages(lo, hi - lo).unwrap_err();
                    assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{lo:#x}-{hi:#x}");
                    assert_eq!(maps_overlapping(lo, hi), 0);
                }
            }
            other => panic!("unknown child mode {other}"),
        }
    }

    fn page() -> usize {
        page_size()
    }

    /// Lines of /proc/self/maps that overlap `[lo, hi)`.
    fn maps_overlapping(lo: usize, hi: usize) -> usize {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter(|line| {
                let range = line.split_whitespace().next().unwrap();
                let (a, b) = range.split_once('-').unwrap();
                let a = usize::from_str_radix(a, 16).unwrap();
                let b = usize::from_str_radix(b, 16).unwrap();
                a < hi && lo < b
            })
            .count()
    }

    /// Resident pages in `[addr, addr + len)` (page-aligned), via mincore.
    fn resident_pages(addr: usize, len: usize) -> io::Result<usize> {
        let pages = len.div_ceil(page());
        let mut vec = vec![0u8; pages];
        // SAFETY: mincore only reads page-table state and writes `pages`
        // bytes into `vec`.
        let r = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
    }

    /// Writes every usable page of a stack.
    fn touch(stack: &Stack) {
        let lo = stack.limit.get() + stack.guard as usize;
        let mut p = lo;
        while p < stack.base.get() {
            // SAFETY: the usable part of a stack we own.
            unsafe { ptr::write_volatile(p as *mut u8, 0xA5) };
            p += page();
        }
    }

    fn slab_range(pool: &StackPool) -> Vec<(usize, usize)> {
        let inner = pool.lock();
        inner
            .slabs
            .iter()
            .filter(|s| s.is_mapped())
            .map(|s| (s.start, s.start + s.len))
            .collect()
    }

    fn cfg(mode: GuardMode) -> PoolConfig {
        PoolConfig {
            guard_mode: mode,
            ..PoolConfig::default()
        }
    }

    #[test]
    fn sizes_are_rounded() {
        let _serial = serial();
        let pool = StackPool::new();
        let a = pool.alloc(1).unwrap();
        assert_eq!(a.size(), MIN_STACK_SIZE);
        let b = pool.alloc(MIN_STACK_SIZE + 1).unwrap();
        assert_eq!(b.size(), MIN_STACK_SIZE + page());
        let c = pool.alloc(100_000).unwrap();
        assert_eq!(c.size(), 100_000usize.div_ceil(page()) * page());
        for s in [&a, &b, &c] {
            use corosensei::stack::Stack as _;
            assert_eq!(s.base().get() - s.limit().get(), s.size() + page());
            assert_eq!(s.limit().get() % page(), 0);
            assert_eq!(s.base().get() % 16, 0);
        }
        assert!(matches!(
            pool.alloc(MAX_STACK_SIZE + 1),
            Err(StackError::TooLarge { .. })
        ));
        assert_eq!(pool.stats().size_classes, 3);
        let _ = pool.free(a);
        let _ = pool.free(b);
        let _ = pool.free(c);
    }

    #[test]
    fn alloc_free_reuse() {
        let _serial = serial();
        let pool = StackPool::new();
        let a = pool.alloc(64 * 1024).unwrap();
        let b = pool.alloc(64 * 1024).unwrap();
        assert_ne!(a.limit, b.limit);
        touch(&a);
        touch(&b);
        let (a_limit, b_limit) = (a.limit, b.limit);
        let _ = pool.free(a);
        let _ = pool.free(b);
        let st = pool.stats();
        assert_eq!((st.carved, st.outstanding, st.free_hot), (2, 0, 2));
        // LIFO: the last freed comes back first.
        let c = pool.alloc(64 * 1024).unwrap();
        assert_eq!(c.limit, b_limit);
        let d = pool.alloc(64 * 1024 - 100).unwrap(); // rounds to the same class
        assert_eq!(d.limit, a_limit);
        let e = pool.alloc(64 * 1024).unwrap(); // carves a new one
        assert_eq!(pool.stats().carved, 3);
        // A different size gets its own slab.
        let f = pool.alloc(128 * 1024).unwrap();
        let st = pool.stats();
        assert_eq!((st.slabs, st.outstanding), (2, 4));
        for s in [c, d, e, f] {
            let _ = pool.free(s);
        }
        assert_eq!(pool.stats().outstanding, 0);
    }

    #[test]
    fn guard_page_faults_are_registered() {
        let _serial = serial();
        let pool = StackPool::new();
        let s = pool.alloc(32 * 1024).unwrap();
        touch(&s);
        let guard = s.limit.get();
        let hit = overflow::lookup_guard(guard + 8).expect("guard page is registered");
        assert_eq!(hit.usable, s.size());
        assert_eq!(hit.guard_start, guard);
        assert!(overflow::lookup_guard(guard + page() + 8).is_none());
        assert!(overflow::lookup_guard(s.base.get() - 8).is_none());
        let _ = pool.free(s);
    }

    #[test]
    fn slabs_grow() {
        let _serial = serial();
        let pool = StackPool::with_config(PoolConfig {
            first_slab_stacks: 4,
            ..PoolConfig::default()
        });
        let stacks: Vec<_> = (0..4 + 8 + 1)
            .map(|_| pool.alloc(16 * 1024).unwrap())
            .collect();
        let st = pool.stats();
        assert_eq!(st.slabs, 3);
        assert_eq!(st.mapped_bytes, (4 + 8 + 16) * (16 * 1024 + page()));
        let _ = pool.free_batch(stacks);
    }

    #[test]
    fn many_stacks_few_maps() {
        if guard_mode() != GuardMode::Madvise {
            eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
            return;
        }
        let _serial = serial();
        let pool = StackPool::new();
        let stacks: Vec<_> = (0..20_000)
            .map(|_| pool.alloc(16 * 1024).unwrap())
            .collect();
        let st = pool.stats();
        assert_eq!(st.carved, 20_000);
        let lines: usize = slab_range(&pool)
            .iter()
            .map(|&(lo, hi)| maps_overlapping(lo, hi))
            .sum();
        // 64 + 128 + ... : 9 slabs for 20,000 stacks, one map each (or fewer
        // when the kernel merges neighbours); mprotect guards would be 40,000.
        assert!(lines <= st.slabs, "{lines} maps for {} slabs", st.slabs);
        assert!(st.slabs <= 10, "{} slabs", st.slabs);
        let _ = pool.free_batch(stacks);
    }

    #[test]
    fn scavenger_releases_old_hot_stacks() {
        let _serial = serial();
        let pool = StackPool::with_config(PoolConfig {
            hot_max_stacks: 8,
            // Room left in the slab: it stays when all its stacks are cold.
            first_slab_stacks: 128,
            ..PoolConfig::default()
        });
        let size = 256 * 1024;
        let stacks: Vec<_> = (0..64).map(|_| pool.alloc(size).unwrap()).collect();
        for s in &stacks {
            touch(s);
        }
        let usable = |s: &Stack| (s.limit.get() + page(), s.size());
        let ranges: Vec<_> = stacks.iter().map(usable).collect();
        let resident = || -> usize {
            ranges
                .iter()
                .map(|&(a, l)| resident_pages(a, l).unwrap())
                .sum()
        };
        assert_eq!(resident(), 64 * size / page());
        // Freeing makes no syscall: every stack stays hot and resident; the
        // first free over the bound asks for a scavenger, once.
        let asks: usize = stacks.into_iter().map(|s| usize::from(pool.free(s))).sum();
        assert_eq!(asks, 1);
        assert_eq!(pool.stats().free_hot, 64);
        assert_eq!(resident(), 64 * size / page());
        // Step 1: all were freed in this period, too young to release.
        assert!(pool.scavenge(usize::MAX));
        assert_eq!(pool.stats().free_hot, 64);
        // Step 2 releases at most `max`, oldest first...
        assert!(pool.scavenge(10));
        assert_eq!(pool.stats().free_cold, 10);
        // ...step 3 the rest beyond the bound...
        assert!(pool.scavenge(usize::MAX));
        let st = pool.stats();
        assert_eq!((st.free_hot, st.free_cold), (8, 56), "{st:?}");
        assert_eq!(resident(), 8 * size / page(), "{st:?}");
        // ...and the sweep those within it free for two periods; it ends.
        assert!(!pool.scavenge(usize::MAX));
        let st = pool.stats();
        assert_eq!((st.free_hot, st.free_cold), (0, 64), "{st:?}");
        assert_eq!(resident(), 0, "{st:?}");
        // Hot stacks are reused before cold ones; cold ones still work.
        let again: Vec<_> = (0..64).map(|_| pool.alloc(size).unwrap()).collect();
        for s in &again {
            touch(s);
            assert!(overflow::lookup_guard(s.limit.get()).is_some());
        }
        assert_eq!(pool.stats().carved, 64);
        let _ = pool.free_batch(again);
    }

    /// The scavenger's `MADV_DONTNEED` runs cover the guard pages between
    /// adjacent stacks: the guards must survive it (a child reads one and
    /// must die of SIGSEGV).
    #[test]
    fn guards_survive_the_scavenger() {
        if guard_mode() != GuardMode::Madvise {
            eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
            return;
        }
        let out = run_child(module_path!(), "guard-after-scavenge");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "the guard read did not fault: {stderr}"
        );
        assert!(
            stderr.contains("scavenged; reading a guard"),
            "the child did not get to the read: {stderr}"
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{stderr}");
    }

    #[test]
    fn cache_hit_and_overflow_moves_half_to_pool() {
        let _serial = serial();
        let pool = StackPool::new();
        let mut cache = StackCache::new();
        let size = 256 * 1024;
        let limit = (CACHE_MAX_BYTES / (size + page())).clamp(CACHE_MIN_STACKS, CACHE_MAX_STACKS);
        // Each stack a goroutine gets was promised at its spawn.
        for _ in 0..limit + 2 {
            cache.reserve(&pool, size).unwrap();
        }
        cache.reserve(&pool, 32 * 1024).unwrap();
        let stacks: Vec<_> = (0..limit + 1)
            .map(|_| cache.get(&pool, size).unwrap())
            .collect();
        assert_eq!(pool.stats().outstanding, limit + 1);
        let last = stacks.last().unwrap().limit;
        for s in stacks {
            let _ = cache.put(&pool, s);
        }
        // The (limit+1)th put overflowed: half went to the pool.
        let len = limit + 1;
        let moved = len / 2; // what the overflowing put moved
        assert_eq!(cache.len(), limit + 1 - moved);
        let st = pool.stats();
        assert_eq!(st.free_hot + st.free_cold, moved);
        assert_eq!(st.outstanding, limit + 1 - moved);
        // Hit: the most recently put stack, without touching the pool.
        let s = cache.get(&pool, size - 100).unwrap();
        assert_eq!(s.limit, last);
        assert_eq!(pool.stats().outstanding, limit + 1 - moved);
        // Miss on another size goes to the pool.
        let t = cache.get(&pool, 32 * 1024).unwrap();
        let _ = cache.put(&pool, s);
        let _ = cache.put(&pool, t);
        cache.drain(&pool, &pool.lock_cache_flush());
        assert_eq!(cache.len(), 0);
        let st = pool.stats();
        assert_eq!(st.outstanding, 0);
        // One promise was never used (limit + 2 reserved, limit + 1 run):
        // drained with the credit, like the returned ones.
        assert_eq!(st.committed, 0, "{st:?}");
    }

    /// A reservation maps address space, never carves: stacks still come
    /// lazily, and every promise made by `reserve` fits in mapped slabs with
    /// room left for what the per-P caches may hold.
    #[test]
    fn reservations_map_slabs_ahead_of_carving() {
        let _serial = serial();
        let pool = StackPool::new();
        pool.set_caches(2);
        let size = 256 * 1024;
        let slack = 2 * cache_limit(size + page());
        let mut promised = 0;
        for want in [1, 1, 32, 500, 3000] {
            // A grant may be partial (what fits without a new slab).
            let mut got = 0;
            while got < want {
                got += pool.reserve(size, want - got).unwrap();
            }
            promised += got;
            let st = pool.stats();
            assert_eq!(st.committed, promised);
            assert!(st.capacity >= promised + slack, "{st:?}");
            assert_eq!(st.carved, 0, "a reservation carved a stack: {st:?}");
        }
        assert_eq!(promised, 1 + 1 + 32 + 500 + 3000);
        pool.unreserve(size, promised);
        assert_eq!(pool.stats().committed, 0);
    }

    /// The point of the slack: with every other cache full and no spare
    /// slab, a goroutine whose promise was made finds its stack without
    /// mapping (a failing `mmap` there would kill it at its first run).
    #[test]
    fn a_promised_stack_needs_no_new_slab() {
        let _serial = serial();
        let pool = StackPool::new();
        pool.set_caches(2);
        let size = 64 * 1024;
        let (mut a, mut b) = (StackCache::new(), StackCache::new());
        let limit = cache_limit(size + page());
        // B runs `limit` goroutines to completion: their stacks stay in B.
        for _ in 0..limit {
            b.reserve(&pool, size).unwrap();
        }
        let held: Vec<_> = (0..limit).map(|_| b.get(&pool, size).unwrap()).collect();
        for s in held {
            let _ = b.put(&pool, s);
        }
        assert_eq!(b.len(), limit);
        // A promises as many stacks as it can without a new slab, then runs
        // them all at once.
        let slabs = pool.stats().slabs;
        let mut n = 0;
        loop {
            a.reserve(&pool, size).unwrap();
            if pool.stats().slabs != slabs {
                break; // that promise needed a slab: it is not counted
            }
            n += 1;
        }
        let slabs = pool.stats().slabs;
        let running: Vec<_> = (0..n + 1).map(|_| a.get(&pool, size).unwrap()).collect();
        assert_eq!(pool.stats().slabs, slabs, "a promised stack mapped a slab");
        for s in running {
            let _ = a.put(&pool, s);
        }
        a.drain(&pool, &pool.lock_cache_flush());
        b.drain(&pool, &pool.lock_cache_flush());
        let st = pool.stats();
        assert_eq!((st.outstanding, st.committed), (0, 0), "{st:?}");
    }

    /// mprotect mode: promises stay within the map budget, counting the
    /// stacks the caches may hold, and fail with the sysctl message.
    #[test]
    fn mprotect_reservations_respect_the_map_budget() {
        let _serial = serial();
        let margin = 100;
        let budget = 200; // guards
        let pool = StackPool::with_config(PoolConfig {
            max_map_count: margin + 2 * (GUARDS_COMMITTED.load(Ordering::Relaxed) + budget),
            map_margin: margin,
            ..cfg(GuardMode::Mprotect)
        });
        pool.set_caches(2);
        let size = 16 * 1024;
        let room = budget - 2 * CACHE_MAX_STACKS;
        let mut got = 0;
        let err = loop {
            match pool.reserve(size, 1000) {
                Ok(n) => got += n,
                Err(e) => break e,
            }
        };
        assert_eq!(got, room);
        assert!(
            matches!(err, StackError::MapCountExhausted { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("vm.max_map_count"), "{err}");
        pool.unreserve(size, 1);
        assert_eq!(pool.reserve(size, 5).unwrap(), 1);
        pool.unreserve(size, room);
        assert_eq!(pool.stats().committed, 0);
    }

    #[test]
    fn drop_unregisters_and_leaks_in_use_slabs() {
        let _serial = serial();
        let pool = StackPool::new();
        let a = pool.alloc(16 * 1024).unwrap();
        let b = pool.alloc(64 * 1024).unwrap(); // second slab, kept out
        touch(&a);
        let guard_a = a.limit.get();
        let _ = pool.free(a);
        assert!(overflow::lookup_guard(guard_a).is_some());
        drop(pool);
        // The free slab is gone from the registry (the unmapping itself is
        // checked in a child process: `drop_unmaps_slabs`).
        assert!(overflow::lookup_guard(guard_a).is_none());
        // The slab with a stack out is leaked: still mapped, still guarded.
        touch(&b);
        assert!(overflow::lookup_guard(b.limit.get()).is_some());
    }

    #[test]
    fn batched_guards_fault() {
        if guard_mode() != GuardMode::Madvise {
            eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
            return;
        }
        let mut modes = vec!["guard-of-batch", "guard-per-page"];
        if matches!(guard_install(), GuardInstall::Vector { .. }) {
            modes.push("guard-ahead");
        }
        for mode in modes {
            let out = run_child(module_path!(), mode);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("carved; reading a guard"),
                "{mode}: {stderr}"
            );
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{mode}: {stderr}");
        }
    }

    /// Guards go in ahead of carving, a batch at a time, only as far as the
    /// carving has got: a slab that is never used costs no guards.
    #[test]
    fn guards_are_installed_in_batches() {
        if guard_mode() != GuardMode::Madvise {
            eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
            return;
        }
        let _serial = serial();
        let pool = StackPool::with_config(PoolConfig {
            first_slab_stacks: 1024,
            ..PoolConfig::default()
        });
        let guards_to = |pool: &StackPool| {
            let inner = pool.lock();
            inner.slabs.iter().map(|s| s.guards_to).collect::<Vec<_>>()
        };
        pool.reserve(16 * 1024, 1000).unwrap();
        assert!(
            guards_to(&pool).iter().all(|&g| g == 0),
            "a promise installed guards"
        );
        let a = pool.alloc(16 * 1024).unwrap();
        let batch = match guard_install() {
            GuardInstall::Vector { .. } => GUARD_BATCH,
            GuardInstall::PerPage => 1,
        };
        let slab = a.slab as usize;
        assert_eq!(guards_to(&pool)[slab], batch);
        let more: Vec<_> = (0..batch).map(|_| pool.alloc(16 * 1024).unwrap()).collect();
        // With `process_madvise`, the second batch went in ahead, once half
        // of the first was carved; per page, one guard per carve.
        assert_eq!(guards_to(&pool)[slab], 2 * batch);
        let _ = pool.free(a);
        let _ = pool.free_batch(more);
        pool.unreserve(16 * 1024, 1000);
    }

    /// A quiet step (no stack handed out during the last period) gives
    /// every slab whose stacks are all free and old back whole, with no
    /// `MADV_DONTNEED` pass before; a step after a stack was handed out
    /// does not (the bursts of W13 would map, guard and fault them again),
    /// and releases the old stacks beyond the bound instead.
    /// Slabs of 4, 8, 16... stacks, hot lists bounded at 4 stacks.
    fn small_slabs() -> PoolConfig {
        PoolConfig {
            first_slab_stacks: 4,
            hot_max_stacks: 4,
            ..PoolConfig::default()
        }
    }

    /// `n` stacks of `size`, every page written.
    fn alloc_touched(pool: &StackPool, n: usize, size: usize) -> Vec<Stack> {
        let stacks: Vec<_> = (0..n).map(|_| pool.alloc(size).unwrap()).collect();
        for s in &stacks {
            touch(s);
        }
        stacks
    }

    #[test]
    fn quiet_steps_return_whole_slabs() {
        let _serial = serial();
        let config = small_slabs();
        let size = 16 * 1024;
        // Slabs of 4, 8 and 16 stacks, all carved, all freed at once.
        let burst = |pool: &StackPool| assert!(pool.free_batch(alloc_touched(pool, 28, size)));

        let pool = StackPool::with_config(config);
        burst(&pool);
        // Step 1: the burst handed out stacks during the period, and freed
        // them all in it.
        assert!(pool.scavenge(usize::MAX));
        let st = pool.stats();
        assert_eq!((st.slabs, st.free_hot, st.free_cold), (3, 28, 0), "{st:?}");
        // Step 2 is quiet: the three slabs go, none of their stacks made
        // cold first.
        assert!(pool.scavenge(usize::MAX));
        let st = pool.stats();
        assert_eq!(
            (st.slabs, st.slabs_returned, st.mapped_bytes),
            (0, 3, 0),
            "{st:?}"
        );
        assert_eq!((st.free_hot, st.free_cold, st.carved), (0, 0, 0), "{st:?}");
        // The sweep finds nothing left and ends the scavenger.
        assert!(!pool.scavenge(usize::MAX));
        drop(pool);

        let pool = StackPool::with_config(config);
        burst(&pool);
        assert!(pool.scavenge(usize::MAX));
        // A stack handed out (and back) during the period: not quiet.
        let one = pool.alloc(size).unwrap();
        let _ = pool.free(one);
        assert!(pool.scavenge(usize::MAX));
        let st = pool.stats();
        assert_eq!((st.slabs, st.slabs_returned), (3, 0), "{st:?}");
        assert_eq!((st.free_hot, st.free_cold), (4, 24), "{st:?}");
        // The next period is quiet: every slab goes, its cold stacks and
        // its hot ones (the one reused is old by now).
        assert!(pool.scavenge(usize::MAX));
        let st = pool.stats();
        assert_eq!((st.slabs, st.slabs_returned), (0, 3), "{st:?}");
        assert_eq!((st.free_hot, st.free_cold), (0, 0), "{st:?}");
        assert!(!pool.scavenge(usize::MAX));
        // The pool still works: new slabs, guarded stacks.
        let again: Vec<_> = (0..30).map(|_| pool.alloc(size).unwrap()).collect();
        for s in &again {
            touch(s);
            assert!(overflow::lookup_guard(s.limit.get()).is_some());
        }
        let _ = pool.free_batch(again);
    }

    /// A paced step stops when its budget says so (`go_on`), after one
    /// syscall at least: the stacks it did not release stay hot, the slabs
    /// it did not unmap wait for the next steps, and dropping the pool
    /// unmaps what is still pending.
    #[test]
    fn paced_steps_leave_the_rest_for_later() {
        let _serial = serial();
        let size = 16 * 1024;
        let pool = StackPool::with_config(small_slabs());
        let stacks = alloc_touched(&pool, 28, size);
        let slabs = slab_range(&pool);
        assert_eq!(slabs.len(), 3);
        assert!(pool.free_batch(stacks));
        let mut stop = || false;
        // Step 1: everything was freed during the period, nothing to do.
        assert!(pool.scavenge_within(usize::MAX, &mut stop));
        // Keep the next step from being quiet (a stack handed out and back):
        // it would release the old hot stacks over the bound, one `madvise`
        // per run of adjacent stacks, but stops after the first run.
        let one = pool.alloc(size).unwrap();
        let _ = pool.free(one);
        assert!(pool.scavenge_within(usize::MAX, &mut stop));
        let st = pool.stats();
        assert!(st.free_cold > 0 && st.free_cold < 24, "{st:?}");
        assert_eq!(st.free_hot + st.free_cold, 28, "{st:?}");
        // Quiet now: the three slabs leave the pool at once, but only the
        // first is unmapped; the others wait (still counted as mapped).
        assert!(pool.scavenge_within(usize::MAX, &mut stop));
        let st = pool.stats();
        assert_eq!((st.slabs, st.slabs_returned), (0, 3), "{st:?}");
        assert_eq!((st.free_hot, st.free_cold), (0, 0), "{st:?}");
        assert_eq!(maps_overlapping(slabs[0].0, slabs[0].1), 0);
        assert_eq!(maps_overlapping(slabs[1].0, slabs[1].1), 1);
        assert_eq!(maps_overlapping(slabs[2].0, slabs[2].1), 1);
        let pending = slabs[1].1 - slabs[1].0 + slabs[2].1 - slabs[2].0;
        assert_eq!(st.mapped_bytes, pending, "{st:?}");
        // The next step goes on with the second; the scavenger is not over.
        assert!(pool.scavenge_within(usize::MAX, &mut stop));
        assert_eq!(maps_overlapping(slabs[1].0, slabs[1].1), 0);
        assert_eq!(maps_overlapping(slabs[2].0, slabs[2].1), 1);
        // Dropping the pool unmaps the third.
        drop(pool);
        assert_eq!(maps_overlapping(slabs[2].0, slabs[2].1), 0);
    }

    /// mprotect mode unmaps unpaced: a slab's guards count against the map
    /// budget until it is gone, and promises rely on getting them back (a
    /// review found a promised goroutine failing with `MapCountExhausted`
    /// while paced slabs waited).
    #[test]
    fn mprotect_slabs_go_at_once() {
        let _serial = serial();
        let pool = StackPool::with_config(PoolConfig {
            guard_mode: GuardMode::Mprotect,
            ..small_slabs()
        });
        let stacks = alloc_touched(&pool, 28, 16 * 1024);
        let slabs = slab_range(&pool);
        assert!(pool.free_batch(stacks));
        let mut stop = || false;
        assert!(pool.scavenge_within(usize::MAX, &mut stop));
        assert!(pool.scavenge_within(usize::MAX, &mut stop)); // quiet
        let st = pool.stats();
        assert_eq!((st.slabs_returned, st.mapped_bytes), (3, 0), "{st:?}");
        for (lo, hi) in slabs {
            assert_eq!(maps_overlapping(lo, hi), 0);
        }
    }

    /// A slab whose next guards are being installed with the pool lock
    /// released (`install_ahead`) is not given back meanwhile: the install
    /// would write guard markers into whatever is mapped there next.
    #[test]
    fn a_slab_being_guarded_stays() {
        let _serial = serial();
        let config = PoolConfig {
            first_slab_stacks: 8,
            hot_max_stacks: 4,
            ..PoolConfig::default()
        };
        let pool = StackPool::with_config(config);
        let stacks: Vec<_> = (0..8).map(|_| pool.alloc(16 * 1024).unwrap()).collect();
        let slab = stacks[0].slab as usize;
        assert!(pool.free_batch(stacks));
        pool.lock().slabs[slab].installing = true;
        assert!(pool.scavenge(usize::MAX));
        assert!(pool.scavenge(usize::MAX)); // quiet
        assert_eq!(pool.stats().slabs_returned, 0);
        pool.lock().slabs[slab].installing = false;
        while pool.scavenge(usize::MAX) {}
        assert_eq!(pool.stats().slabs_returned, 1);
    }

    /// Stacks in a per-P cache pin their slabs; the scavenger's flush of an
    /// idle P's cache (`flush_idle`) gives them and the cache's promises
    /// back as old, so the same quiet step returns the slabs.
    #[test]
    fn flushed_caches_unpin_slabs() {
        let _serial = serial();
        let pool = StackPool::with_config(PoolConfig {
            first_slab_stacks: 4,
            hot_max_stacks: 4,
            ..PoolConfig::default()
        });
        let size = 16 * 1024;
        let mut cache = StackCache::new();
        for _ in 0..12 {
            cache.reserve(&pool, size).unwrap();
        }
        let stacks: Vec<_> = (0..12).map(|_| cache.get(&pool, size).unwrap()).collect();
        // The burst's other stacks, in slabs of their own.
        let others: Vec<_> = (0..40).map(|_| pool.alloc(size).unwrap()).collect();
        for s in stacks.iter().chain(&others) {
            touch(s);
        }
        let pinned: Vec<u32> = stacks.iter().map(|s| s.slab).collect();
        for s in stacks {
            let _ = cache.put(&pool, s);
        }
        assert_eq!(cache.len(), 12);
        let _ = pool.free_batch(others);
        for _ in 0..3 {
            let _ = pool.scavenge(usize::MAX);
        }
        // The cached stacks' slabs stay, however quiet the pool.
        {
            let inner = pool.lock();
            for &slab in &pinned {
                assert!(inner.slabs[slab as usize].is_mapped());
            }
        }
        assert!(pool.stats().committed > 0);
        let _ = pool.free(pool.alloc(size).unwrap());
        let _ = pool.scavenge(usize::MAX); // not quiet
        assert!(pool.quiet());
        cache.flush_idle(&pool, &pool.lock_cache_flush());
        assert_eq!(cache.len(), 0);
        let st = pool.stats();
        assert_eq!((st.outstanding, st.committed), (0, 0), "{st:?}");
        let _ = pool.scavenge(usize::MAX);
        {
            let inner = pool.lock();
            for &slab in &pinned {
                let s = &inner.slabs[slab as usize];
                // Returned, or the carving slab with room left.
                assert!(
                    !s.is_mapped() || (s.carved < s.capacity && s.outstanding == 0),
                    "slab {slab} stayed"
                );
            }
            assert!(inner.slabs_returned >= 2, "{}", inner.slabs_returned);
        }
        // Flushed stacks of a slab that stays are released by the sweep at
        // the latest: none stays resident once the scavenger ends.
        while pool.scavenge(usize::MAX) {}
        assert_eq!(pool.stats().free_hot, 0, "{:?}", pool.stats());
    }

    /// Whole-slab return: a slab whose stacks are all free and released
    /// is unmapped (checked in a child: `slab-return`); one with a stack out
    /// (a goroutine's, or a per-P cache's) stays, and so does one the
    /// promises need.
    #[test]
    fn empty_slabs_go_back_to_the_os() {
        assert_child_passed(&run_child(module_path!(), "slab-return"));
        let _serial = serial();
        let pool = StackPool::with_config(PoolConfig {
            first_slab_stacks: 4,
            hot_max_stacks: 4,
            ..PoolConfig::default()
        });
        let size = 16 * 1024;
        let scavenge = |pool: &StackPool| {
            for _ in 0..4 {
                let _ = pool.scavenge(usize::MAX);
            }
        };
        let mut stacks: Vec<_> = (0..4 + 8 + 10).map(|_| pool.alloc(size).unwrap()).collect();
        // One stack of the first slab stays out (a per-P cache holds it).
        let kept = stacks.remove(0);
        let _ = pool.free_batch(stacks);
        scavenge(&pool);
        // The full second slab went back, the one being carved stays.
        let st = pool.stats();
        assert_eq!((st.slabs, st.slabs_returned), (2, 1), "{st:?}");
        assert_eq!((st.free_hot, st.free_cold), (0, 3 + 10), "{st:?}");
        let _ = pool.free(kept);
        // Promises that need every stack of the two slabs keep them.
        let granted = pool.reserve(size, 4 + 16).unwrap();
        assert_eq!(granted, 4 + 16);
        scavenge(&pool);
        let st = pool.stats();
        assert_eq!(
            (st.slabs, st.slabs_returned, st.free_cold),
            (2, 1, 4 + 10),
            "{st:?}"
        );
        // Without them the first one goes back.
        pool.unreserve(size, granted);
        let again = pool.alloc(size).unwrap(); // a cold stack is reused...
        let _ = pool.free(again); // ...and scavenged again
        scavenge(&pool);
        let st = pool.stats();
        assert_eq!(
            (st.slabs, st.slabs_returned, st.free_cold),
            (1, 2, 10),
            "{st:?}"
        );
        // The pool still works: its cold stacks, then new slabs (which
        // reuse the returned slabs' entries).
        let stacks: Vec<_> = (0..40).map(|_| pool.alloc(size).unwrap()).collect();
        for s in &stacks {
            touch(s);
            assert!(overflow::lookup_guard(s.limit.get()).is_some());
        }
        let st = pool.stats();
        assert_eq!(st.outstanding, 40, "{st:?}");
        assert_eq!(pool.lock().slabs.len(), 3, "returned entries are reused");
        let _ = pool.free_batch(stacks);
    }

    #[test]
    fn drop_unmaps_slabs() {
        assert_child_passed(&run_child(module_path!(), "pool-drop"));
    }

    #[test]
    fn mprotect_fallback_costs_maps_and_is_bounded() {
        let _serial = serial();
        let base = GUARDED_STACKS.load(Ordering::Relaxed);
        let budget = 40;
        let margin = 100;
        let pool = StackPool::with_config(PoolConfig {
            max_map_count: margin + 2 * (base + budget),
            map_margin: margin,
            hot_max_stacks: 8,
            ..cfg(GuardMode::Mprotect)
        });
        let size = 16 * 1024;
        let mut stacks: Vec<_> = (0..budget).map(|_| pool.alloc(size).unwrap()).collect();
        // The guard really is PROT_NONE: each guard splits the slab.
        let (lo, hi) = slab_range(&pool)[0];
        let lines = maps_overlapping(lo, hi);
        assert!(
            lines >= 2 * budget,
            "{lines} maps for {budget} mprotect guards"
        );
        assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base + budget);
        // Over budget: refused, naming the sysctl.
        let err = pool.alloc(size).unwrap_err();
        assert!(
            matches!(err, StackError::MapCountExhausted { .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("vm.max_map_count") && msg.contains("sysctl -w"),
            "{msg}"
        );
        // Freeing makes cold stacks, which give their guards (maps) back...
        for s in stacks.drain(..) {
            let _ = pool.free(s);
        }
        pool.scavenge(usize::MAX);
        pool.scavenge(usize::MAX);
        let st = pool.stats();
        assert!(st.free_cold > 0);
        assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base + st.free_hot);
        assert!(maps_overlapping(lo, hi) < lines);
        // ...and reuse re-guards them, hot ones are demoted when needed.
        let stacks: Vec<_> = (0..budget).map(|_| pool.alloc(size).unwrap()).collect();
        assert_eq!(pool.stats().carved, budget);
        for s in &stacks {
            touch(s);
            assert!(overflow::lookup_guard(s.limit.get()).is_some());
        }
        assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base + budget);
        let _ = pool.free_batch(stacks);
        drop(pool);
        assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base);
    }

    #[test]
    fn error_messages() {
        let e = StackError::MapCountExhausted {
            max_map_count: 65530,
            guarded_stacks: 28000,
        };
        let msg = e.to_string();
        assert!(msg.contains("vm.max_map_count = 65530"), "{msg}");
        assert!(msg.contains("sysctl -w vm.max_map_count=262144"), "{msg}");
        let e = StackError::Mmap(io::Error::from_raw_os_error(libc::ENOMEM));
        assert!(std::error::Error::source(&e).is_some());
    }

    /// Far more live 256 KiB stacks than mprotect guards could ever allow under
    /// the default vm.max_map_count (~32K) stay within a few maps. (A million
    /// took 254 slabs and 40 maps in 12 s when measured; 100,000 keep CI fast.)
    #[test]
    fn hundred_thousand_stacks_of_256k() {
        if guard_mode() != GuardMode::Madvise {
            eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
            return;
        }
        let _serial = serial();
        let pool = StackPool::new();
        let t = std::time::Instant::now();
        let stacks: Vec<_> = (0..100_000)
            .map(|_| {
                let s = pool.alloc(256 * 1024).unwrap();
                // A goroutine touches at least its top page.
                // SAFETY: the usable part of a stack we own.
                unsafe { ptr::write_volatile((s.base.get() - 64) as *mut u8, 1) };
                s
            })
            .collect();
        let st = pool.stats();
        let lines: usize = slab_range(&pool)
            .iter()
            .map(|&(lo, hi)| maps_overlapping(lo, hi))
            .sum();
        let total = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count();
        eprintln!(
            "100K stacks in {:?}: {} slabs, {} GiB mapped, {lines} maps for the slabs, \
             {total} maps in the process",
            t.elapsed(),
            st.slabs,
            st.mapped_bytes >> 30
        );
        assert!(st.slabs < 300, "{st:?}");
        assert!(lines <= st.slabs);
        assert!(total < max_map_count() / 2);
        assert!(pool.free_batch(stacks), "over the bound: start a scavenger");
        assert_eq!(pool.stats().free_hot, 100_000, "freeing makes no syscall");
        let t = std::time::Instant::now();
        assert!(pool.scavenge(usize::MAX), "first step: all too young");
        assert!(
            pool.scavenge(usize::MAX),
            "second step (quiet): whole slabs"
        );
        let st = pool.stats();
        eprintln!(
            "returned {} slabs, released {} stacks in {:?}",
            st.slabs_returned,
            st.free_cold,
            t.elapsed()
        );
        assert!(
            st.free_hot <= HOT_MAX_BYTES / (256 * 1024 + page()),
            "{st:?}"
        );
        // Only the slab being carved, with room left, stays.
        assert!(st.slabs <= 1, "{st:?}");
        assert_eq!(st.free_hot + st.free_cold, st.carved, "{st:?}");
    }

    #[test]
    fn types_are_send_sync() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<Stack>();
        send::<StackPool>();
        sync::<StackPool>();
        send::<StackCache>();
        send::<StackError>();
        sync::<StackError>();
    }
}
