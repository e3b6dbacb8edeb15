//! Per-thread event chunks and the registry that collects them (the rules are
//! in `mod.rs`, "Buffers").

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::ptr;
use std::sync::atomic::{
    AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex, MutexGuard};

use super::clock::{self, Point};
use super::{Event, LIMIT_BYTES, ON};

/// Events per chunk: a thread takes the registry lock once per this many.
const CHUNK_EVENTS: usize = 1024;
const LIMIT_EVENTS: usize = LIMIT_BYTES / std::mem::size_of::<Event>();
/// Spare chunks kept for reuse (a flight recorder recycles its oldest ones:
/// no allocation, no page faults in steady state).
const FREE_MAX: usize = 64;

/// One thread's run of events. Slots `[0, len)` are written (and never again);
/// only the owning thread writes, at `len`, then stores `len + 1` (Release).
struct Chunk {
    len: AtomicUsize,
    slots: Box<[UnsafeCell<MaybeUninit<Event>>]>,
}

// SAFETY: see the type's rule: readers copy only slots below a `len` they
// loaded with Acquire, which the single writer never touches again, and the
// registry lock keeps the chunk alive while they do (`mod.rs`, "Buffers").
unsafe impl Sync for Chunk {}
// SAFETY: a chunk is plain data (`Event` is `Copy` and holds only `'static`
// references); ownership moves between threads under the registry lock.
unsafe impl Send for Chunk {}

impl Chunk {
    fn new() -> Box<Chunk> {
        Box::new(Chunk {
            len: AtomicUsize::new(0),
            slots: (0..CHUNK_EVENTS)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
        })
    }

    /// The published events, copied out.
    fn published(&self, out: &mut Vec<(u32, Event)>, tid: u32) {
        let n = self.len.load(Acquire);
        for slot in &self.slots[..n] {
            // SAFETY: slots below an Acquire-loaded `len` were written before
            // its Release store and are never written again (the type's rule).
            out.push((tid, unsafe { (*slot.get()).assume_init() }));
        }
    }

    fn last_ts(&self) -> u64 {
        match self.len.load(Acquire) {
            0 => 0,
            // SAFETY: as in `published`.
            n => unsafe { (*self.slots[n - 1].get()).assume_init() }.ts,
        }
    }
}

/// What is being recorded.
pub(crate) enum Mode {
    Full { path: PathBuf, file: std::fs::File },
    Flight { window_ns: u64 },
}

/// A thread that recorded in this session.
struct ThreadEntry {
    tid: u32,
    name: String,
    /// Its current chunk (owned by the thread; null once it exited). Read
    /// only under the registry lock.
    chunk: *const Chunk,
}

struct Registry {
    /// `None` when nothing records.
    mode: Option<Mode>,
    /// Bumped by every start.
    session: u64,
    /// When the session started.
    start: Point,
    threads: Vec<ThreadEntry>,
    /// Full chunks, oldest retirement first, with their thread's track id.
    /// Shared: a snapshot copies them after it lets go of the lock.
    retired: VecDeque<(u32, Arc<Chunk>)>,
    retired_events: usize,
    dropped: u64,
    /// A full trace hit `LIMIT_EVENTS` and stopped recording.
    truncated: bool,
    /// Named goroutines' names, by runtime and id (this session).
    names: BTreeMap<(u32, u64), Arc<str>>,
    /// Spare chunks (no reader reaches them). Boxed: a thread's current
    /// chunk is a raw pointer from `Box::into_raw`, so a chunk never moves.
    #[allow(clippy::vec_box)]
    free: Vec<Box<Chunk>>,
}

// SAFETY: the raw chunk pointers are only dereferenced under the registry lock
// by the rules in `mod.rs`; everything else is plain data.
unsafe impl Send for Registry {}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    mode: None,
    session: 0,
    start: Point { ticks: 0, ns: 0 },
    threads: Vec::new(),
    retired: VecDeque::new(),
    retired_events: 0,
    dropped: 0,
    truncated: false,
    names: BTreeMap::new(),
    free: Vec::new(),
});

/// The session threads compare theirs with (written under the lock).
static SESSION: AtomicU64 = AtomicU64::new(0);

/// Runtime names by trace id (kept across sessions).
static RUNTIMES: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

/// An empty chunk: a spare one if there is one.
fn take_chunk(r: &mut Registry) -> Box<Chunk> {
    match r.free.pop() {
        Some(c) => {
            // Ours alone: no reader reaches a spare chunk.
            c.len.store(0, Relaxed);
            c
        }
        None => Chunk::new(),
    }
}

/// A chunk nobody will read again.
fn give_back(r: &mut Registry, c: Box<Chunk>) {
    if r.free.len() < FREE_MAX {
        r.free.push(c);
    }
}

