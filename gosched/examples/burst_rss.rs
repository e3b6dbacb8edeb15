//! RSS after a burst (issue 25): 100,000 goroutines park at once, all are
//! released and joined, then the process idles. Prints VmRSS before the
//! burst, at its peak (all parked), and every 250 ms for 6 s while the stack
//! scavenger gives the free stacks back, with the page tables (VmPTE) and the
//! stack slabs still mapped and the process's CPU time in that tick; then
//! the CPU time the process used while idle (the scavenger's cost), its
//! busiest second (the scavenger's pacing), and whether RSS came back within
//! 2x of the pre-burst level within 5 s (the target).
//!
//! `/tmp/burst/burst.go` (see the report of issue 25) does the same in Go.
//!
//! cargo run --release -p gosched --example burst_rss [-- units]
//!
//! `BURST_SMAPS=1` also lists, at the end, the mappings that hold the most
//! resident memory, those whose resident memory grew the most since before
//! the burst (what the idle process kept), and glibc's `malloc_stats`.

use std::time::{Duration, Instant};

/// A `kB` field of /proc/self/status.
fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of the whole process.
fn cpu_time() -> Duration {
    // SAFETY: a zeroed rusage is valid; getrusage only writes it.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of each thread of the process, by name (`/proc/self/task/*/schedstat`).
fn thread_cpu() -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        out.push((name.trim().to_string(), Duration::from_nanos(ns)));
    }
    out
}

/// CPU used by each thread name between two [`thread_cpu`] snapshots.
fn cpu_by_name(a: &[(String, Duration)], b: &[(String, Duration)]) -> Vec<(String, Duration)> {
    let mut by: Vec<(String, Duration)> = Vec::new();
    for (name, t) in b {
        match by.iter_mut().find(|(n, _)| n == name) {
            Some(e) => e.1 += *t,
            None => by.push((name.clone(), *t)),
        }
    }
    for (name, t) in a {
        if let Some(e) = by.iter_mut().find(|(n, _)| n == name) {
            e.1 = e.1.saturating_sub(*t);
        }
    }
    by
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// Resident kB of each mapping of the process, with its `/proc/self/smaps`
/// header line, keyed by start address.
fn mappings() -> Vec<(usize, u64, String)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut maps = Vec::new();
    let mut head = String::new();
    for line in smaps.lines() {
        if let Some(v) = line.strip_prefix("Rss:") {
            let kb = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            let start = head
                .split('-')
                .next()
                .and_then(|a| usize::from_str_radix(a, 16).ok())
                .unwrap_or(0);
            maps.push((start, kb, head.clone()));
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.contains('-') && !w.ends_with(':'))
        {
            head = line.to_string();
        }
    }
    maps
}

/// The mappings holding the most resident memory at the end, and those
/// whose resident memory grew the most since `before` (`BURST_SMAPS=1`).
fn print_top_mappings(before: &[(usize, u64, String)]) {
    let mut maps = mappings();
    maps.sort_by_key(|m| std::cmp::Reverse(m.1));
    println!("mappings holding the most RSS:");
    for (_, kb, head) in maps.iter().take(12) {
        println!("  {kb:>8} kB  {head}");
    }
    let mut grown: Vec<(i64, &str)> = maps
        .iter()
        .map(|(start, kb, head)| {
            let was = before
                .iter()
                .find(|m| m.0 == *start)
                .map_or(0, |m| m.1 as i64);
            (*kb as i64 - was, head.as_str())
        })
        .filter(|m| m.0 != 0)
        .collect();
    grown.sort_by_key(|m| std::cmp::Reverse(m.0));
    let total: i64 = grown.iter().map(|m| m.0).sum();
    println!("RSS grown since before the burst, by mapping (total {total} kB):");
    for (kb, head) in grown.iter().take(12) {
        println!("  {kb:>+8} kB  {head}");
    }
}

