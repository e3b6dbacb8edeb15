//! Promises: a goroutine is promised its stack at spawn (`StackPool::reserve`,
//! "Reservations" in `mod.rs`), and the address space left to the rest of
//! the process near a limit (`headroom`).

use std::io;
use std::ptr;
use std::sync::atomic::Ordering;

use super::*;

/// Least address space that `reserve` leaves free for the rest of the
/// process once a map has failed (an address-space limit is near). A
/// quarter of the limit when that is more: every new thread may need a
/// malloc arena (glibc reserves 64 MiB per arena and maps 128 MiB while it
/// aligns one) and its own stack, and 128 MiB proved too little under
/// `ulimit -v 1G` (a thread started after the stacks had filled the space
/// failed an 88-byte allocation about once in 20 runs).
pub(super) const HEADROOM_MIN: usize = 256 << 20;

/// The headroom for the current address-space limit: `max(HEADROOM_MIN,
/// limit / 4)`.
pub(super) fn headroom() -> usize {
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
pub(super) fn headroom_left() -> bool {
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

impl StackPool {
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
}
