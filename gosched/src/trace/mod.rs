//! The timeline: what the scheduler did, event by event, written as Chrome
//! trace-event JSON that Perfetto (ui.perfetto.dev) and `chrome://tracing` open
//! (Go's `runtime/trace` and `go tool trace`, in a format everyone has a viewer
//! for).
//!
//! # Modes
//!
//! - *Full* (`GOSCHED_TRACE=path.json`, or `runtime::trace_start(path)`): every
//!   event from start to `runtime::trace_stop` (or process exit, through an
//!   `atexit` hook, for the variable), kept in memory up to `LIMIT_BYTES`;
//!   past that recording stops and the file says so (`otherData.truncated`).
//! - *Flight recorder* (`GOSCHED_TRACE=flight=MS`, or
//!   `runtime::flight_recorder_start(window)`, Go 1.25's `trace.FlightRecorder`):
//!   the same events, but only the last `window` are kept; `runtime::trace_snapshot`
//!   writes them, e.g. from a test that has just seen a latency spike.
//!
//! # Cost
//!
//! Off: every recording site is `if trace::on() { ... }`, one relaxed load of a
//! process-wide flag and a branch that is never taken; the recording itself
//! (`record`) is out of line and cold. `execute` checks once per poll and runs
//! a separate traced copy of itself when on (its two checks around the poll
//! cost W3 async about 3%, measured).
//!
//! On (2-core VM, `GOSCHED_TRACE=flight=50`, medians of 11): 14–18 ns per
//! event (W1 async +17 ns, W3 +18 ns per event, 6 events per round trip); a
//! full trace costs 30–45 ns per event, most of it the kernel zeroing the new
//! pages the events fill. Half of the rest was `clock_gettime` (23 ns here),
//! hence the TSC (`clock.rs`); the flight recorder reuses its oldest chunks.
//!
//! # Buffers (`buffer.rs`)
//!
//! Each thread that records gets a *chunk* of `CHUNK_EVENTS` slots that only it
//! writes: it fills slot `len`, then publishes `len + 1` with a Release store, so
//! recording takes no lock and no read-modify-write. A full chunk is *retired*
//! into the registry (one lock per `CHUNK_EVENTS` events) and replaced. A
//! snapshot or the stop copies the retired chunks and the prefix `[0, len)` of
//! every thread's current chunk (Acquire), under the registry lock. The rule
//! that keeps that sound: a thread moves or frees its current chunk only while
//! holding the registry lock, and readers look at current chunks only while
//! holding it. Slots below `len` are never written again.
//!
//! Each start begins a new *session*: threads notice the new number at their next
//! event, drop the chunk of the old session (already copied or discarded) and
//! register again, so a thread that recorded nothing in a session costs nothing.
//!
//! # Events and tracks (`export.rs`)
//!
//! Events are recorded raw (`Ev`, 48 bytes with the timestamp) and turned into
//! slices only when written: the exporter sorts them by time and replays them
//! through a small state machine per track, so every `B` has its `E` even in a
//! flight-recorder window that cut a slice in half. One track per thread (the
//! Ms by their thread names, sysmon, plain threads that woke a goroutine) and one
//! per P: on a P's track, the M that holds it (a slice named after the M), the
//! goroutine it runs, and its system calls; a gap is an idle P. A wake-up is a
//! flow arrow from the waker's slice (or from the `go` statement) to the
//! goroutine's next run.

mod buffer;
mod clock;
mod export;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::time::Duration;

/// A named goroutine was created (call under `on()`): its name labels its
/// slices.
#[cold]
pub(crate) fn record_name(rt: u32, g: u64, name: &std::sync::Arc<str>) {
    buffer::record_name(rt, g, name);
}

/// Whether a timeline is being recorded (full or flight). Written only under the
/// registry lock; read by every recording site.
static ON: AtomicBool = AtomicBool::new(false);

