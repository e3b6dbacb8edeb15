//! Guard pages: which mechanism (`guard_mode`), batched installs, and the
//! map budget of mprotect mode.
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
//!   `GOSCHED_STACK_GUARD=madvise`: one `madvise` per carved stack. A batch
//!   and not the whole slab: a call costs less per guard with more iovecs,
//!   but a slab holds up to 65,000 stacks, whose guards the goroutine that
//!   carves the first one would pay for, used or not. Once half of a batch
//!   is carved, the carver installs the next batch with the pool lock
//!   released (`guards_ahead_due`, `install_ahead`; the slab is not returned
//!   meanwhile), so the Ms that want a stack do not wait on the call. Only a
//!   slab's first batch, or a carve that outruns the installer, installs
//!   under the lock.
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

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// `madvise` advice installing guard markers (Linux 6.13); not in libc 0.2.191.
/// (`MADV_GUARD_REMOVE` is 103; it is not needed: guards live as long as
/// their slab.)
pub(crate) const MADV_GUARD_INSTALL: libc::c_int = 102;

/// `pidfd` naming the calling process in `process_madvise` (Linux 6.15,
/// `PIDFD_SELF_THREAD_GROUP`): no descriptor to open, and still right in a
/// forked child. Not in libc 0.2.191.
pub(super) const PIDFD_SELF: libc::c_int = -10001;

/// Guards installed ahead of carving, with one `process_madvise` (see
/// "Guards" at the top).
pub(super) const GUARD_BATCH: usize = 64;

/// mprotect mode: maps left to the rest of the process are
/// `max(MAP_MARGIN_MIN, max_map_count / MAP_MARGIN_DIV)`.
pub(super) const MAP_MARGIN_MIN: usize = 1024;

pub(super) const MAP_MARGIN_DIV: usize = 8;

/// mprotect mode: guards currently installed by all pools of the process
/// (each costs about two maps, and the map limit is per process).
pub(super) static GUARDED_STACKS: AtomicUsize = AtomicUsize::new(0);

/// mprotect mode: stacks promised by all pools of the process (each may need
/// a guard; see "Reservations").
pub(super) static GUARDS_COMMITTED: AtomicUsize = AtomicUsize::new(0);

/// How guard pages are made. See the top of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuardMode {
    /// `madvise(MADV_GUARD_INSTALL)`: no VMA split, no map cost.
    Madvise,
    /// `mprotect(PROT_NONE)`: two maps per guarded stack.
    Mprotect,
}

/// Two fresh pages for a probe (`guard_mode`, `guard_install`); the caller
/// unmaps them. `None` if they cannot be mapped.
pub(super) fn scratch_pages(page: usize) -> Option<*mut libc::c_void> {
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

/// The guards a carver installs with the pool lock released: stacks
/// `from..to` of slab `slab` (at `start`, `stride` apart).
#[derive(Debug, Clone, Copy)]
pub(super) struct GuardsAhead {
    pub(super) slab: u32,
    pub(super) start: usize,
    pub(super) stride: usize,
    pub(super) from: usize,
    pub(super) to: usize,
}

impl StackPool {
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
    pub(super) fn guards_ahead_due(&self, inner: &mut PoolInner, ci: usize) -> Option<GuardsAhead> {
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
    pub(super) fn install_ahead(&self, ahead: GuardsAhead) {
        let installed = self
            .install_guards(ahead.start, ahead.stride, ahead.from, ahead.to)
            .unwrap_or(0);
        let mut inner = self.lock();
        let slab = &mut inner.slabs[ahead.slab as usize];
        debug_assert!(slab.installing && slab.start == ahead.start);
        slab.installing = false;
        slab.guards_to = slab.guards_to.max(ahead.from + installed);
    }

    /// mprotect mode: `grant` stacks more (at least one) within the map
    /// budget, counting every pool's promises and this pool's caches.
    /// Reservations are not limited by guards in madvise mode.
    pub(super) fn reserve_guards(&self, grant: usize) -> Result<usize, StackError> {
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
    pub(super) fn guard_slot(
        &self,
        inner: &mut PoolInner,
        limit: usize,
        slab: u32,
    ) -> Result<(), StackError> {
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
    pub(super) fn guard_ahead(&self, slab: &mut Slab) -> Result<(), StackError> {
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
    pub(super) fn install_guards(
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

    pub(super) fn map_count_error(&self) -> StackError {
        StackError::MapCountExhausted {
            max_map_count: self.config.max_map_count,
            guarded_stacks: GUARDED_STACKS.load(Ordering::Relaxed),
        }
    }

    /// mprotect mode: counts one more guard if `2 * guards + margin` stays
    /// within the map limit.
    pub(super) fn reserve_guard(&self) -> bool {
        let max = self.config.max_map_count;
        let margin = self.config.map_margin;
        update_relaxed(&GUARDED_STACKS, |g| {
            let next = g + 1;
            (next.saturating_mul(2).saturating_add(margin) <= max).then_some(next)
        })
        .is_ok()
    }
}
