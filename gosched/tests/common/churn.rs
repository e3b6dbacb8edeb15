//! Allocator churn beside virtual threads (issue 45): 1,000,000 goroutines,
//! 1,000 alive at a time, each allocating, yielding (it may resume on the
//! other M) and freeing, with `ALLOCATOR` as the global allocator. An
//! allocator keeps per-thread state (a cache, a heap) in thread-locals;
//! where goroutines are virtual threads, an allocator linked into the
//! executable has its thread-locals in the goroutine's own block, so each
//! goroutine gets that state and must give it back when it ends (its TLS
//! and pthread-key destructors run then). RSS must stay flat: it may not
//! grow by more than 32 MiB from the first 200,000 goroutines to the
//! millionth (a leak of 40 bytes per goroutine would break that).

/// Resident set size of this process, from `/proc/self/statm`.
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

pub fn churn(allocator: &str) {
    const TOTAL: usize = 1_000_000;
    const ALIVE: usize = 1_000;
    const SAMPLE: usize = 100_000;
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let mut rss = Vec::new();
    let mut moved = 0usize;
    for _ in 0..TOTAL / SAMPLE {
        let (sum, m) = rt
            .block_on(rt.go(|| {
                let mut sum = 0usize;
                let mut moved = 0usize;
                for _ in 0..SAMPLE / ALIVE {
                    let hs: Vec<_> = (0..ALIVE)
                        .map(|i| {
                            gosched::go(move || {
                                let before = os_thread();
                                let v = vec![i as u8; 16 + i % 2048];
                                let s = std::hint::black_box(String::from("goroutine"));
                                gosched::yield_now();
                                let b = Box::new(v.len() + s.len());
                                drop(v);
                                (*b, os_thread() != before)
                            })
                        })
                        .collect();
                    for h in hs {
                        let (n, m) = h.join().unwrap();
                        sum += n;
                        moved += usize::from(m);
                    }
                }
                (sum, moved)
            }))
            .unwrap();
        assert!(sum > 0);
        moved += m;
        rss.push(rss_bytes());
    }
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    eprintln!(
        "{allocator}: RSS per 100,000 goroutines (MiB): {:?}; {moved} resumed on another M",
        rss.iter()
            .map(|&b| (mib(b) * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    let (early, last) = (rss[1], *rss.last().unwrap());
    assert!(
        last <= early + (32 << 20),
        "{allocator}: RSS grew from {:.1} MiB after 200,000 goroutines to {:.1} MiB after \
         1,000,000: per-goroutine state left behind",
        mib(early),
        mib(last)
    );
}

/// The kernel's id of the calling OS thread.
fn os_thread() -> i64 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}
