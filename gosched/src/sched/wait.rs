//! Why a goroutine or task waits, since when, and the goroutine dump
//! (`runtime::dump_goroutines`, Go's `SIGQUIT` / `pprof/goroutine` listing:
//! "goroutine 7 [chan receive, 3 minutes]").
//!
//! # How a wait is recorded
//!
//! A gosched future about to return `Pending` (a channel operation, select,
//! sleep, a sync primitive, a join, a handed-off syscall) names its reason
//! in a thread-local (`note`: one store). The task harness, after every
//! poll, takes that reason (`take`, resetting it) and, if the poll returned
//! `Pending`, stores it with a coarse timestamp in the task header's `wait`
//! word (one store; the clock is `CLOCK_MONOTONIC_COARSE`, a few ns and
//! millisecond-grained). A poll that pends on anything else (a foreign
//! future) records no reason: the dump says "block_on" for a goroutine and
//! "future" for a task.
//!
//! The thread-local is read and written only through `#[inline(never)]`
//! functions, never across a goroutine's suspension inside one function
//! (see "The thread rule" in `machine.rs`): `note` runs in the future's
//! poll, on the thread that polls it, and the harness takes it on the same
//! thread before the poll returns to the scheduler.
//!
//! # The dump
//!
//! The runtime's owned list holds every task that has parked at least once
//! and not completed (`owned.rs`): the dump walks it shard by shard under
//! the shard locks, reading each header's state word, `wait` word and spawn
//! site (fixed at spawn). Goroutines and tasks that never parked are not in
//! it (they are running or queued for their first run): the dump counts
//! them in its last line. Nothing stops the world, so the listing is a blur
//! of the moment, as `stats()` is.

use std::cell::Cell;
use std::io::{self, Write};
use std::sync::atomic::Ordering::Relaxed;

/// Why a goroutine or task is parked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WaitReason {
    /// Nothing noted (a foreign future, or never parked).
    None = 0,
    ChanReceive,
    ChanSend,
    Select,
    Sleep,
    Mutex,
    RwLock,
    WaitGroup,
    Cond,
    Semaphore,
    Once,
    Join,
    Syscall,
}

impl WaitReason {
    fn from_u8(v: u8) -> WaitReason {
        use WaitReason::*;
        [
            None,
            ChanReceive,
            ChanSend,
            Select,
            Sleep,
            Mutex,
            RwLock,
            WaitGroup,
            Cond,
            Semaphore,
            Once,
            Join,
            Syscall,
        ]
        .get(v as usize)
        .copied()
        .unwrap_or(None)
    }

    /// Go's words where Go has them.
    fn describe(self, goroutine: bool) -> &'static str {
        match self {
            WaitReason::None if goroutine => "block_on",
            WaitReason::None => "future",
            WaitReason::ChanReceive => "chan receive",
            WaitReason::ChanSend => "chan send",
            WaitReason::Select => "select",
            WaitReason::Sleep => "sleep",
            WaitReason::Mutex => "sync.Mutex.Lock",
            WaitReason::RwLock => "sync.RWMutex.Lock",
            WaitReason::WaitGroup => "sync.WaitGroup.Wait",
            WaitReason::Cond => "sync.Cond.Wait",
            WaitReason::Semaphore => "semacquire",
            WaitReason::Once => "sync.Once.Do",
            WaitReason::Join => "join",
            WaitReason::Syscall => "syscall",
        }
    }
}

thread_local! {
    static REASON: Cell<u8> = const { Cell::new(0) };
}

/// A gosched future about to return `Pending`: say why (see the module docs).
#[inline(never)]
pub(crate) fn note(reason: WaitReason) {
    REASON.with(|r| r.set(reason as u8));
}

/// `note(reason)`, then `Poll::Pending`: the return of a gosched future that
/// parks.
#[inline]
pub(crate) fn pending<T>(reason: WaitReason) -> std::task::Poll<T> {
    note(reason);
    std::task::Poll::Pending
}

/// The harness, after a poll: the reason its future noted (and forget it).
#[inline(never)]
pub(crate) fn take() -> u8 {
    REASON.with(|r| r.replace(0))
}

/// Milliseconds on `CLOCK_MONOTONIC_COARSE` (a few ns; ms-grained).
pub(crate) fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; the clock id exists on Linux (elsewhere
    // the call fails and we report 0).
    #[cfg(target_os = "linux")]
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0;
    #[cfg(not(target_os = "linux"))]
    // SAFETY: as above, with the plain monotonic clock.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } == 0;
    if !ok {
        return 0;
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

const REASON_SHIFT: u32 = 56;

/// The header's `wait` word for a task that parks now for `reason`.
#[inline]
pub(crate) fn word(reason: u8) -> u64 {
    (u64::from(reason) << REASON_SHIFT) | (coarse_ms() & ((1 << REASON_SHIFT) - 1))
}

#[cfg(not(loom))]
impl super::Shared {
    /// Write every goroutine and task that has parked at least once and is
    /// still alive: id, kind, state, wait reason and time, spawn site.
    pub(crate) fn dump_goroutines(&self, w: &mut dyn Write) -> io::Result<()> {
        let now = coarse_ms();
        let mut listed = 0usize;
        let mut lines = Vec::new();
        self.owned.for_each(|h| {
            let st = h.state.load();
            if st.is_complete() {
                return;
            }
            let kind = if h.goroutine { "goroutine" } else { "task" };
            let wait = h.wait.load(Relaxed);
            let state = if st.is_running() {
                "running".to_string()
            } else if st.is_notified() {
                "runnable".to_string()
            } else {
                let reason = WaitReason::from_u8((wait >> REASON_SHIFT) as u8);
                let since = wait & ((1 << REASON_SHIFT) - 1);
                format!(
                    "{}, {}",
                    reason.describe(h.goroutine),
                    minutes_or_ms(now.saturating_sub(since))
                )
            };
            lines.push((
                h.id,
                format!("{kind} {} [{state}]:\n\tspawned at {}\n\n", h.id, h.site),
            ));
            listed += 1;
        });
        lines.sort_by_key(|(id, _)| *id);
        for (_, l) in &lines {
            w.write_all(l.as_bytes())?;
        }
        let live = self.live_tasks();
        writeln!(
            w,
            "{listed} listed; {} more alive that never parked (running or queued \
             for their first run)",
            live.saturating_sub(listed)
        )
    }
}

/// Go's wait-time words: "N minutes" from one minute on, else milliseconds.
fn minutes_or_ms(ms: u64) -> String {
    if ms >= 60_000 {
        let m = ms / 60_000;
        format!("{m} minute{}", if m == 1 { "" } else { "s" })
    } else {
        format!("{ms} ms")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_through_the_word() {
        for r in 0..=12u8 {
            let w = word(r);
            assert_eq!(WaitReason::from_u8((w >> REASON_SHIFT) as u8) as u8, r);
        }
        assert_eq!(WaitReason::from_u8(200), WaitReason::None);
        assert_eq!(minutes_or_ms(1500), "1500 ms");
        assert_eq!(minutes_or_ms(60_000), "1 minute");
        assert_eq!(minutes_or_ms(180_500), "3 minutes");
    }

    #[test]
    fn note_then_take_resets() {
        note(WaitReason::Sleep);
        assert_eq!(take(), WaitReason::Sleep as u8);
        assert_eq!(take(), 0);
    }
}