/// A retired chunk nobody needs any more: spare if no snapshot holds it.
fn give_back_retired(r: &mut Registry, c: Arc<Chunk>) {
    if let Some(c) = Arc::into_inner(c) {
        give_back(r, Box::new(c));
    }
}

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn name_runtime(id: u32, name: &str) {
    RUNTIMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, name.to_string()));
}

/// A named goroutine was created (call under `on()`): its name labels its
/// slices.
#[cold]
pub(crate) fn record_name(rt: u32, g: u64, name: &Arc<str>) {
    let mut r = registry();
    if r.mode.is_some() {
        r.names.insert((rt, g), name.clone());
    }
}

/// The calling thread's recording state.
struct Local {
    session: u64,
    /// Our index in `Registry::threads`.
    index: usize,
    /// Our current chunk (from `Box::into_raw`), or null.
    chunk: *mut Chunk,
}

impl Drop for Local {
    fn drop(&mut self) {
        if self.chunk.is_null() {
            return;
        }
        let mut r = registry();
        // SAFETY: our own chunk, from `Box::into_raw`; under the lock, so no
        // reader holds it.
        let chunk = unsafe { Box::from_raw(self.chunk) };
        self.chunk = ptr::null_mut();
        if r.session == self.session && r.mode.is_some() {
            let tid = r.threads[self.index].tid;
            r.threads[self.index].chunk = ptr::null();
            retire(&mut r, tid, chunk);
        } else {
            give_back(&mut r, chunk);
        }
    }
}

thread_local! {
    /// The OS thread's chunk (`vthread::with_os_local`): a goroutine records
    /// on its M's track, and keeps no chunk of its own.
    static LOCAL: Cell<*mut RefCell<Local>> = const { Cell::new(ptr::null_mut()) };
}

fn new_local() -> RefCell<Local> {
    RefCell::new(Local {
        session: 0,
        index: 0,
        chunk: ptr::null_mut(),
    })
}

/// Append `ev` to the calling thread's chunk.
pub(super) fn push(ev: Event) {
    crate::vthread::with_os_local(&LOCAL, new_local, |l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return;
        };
        if (l.session != SESSION.load(Acquire) || l.chunk.is_null()) && !register(&mut l) {
            return;
        }
        // SAFETY: our own live chunk (only we free or move it).
        let mut n = unsafe { &*l.chunk }.len.load(Relaxed);
        if n == CHUNK_EVENTS {
            if !replace_full(&mut l) {
                return;
            }
            n = 0;
        }
        // SAFETY: our own chunk; slot `n` is at `len`, which no reader reads
        // and nobody else writes.
        let c = unsafe { &*l.chunk };
        // SAFETY: as above.
        unsafe { (*c.slots[n].get()).write(ev) };
        c.len.store(n + 1, Release);
    });
}

/// Join the current session (dropping a chunk of an old one). False if
/// nothing records now.
#[cold]
fn register(l: &mut Local) -> bool {
    let mut r = registry();
    if !l.chunk.is_null() {
        // SAFETY: our own chunk of an older session: its entry was cleared
        // when that session stopped, so no reader can reach it; we hold the
        // lock besides.
        let old = unsafe { Box::from_raw(l.chunk) };
        give_back(&mut r, old);
        l.chunk = ptr::null_mut();
    }
    if r.mode.is_none() || r.truncated {
        l.session = r.session;
        return false;
    }
    let chunk = Box::into_raw(take_chunk(&mut r));
    let tid = r.threads.len() as u32 + 1;
    let name = thread_name().unwrap_or_else(|| format!("thread {tid}"));
    r.threads.push(ThreadEntry { tid, name, chunk });
    l.session = r.session;
    l.index = r.threads.len() - 1;
    l.chunk = chunk;
    true
}