/// Runtime ids for the trace (its tracks are grouped by runtime).
static NEXT_RUNTIME: AtomicU32 = AtomicU32::new(1);

/// Whether to record. The one branch a recording site costs when tracing is off.
#[inline(always)]
pub(crate) fn on() -> bool {
    #[cfg(not(loom))]
    return ON.load(Relaxed);
    #[cfg(loom)]
    false
}

/// No P (the event is about a thread, or the M has none).
pub(crate) const NO_P: u32 = u32::MAX;

/// How a run of a goroutine or task ended.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stop {
    /// Parked, waiting for this (`sched/wait.rs`'s words).
    Parked(&'static str),
    /// Woken while it ran, or a yield: queued again at once.
    Runnable(&'static str),
    /// Completed, panicked or cancelled.
    Finished,
}

/// Why sysmon took a P (`sched/sysmon.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Retake {
    /// A system call made in place ran past a sysmon tick.
    Syscall,
    /// A poll ran past 10 ms and work waited for its P.
    Hog,
    /// `set_procs` shrank the runtime below this P.
    Dying,
}

/// One scheduler event; `p` (in `Event`) is the P it concerns, if any.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    /// `go` / `spawn`: a new G, by the G running here (`parent`, 0 if none).
    Create {
        g: u64,
        parent: u64,
        goroutine: bool,
        site: &'static std::panic::Location<'static>,
    },
    /// A poll of `g` begins on this M (holding P `p`).
    Start {
        g: u64,
        goroutine: bool,
    },
    /// That poll ended (`p`: the P the M holds after it, which may differ).
    End {
        g: u64,
        why: Stop,
    },
    /// `g` was made runnable by the code running here (`by`: its G, or 0).
    Unblock {
        g: u64,
        by: u64,
    },
    /// This M took `n` Gs from P `victim`'s queue.
    Steal {
        victim: u32,
        n: u32,
    },
    /// sysmon took P `p` from its M.
    Retake {
        why: Retake,
    },
    /// P `p` was handed to another M (Go's `handoffp`).
    Handoff,
    /// sysmon asked the G on P `p` to yield.
    Preempt,
    /// P `p` went on the idle list (or to an M waiting for one).
    ProcIdle,
    /// In the middle of `g`'s poll this M took P `p` (its own was retaken).
    ProcTake {
        g: u64,
        goroutine: bool,
    },
    /// A system call made in place begins / ends on this M.
    SyscallEnter,
    SyscallExit,
}

/// An event as stored: when (`clock::ticks`), which runtime, which P.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) ts: u64,
    pub(crate) rt: u32,
    pub(crate) p: u32,
    pub(crate) ev: Ev,
}

/// Record `ev` from the calling thread. Call only under `if on()`.
#[cold]
#[inline(never)]
pub(crate) fn record(rt: u32, p: u32, ev: Ev) {
    #[cfg(not(loom))]
    buffer::push(Event {
        ts: clock::ticks(),
        rt,
        p,
        ev,
    });
    #[cfg(loom)]
    let _ = (rt, p, ev);
}

/// A runtime's trace id; its name labels its tracks.
pub(crate) fn new_runtime(name: &str) -> u32 {
    let id = NEXT_RUNTIME.fetch_add(1, Relaxed);
    #[cfg(not(loom))]
    buffer::name_runtime(id, name);
    #[cfg(loom)]
    let _ = name;
    id
}

/// The most event memory a full trace keeps (about 11 million events); the
/// flight recorder drops its oldest chunks past it.
pub(crate) const LIMIT_BYTES: usize = 512 << 20;

