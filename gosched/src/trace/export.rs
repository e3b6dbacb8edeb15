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

use std::collections::HashMap;
use std::io::{self, Write};

use super::buffer::Collected;
use super::{Ev, Retake, Stop, TraceSummary, NO_P};

/// P tracks' ids (after every thread's; Perfetto reads ids as 32 bits).
const P_TRACK_BASE: u32 = 1_000_000;
const P_TRACKS_PER_RUNTIME: u32 = 10_000;

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

struct Replay<'a> {
    data: &'a Collected,
    out: Vec<Out>,
    stacks: HashMap<u32, Vec<Open>>,
    /// Track id → pid (runtime).
    pids: HashMap<u32, u32>,
    /// G → (flow id, index in `out` of its flow-out slice).
    pending: HashMap<u64, (u64, usize)>,
    next_flow: u64,
    thread_names: HashMap<u32, &'a str>,
}

impl<'a> Replay<'a> {
    fn rel(&self, ts: u64) -> u64 {
        self.data.rel_ns(ts)
    }

    fn label(&self, g: u64, goroutine: bool) -> String {
        let kind = if goroutine { "G" } else { "task " };
        match self.data.names.get(&g) {
            Some(n) => format!("{kind}{g} {n}"),
            None => format!("{kind}{g}"),
        }
    }

    fn emit(&mut self, o: Out) -> usize {
        self.out.push(o);
        self.out.len() - 1
    }