/// The calling thread's name, from the OS (`std::thread::current` may
/// panic while a thread's locals are being destroyed, where wakers can
/// still run).
fn thread_name() -> Option<String> {
    let mut buf = [0u8; 64];
    // SAFETY: a valid buffer and its length, for the calling thread.
    let rc = unsafe {
        libc::pthread_getname_np(libc::pthread_self(), buf.as_mut_ptr().cast(), buf.len())
    };
    if rc != 0 {
        return None;
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Our chunk is full: retire it and start a new one. False if the session
/// ended meanwhile (then we hold no chunk).
#[cold]
fn replace_full(l: &mut Local) -> bool {
    let mut r = registry();
    // SAFETY: our own chunk; under the lock.
    let full = unsafe { Box::from_raw(l.chunk) };
    l.chunk = ptr::null_mut();
    if r.session != l.session || r.mode.is_none() {
        give_back(&mut r, full);
        return false;
    }
    let tid = r.threads[l.index].tid;
    retire(&mut r, tid, full);
    if r.truncated {
        // The full trace just hit its limit.
        r.threads[l.index].chunk = ptr::null();
        return false;
    }
    let chunk = Box::into_raw(take_chunk(&mut r));
    r.threads[l.index].chunk = chunk;
    l.chunk = chunk;
    true
}

/// Keep a full chunk; trim the flight recorder, or stop a full trace at its
/// limit.
fn retire(r: &mut Registry, tid: u32, chunk: Box<Chunk>) {
    let n = chunk.len.load(Relaxed);
    r.retired_events += n;
    r.retired.push_back((tid, Arc::from(chunk)));
    match r.mode {
        Some(Mode::Flight { window_ns }) => {
            let now = Point::now();
            let span = now.ns.saturating_sub(r.start.ns);
            let from = if span >= window_ns.max(clock::MIN_SPAN_NS) {
                let scale = clock::scale(r.start, now);
                now.ticks.saturating_sub(clock::ticks_in(window_ns, scale))
            } else {
                0
            };
            while let Some((_, c)) = r.retired.front() {
                if c.last_ts() >= from && r.retired_events <= LIMIT_EVENTS {
                    break;
                }
                let n = c.len.load(Relaxed);
                let (_, c) = r.retired.pop_front().expect("front exists");
                give_back_retired(r, c);
                r.retired_events -= n;
                r.dropped += n as u64;
            }
        }
        Some(Mode::Full { .. }) if r.retired_events >= LIMIT_EVENTS => {
            // Stop here and say so in the file, rather than grow without bound.
            r.truncated = true;
            ON.store(false, Relaxed);
        }
        _ => {}
    }
}

pub(super) fn start(mode: Mode) -> io::Result<()> {
    let mut r = registry();
    if r.mode.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "gosched trace: a trace is already being recorded (stop it first: \
             runtime::trace_stop)",
        ));
    }
    clock::init();
    r.session += 1;
    SESSION.store(r.session, Release);
    r.start = Point::now();
    r.threads.clear();
    r.retired.clear();
    r.retired_events = 0;
    r.dropped = 0;
    r.truncated = false;
    r.names.clear();
    r.mode = Some(mode);
    ON.store(true, Relaxed);
    Ok(())
}

/// Everything a writer needs, copied out of the registry. Times are ticks
/// (`clock.rs`); `start` and `taken` turn them into nanoseconds.
pub(crate) struct Collected {
    /// By thread (track id), each thread's in order.
    pub(crate) events: Vec<(u32, Event)>,
    pub(crate) threads: Vec<(u32, String)>,
    pub(crate) runtimes: Vec<(u32, String)>,
    pub(crate) names: BTreeMap<(u32, u64), Arc<str>>,
    pub(crate) start: Point,
    pub(crate) taken: Point,
    /// Nanoseconds per tick.
    pub(crate) scale: f64,
    /// Flight recorder: events before this tick are left out.
    pub(crate) from: u64,
    pub(crate) dropped: u64,
    pub(crate) truncated: bool,
    pub(crate) flight: bool,
}

impl Collected {
    /// Nanoseconds since the session started.
    pub(crate) fn rel_ns(&self, ticks: u64) -> u64 {
        (ticks.saturating_sub(self.start.ticks) as f64 * self.scale) as u64
    }
}

/// What `collect` takes under the registry lock: the retired chunks (shared)
/// and copies of the current chunks' prefixes; the rest happens after.
struct Taken {
    retired: Vec<(u32, Arc<Chunk>)>,
    current: Vec<(u32, Event)>,
    threads: Vec<(u32, String)>,
    names: BTreeMap<(u32, u64), Arc<str>>,
    start: Point,
    window_ns: Option<u64>,
    dropped: u64,
    truncated: bool,
}

/// Under the lock: only what cannot wait (the threads' current chunks are
/// theirs again once we let go), at most one chunk per live thread.
fn take(r: &Registry) -> Taken {
    let live = r.threads.iter().filter(|t| !t.chunk.is_null()).count();
    let mut current = Vec::with_capacity(live * CHUNK_EVENTS);
    for t in &r.threads {
        if !t.chunk.is_null() {
            // SAFETY: a thread's current chunk stays alive while we hold the
            // registry lock (it moves or frees it only under the lock).
            unsafe { &*t.chunk }.published(&mut current, t.tid);
        }
    }
    Taken {
        retired: r.retired.iter().cloned().collect(),
        current,
        threads: r.threads.iter().map(|t| (t.tid, t.name.clone())).collect(),
        names: r.names.clone(),
        start: r.start,
        window_ns: match r.mode {
            Some(Mode::Flight { window_ns }) => Some(window_ns),
            _ => None,
        },
        dropped: r.dropped,
        truncated: r.truncated,
    }
}