/// What a written trace holds (returned by `runtime::trace_stop` and
/// `runtime::trace_snapshot`).
///
/// ```
/// let path = std::env::temp_dir().join(format!("gosched-summary-{}.json", std::process::id()));
/// gosched::runtime::trace_start(&path).unwrap();
/// gosched::go(|| ()).join().unwrap();
/// let s: gosched::runtime::TraceSummary = gosched::runtime::trace_stop().unwrap();
/// assert_eq!(s.path.as_deref(), Some(path.as_path()));
/// assert!(s.events > 0 && !s.truncated);
/// std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct TraceSummary {
    /// Where it was written (`None`: a flight recorder stopped without a file).
    pub path: Option<PathBuf>,
    /// Events recorded into the file's window.
    pub events: u64,
    /// Events lost: past the memory limit of a full trace (recording stopped
    /// there), or older than a flight recorder's window.
    pub dropped: u64,
    /// The full trace hit its memory limit and stopped recording.
    pub truncated: bool,
}

/// Start recording everything into `path` (created now, written at `trace_stop`).
pub(crate) fn start_full(path: &Path) -> io::Result<()> {
    let file = std::fs::File::create(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("gosched trace: cannot create {}: {e}", path.display()),
        )
    })?;
    buffer::start(buffer::Mode::Full {
        path: path.to_path_buf(),
        file,
    })
}

/// Start the flight recorder, keeping the last `window`.
pub(crate) fn start_flight(window: Duration) -> io::Result<()> {
    if window.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "gosched trace: the flight recorder's window must be longer than 0",
        ));
    }
    buffer::start(buffer::Mode::Flight {
        window_ns: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
    })
}

/// Stop recording; a full trace is written to its file.
pub(crate) fn stop() -> io::Result<TraceSummary> {
    let (data, mode) = buffer::stop()?;
    match mode {
        buffer::Mode::Full { path, file } => {
            let mut summary = export::write(&data, io::BufWriter::new(file))?;
            summary.path = Some(path);
            Ok(summary)
        }
        buffer::Mode::Flight { .. } => Ok(TraceSummary {
            path: None,
            events: data.events.len() as u64,
            dropped: data.dropped,
            truncated: false,
        }),
    }
}

/// Write what is being recorded so far (a flight recorder: its window) to
/// `path`; recording goes on.
pub(crate) fn snapshot(path: &Path) -> io::Result<TraceSummary> {
    let data = buffer::snapshot()?;
    let file = std::fs::File::create(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("gosched trace: cannot create {}: {e}", path.display()),
        )
    })?;
    let mut summary = export::write(&data, io::BufWriter::new(file))?;
    summary.path = Some(path.to_path_buf());
    Ok(summary)
}

/// `GOSCHED_TRACE` (read once per process, when the first runtime is built):
/// `path.json` records everything and writes it at exit; `flight=MS` starts the
/// flight recorder with an `MS` millisecond window.
#[cfg(not(loom))]
pub(crate) fn start_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(v) = std::env::var_os("GOSCHED_TRACE") else {
            return;
        };
        let v = v.to_string_lossy().into_owned();
        if v.is_empty() {
            return;
        }
        let res = match v.strip_prefix("flight=") {
            Some(ms) => match ms.parse::<u64>() {
                Ok(ms) => start_flight(Duration::from_millis(ms)),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "gosched trace: GOSCHED_TRACE=flight={ms}: expected a window in \
                         milliseconds, e.g. flight=5000"
                    ),
                )),
            },
            None => start_full(Path::new(&v)).map(|()| {
                static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                PID.store(std::process::id(), Relaxed);
                extern "C" fn write_at_exit() {
                    if std::process::id() != PID.load(Relaxed) {
                        return; // a forked child: the file is the parent's
                    }
                    let _ = std::panic::catch_unwind(|| match stop() {
                        Ok(_) => {}
                        // Stopped already (by `trace_stop`): nothing to write.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => eprintln!("{e}"),
                    });
                }
                // SAFETY: registering a plain `extern "C"` function with no
                // arguments; it catches its own panics.
                unsafe { libc::atexit(write_at_exit) };
            }),
        };
        if let Err(e) = res {
            eprintln!("{e} (GOSCHED_TRACE ignored)");
        }
    });
}