    fn slice(&mut self, ph: u8, ts: u64, track: u32, name: String) -> Out {
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

    fn close_all(&mut self, ts: u64, track: u32) {
        let n = self.stacks.get(&track).map_or(0, Vec::len);
        if let Some(s) = self.stacks.get_mut(&track) {
            s.clear();
        }
        for _ in 0..n {
            let e = self.slice(b'E', ts, track, String::new());
            self.emit(e);
        }
    }

    /// The bottom of a P track's stack: the M holding it.
    fn owner(&self, track: u32) -> Option<Open> {
        self.stacks.get(&track).and_then(|s| s.first().copied())
    }

    fn top(&self, track: u32) -> Option<Open> {
        self.stacks.get(&track).and_then(|s| s.last().copied())
    }

    fn p_track(&mut self, rt: u32, p: u32) -> u32 {
        let t = P_TRACK_BASE + rt * P_TRACKS_PER_RUNTIME + p.min(P_TRACKS_PER_RUNTIME - 1);
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

    fn flow_out(&mut self, g: u64, idx: usize) {
        let id = self.next_flow;
        self.next_flow += 1;
        self.out[idx].flow = Some((id, true));
        if let Some((_, old)) = self.pending.insert(g, (id, idx)) {
            self.out[old].flow = None;
        }
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
                let mut o = self.slice(b'X', ts, tid, format!("go {}", self.label(g, goroutine)));
                o.dur = Some(0);
                o.args = vec![
                    ("g", Arg::U(g)),
                    ("parent", Arg::U(parent)),
                    ("site", Arg::S(format!("{}:{}", site.file(), site.line()))),
                ];
                let idx = self.emit(o);
                self.flow_out(g, idx);
            }
            Ev::Start { g, goroutine } => {
                // One poll at a time on a thread: anything open is stale.
                self.close_all(ts, tid);
                let name = self.label(g, goroutine);
                let mut o = self.slice(b'B', ts, tid, name.clone());
                o.args = vec![("g", Arg::U(g))];
                if let Some(p) = p {
                    o.args.push(("p", Arg::U(u64::from(p))));
                }
                if let Some((id, _)) = self.pending.remove(&g) {
                    o.flow = Some((id, false));
                }
                self.open(tid, Open::G(g), o);
                if let Some(p) = p {
                    let pt = self.p_track(e.rt, p);
                    self.own(ts, pt, tid);
                    self.close_to(ts, pt, Open::G(g), Vec::new());
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
                let idx = self.emit(o);
                self.flow_out(g, idx);
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
                        let name = self.label(g, goroutine);
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

/// Write `data` as trace JSON.
pub(super) fn write(data: &Collected, mut w: impl Write) -> io::Result<TraceSummary> {
    // Merge by time; a stable sort keeps each thread's own order for ties.
    let mut events: Vec<&(u32, super::Event)> = data
        .events
        .iter()
        .filter(|(_, e)| e.ts >= data.from)
        .collect();
    events.sort_by_key(|(_, e)| e.ts);
    let mut r = Replay {
        data,
        out: Vec::with_capacity(events.len() * 2),
        stacks: HashMap::new(),
        pids: HashMap::new(),
        pending: HashMap::new(),
        next_flow: 1,
        thread_names: data.threads.iter().map(|(t, n)| (*t, n.as_str())).collect(),
    };
    // A thread's track sits with the runtime of its first event.
    for (tid, e) in &events {
        r.pids.entry(*tid).or_insert(e.rt);
    }
    for (tid, e) in &events {
        r.replay(*tid, e);
    }
    // (A thread that saw tracing on just before it stopped may have recorded
    // after the snapshot's clock read.)
    let end = events
        .last()
        .map_or(data.taken.ticks, |(_, e)| e.ts.max(data.taken.ticks));
    let open: Vec<u32> = r.stacks.keys().copied().collect();
    for t in open {
        r.close_all(end, t);
    }
    for (_, idx) in std::mem::take(&mut r.pending).into_values() {
        r.out[idx].flow = None;
    }

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
    let mut first = true;
    let mut sep = |w: &mut dyn Write| -> io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    // Names: runtimes (processes), threads and Ps (tracks).
    let mut pids: Vec<u32> = r.pids.values().copied().collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let name = data.runtimes.iter().find(|(id, _)| *id == pid).map_or_else(
            || format!("runtime {pid}"),
            |(_, n)| format!("gosched runtime \"{n}\""),
        );
        sep(&mut w)?;
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":"
        )?;
        json_str(&mut w, &name)?;
        w.write_all(b"}}")?;
    }
    let mut tracks: Vec<(u32, u32)> = r.pids.iter().map(|(t, p)| (*t, *p)).collect();
    tracks.sort_unstable();
    for (tid, pid) in tracks {
        let (name, order) = if tid >= P_TRACK_BASE {
            (
                format!("P{}", (tid - P_TRACK_BASE) % P_TRACKS_PER_RUNTIME),
                tid - P_TRACK_BASE,
            )
        } else {
            (
                r.thread_names
                    .get(&tid)
                    .map_or_else(|| format!("thread {tid}"), |n| n.to_string()),
                P_TRACK_BASE + tid,
            )
        };
        sep(&mut w)?;
        write!(w, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":")?;
        json_str(&mut w, &name)?;
        w.write_all(b"}}")?;
        sep(&mut w)?;
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{order}}}}}"
        )?;
    }
    for o in &r.out {
        sep(&mut w)?;
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
            json_str(&mut w, &o.name)?;
        }
        if let Some(d) = o.dur {
            write!(w, ",\"dur\":{}.{:03}", d / 1000, d % 1000)?;
        }
        if o.ph == b'i' {
            w.write_all(b",\"s\":\"t\"")?;
        }
        if let Some((id, out)) = o.flow {
            write!(
                w,
                ",\"bind_id\":\"0x{id:x}\",\"{}\":true",
                if out { "flow_out" } else { "flow_in" }
            )?;
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
                    Arg::S(s) => json_str(&mut w, s)?,
                }
            }
            w.write_all(b"}")?;
        }
        w.write_all(b"}")?;
    }
    w.write_all(b"\n]}\n")?;
    w.flush()?;
    Ok(TraceSummary {
        path: None,
        events: events.len() as u64,
        dropped: data.dropped + (data.events.len() - events.len()) as u64,
        truncated: data.truncated,
    })
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