/// Outside the lock: copy the retired chunks, merge, convert the clock.
fn finish(t: Taken) -> Collected {
    // A rate needs two points far enough apart (a snapshot right after the
    // start waits a little).
    let mut taken = Point::now();
    while taken.ns.saturating_sub(t.start.ns) < clock::MIN_SPAN_NS {
        std::hint::spin_loop();
        taken = Point::now();
    }
    let scale = clock::scale(t.start, taken);
    let n: usize = t.retired.iter().map(|(_, c)| c.len.load(Acquire)).sum();
    let mut events = Vec::with_capacity(n + t.current.len());
    for (tid, c) in &t.retired {
        c.published(&mut events, *tid);
    }
    events.extend(t.current);
    // Retired chunks come before the current ones of their thread: a stable
    // sort by track keeps each thread's events in order. An event stamped
    // before the session began (a thread that read the clock, then joined
    // the new session) is left out.
    events.retain(|(_, e)| e.ts >= t.start.ticks);
    events.sort_by_key(|(tid, _)| *tid);
    let (from, flight) = match t.window_ns {
        Some(w) => (taken.ticks.saturating_sub(clock::ticks_in(w, scale)), true),
        None => (0, false),
    };
    Collected {
        events,
        threads: t.threads,
        runtimes: RUNTIMES.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        names: t.names,
        start: t.start,
        taken,
        scale,
        from,
        dropped: t.dropped,
        truncated: t.truncated,
        flight,
    }
}

/// Stop recording: what was recorded, and the mode (a full trace's file).
pub(super) fn stop() -> io::Result<(Collected, Mode)> {
    let mut r = registry();
    let Some(mode) = r.mode.take() else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "gosched trace: no trace is being recorded",
        ));
    };
    ON.store(false, Relaxed);
    // Put the mode back for `take` to read it, then take it for good.
    r.mode = Some(mode);
    let taken = take(&r);
    let mode = r.mode.take().expect("set above");
    // The threads' chunks are theirs to drop (at their next event or exit);
    // from now on no reader reaches them.
    r.threads.clear();
    while let Some((_, c)) = r.retired.pop_front() {
        give_back_retired(&mut r, c);
    }
    r.retired_events = 0;
    r.names.clear();
    drop(r);
    Ok((finish(taken), mode))
}

/// Copy what is recorded so far; recording goes on.
pub(super) fn snapshot() -> io::Result<Collected> {
    let r = registry();
    if r.mode.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "gosched trace: nothing is being recorded: start the flight recorder first \
             (runtime::flight_recorder_start, or GOSCHED_TRACE=flight=MS)",
        ));
    }
    let taken = take(&r);
    drop(r);
    Ok(finish(taken))
}

#[cfg(test)]
mod tests {
    use super::super::{Ev, Event, NO_P};
    use super::*;

    /// The only test in the crate that records: it holds the process-wide
    /// session for itself.
    #[test]
    fn concurrent_writers_and_snapshots_see_whole_events_in_order() {
        const THREADS: u64 = 3;
        // Other tests of this binary may record meanwhile: ours carry this.
        const MARK: u32 = u32::MAX;
        #[cfg(miri)]
        const EACH: u64 = CHUNK_EVENTS as u64 + 5;
        #[cfg(not(miri))]
        const EACH: u64 = 50_000;
        start(Mode::Flight {
            window_ns: u64::MAX,
        })
        .unwrap();
        // Stamps after the session's start (earlier ones are left out).
        let base = clock::ticks();
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        push(Event {
                            ts: base + i,
                            rt: MARK,
                            p: NO_P,
                            ev: Ev::Unblock { g: i, by: t },
                        });
                    }
                })
            })
            .collect();
        // Every snapshot holds, per writer, a prefix of its sequence:
        // nothing torn, nothing out of order, nothing missing in between.
        let check = |c: &Collected| {
            let mut next = std::collections::HashMap::new();
            for (tid, e) in c.events.iter().filter(|(_, e)| e.rt == MARK) {
                let Ev::Unblock { g, by } = e.ev else {
                    panic!("not ours: {e:?}");
                };
                assert_eq!(e.ts - base, g, "torn event");
                let want = next.entry(*tid).or_insert((by, 0));
                assert_eq!((by, g), *want, "events of one thread out of order");
                want.1 += 1;
            }
            next.values().map(|(_, n)| *n).sum::<u64>()
        };
        let mut seen = 0;
        while writers.iter().any(|w| !w.is_finished()) {
            let n = check(&snapshot().unwrap());
            assert!(n >= seen, "a snapshot lost events: {n} < {seen}");
            seen = n;
        }
        for w in writers {
            w.join().unwrap();
        }
        // The writers have exited: their chunks were retired at thread exit.
        let (data, _) = stop().unwrap();
        assert_eq!(check(&data), THREADS * EACH);
        assert!(snapshot().is_err(), "stopped");
    }
}
