//! Why a goroutine or task waits, since when, and the goroutine dump
//! (`runtime::dump_goroutines`, Go's `SIGQUIT` / `pprof/goroutine` listing:
//! "goroutine 7 [chan receive, 3 minutes]").
//!
//! # How a wait is recorded
//!
//! The task harness clears the header's `wait` word as a poll begins (a
//! plain store to the line its state CAS just took). A gosched future about
//! to return `Pending` (a channel operation, select, sleep, a sync
//! primitive, a join, a handed-off syscall) finds the task through its
//! `Context`'s waker — the harness's own waker, told apart by its vtable —
//! and stores its reason with a coarse timestamp there (`note`: the time
//! sysmon last published, `NOW_MS`, and one store). Nothing happens on polls that do not park in a gosched
//! future: a task pending on anything else (a foreign future) keeps the
//! cleared word, and the dump says "block_on" for a goroutine, "future" for
//! a task, with no wait time. (A first version noted through a
//! thread-local the harness took after every poll, and read the clock on
//! every `Pending`, yields included: W4 yield 1.22–1.30x, W3 1.08–1.16x;
//! reading the clock on every park in a gosched future still cost W3 async
//! 1.17x.)
//!
//! Limits: the word is cleared only when a poll begins, so a gosched
//! future that returned `Pending` and was then dropped within the same poll
//! (a `select` of futures where another branch won, a `poll!`) leaves its
//! reason behind if the poll then pends on a foreign future. `Sleep` notes
//! only if nothing else did in that poll (`pending_unless_noted`), so a
//! `recv_timeout` or `time::timeout` names the operation, not its timer.
//! The time is sysmon's (`NOW_MS`, ≤ 10 ms old); sysmon clears it when it
//! sleeps or exits, and then the clock is read.
//!
//! # The dump
//!
//! The runtime's owned list holds every task that has parked at least once
//! and not completed (`owned.rs`): the dump walks it shard by shard under
//! the shard locks, reading each header's state word, `wait` word and spawn
//! site (fixed at spawn). Goroutines and tasks that never parked are not in
//! it (they are running or queued for their first run): the dump counts
//! them in its last line. A named goroutine's name comes from the runtime's
//! side table (`Shared::names`: inserted by the spawner before the task
//! exists, removed by the completion hook), looked up only when the
//! header's `named` flag is set. Nothing stops the world, so the listing is a blur
//! of the moment, as `stats()` is.

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
    /// A socket read, write, accept or connect (`net`).
    IoWait,
    /// Waiting for a worker of a full `pool`.
    PoolSubmit,
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
            IoWait,
            PoolSubmit,
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
            WaitReason::IoWait => "IO wait",
            WaitReason::PoolSubmit => "pool submit",
        }
    }
}

/// A gosched future about to return `Pending` for `reason`: record it, with
/// the time, in the header of the task being polled (if `cx` is one of our
/// tasks' wakers; a future polled by another executor records nothing).
#[inline]
pub(crate) fn note(reason: WaitReason, cx: &std::task::Context<'_>) {
    if let Some(h) = super::task::header_of(cx.waker()) {
        h.wait.store(word(reason as u8), Relaxed);
    }
}

/// Milliseconds on the coarse clock as sysmon last read it, or 0 when no
/// sysmon keeps it (none runs, or every P is idle and it sleeps): then
/// `word` reads the clock itself. Reading the clock on every park cost W3
/// async ping-pong 125 → 150 ns per round trip; with this word it is
/// 126 → 134 ns (still to be explained: storing a constant instead costs
/// 1 ns), and the time it gives is at most one sysmon period (≤ 10 ms) old.
/// (On a line of its own: a neighbour written on hot paths, such as the
/// parkers' pending-wake count, would make every park miss.)
static NOW_MS: crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64> =
    crossbeam_utils::CachePadded::new(std::sync::atomic::AtomicU64::new(0));

/// sysmon, at each look: publish the coarse time.
pub(crate) fn tick() {
    let now = coarse_ms().max(1);
    // Written at most once a millisecond: every write costs each reader a
    // cache miss.
    if NOW_MS.load(Relaxed) != now {
        NOW_MS.store(now, Relaxed);
    }
}

/// sysmon, about to sleep while every P is idle: nobody keeps the time now.
pub(crate) fn clock_unkept() {
    NOW_MS.store(0, Relaxed);
}

