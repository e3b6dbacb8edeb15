//! Raw events to Chrome trace-event JSON (the "JSON Object Format": Perfetto and
//! `chrome://tracing` open it).
//!
//! The events of all threads are merged by time and replayed through one stack
//! of open slices per track, so the output nests and every `B` has its `E`:
//!
//! - a thread's track: a `Start` opens the G's slice, its `End` closes it (and
//!   anything left open inside it: a system call the goroutine parked in);
//!   `SyscallEnter`/`Exit` nest inside; `Create` and `Unblock` are zero-length
//!   slices that a flow arrow leaves from (v2 flows: `bind_id` + `flow_out`),
//!   to the G's next `Start` (`flow_in`); steals, retakes, hand-offs and
//!   preemption requests are instants.
//! - a P's track: the M holding it (a slice named after the M's thread), the G
//!   it runs inside that, the G's system calls inside that. A `Start` by
//!   another M than the one holding it, `ProcIdle`, `Handoff` and `Retake`
//!   close what is open; `ProcTake` opens the M and the G it is in the middle
//!   of.
//!
//! An event whose opening fell outside the recorded window (a flight
//! recorder's) closes nothing; a slice still open at the end is closed at the
//! snapshot's time. A flow whose G did not start again within the window is
//! left out at both ends.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use super::buffer::Collected;
use super::{Ev, Retake, Stop, TraceSummary, NO_P};

/// P tracks' ids (after every thread's; Perfetto reads ids as 32 bits).
const P_TRACK_BASE: u32 = 0x8000_0000;
const P_TRACKS_PER_RUNTIME: u32 = 10_000;
/// Runtimes with tracks of their own (ids wrap past it).
const MAX_RUNTIMES: u32 = 200_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    /// The M (thread track id) holding a P.
    Owner(u32),
    G(u64),
    Syscall,
}

enum Arg {
    U(u64),
    S(String),
}

struct Out {
    ph: u8,
    ts: u64,
    pid: u32,
    tid: u32,
    name: String,
    dur: Option<u64>,
    args: Vec<(&'static str, Arg)>,
    /// v2 flow: id, and whether it leaves (`flow_out`) or arrives (`flow_in`).
    flow: Option<(u64, bool)>,
}

/// The replay runs twice over the same events: the first pass only learns
/// which flow arrows get both ends (and which P tracks exist); the second
/// writes each event as it goes, so memory stays that of the open slices, not
/// of the output.
struct Replay<'a, 'w> {
    data: &'a Collected,
    stacks: HashMap<u32, Vec<Open>>,
    /// Track id → pid (runtime).
    pids: HashMap<u32, u32>,
    /// (runtime, G) → the id of the flow arrow waiting for its next run.
    pending: HashMap<(u32, u64), u64>,
    next_flow: u64,
    /// Flow ids that reach a run (filled by the first pass).
    matched: HashSet<u64>,
    thread_names: HashMap<u32, &'a str>,
    /// The second pass writes here.
    sink: Option<&'w mut dyn Write>,
    /// The first write error.
    err: io::Result<()>,
}

impl Replay<'_, '_> {
    fn rel(&self, ts: u64) -> u64 {
        self.data.rel_ns(ts)
    }

    fn label(&self, rt: u32, g: u64, goroutine: bool) -> String {
        let kind = if goroutine { "G" } else { "task " };
        match self.data.names.get(&(rt, g)) {
            Some(n) => format!("{kind}{g} {n}"),
            None => format!("{kind}{g}"),
        }
    }

    fn emit(&mut self, o: Out) {
        let Some(w) = self.sink.as_deref_mut() else {
            return;
        };
        if self.err.is_ok() {
            self.err = write_out(w, &o, &self.matched);
        }
    }

    fn slice(&self, ph: u8, ts: u64, track: u32, name: String) -> Out {
        Out {
            ph,
            ts: self.rel(ts),
            pid: self.pids.get(&track).copied().unwrap_or(0),
            tid: track,
            name,
            dur: None,
            args: Vec::new(),
            flow: None,
        }
    }

    fn open(&mut self, track: u32, what: Open, o: Out) {
        self.stacks.entry(track).or_default().push(what);
        self.emit(o);
    }