fn main() {
    let units: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().expect("units"));
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    rt.block_on(rt.go(|| {})).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let maps_before = mappings();
    let before = status_kb("VmRSS");
    let pte_before = status_kb("VmPTE");
    let peak = rt
        .block_on(rt.go(move || {
            let wg = gosched::sync::WaitGroup::new();
            let chans: Vec<_> = (0..units)
                .map(|_| {
                    let c = gosched::chan::<()>(0);
                    let (r, wg) = (c.clone(), wg.clone());
                    wg.add(1);
                    gosched::go(move || {
                        let _ = r.recv();
                        wg.done();
                    });
                    c
                })
                .collect();
            // All parked: each goroutine has run up to its `recv`.
            while gosched::runtime::stats().parked < units {
                gosched::yield_now();
            }
            let peak = (status_kb("VmRSS"), status_kb("VmPTE"));
            for c in &chans {
                c.close().unwrap();
            }
            wg.wait();
            peak
        }))
        .unwrap();
    let t = Instant::now();
    let cpu0 = cpu_time();
    let threads0 = thread_cpu();
    println!(
        "{units} goroutines. before the burst: RSS {:.1} MiB (page tables {:.1} MiB); \
         all parked: RSS {:.1} MiB (page tables {:.1} MiB)",
        mib(before),
        mib(pte_before),
        mib(peak.0),
        mib(peak.1)
    );
    let mut back_at = None;
    // Process CPU time used in each 250 ms tick: the busiest second (four
    // ticks in a row) shows the scavenger's pacing.
    let mut ticks: Vec<Duration> = Vec::new();
    let mut cpu_prev = cpu0;
    let mut tick = 1;
    while tick <= 24 {
        let next = Duration::from_millis(250 * tick);
        if let Some(wait) = next.checked_sub(t.elapsed()) {
            std::thread::sleep(wait);
        }
        let rss = status_kb("VmRSS");
        let cpu_now = cpu_time();
        ticks.push(cpu_now - cpu_prev);
        cpu_prev = cpu_now;
        let st = rt.stats().stacks;
        if rss <= 2 * before && back_at.is_none() {
            back_at = Some(t.elapsed());
        } else if rss > 2 * before {
            back_at = None;
        }
        println!(
            "{:>5} ms after: RSS {:>6.1} MiB, page tables {:>5.1} MiB, {} slabs ({} MiB mapped), \
             free stacks {} resident / {} released, CPU {:.1} ms",
            t.elapsed().as_millis(),
            mib(rss),
            mib(status_kb("VmPTE")),
            st.slabs,
            st.mapped_bytes >> 20,
            st.free_resident,
            st.free_released,
            ticks.last().unwrap().as_secs_f64() * 1e3,
        );
        tick += 1;
    }
    let idle = t.elapsed();
    let cpu = cpu_time() - cpu0;
    let threads = cpu_by_name(&threads0, &thread_cpu());
    println!(
        "idle phase: {:.1} ms CPU in {:.1} s = {:.2}% of one core",
        cpu.as_secs_f64() * 1e3,
        idle.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / idle.as_secs_f64()
    );
    for (name, t) in threads {
        println!("  {name}: {:.1} ms", t.as_secs_f64() * 1e3);
    }
    let busiest = ticks
        .windows(4)
        .map(|w| w.iter().sum::<Duration>())
        .max()
        .unwrap_or_default();
    println!(
        "busiest second: {:.1} ms CPU = {:.2}% of one core ({:.2}% of the 2 procs)",
        busiest.as_secs_f64() * 1e3,
        busiest.as_secs_f64() * 100.0,
        busiest.as_secs_f64() * 50.0
    );
    match back_at {
        Some(at) => println!(
            "RSS within 2x of before the burst from {} ms on (target: 5000 ms): {}",
            at.as_millis(),
            if at <= Duration::from_secs(5) {
                "met"
            } else {
                "missed"
            }
        ),
        None => println!("RSS never came back within 2x of before the burst: missed"),
    }
    if std::env::var_os("BURST_SMAPS").is_some() {
        print_top_mappings(&maps_before);
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_stats only prints the C heap's statistics to stderr.
        unsafe {
            libc::malloc_stats()
        };
    }
}