/// As `note`, unless this poll noted a reason already: for `Sleep`, the
/// weakest reason — a `recv_timeout`, `send_timeout` or `time::timeout`
/// polls its timer after the operation it bounds, and the dump should name
/// the operation.
#[inline]
pub(crate) fn pending_unless_noted<T>(
    reason: WaitReason,
    cx: &std::task::Context<'_>,
) -> std::task::Poll<T> {
    if let Some(h) = super::task::header_of(cx.waker()) {
        if h.wait.load(Relaxed) >> REASON_SHIFT == 0 {
            h.wait.store(word(reason as u8), Relaxed);
        }
    }
    std::task::Poll::Pending
}

/// `note(reason, cx)`, then `Poll::Pending`: the return of a gosched future
/// that parks.
#[inline]
pub(crate) fn pending<T>(reason: WaitReason, cx: &std::task::Context<'_>) -> std::task::Poll<T> {
    note(reason, cx);
    std::task::Poll::Pending
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

/// The reason in a `wait` word.
#[inline]
pub(crate) fn reason_of(word: u64) -> u8 {
    (word >> REASON_SHIFT) as u8
}

/// What the timeline says a task parked for (the dump's words).
pub(crate) fn describe(reason: u8, goroutine: bool) -> &'static str {
    WaitReason::from_u8(reason).describe(goroutine)
}

/// The header's `wait` word for a task that parks now for `reason`.
#[inline]
pub(crate) fn word(reason: u8) -> u64 {
    let now = match NOW_MS.load(Relaxed) {
        0 => coarse_ms(),
        t => t,
    };
    (u64::from(reason) << REASON_SHIFT) | (now & ((1 << REASON_SHIFT) - 1))
}

#[cfg(not(loom))]
impl super::Shared {
    /// Write every goroutine and task that has parked at least once and is
    /// still alive: id, kind, state, wait reason and time, spawn site.
    pub(crate) fn dump_goroutines(&self, w: &mut dyn Write) -> io::Result<()> {
        let now = coarse_ms();
        let seen = self.parked_snapshot();
        let listed = seen.len();
        for g in &seen {
            let kind = if g.goroutine { "goroutine" } else { "task" };
            let state = match g.run {
                Some(run) => run.to_string(),
                // Not a gosched future: no time was recorded.
                None if g.reason == WaitReason::None => g.reason.describe(g.goroutine).into(),
                None => format!(
                    "{}, {}",
                    g.reason.describe(g.goroutine),
                    minutes_or_ms(now.saturating_sub(g.since))
                ),
            };
            let name = if g.named {
                let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
                names
                    .get(&g.id)
                    .map_or(String::new(), |n| format!(" \"{n}\""))
            } else {
                String::new()
            };
            let line = format!(
                "{kind} {}{name} [{state}]:\n\tspawned at {}\n\n",
                g.id, g.site
            );
            w.write_all(line.as_bytes())?;
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

/// One entry of the owned list, as `parked_snapshot` copied it.
#[cfg(not(loom))]
pub(crate) struct Parked {
    pub(crate) id: u64,
    pub(crate) goroutine: bool,
    pub(crate) named: bool,
    pub(crate) site: &'static std::panic::Location<'static>,
    /// "running" or "runnable"; `None` while parked.
    pub(crate) run: Option<&'static str>,
    pub(crate) reason: WaitReason,
    /// Coarse ms when it parked (meaningless for `WaitReason::None`).
    pub(crate) since: u64,
}

#[cfg(not(loom))]
impl Parked {
    /// Go's scheddetail status number (1 runnable, 2 running, 4 waiting)
    /// and wait reason.
    pub(crate) fn go_status(&self) -> (u8, &'static str) {
        match self.run {
            Some("running") => (2, ""),
            Some(_) => (1, ""),
            None => (4, self.reason.describe(self.goroutine)),
        }
    }
}

#[cfg(not(loom))]
impl super::Shared {
    /// Every task on the owned list that has not completed, sorted by id:
    /// copied under the shard locks (a task parking for the first time, or
    /// completing, waits for the lock meanwhile), formatted by the caller.
    pub(crate) fn parked_snapshot(&self) -> Vec<Parked> {
        let mut seen = Vec::new();
        self.owned.for_each(|h| {
            let st = h.state.load();
            if st.is_complete() {
                return;
            }
            let run = if st.is_running() {
                Some("running")
            } else if st.is_notified() {
                Some("runnable")
            } else {
                None
            };
            let wait = h.wait.load(Relaxed);
            seen.push(Parked {
                id: h.id,
                goroutine: h.goroutine,
                named: h.named,
                site: h.site,
                run,
                reason: WaitReason::from_u8((wait >> REASON_SHIFT) as u8),
                since: wait & ((1 << REASON_SHIFT) - 1),
            });
        });
        seen.sort_by_key(|g| g.id);
        seen
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
}