    /// Close slices on `track` from the top down to and including the first
    /// that matches `what`; nothing if none does. `args` go on the last `E`.
    fn close_to(&mut self, ts: u64, track: u32, what: Open, args: Vec<(&'static str, Arg)>) {
        let Some(stack) = self.stacks.get_mut(&track) else {
            return;
        };
        let Some(at) = stack.iter().rposition(|o| *o == what) else {
            return;
        };
        let n = stack.len() - at;
        stack.truncate(at);
        let mut args = Some(args);
        for i in 0..n {
            let mut e = self.slice(b'E', ts, track, String::new());
            if i == n - 1 {
                e.args = args.take().unwrap_or_default();
            }
            self.emit(e);
        }
    }

    /// Close everything on `track` above its first `keep` slices.
    fn close_above(&mut self, ts: u64, track: u32, keep: usize) {
        let n = self
            .stacks
            .get(&track)
            .map_or(0, |s| s.len().saturating_sub(keep));
        if let Some(s) = self.stacks.get_mut(&track) {
            s.truncate(keep.min(s.len()));
        }
        for _ in 0..n {
            let e = self.slice(b'E', ts, track, String::new());
            self.emit(e);
        }
    }

    fn close_all(&mut self, ts: u64, track: u32) {
        self.close_above(ts, track, 0);
    }

    /// The bottom of a P track's stack: the M holding it.
    fn owner(&self, track: u32) -> Option<Open> {
        self.stacks.get(&track).and_then(|s| s.first().copied())
    }

    fn top(&self, track: u32) -> Option<Open> {
        self.stacks.get(&track).and_then(|s| s.last().copied())
    }

    fn p_track(&mut self, rt: u32, p: u32) -> u32 {
        let t = P_TRACK_BASE
            + (rt % MAX_RUNTIMES) * P_TRACKS_PER_RUNTIME
            + p.min(P_TRACKS_PER_RUNTIME - 1);
        self.pids.entry(t).or_insert(rt);
        t
    }

    /// The P's track held by M `tid`: if another M (or nobody) holds it, close
    /// what is open and open `tid`'s slice.
    fn own(&mut self, ts: u64, pt: u32, tid: u32) {
        let held = self.stacks.get(&pt).and_then(|s| s.first().copied()) == Some(Open::Owner(tid));
        if !held {
            self.close_all(ts, pt);
            let name = format!("M {}", self.thread_names.get(&tid).copied().unwrap_or("?"));
            let o = self.slice(b'B', ts, pt, name);
            self.open(pt, Open::Owner(tid), o);
        }
    }

    /// A new arrow leaving `o` towards G `g`'s next run; `o` is written.
    fn flow_out(&mut self, rt: u32, g: u64, mut o: Out) {
        let id = self.next_flow;
        self.next_flow += 1;
        o.flow = Some((id, true));
        self.pending.insert((rt, g), id);
        self.emit(o);
    }

    fn instant(&mut self, ts: u64, tid: u32, name: String, args: Vec<(&'static str, Arg)>) {
        let mut o = self.slice(b'i', ts, tid, name);
        o.args = args;
        self.emit(o);
    }

    fn replay(&mut self, tid: u32, e: &super::Event) {
        let ts = e.ts;
        let p = (e.p != NO_P).then_some(e.p);
        match e.ev {
            Ev::Create {
                g,
                parent,
                goroutine,
                site,
            } => {
                let name = format!("go {}", self.label(e.rt, g, goroutine));
                let mut o = self.slice(b'X', ts, tid, name);
                o.dur = Some(0);
                o.args = vec![
                    ("g", Arg::U(g)),
                    ("parent", Arg::U(parent)),
                    ("site", Arg::S(format!("{}:{}", site.file(), site.line()))),
                ];
                self.flow_out(e.rt, g, o);
            }
            Ev::Start { g, goroutine } => {
                // One poll at a time on a thread: anything open is stale.
                self.close_all(ts, tid);
                let name = self.label(e.rt, g, goroutine);
                let mut o = self.slice(b'B', ts, tid, name.clone());
                o.args = vec![("g", Arg::U(g))];
                if let Some(p) = p {
                    o.args.push(("p", Arg::U(u64::from(p))));
                }
                if let Some(id) = self.pending.remove(&(e.rt, g)) {
                    self.matched.insert(id);
                    o.flow = Some((id, false));
                }
                self.open(tid, Open::G(g), o);
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    self.own(ts, pt, tid);
                    // Only the M's slice stays open below a new run.
                    self.close_above(ts, pt, 1);
                    let o = self.slice(b'B', ts, pt, name);
                    self.open(pt, Open::G(g), o);
                }
            }
            Ev::End { g, why } => {
                let why = match why {
                    Stop::Parked(r) => format!("parked: {r}"),
                    Stop::Runnable(r) => format!("runnable: {r}"),
                    Stop::Finished => "finished".to_string(),
                };
                self.close_to(ts, tid, Open::G(g), vec![("stop", Arg::S(why))]);
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    if self.owner(pt) == Some(Open::Owner(tid)) {
                        self.close_to(ts, pt, Open::G(g), Vec::new());
                    }
                }
            }
            Ev::Unblock { g, by } => {
                let mut o = self.slice(b'X', ts, tid, format!("unblock G{g}"));
                o.dur = Some(0);
                o.args = vec![("g", Arg::U(g)), ("by", Arg::U(by))];
                self.flow_out(e.rt, g, o);
            }
            Ev::Steal { victim, n } => {
                let name = format!("steal {n} from P{victim}");
                let mut args = vec![
                    ("victim", Arg::U(u64::from(victim))),
                    ("n", Arg::U(u64::from(n))),
                ];
                if let Some(p) = p {
                    args.push(("p", Arg::U(u64::from(p))));
                }
                self.instant(ts, tid, name, args);
            }
            Ev::Retake { why } => {
                let why = match why {
                    Retake::Syscall => "syscall",
                    Retake::Hog => "long poll",
                    Retake::Dying => "set_procs",
                };
                if let Some(p) = p {
                    self.instant(
                        ts,
                        tid,
                        format!("retake P{p} ({why})"),
                        vec![("p", Arg::U(u64::from(p)))],
                    );
                    let pt = self.p_track(e.rt, p);
                    self.close_all(ts, pt);
                }
            }
            Ev::Handoff => {
                if let Some(p) = p {
                    self.instant(
                        ts,
                        tid,
                        format!("handoff P{p}"),
                        vec![("p", Arg::U(u64::from(p)))],
                    );
                    let pt = self.p_track(e.rt, p);
                    self.close_all(ts, pt);
                }
            }
            Ev::Preempt => {
                if let Some(p) = p {
                    self.instant(
                        ts,
                        tid,
                        format!("preempt P{p}"),
                        vec![("p", Arg::U(u64::from(p)))],
                    );
                }
            }
            Ev::ProcIdle => {
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    self.close_all(ts, pt);
                }
            }
            Ev::ProcTake { g, goroutine } => {
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    self.own(ts, pt, tid);
                    if g != 0 && self.top(pt) == Some(Open::Owner(tid)) {
                        let name = self.label(e.rt, g, goroutine);
                        let o = self.slice(b'B', ts, pt, name);
                        self.open(pt, Open::G(g), o);
                    }
                }
            }
            Ev::SyscallEnter => {
                if matches!(self.top(tid), Some(Open::G(_))) {
                    let o = self.slice(b'B', ts, tid, "syscall".to_string());
                    self.open(tid, Open::Syscall, o);
                }
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    if matches!(self.top(pt), Some(Open::G(_)))
                        && self.owner(pt) == Some(Open::Owner(tid))
                    {
                        let o = self.slice(b'B', ts, pt, "syscall".to_string());
                        self.open(pt, Open::Syscall, o);
                    }
                }
            }
            Ev::SyscallExit => {
                if self.top(tid) == Some(Open::Syscall) {
                    self.close_to(ts, tid, Open::Syscall, Vec::new());
                }
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    if self.top(pt) == Some(Open::Syscall)
                        && self.owner(pt) == Some(Open::Owner(tid))
                    {
                        self.close_to(ts, pt, Open::Syscall, Vec::new());
                    }
                }
            }
        }
    }
}

