//! Unit tests of the stack pool, the guards, the scavenger and the cache.

use super::*;

/// The tests of this file (and overflow.rs) that map memory run one at a
/// time: some inspect the address space (maps, residency) or the
/// process-wide guard count.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Environment variable selecting a child role (see [`run_child`]).
pub(crate) const CHILD_ENV: &str = "GOSCHED_CORO_TEST_CHILD";

/// Re-executes this test binary to run only the test `<module>::child`
/// (pass `module_path!()`), with [`CHILD_ENV`] set to `mode`. Checks that
/// need a quiet address space, or that crash, run there.
pub(crate) fn run_child(module: &str, mode: &str) -> std::process::Output {
    let path = format!("{module}::child");
    // Test names omit the crate name.
    let name = path
        .split_once("::")
        .map_or(path.as_str(), |(_, rest)| rest);
    std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, mode)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .output()
        .unwrap()
}

/// Asserts that a child exited successfully after really running its test.
pub(crate) fn assert_child_passed(out: &std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{:?}\n{stdout}\n{stderr}",
        out.status
    );
}

/// The child role; does nothing in a normal test run.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    match mode.as_str() {
        "guard-after-scavenge" => {
            let pool = StackPool::with_config(PoolConfig {
                hot_max_stacks: 4,
                ..PoolConfig::default()
            });
            let stacks: Vec<_> = (0..16).map(|_| pool.alloc(16 * 1024).unwrap()).collect();
            for s in &stacks {
                touch(s);
            }
            // A guard in the middle of a run of adjacent free stacks.
            let guard = stacks[2].limit.get();
            let _ = pool.free_batch(stacks);
            let mut steps = 0;
            while pool.scavenge(usize::MAX) {
                steps += 1;
                assert!(steps < 10, "the scavenger never ends");
            }
            assert!(pool.stats().free_cold >= 12);
            eprintln!("scavenged; reading a guard");
            // SAFETY: deliberately reads a guard page: must fault.
            let v = unsafe { ptr::read_volatile(guard as *const u8) };
            eprintln!("read {v}: the guard is gone");
        }
        "guard-of-batch" | "guard-per-page" => {
            // Guards installed ahead of carving (one process_madvise for
            // 64 stacks), or one madvise per carved stack: the guard of
            // the first stack of the second batch must fault.
            let guard_install = if mode == "guard-per-page" {
                GuardInstall::PerPage
            } else {
                guard_install()
            };
            let pool = StackPool::with_config(PoolConfig {
                guard_install,
                ..PoolConfig::default()
            });
            let stacks: Vec<_> = (0..GUARD_BATCH + 2)
                .map(|_| pool.alloc(16 * 1024).unwrap())
                .collect();
            let guard = stacks[GUARD_BATCH].limit.get();
            eprintln!("carved; reading a guard ({guard_install:?})");
            // SAFETY: deliberately reads a guard page: must fault.
            let v = unsafe { ptr::read_volatile(guard as *const u8) };
            eprintln!("read {v}: the guard is missing");
        }
        "guard-ahead" => {
            // Half a batch carved: the next batch's guards went in with
            // the lock released (`install_ahead`), before any carve
            // reached them: the guard of a stack not carved yet faults.
            let pool = StackPool::with_config(PoolConfig {
                guard_install: guard_install(),
                first_slab_stacks: 1024,
                ..PoolConfig::default()
            });
            let stacks: Vec<_> = (0..GUARD_BATCH / 2 + 1)
                .map(|_| pool.alloc(16 * 1024).unwrap())
                .collect();
            let inner = pool.lock();
            let slab = &inner.slabs[stacks[0].slab as usize];
            assert_eq!(slab.guards_to, 2 * GUARD_BATCH);
            let guard = slab.start + (GUARD_BATCH + GUARD_BATCH / 2) * slab.stride;
            drop(inner);
            eprintln!("carved; reading a guard");
            // SAFETY: deliberately reads a guard page: must fault.
            let v = unsafe { ptr::read_volatile(guard as *const u8) };
            eprintln!("read {v}: the guard is missing");
        }
        "slab-return" => {
            // No other test runs in this process, so nothing can map the
            // holes between munmap and the check.
            let pool = StackPool::with_config(PoolConfig {
                first_slab_stacks: 4,
                hot_max_stacks: 4,
                ..PoolConfig::default()
            });
            let stacks: Vec<_> = (0..4 + 8 + 10)
                .map(|_| pool.alloc(16 * 1024).unwrap())
                .collect();
            for s in &stacks {
                touch(s);
            }
            let ranges = slab_range(&pool);
            assert_eq!(ranges.len(), 3);
            let _ = pool.free_batch(stacks);
            let mut steps = 0;
            while pool.scavenge(usize::MAX) {
                steps += 1;
                assert!(steps < 10, "the scavenger never ends");
            }
            // The two full slabs went back; the one being carved stays.
            let st = pool.stats();
            assert_eq!((st.slabs, st.slabs_returned), (1, 2), "{st:?}");
            for &(lo, hi) in &ranges[..2] {
                let err = resident_pages(lo, hi - lo).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{lo:#x}-{hi:#x}");
                assert_eq!(maps_overlapping(lo, hi), 0);
                assert!(overflow::lookup_guard(lo).is_none());
            }
        }
        "pool-drop" => {
            // No other test runs in this process, so nothing can map the
            // holes between munmap and the check.
            let pool = StackPool::new();
            let a = pool.alloc(16 * 1024).unwrap();
            let b = pool.alloc(64 * 1024).unwrap();
            touch(&a);
            touch(&b);
            let ranges = slab_range(&pool);
            assert_eq!(ranges.len(), 2);
            let _ = pool.free(a);
            let _ = pool.free(b);
            drop(pool);
            for (lo, hi) in ranges {
                let err = resident_pages(lo, hi - lo).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{lo:#x}-{hi:#x}");
                assert_eq!(maps_overlapping(lo, hi), 0);
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn page() -> usize {
    page_size()
}

/// Lines of /proc/self/maps that overlap `[lo, hi)`.
fn maps_overlapping(lo: usize, hi: usize) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|line| {
            let range = line.split_whitespace().next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let a = usize::from_str_radix(a, 16).unwrap();
            let b = usize::from_str_radix(b, 16).unwrap();
            a < hi && lo < b
        })
        .count()
}

/// Resident pages in `[addr, addr + len)` (page-aligned), via mincore.
fn resident_pages(addr: usize, len: usize) -> io::Result<usize> {
    let pages = len.div_ceil(page());
    let mut vec = vec![0u8; pages];
    // SAFETY: mincore only reads page-table state and writes `pages`
    // bytes into `vec`.
    let r = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
}

/// Writes every usable page of a stack.
fn touch(stack: &Stack) {
    let lo = stack.limit.get() + stack.guard as usize;
    let mut p = lo;
    while p < stack.base.get() {
        // SAFETY: the usable part of a stack we own.
        unsafe { ptr::write_volatile(p as *mut u8, 0xA5) };
        p += page();
    }
}

fn slab_range(pool: &StackPool) -> Vec<(usize, usize)> {
    let inner = pool.lock();
    inner
        .slabs
        .iter()
        .filter(|s| s.is_mapped())
        .map(|s| (s.start, s.start + s.len))
        .collect()
}

fn cfg(mode: GuardMode) -> PoolConfig {
    PoolConfig {
        guard_mode: mode,
        ..PoolConfig::default()
    }
}

#[test]
fn sizes_are_rounded() {
    let _serial = serial();
    let pool = StackPool::new();
    let a = pool.alloc(1).unwrap();
    assert_eq!(a.size(), MIN_STACK_SIZE);
    let b = pool.alloc(MIN_STACK_SIZE + 1).unwrap();
    assert_eq!(b.size(), MIN_STACK_SIZE + page());
    let c = pool.alloc(100_000).unwrap();
    assert_eq!(c.size(), 100_000usize.div_ceil(page()) * page());
    for s in [&a, &b, &c] {
        use corosensei::stack::Stack as _;
        assert_eq!(s.base().get() - s.limit().get(), s.size() + page());
        assert_eq!(s.limit().get() % page(), 0);
        assert_eq!(s.base().get() % 16, 0);
    }
    assert!(matches!(
        pool.alloc(MAX_STACK_SIZE + 1),
        Err(StackError::TooLarge { .. })
    ));
    assert_eq!(pool.stats().size_classes, 3);
    let _ = pool.free(a);
    let _ = pool.free(b);
    let _ = pool.free(c);
}

#[test]
fn alloc_free_reuse() {
    let _serial = serial();
    let pool = StackPool::new();
    let a = pool.alloc(64 * 1024).unwrap();
    let b = pool.alloc(64 * 1024).unwrap();
    assert_ne!(a.limit, b.limit);
    touch(&a);
    touch(&b);
    let (a_limit, b_limit) = (a.limit, b.limit);
    let _ = pool.free(a);
    let _ = pool.free(b);
    let st = pool.stats();
    assert_eq!((st.carved, st.outstanding, st.free_hot), (2, 0, 2));
    // LIFO: the last freed comes back first.
    let c = pool.alloc(64 * 1024).unwrap();
    assert_eq!(c.limit, b_limit);
    let d = pool.alloc(64 * 1024 - 100).unwrap(); // rounds to the same class
    assert_eq!(d.limit, a_limit);
    let e = pool.alloc(64 * 1024).unwrap(); // carves a new one
    assert_eq!(pool.stats().carved, 3);
    // A different size gets its own slab.
    let f = pool.alloc(128 * 1024).unwrap();
    let st = pool.stats();
    assert_eq!((st.slabs, st.outstanding), (2, 4));
    for s in [c, d, e, f] {
        let _ = pool.free(s);
    }
    assert_eq!(pool.stats().outstanding, 0);
}

#[test]
fn guard_page_faults_are_registered() {
    let _serial = serial();
    let pool = StackPool::new();
    let s = pool.alloc(32 * 1024).unwrap();
    touch(&s);
    let guard = s.limit.get();
    let hit = overflow::lookup_guard(guard + 8).expect("guard page is registered");
    assert_eq!(hit.usable, s.size());
    assert_eq!(hit.guard_start, guard);
    assert!(overflow::lookup_guard(guard + page() + 8).is_none());
    assert!(overflow::lookup_guard(s.base.get() - 8).is_none());
    let _ = pool.free(s);
}

#[test]
fn slabs_grow() {
    let _serial = serial();
    let pool = StackPool::with_config(PoolConfig {
        first_slab_stacks: 4,
        ..PoolConfig::default()
    });
    let stacks: Vec<_> = (0..4 + 8 + 1)
        .map(|_| pool.alloc(16 * 1024).unwrap())
        .collect();
    let st = pool.stats();
    assert_eq!(st.slabs, 3);
    assert_eq!(st.mapped_bytes, (4 + 8 + 16) * (16 * 1024 + page()));
    let _ = pool.free_batch(stacks);
}

#[test]
fn many_stacks_few_maps() {
    if guard_mode() != GuardMode::Madvise {
        eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
        return;
    }
    let _serial = serial();
    let pool = StackPool::new();
    let stacks: Vec<_> = (0..20_000)
        .map(|_| pool.alloc(16 * 1024).unwrap())
        .collect();
    let st = pool.stats();
    assert_eq!(st.carved, 20_000);
    let lines: usize = slab_range(&pool)
        .iter()
        .map(|&(lo, hi)| maps_overlapping(lo, hi))
        .sum();
    // 64 + 128 + ... : 9 slabs for 20,000 stacks, one map each (or fewer
    // when the kernel merges neighbours); mprotect guards would be 40,000.
    assert!(lines <= st.slabs, "{lines} maps for {} slabs", st.slabs);
    assert!(st.slabs <= 10, "{} slabs", st.slabs);
    let _ = pool.free_batch(stacks);
}

#[test]
fn scavenger_releases_old_hot_stacks() {
    let _serial = serial();
    let pool = StackPool::with_config(PoolConfig {
        hot_max_stacks: 8,
        // Room left in the slab: it stays when all its stacks are cold.
        first_slab_stacks: 128,
        ..PoolConfig::default()
    });
    let size = 256 * 1024;
    let stacks: Vec<_> = (0..64).map(|_| pool.alloc(size).unwrap()).collect();
    for s in &stacks {
        touch(s);
    }
    let usable = |s: &Stack| (s.limit.get() + page(), s.size());
    let ranges: Vec<_> = stacks.iter().map(usable).collect();
    let resident = || -> usize {
        ranges
            .iter()
            .map(|&(a, l)| resident_pages(a, l).unwrap())
            .sum()
    };
    assert_eq!(resident(), 64 * size / page());
    // Freeing makes no syscall: every stack stays hot and resident; the
    // first free over the bound asks for a scavenger, once.
    let asks: usize = stacks.into_iter().map(|s| usize::from(pool.free(s))).sum();
    assert_eq!(asks, 1);
    assert_eq!(pool.stats().free_hot, 64);
    assert_eq!(resident(), 64 * size / page());
    // Step 1: all were freed in this period, too young to release.
    assert!(pool.scavenge(usize::MAX));
    assert_eq!(pool.stats().free_hot, 64);
    // Step 2 releases at most `max`, oldest first...
    assert!(pool.scavenge(10));
    assert_eq!(pool.stats().free_cold, 10);
    // ...step 3 the rest beyond the bound...
    assert!(pool.scavenge(usize::MAX));
    let st = pool.stats();
    assert_eq!((st.free_hot, st.free_cold), (8, 56), "{st:?}");
    assert_eq!(resident(), 8 * size / page(), "{st:?}");
    // ...and the sweep those within it free for two periods; it ends.
    assert!(!pool.scavenge(usize::MAX));
    let st = pool.stats();
    assert_eq!((st.free_hot, st.free_cold), (0, 64), "{st:?}");
    assert_eq!(resident(), 0, "{st:?}");
    // Hot stacks are reused before cold ones; cold ones still work.
    let again: Vec<_> = (0..64).map(|_| pool.alloc(size).unwrap()).collect();
    for s in &again {
        touch(s);
        assert!(overflow::lookup_guard(s.limit.get()).is_some());
    }
    assert_eq!(pool.stats().carved, 64);
    let _ = pool.free_batch(again);
}

/// The scavenger's `MADV_DONTNEED` runs cover the guard pages between
/// adjacent stacks: the guards must survive it (a child reads one and
/// must die of SIGSEGV).
#[test]
fn guards_survive_the_scavenger() {
    if guard_mode() != GuardMode::Madvise {
        eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
        return;
    }
    let out = run_child(module_path!(), "guard-after-scavenge");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the guard read did not fault: {stderr}"
    );
    assert!(
        stderr.contains("scavenged; reading a guard"),
        "the child did not get to the read: {stderr}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{stderr}");
}

#[test]
fn cache_hit_and_overflow_moves_half_to_pool() {
    let _serial = serial();
    let pool = StackPool::new();
    let mut cache = StackCache::new();
    let size = 256 * 1024;
    let limit = (CACHE_MAX_BYTES / (size + page())).clamp(CACHE_MIN_STACKS, CACHE_MAX_STACKS);
    // Each stack a goroutine gets was promised at its spawn.
    for _ in 0..limit + 2 {
        cache.reserve(&pool, size).unwrap();
    }
    cache.reserve(&pool, 32 * 1024).unwrap();
    let stacks: Vec<_> = (0..limit + 1)
        .map(|_| cache.get(&pool, size).unwrap())
        .collect();
    assert_eq!(pool.stats().outstanding, limit + 1);
    let last = stacks.last().unwrap().limit;
    for s in stacks {
        let _ = cache.put(&pool, s);
    }
    // The (limit+1)th put overflowed: half went to the pool.
    let len = limit + 1;
    let moved = len / 2; // what the overflowing put moved
    assert_eq!(cache.len(), limit + 1 - moved);
    let st = pool.stats();
    assert_eq!(st.free_hot + st.free_cold, moved);
    assert_eq!(st.outstanding, limit + 1 - moved);
    // Hit: the most recently put stack, without touching the pool.
    let s = cache.get(&pool, size - 100).unwrap();
    assert_eq!(s.limit, last);
    assert_eq!(pool.stats().outstanding, limit + 1 - moved);
    // Miss on another size goes to the pool.
    let t = cache.get(&pool, 32 * 1024).unwrap();
    let _ = cache.put(&pool, s);
    let _ = cache.put(&pool, t);
    cache.drain(&pool, &pool.lock_cache_flush());
    assert_eq!(cache.len(), 0);
    let st = pool.stats();
    assert_eq!(st.outstanding, 0);
    // One promise was never used (limit + 2 reserved, limit + 1 run):
    // drained with the credit, like the returned ones.
    assert_eq!(st.committed, 0, "{st:?}");
}

/// A reservation maps address space, never carves: stacks still come
/// lazily, and every promise made by `reserve` fits in mapped slabs with
/// room left for what the per-P caches may hold.
#[test]
fn reservations_map_slabs_ahead_of_carving() {
    let _serial = serial();
    let pool = StackPool::new();
    pool.set_caches(2);
    let size = 256 * 1024;
    let slack = 2 * cache_limit(size + page());
    let mut promised = 0;
    for want in [1, 1, 32, 500, 3000] {
        // A grant may be partial (what fits without a new slab).
        let mut got = 0;
        while got < want {
            got += pool.reserve(size, want - got).unwrap();
        }
        promised += got;
        let st = pool.stats();
        assert_eq!(st.committed, promised);
        assert!(st.capacity >= promised + slack, "{st:?}");
        assert_eq!(st.carved, 0, "a reservation carved a stack: {st:?}");
    }
    assert_eq!(promised, 1 + 1 + 32 + 500 + 3000);
    pool.unreserve(size, promised);
    assert_eq!(pool.stats().committed, 0);
}

/// The point of the slack: with every other cache full and no spare
/// slab, a goroutine whose promise was made finds its stack without
/// mapping (a failing `mmap` there would kill it at its first run).
#[test]
fn a_promised_stack_needs_no_new_slab() {
    let _serial = serial();
    let pool = StackPool::new();
    pool.set_caches(2);
    let size = 64 * 1024;
    let (mut a, mut b) = (StackCache::new(), StackCache::new());
    let limit = cache_limit(size + page());
    // B runs `limit` goroutines to completion: their stacks stay in B.
    for _ in 0..limit {
        b.reserve(&pool, size).unwrap();
    }
    let held: Vec<_> = (0..limit).map(|_| b.get(&pool, size).unwrap()).collect();
    for s in held {
        let _ = b.put(&pool, s);
    }
    assert_eq!(b.len(), limit);
    // A promises as many stacks as it can without a new slab, then runs
    // them all at once.
    let slabs = pool.stats().slabs;
    let mut n = 0;
    loop {
        a.reserve(&pool, size).unwrap();
        if pool.stats().slabs != slabs {
            break; // that promise needed a slab: it is not counted
        }
        n += 1;
    }
    let slabs = pool.stats().slabs;
    let running: Vec<_> = (0..n + 1).map(|_| a.get(&pool, size).unwrap()).collect();
    assert_eq!(pool.stats().slabs, slabs, "a promised stack mapped a slab");
    for s in running {
        let _ = a.put(&pool, s);
    }
    a.drain(&pool, &pool.lock_cache_flush());
    b.drain(&pool, &pool.lock_cache_flush());
    let st = pool.stats();
    assert_eq!((st.outstanding, st.committed), (0, 0), "{st:?}");
}

/// mprotect mode: promises stay within the map budget, counting the
/// stacks the caches may hold, and fail with the sysctl message.
#[test]
fn mprotect_reservations_respect_the_map_budget() {
    let _serial = serial();
    let margin = 100;
    let budget = 200; // guards
    let pool = StackPool::with_config(PoolConfig {
        max_map_count: margin + 2 * (GUARDS_COMMITTED.load(Ordering::Relaxed) + budget),
        map_margin: margin,
        ..cfg(GuardMode::Mprotect)
    });
    pool.set_caches(2);
    let size = 16 * 1024;
    let room = budget - 2 * CACHE_MAX_STACKS;
    let mut got = 0;
    let err = loop {
        match pool.reserve(size, 1000) {
            Ok(n) => got += n,
            Err(e) => break e,
        }
    };
    assert_eq!(got, room);
    assert!(
        matches!(err, StackError::MapCountExhausted { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("vm.max_map_count"), "{err}");
    pool.unreserve(size, 1);
    assert_eq!(pool.reserve(size, 5).unwrap(), 1);
    pool.unreserve(size, room);
    assert_eq!(pool.stats().committed, 0);
}

#[test]
fn drop_unregisters_and_leaks_in_use_slabs() {
    let _serial = serial();
    let pool = StackPool::new();
    let a = pool.alloc(16 * 1024).unwrap();
    let b = pool.alloc(64 * 1024).unwrap(); // second slab, kept out
    touch(&a);
    let guard_a = a.limit.get();
    let _ = pool.free(a);
    assert!(overflow::lookup_guard(guard_a).is_some());
    drop(pool);
    // The free slab is gone from the registry (the unmapping itself is
    // checked in a child process: `drop_unmaps_slabs`).
    assert!(overflow::lookup_guard(guard_a).is_none());
    // The slab with a stack out is leaked: still mapped, still guarded.
    touch(&b);
    assert!(overflow::lookup_guard(b.limit.get()).is_some());
}

#[test]
fn batched_guards_fault() {
    if guard_mode() != GuardMode::Madvise {
        eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
        return;
    }
    let mut modes = vec!["guard-of-batch", "guard-per-page"];
    if matches!(guard_install(), GuardInstall::Vector { .. }) {
        modes.push("guard-ahead");
    }
    for mode in modes {
        let out = run_child(module_path!(), mode);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("carved; reading a guard"),
            "{mode}: {stderr}"
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{mode}: {stderr}");
    }
}

/// Guards go in ahead of carving, a batch at a time, only as far as the
/// carving has got: a slab that is never used costs no guards.
#[test]
fn guards_are_installed_in_batches() {
    if guard_mode() != GuardMode::Madvise {
        eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
        return;
    }
    let _serial = serial();
    let pool = StackPool::with_config(PoolConfig {
        first_slab_stacks: 1024,
        ..PoolConfig::default()
    });
    let guards_to = |pool: &StackPool| {
        let inner = pool.lock();
        inner.slabs.iter().map(|s| s.guards_to).collect::<Vec<_>>()
    };
    pool.reserve(16 * 1024, 1000).unwrap();
    assert!(
        guards_to(&pool).iter().all(|&g| g == 0),
        "a promise installed guards"
    );
    let a = pool.alloc(16 * 1024).unwrap();
    let batch = match guard_install() {
        GuardInstall::Vector { .. } => GUARD_BATCH,
        GuardInstall::PerPage => 1,
    };
    let slab = a.slab as usize;
    assert_eq!(guards_to(&pool)[slab], batch);
    let more: Vec<_> = (0..batch).map(|_| pool.alloc(16 * 1024).unwrap()).collect();
    // With `process_madvise`, the second batch went in ahead, once half
    // of the first was carved; per page, one guard per carve.
    assert_eq!(guards_to(&pool)[slab], 2 * batch);
    let _ = pool.free(a);
    let _ = pool.free_batch(more);
    pool.unreserve(16 * 1024, 1000);
}

/// A quiet step (no stack handed out during the last period) gives
/// every slab whose stacks are all free and old back whole, with no
/// `MADV_DONTNEED` pass before; a step after a stack was handed out
/// does not (the bursts of W13 would map, guard and fault them again),
/// and releases the old stacks beyond the bound instead.
/// Slabs of 4, 8, 16... stacks, hot lists bounded at 4 stacks.
fn small_slabs() -> PoolConfig {
    PoolConfig {
        first_slab_stacks: 4,
        hot_max_stacks: 4,
        ..PoolConfig::default()
    }
}

/// `n` stacks of `size`, every page written.
fn alloc_touched(pool: &StackPool, n: usize, size: usize) -> Vec<Stack> {
    let stacks: Vec<_> = (0..n).map(|_| pool.alloc(size).unwrap()).collect();
    for s in &stacks {
        touch(s);
    }
    stacks
}

#[test]
fn quiet_steps_return_whole_slabs() {
    let _serial = serial();
    let config = small_slabs();
    let size = 16 * 1024;
    // Slabs of 4, 8 and 16 stacks, all carved, all freed at once.
    let burst = |pool: &StackPool| assert!(pool.free_batch(alloc_touched(pool, 28, size)));

    let pool = StackPool::with_config(config);
    burst(&pool);
    // Step 1: the burst handed out stacks during the period, and freed
    // them all in it.
    assert!(pool.scavenge(usize::MAX));
    let st = pool.stats();
    assert_eq!((st.slabs, st.free_hot, st.free_cold), (3, 28, 0), "{st:?}");
    // Step 2 is quiet: the three slabs go, none of their stacks made
    // cold first.
    assert!(pool.scavenge(usize::MAX));
    let st = pool.stats();
    assert_eq!(
        (st.slabs, st.slabs_returned, st.mapped_bytes),
        (0, 3, 0),
        "{st:?}"
    );
    assert_eq!((st.free_hot, st.free_cold, st.carved), (0, 0, 0), "{st:?}");
    // The sweep finds nothing left and ends the scavenger.
    assert!(!pool.scavenge(usize::MAX));
    drop(pool);

    let pool = StackPool::with_config(config);
    burst(&pool);
    assert!(pool.scavenge(usize::MAX));
    // A stack handed out (and back) during the period: not quiet.
    let one = pool.alloc(size).unwrap();
    let _ = pool.free(one);
    assert!(pool.scavenge(usize::MAX));
    let st = pool.stats();
    assert_eq!((st.slabs, st.slabs_returned), (3, 0), "{st:?}");
    assert_eq!((st.free_hot, st.free_cold), (4, 24), "{st:?}");
    // The next period is quiet: every slab goes, its cold stacks and
    // its hot ones (the one reused is old by now).
    assert!(pool.scavenge(usize::MAX));
    let st = pool.stats();
    assert_eq!((st.slabs, st.slabs_returned), (0, 3), "{st:?}");
    assert_eq!((st.free_hot, st.free_cold), (0, 0), "{st:?}");
    assert!(!pool.scavenge(usize::MAX));
    // The pool still works: new slabs, guarded stacks.
    let again: Vec<_> = (0..30).map(|_| pool.alloc(size).unwrap()).collect();
    for s in &again {
        touch(s);
        assert!(overflow::lookup_guard(s.limit.get()).is_some());
    }
    let _ = pool.free_batch(again);
}

/// A paced step stops when its budget says so (`go_on`), after one
/// syscall at least: the stacks it did not release stay hot, the slabs
/// it did not unmap wait for the next steps, and dropping the pool
/// unmaps what is still pending.
#[test]
fn paced_steps_leave_the_rest_for_later() {
    let _serial = serial();
    let size = 16 * 1024;
    let pool = StackPool::with_config(small_slabs());
    let stacks = alloc_touched(&pool, 28, size);
    let slabs = slab_range(&pool);
    assert_eq!(slabs.len(), 3);
    assert!(pool.free_batch(stacks));
    let mut stop = || false;
    // Step 1: everything was freed during the period, nothing to do.
    assert!(pool.scavenge_within(usize::MAX, &mut stop));
    // Keep the next step from being quiet (a stack handed out and back):
    // it would release the old hot stacks over the bound, one `madvise`
    // per run of adjacent stacks, but stops after the first run.
    let one = pool.alloc(size).unwrap();
    let _ = pool.free(one);
    assert!(pool.scavenge_within(usize::MAX, &mut stop));
    let st = pool.stats();
    assert!(st.free_cold > 0 && st.free_cold < 24, "{st:?}");
    assert_eq!(st.free_hot + st.free_cold, 28, "{st:?}");
    // Quiet now: the three slabs leave the pool at once, but only the
    // first is unmapped; the others wait (still counted as mapped).
    assert!(pool.scavenge_within(usize::MAX, &mut stop));
    let st = pool.stats();
    assert_eq!((st.slabs, st.slabs_returned), (0, 3), "{st:?}");
    assert_eq!((st.free_hot, st.free_cold), (0, 0), "{st:?}");
    assert_eq!(maps_overlapping(slabs[0].0, slabs[0].1), 0);
    assert_eq!(maps_overlapping(slabs[1].0, slabs[1].1), 1);
    assert_eq!(maps_overlapping(slabs[2].0, slabs[2].1), 1);
    let pending = slabs[1].1 - slabs[1].0 + slabs[2].1 - slabs[2].0;
    assert_eq!(st.mapped_bytes, pending, "{st:?}");
    // The next step goes on with the second; the scavenger is not over.
    assert!(pool.scavenge_within(usize::MAX, &mut stop));
    assert_eq!(maps_overlapping(slabs[1].0, slabs[1].1), 0);
    assert_eq!(maps_overlapping(slabs[2].0, slabs[2].1), 1);
    // Dropping the pool unmaps the third.
    drop(pool);
    assert_eq!(maps_overlapping(slabs[2].0, slabs[2].1), 0);
}

/// mprotect mode unmaps unpaced: a slab's guards count against the map
/// budget until it is gone, and promises rely on getting them back (a
/// review found a promised goroutine failing with `MapCountExhausted`
/// while paced slabs waited).
#[test]
fn mprotect_slabs_go_at_once() {
    let _serial = serial();
    let pool = StackPool::with_config(PoolConfig {
        guard_mode: GuardMode::Mprotect,
        ..small_slabs()
    });
    let stacks = alloc_touched(&pool, 28, 16 * 1024);
    let slabs = slab_range(&pool);
    assert!(pool.free_batch(stacks));
    let mut stop = || false;
    assert!(pool.scavenge_within(usize::MAX, &mut stop));
    assert!(pool.scavenge_within(usize::MAX, &mut stop)); // quiet
    let st = pool.stats();
    assert_eq!((st.slabs_returned, st.mapped_bytes), (3, 0), "{st:?}");
    for (lo, hi) in slabs {
        assert_eq!(maps_overlapping(lo, hi), 0);
    }
}

/// A slab whose next guards are being installed with the pool lock
/// released (`install_ahead`) is not given back meanwhile: the install
/// would write guard markers into whatever is mapped there next.
#[test]
fn a_slab_being_guarded_stays() {
    let _serial = serial();
    let config = PoolConfig {
        first_slab_stacks: 8,
        hot_max_stacks: 4,
        ..PoolConfig::default()
    };
    let pool = StackPool::with_config(config);
    let stacks: Vec<_> = (0..8).map(|_| pool.alloc(16 * 1024).unwrap()).collect();
    let slab = stacks[0].slab as usize;
    assert!(pool.free_batch(stacks));
    pool.lock().slabs[slab].installing = true;
    assert!(pool.scavenge(usize::MAX));
    assert!(pool.scavenge(usize::MAX)); // quiet
    assert_eq!(pool.stats().slabs_returned, 0);
    pool.lock().slabs[slab].installing = false;
    while pool.scavenge(usize::MAX) {}
    assert_eq!(pool.stats().slabs_returned, 1);
}

/// Stacks in a per-P cache pin their slabs; the scavenger's flush of an
/// idle P's cache (`flush_idle`) gives them and the cache's promises
/// back as old, so the same quiet step returns the slabs.
#[test]
fn flushed_caches_unpin_slabs() {
    let _serial = serial();
    let pool = StackPool::with_config(PoolConfig {
        first_slab_stacks: 4,
        hot_max_stacks: 4,
        ..PoolConfig::default()
    });
    let size = 16 * 1024;
    let mut cache = StackCache::new();
    for _ in 0..12 {
        cache.reserve(&pool, size).unwrap();
    }
    let stacks: Vec<_> = (0..12).map(|_| cache.get(&pool, size).unwrap()).collect();
    // The burst's other stacks, in slabs of their own.
    let others: Vec<_> = (0..40).map(|_| pool.alloc(size).unwrap()).collect();
    for s in stacks.iter().chain(&others) {
        touch(s);
    }
    let pinned: Vec<u32> = stacks.iter().map(|s| s.slab).collect();
    for s in stacks {
        let _ = cache.put(&pool, s);
    }
    assert_eq!(cache.len(), 12);
    let _ = pool.free_batch(others);
    for _ in 0..3 {
        let _ = pool.scavenge(usize::MAX);
    }
    // The cached stacks' slabs stay, however quiet the pool.
    {
        let inner = pool.lock();
        for &slab in &pinned {
            assert!(inner.slabs[slab as usize].is_mapped());
        }
    }
    assert!(pool.stats().committed > 0);
    let _ = pool.free(pool.alloc(size).unwrap());
    let _ = pool.scavenge(usize::MAX); // not quiet
    assert!(pool.quiet());
    cache.flush_idle(&pool, &pool.lock_cache_flush());
    assert_eq!(cache.len(), 0);
    let st = pool.stats();
    assert_eq!((st.outstanding, st.committed), (0, 0), "{st:?}");
    let _ = pool.scavenge(usize::MAX);
    {
        let inner = pool.lock();
        for &slab in &pinned {
            let s = &inner.slabs[slab as usize];
            // Returned, or the carving slab with room left.
            assert!(
                !s.is_mapped() || (s.carved < s.capacity && s.outstanding == 0),
                "slab {slab} stayed"
            );
        }
        assert!(inner.slabs_returned >= 2, "{}", inner.slabs_returned);
    }
    // Flushed stacks of a slab that stays are released by the sweep at
    // the latest: none stays resident once the scavenger ends.
    while pool.scavenge(usize::MAX) {}
    assert_eq!(pool.stats().free_hot, 0, "{:?}", pool.stats());
}

/// Whole-slab return: a slab whose stacks are all free and released
/// is unmapped (checked in a child: `slab-return`); one with a stack out
/// (a goroutine's, or a per-P cache's) stays, and so does one the
/// promises need.
#[test]
fn empty_slabs_go_back_to_the_os() {
    assert_child_passed(&run_child(module_path!(), "slab-return"));
    let _serial = serial();
    let pool = StackPool::with_config(PoolConfig {
        first_slab_stacks: 4,
        hot_max_stacks: 4,
        ..PoolConfig::default()
    });
    let size = 16 * 1024;
    let scavenge = |pool: &StackPool| {
        for _ in 0..4 {
            let _ = pool.scavenge(usize::MAX);
        }
    };
    let mut stacks: Vec<_> = (0..4 + 8 + 10).map(|_| pool.alloc(size).unwrap()).collect();
    // One stack of the first slab stays out (a per-P cache holds it).
    let kept = stacks.remove(0);
    let _ = pool.free_batch(stacks);
    scavenge(&pool);
    // The full second slab went back, the one being carved stays.
    let st = pool.stats();
    assert_eq!((st.slabs, st.slabs_returned), (2, 1), "{st:?}");
    assert_eq!((st.free_hot, st.free_cold), (0, 3 + 10), "{st:?}");
    let _ = pool.free(kept);
    // Promises that need every stack of the two slabs keep them.
    let granted = pool.reserve(size, 4 + 16).unwrap();
    assert_eq!(granted, 4 + 16);
    scavenge(&pool);
    let st = pool.stats();
    assert_eq!(
        (st.slabs, st.slabs_returned, st.free_cold),
        (2, 1, 4 + 10),
        "{st:?}"
    );
    // Without them the first one goes back.
    pool.unreserve(size, granted);
    let again = pool.alloc(size).unwrap(); // a cold stack is reused...
    let _ = pool.free(again); // ...and scavenged again
    scavenge(&pool);
    let st = pool.stats();
    assert_eq!(
        (st.slabs, st.slabs_returned, st.free_cold),
        (1, 2, 10),
        "{st:?}"
    );
    // The pool still works: its cold stacks, then new slabs (which
    // reuse the returned slabs' entries).
    let stacks: Vec<_> = (0..40).map(|_| pool.alloc(size).unwrap()).collect();
    for s in &stacks {
        touch(s);
        assert!(overflow::lookup_guard(s.limit.get()).is_some());
    }
    let st = pool.stats();
    assert_eq!(st.outstanding, 40, "{st:?}");
    assert_eq!(pool.lock().slabs.len(), 3, "returned entries are reused");
    let _ = pool.free_batch(stacks);
}

#[test]
fn drop_unmaps_slabs() {
    assert_child_passed(&run_child(module_path!(), "pool-drop"));
}

#[test]
fn mprotect_fallback_costs_maps_and_is_bounded() {
    let _serial = serial();
    let base = GUARDED_STACKS.load(Ordering::Relaxed);
    let budget = 40;
    let margin = 100;
    let pool = StackPool::with_config(PoolConfig {
        max_map_count: margin + 2 * (base + budget),
        map_margin: margin,
        hot_max_stacks: 8,
        ..cfg(GuardMode::Mprotect)
    });
    let size = 16 * 1024;
    let mut stacks: Vec<_> = (0..budget).map(|_| pool.alloc(size).unwrap()).collect();
    // The guard really is PROT_NONE: each guard splits the slab.
    let (lo, hi) = slab_range(&pool)[0];
    let lines = maps_overlapping(lo, hi);
    assert!(
        lines >= 2 * budget,
        "{lines} maps for {budget} mprotect guards"
    );
    assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base + budget);
    // Over budget: refused, naming the sysctl.
    let err = pool.alloc(size).unwrap_err();
    assert!(
        matches!(err, StackError::MapCountExhausted { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("vm.max_map_count") && msg.contains("sysctl -w"),
        "{msg}"
    );
    // Freeing makes cold stacks, which give their guards (maps) back...
    for s in stacks.drain(..) {
        let _ = pool.free(s);
    }
    pool.scavenge(usize::MAX);
    pool.scavenge(usize::MAX);
    let st = pool.stats();
    assert!(st.free_cold > 0);
    assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base + st.free_hot);
    assert!(maps_overlapping(lo, hi) < lines);
    // ...and reuse re-guards them, hot ones are demoted when needed.
    let stacks: Vec<_> = (0..budget).map(|_| pool.alloc(size).unwrap()).collect();
    assert_eq!(pool.stats().carved, budget);
    for s in &stacks {
        touch(s);
        assert!(overflow::lookup_guard(s.limit.get()).is_some());
    }
    assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base + budget);
    let _ = pool.free_batch(stacks);
    drop(pool);
    assert_eq!(GUARDED_STACKS.load(Ordering::Relaxed), base);
}

#[test]
fn error_messages() {
    let e = StackError::MapCountExhausted {
        max_map_count: 65530,
        guarded_stacks: 28000,
    };
    let msg = e.to_string();
    assert!(msg.contains("vm.max_map_count = 65530"), "{msg}");
    assert!(msg.contains("sysctl -w vm.max_map_count=262144"), "{msg}");
    let e = StackError::Mmap(io::Error::from_raw_os_error(libc::ENOMEM));
    assert!(std::error::Error::source(&e).is_some());
}

/// Far more live 256 KiB stacks than mprotect guards could ever allow under
/// the default vm.max_map_count (~32K) stay within a few maps. (A million
/// took 254 slabs and 40 maps in 12 s when measured; 100,000 keep CI fast.)
#[test]
fn hundred_thousand_stacks_of_256k() {
    if guard_mode() != GuardMode::Madvise {
        eprintln!("MADV_GUARD_INSTALL unsupported; skipping");
        return;
    }
    let _serial = serial();
    let pool = StackPool::new();
    let t = std::time::Instant::now();
    let stacks: Vec<_> = (0..100_000)
        .map(|_| {
            let s = pool.alloc(256 * 1024).unwrap();
            // A goroutine touches at least its top page.
            // SAFETY: the usable part of a stack we own.
            unsafe { ptr::write_volatile((s.base.get() - 64) as *mut u8, 1) };
            s
        })
        .collect();
    let st = pool.stats();
    let lines: usize = slab_range(&pool)
        .iter()
        .map(|&(lo, hi)| maps_overlapping(lo, hi))
        .sum();
    let total = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    eprintln!(
        "100K stacks in {:?}: {} slabs, {} GiB mapped, {lines} maps for the slabs, \
         {total} maps in the process",
        t.elapsed(),
        st.slabs,
        st.mapped_bytes >> 30
    );
    assert!(st.slabs < 300, "{st:?}");
    assert!(lines <= st.slabs);
    assert!(total < max_map_count() / 2);
    assert!(pool.free_batch(stacks), "over the bound: start a scavenger");
    assert_eq!(pool.stats().free_hot, 100_000, "freeing makes no syscall");
    let t = std::time::Instant::now();
    assert!(pool.scavenge(usize::MAX), "first step: all too young");
    assert!(
        pool.scavenge(usize::MAX),
        "second step (quiet): whole slabs"
    );
    let st = pool.stats();
    eprintln!(
        "returned {} slabs, released {} stacks in {:?}",
        st.slabs_returned,
        st.free_cold,
        t.elapsed()
    );
    assert!(
        st.free_hot <= HOT_MAX_BYTES / (256 * 1024 + page()),
        "{st:?}"
    );
    // Only the slab being carved, with room left, stays.
    assert!(st.slabs <= 1, "{st:?}");
    assert_eq!(st.free_hot + st.free_cold, st.carved, "{st:?}");
}

#[test]
fn types_are_send_sync() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Stack>();
    send::<StackPool>();
    sync::<StackPool>();
    send::<StackCache>();
    send::<StackError>();
    sync::<StackError>();
}
