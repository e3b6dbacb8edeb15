//! The scavenger: free stacks' pages and empty slabs go back to the OS off
//! the spawn and exit paths, as Go's background scavenger does.
//!
//! When a free leaves a class's hot list over its bound —
//! `clamp(64 MiB / stride, 4, 256)` stacks — `free_batch` asks its caller to
//! start a scavenger (once: `PoolInner::scavenging`), which runs on a thread
//! of the runtime's blocking pool (`Shared::scavenge_stacks_soon`,
//! `sched/blocking.rs`) and calls [`StackPool::scavenge_within`] every
//! 250 ms or later (a *step*, paced: "Pacing" below) until it returns
//! false. The pool counts the stacks it hands out (`handed_out`, under the
//! lock it holds anyway); a step that finds the count unchanged since the
//! previous step is *quiet*: no stack left the pool for a whole period, so
//! the burst is over. A step:
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
//!    free lists that grew with the burst; then the scavenger ends, after
//!    trimming the task allocator's depot and the C heap
//!    (`sched/blocking.rs`, `trim_heap`). Nothing ticks after that: a later
//!    free over a bound starts a new scavenger.
//!
//! The syscalls run outside the pool lock; the stacks and slabs being
//! released are in no list meanwhile.
//!
//! **Whole-slab return** (`take_empty_slabs`). A slab whose carved stacks
//! are all cold, hot and free since before the previous step, or being
//! released in that step (so none is out, none in a per-P cache, none freed
//! during the last period) is taken out of the pool under the lock (its
//! stacks leave the hot and cold lists, its capacity leaves the class, it
//! leaves the overflow registry) and unmapped once the lock is released,
//! which also frees its page tables: a guard marker keeps its page-table
//! page alive, and `MADV_DONTNEED` never frees those. A slab stays when a
//! stack of it is out (a goroutine's, or in the cache of a P that is not
//! idle), when it is its class's carving slab with uncarved room, when the
//! class's promises need it (`committed + slack` must still fit in the
//! remaining capacity, see "Reservations" in `mod.rs`), or when it was never
//! carved (a spare mapped for promises costs address space, no memory).
//!
//! Only quiet steps and the sweep return slabs: a burst that is not over
//! would map, guard and fault them in again. A program whose bursts come
//! further apart than a period pays that at each burst (a new slab, its
//! guards, its page tables): the price of giving the memory back, which Go
//! pays too.
//!
//! Why the flush: nothing else empties the cache of a P that goes idle (its
//! next spawn takes the stacks back at no cost), and a cached stack pins its
//! slab. The flush runs under the scheduler lock (an idle P stays idle under
//! it, as `kill_p` relies on) and the pool's `cache_flush` lock (see "Who
//! may write what" in `mod.rs`).
//!
//! The free lists are shrunk in place, never freed whole (`drop_quietly`):
//! glibc's `free` of a block it had mapped raises its trim threshold for
//! the rest of the process, and a thread arena then keeps up to that much
//! free memory resident.
//!
//! The C heap: each parked goroutine's channel waiter is allocated in the
//! glibc arena of the M that ran it; glibc's `malloc_trim` never trims the
//! top of a thread arena, only a free of a block of 64 KiB or more in that
//! arena does. So when a scavenger run ends, it asks every M to trim
//! (`Shared::heap_trims`, waking the idle ones): each frees a 96 KiB block
//! from its own arena (`blocking.rs`, `trim_thread_arena`).
//!
//! Measurements of all this (RSS after a burst, the scavenger's CPU, Go's
//! figures beside it) are in `docs/bench/stacks.md`.
//!
//! # Pacing
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
//! gone, and promised stacks rely on getting them back.
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

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::*;

/// A slab (or what is left of it) to unmap: out of every list and of the
/// slab table, so nothing else refers to it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unmap {
    pub(super) start: usize,
    pub(super) len: usize,
    /// Its stride: pieces end on a stack's boundary (in mprotect mode, a
    /// mapping's boundary, so no piece splits a mapping in two).
    pub(super) stride: usize,
    /// mprotect guards it holds, uncounted once the last piece is gone.
    pub(super) guarded: usize,
}

/// At most this much address space per `munmap` when a slab goes back
/// (rounded down to whole stacks, at least one): the unit of work a paced
/// step checks its budget after. With one page resident per 256 KiB stack
/// a piece frees 256 pages; with every page resident, 16,384 (some 8 ms).
pub(super) const UNMAP_PIECE: usize = 64 << 20;

/// Capacity a free list keeps however much it shrinks (see
/// [`drop_quietly`]: the lists are never freed whole while the pool lives).
pub(super) const LIST_MIN_CAPACITY: usize = 64;

/// Gives back most of a list's spare capacity once it holds a quarter or
/// less of it (a burst of 100,000 stacks grows a list to 2.3 MiB). It
/// shrinks in place (`realloc`), never to nothing: see [`drop_quietly`].
pub(super) fn shrink_list<L: ShrinkList>(list: &mut L) {
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
pub(super) fn drop_quietly<T>(mut buf: Vec<T>) {
    buf.clear();
    buf.shrink_to(1);
}

/// The free lists' operations [`shrink_list`] needs.
pub(super) trait ShrinkList {
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

impl StackPool {
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
    pub(super) fn take_empty_slabs(
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
    pub(super) fn unmap_slabs(
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

    /// Releases the usable pages of a free stack and, in mprotect mode, its
    /// guard. Called without the lock held (or with it, by `cool_all_hot`);
    /// the stack is in no list.
    pub(super) fn release_pages(&self, slot: &mut Slot, size: usize) {
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
    pub(super) fn release_runs(
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
    pub(super) fn make_cold(&self, inner: &mut PoolInner, ci: usize, slot: Slot) {
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
    pub(super) fn cool_all_hot(&self, inner: &mut PoolInner) {
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