/// Which events a release (of a P, a slice) is: at equal times they go
/// first, so that a P handed over at one tick closes before it reopens.
fn rank(ev: &Ev) -> u8 {
    match ev {
        Ev::End { .. } | Ev::ProcIdle | Ev::Handoff | Ev::Retake { .. } | Ev::SyscallExit => 0,
        _ => 1,
    }
}

/// Write `data` as trace JSON.
pub(super) fn write(data: &Collected, mut w: impl Write) -> io::Result<TraceSummary> {
    let mut events: Vec<&(u32, super::Event)> = data
        .events
        .iter()
        .filter(|(_, e)| e.ts >= data.from)
        .collect();
    // Merge by time (releases first at a tie); a stable sort keeps each
    // thread's own order otherwise.
    events.sort_by_key(|(_, e)| (e.ts, rank(&e.ev)));
    // (A thread that saw tracing on just before it stopped may have recorded
    // after the snapshot's clock read.)
    let end = events
        .last()
        .map_or(data.taken.ticks, |(_, e)| e.ts.max(data.taken.ticks));
    let mut r = Replay {
        data,
        stacks: HashMap::new(),
        pids: HashMap::new(),
        pending: HashMap::new(),
        next_flow: 1,
        matched: HashSet::new(),
        thread_names: data.threads.iter().map(|(t, n)| (*t, n.as_str())).collect(),
        sink: None,
        err: Ok(()),
    };
    // A thread's track sits with the runtime of its first event.
    for (tid, e) in &events {
        r.pids.entry(*tid).or_insert(e.rt);
    }
    let replay_all = |r: &mut Replay<'_, '_>| {
        for (tid, e) in &events {
            r.replay(*tid, e);
        }
        let open: Vec<u32> = r.stacks.keys().copied().collect();
        for t in open {
            r.close_all(end, t);
        }
    };
    // Pass 1: which arrows arrive, which P tracks exist.
    replay_all(&mut r);

    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{")?;
    write!(
        w,
        "\"producer\":\"gosched {}\",\"mode\":\"{}\",\"window_start_us\":{},\"events\":{},\"dropped\":{},\"truncated\":{}",
        env!("CARGO_PKG_VERSION"),
        if data.flight { "flight recorder" } else { "full" },
        data.rel_ns(data.from) / 1000,
        events.len(),
        data.dropped,
        data.truncated
    )?;
    if data.truncated {
        write!(
            w,
            ",\"note\":\"recording stopped at the {} MiB limit: trace a shorter run, or use the flight recorder\"",
            super::LIMIT_BYTES >> 20
        )?;
    }
    w.write_all(b"},\"traceEvents\":[\n")?;
    // Names first: runtimes (processes), threads and Ps (tracks).
    let mut pids: Vec<u32> = r.pids.values().copied().collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let name = data.runtimes.iter().find(|(id, _)| *id == pid).map_or_else(
            || format!("runtime {pid}"),
            |(_, n)| format!("gosched runtime \"{n}\""),
        );
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":"
        )?;
        json_str(&mut w, &name)?;
        w.write_all(b"}},\n")?;
    }
    let mut tracks: Vec<(u32, u32)> = r.pids.iter().map(|(t, p)| (*t, *p)).collect();
    tracks.sort_unstable();
    for (tid, pid) in tracks {
        let (name, order) = if tid >= P_TRACK_BASE {
            (
                format!("P{}", (tid - P_TRACK_BASE) % P_TRACKS_PER_RUNTIME),
                (tid - P_TRACK_BASE) % P_TRACKS_PER_RUNTIME,
            )
        } else {
            (
                r.thread_names
                    .get(&tid)
                    .map_or_else(|| format!("thread {tid}"), |n| n.to_string()),
                P_TRACKS_PER_RUNTIME + tid,
            )
        };
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        )?;
        json_str(&mut w, &name)?;
        w.write_all(b"}},\n")?;
        writeln!(
            w,
            "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{order}}}}},"
        )?;
    }
    // Pass 2: the same replay, written as it goes.
    r.stacks.clear();
    r.pending.clear();
    r.next_flow = 1;
    r.sink = Some(&mut w);
    replay_all(&mut r);
    std::mem::replace(&mut r.err, Ok(()))?;
    drop(r);
    // Every event line ends with ",\n": close the array with one more
    // (harmless) metadata line.
    w.write_all(b"{\"ph\":\"M\",\"name\":\"trace_end\",\"pid\":0,\"tid\":0,\"args\":{}}\n]}\n")?;
    w.flush()?;
    Ok(TraceSummary {
        path: None,
        events: events.len() as u64,
        dropped: data.dropped + (data.events.len() - events.len()) as u64,
        truncated: data.truncated,
    })
}

/// One output event, followed by ",\n".
fn write_out(w: &mut dyn Write, o: &Out, matched: &HashSet<u64>) -> io::Result<()> {
    write!(
        w,
        "{{\"ph\":\"{}\",\"ts\":{}.{:03},\"pid\":{},\"tid\":{}",
        o.ph as char,
        o.ts / 1000,
        o.ts % 1000,
        o.pid,
        o.tid
    )?;
    if !o.name.is_empty() {
        w.write_all(b",\"name\":")?;
        json_str(w, &o.name)?;
    }
    if let Some(d) = o.dur {
        write!(w, ",\"dur\":{}.{:03}", d / 1000, d % 1000)?;
    }
    if o.ph == b'i' {
        w.write_all(b",\"s\":\"t\"")?;
    }
    match o.flow {
        // An arrow whose G never ran again within the trace is left out.
        Some((id, out)) if !out || matched.contains(&id) => write!(
            w,
            ",\"bind_id\":\"0x{id:x}\",\"{}\":true",
            if out { "flow_out" } else { "flow_in" }
        )?,
        _ => {}
    }
    if !o.args.is_empty() {
        w.write_all(b",\"args\":{")?;
        for (i, (k, v)) in o.args.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            write!(w, "\"{k}\":")?;
            match v {
                Arg::U(u) => write!(w, "{u}")?,
                Arg::S(s) => json_str(w, s)?,
            }
        }
        w.write_all(b"}")?;
    }
    w.write_all(b"},\n")
}

fn json_str(w: &mut dyn Write, s: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    for c in s.chars() {
        match c {
            '"' => w.write_all(b"\\\"")?,
            '\\' => w.write_all(b"\\\\")?,
            c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
            c => write!(w, "{c}")?,
        }
    }
    w.write_all(b"\"")
}
