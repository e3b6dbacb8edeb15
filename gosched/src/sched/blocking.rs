//! The blocking pool: plain OS threads that run the blocking calls of async
//! tasks (`gosched::syscall_async`, `coro/syscall.rs`, tokio's
//! `spawn_blocking`), which must not block their M: the task awaits the
//! result while its M goes on with other work. (A goroutine's blocking call
//! runs in place instead, with its P handed off: `sched/syscall.rs`.)
//!
//! # Protocol
//!
//! One `Mutex<State>` and one `Condvar`. `State` counts the pool's threads,
//! the threads waiting for work (`waiting`) and the wake-ups handed to them
//! and not yet taken (`claims`). A submitter pushes the job, then:
//!
//! * if `waiting > claims` (a thread waits that nobody has claimed), it claims
//!   one (`claims += 1`) and notifies once;
//! * else, below `MAX_THREADS`, it starts a thread;
//! * else the job waits in the queue for the next thread that finishes one.
//!
//! A waiting thread that wakes takes a claim if there is one and runs queued
//! jobs until the queue is empty; one that times out (`keep_alive` without a
//! claim) exits, so the pool shrinks back after a burst. Counting claims
//! instead of trusting `notify_one` to find a distinct thread keeps two
//! submits racing one waiter from leaving the second job queued behind a
//! slow first one. Jobs never unwind into the pool (callers catch panics).
//!
//! `shutdown` (runtime teardown) wakes every waiter; threads exit once the
//! queue is empty. Jobs still queued or running are not dropped: they run to
//! their end, and their results are dropped with the futures awaiting them.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::status;
use super::timers::now_ns;
use crate::loom::lock;
use crate::stack::pace::thread_cpu_ns;

/// A job: runs the call and reports the result to its waiter itself.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// Most threads the pool runs at once; further jobs queue (tokio's default
/// bound on blocking threads is the same).
const MAX_THREADS: usize = 512;

pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    work: Condvar,
    name: String,
    /// How long an idle pool thread waits for work before it exits (the
    /// runtime's `thread_keep_alive`; `None`: never).
    keep_alive: Option<Duration>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    threads: usize,
    waiting: usize,
    claims: usize,
    shutdown: bool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and nothing panics under it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl BlockingPool {
    /// A pool whose threads are named `<name>-blocking` and exit after
    /// `keep_alive` without work.
    pub(crate) fn new(name: &str, keep_alive: Option<Duration>) -> Self {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                name: format!("{name}-blocking"),
                keep_alive,
            }),
        }
    }

    /// Runs `job` on a pool thread, as soon as one is free.
    ///
    /// # Panics
    /// When a new thread is needed and the OS refuses to start one (the job is
    /// dropped unrun then).
    pub(crate) fn submit(&self, job: Job) {
        if let Err(e) = self.try_submit(job) {
            panic!(
                "gosched: cannot start a thread for a blocking call ({e}); \
                 the process is out of threads or memory"
            );
        }
    }

    /// `submit`, or the OS's refusal to start a needed thread (the job is
    /// dropped then, not run).
    pub(crate) fn try_submit(&self, job: Job) -> std::io::Result<()> {
        let mut st = self.inner.lock();
        if st.waiting > st.claims {
            st.claims += 1;
            st.queue.push_back(job);
            drop(st);
            self.inner.work.notify_one();
            return Ok(());
        }
        if st.threads >= MAX_THREADS {
            st.queue.push_back(job);
            return Ok(());
        }
        st.threads += 1;
        drop(st);
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name(self.inner.name.clone())
            .spawn(move || inner.run(Some(job)));
        if let Err(e) = spawned {
            self.inner.lock().threads -= 1;
            return Err(e);
        }
        Ok(())
    }

    /// Threads the pool runs now.
    #[allow(dead_code)] // read by tests and, later, the runtime's stats
    pub(crate) fn threads(&self) -> usize {
        self.inner.lock().threads
    }

    /// Jobs running or queued, and the pool's threads (stats).
    pub(crate) fn busy_and_threads(&self) -> (usize, usize) {
        let st = self.inner.lock();
        (
            st.threads.saturating_sub(st.waiting) + st.queue.len(),
            st.threads,
        )
    }

    /// The pool's threads if every one of them waits for work and none is
    /// queued (deadlock detection: nothing here can wake anyone); `None`
    /// while a job runs or waits.
    pub(crate) fn all_idle(&self) -> Option<usize> {
        let st = self.inner.lock();
        (st.queue.is_empty() && st.waiting == st.threads).then_some(st.threads)
    }

    /// Teardown: idle threads exit; busy ones exit when the queue is empty.
    pub(crate) fn shutdown(&self) {
        self.inner.lock().shutdown = true;
        self.inner.work.notify_all();
    }
}

impl Inner {
    /// A pool thread: run `first`, then queued jobs; wait for more; exit after
    /// `keep_alive` without work or at shutdown.
    fn run(&self, first: Option<Job>) {
        if let Some(job) = first {
            job();
        }
        let mut st = self.lock();
        loop {
            if let Some(job) = st.queue.pop_front() {
                drop(st);
                job();
                st = self.lock();
                continue;
            }
            if st.shutdown {
                break;
            }
            st.waiting += 1;
            let (next, timeout) = self
                .work
                .wait_timeout_while(st, self.keep_alive.unwrap_or(Duration::MAX), |s| {
                    s.claims == 0 && !s.shutdown
                })
                .unwrap_or_else(|e| e.into_inner());
            st = next;
            st.waiting -= 1;
            if st.claims > 0 {
                st.claims -= 1;
            } else if timeout.timed_out() && st.queue.is_empty() {
                break;
            }
        }
        st.threads -= 1;
    }
}

/// How often the stack scavenger takes a step, and how many stacks one step
/// releases at most with `MADV_DONTNEED` (`StackPool::scavenge_within`).
/// Once a burst is over (a quiet step, the second after it ends), its slabs
/// go back whole; while bursts go on, up to 8,192 stacks a step, in one
/// `madvise` per run of adjacent stacks. Each step also stops when its CPU
/// budget is spent, and a step that overran sleeps longer (`stack/pace.rs`:
/// 1% of the procs' CPU time, as Go's scavenger): 100,000 freed stacks are
/// back 2–3 s after the burst with 2 procs.
const SCAVENGE_PERIOD: Duration = Duration::from_millis(250);
const SCAVENGE_BATCH: usize = 8192;

impl super::Shared {
    /// Start the stack scavenger (`stack/scavenge.rs`) on a thread
    /// of the blocking pool: off the spawn and exit paths, it returns the
    /// pages of stacks that stayed free for a while, a step per period,
    /// until no hot list is over its bound; at a quiet step it first empties
    /// the idle Ps' stack caches. Holds only a `Weak` to the runtime between
    /// steps.
    pub(crate) fn scavenge_stacks_soon(self: &Arc<Self>) {
        let runtime = Arc::downgrade(self);
        let first = self
            .stacks
            .pace()
            .first_sleep(now_ns(), self.nprocs(), SCAVENGE_PERIOD);
        let started = self.blocking.try_submit(Box::new(move || {
            let mut sleep = first;
            loop {
                std::thread::sleep(sleep);
                let Some(shared) = runtime.upgrade() else {
                    return;
                };
                let procs = shared.nprocs();
                let step = shared.stacks.pace().begin(now_ns(), thread_cpu_ns(), procs);
                if shared.stacks.quiet() {
                    shared.flush_idle_stack_caches();
                }
                let mut go_on = || step.go_on(thread_cpu_ns());
                let more = shared.stacks.scavenge_within(SCAVENGE_BATCH, &mut go_on);
                if !more {
                    // Not split: counted as the step's work (a debt the
                    // next run's first sleep pays).
                    super::alloc::trim_depot();
                    trim_heap();
                    shared.ask_ms_to_trim();
                }
                let worked = step.worked(thread_cpu_ns());
                sleep = shared
                    .stacks
                    .pace()
                    .end(worked, now_ns(), procs, SCAVENGE_PERIOD);
                if !more {
                    return;
                }
            }
        }));
        if started.is_err() {
            // Out of threads or memory: no scavenger now (the stacks stay
            // resident); a later free over the bound asks again.
            self.stacks.scavenger_not_started();
        }
    }

    /// The scavenger's run is over: ask every M to trim what its thread
    /// keeps of the burst (`MachineCtx::trim_if_asked`), and wake the idle
    /// ones (on the idle list, or the timer sleeper) to do it now: one
    /// futex wake per idle M per burst. An M that runs does it when it next
    /// parks.
    fn ask_ms_to_trim(&self) {
        self.heap_trims
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.wake_idle_ms();
    }

    /// The scavenger, at a quiet step (no stack left the pool for a period):
    /// empties the stack caches of the idle Ps into the pool, so that the
    /// slabs their stacks pin can go back to the OS in this step (see
    /// `StackCache::flush_idle`). Nothing empties the cache of a P that is
    /// idle otherwise: it would hold up to 32 stacks per size class, and
    /// their slabs, until the P runs again.
    fn flush_idle_stack_caches(&self) {
        // Under the scheduler lock an IDLE P stays IDLE: it leaves the idle
        // list (`pidleget`, `pidle_take_from`) or is stored IDLE
        // (`pidleput`, `drop_p_for_exit`) only under this lock.
        let _s = lock(&self.sched);
        let flush = self.stacks.lock_cache_flush();
        // Teardown drains the caches without the scheduler lock, after
        // `begin_shutdown` set the flag, under `lock_cache_flush`: a flush
        // that takes that lock after a drain sees the flag and stops; one
        // that took it before finishes before the drain starts.
        if self.shutdown.load(SeqCst) {
            return;
        }
        for p in self.procs.iter() {
            if p.status.load() != status::IDLE {
                continue;
            }
            // SAFETY: an IDLE P is held by nobody and stays IDLE while we
            // hold the scheduler lock (above), so its local state is ours
            // until the lock is released, as for `kill_p`; the M that gave
            // it up wrote that state before its Release store of IDLE, which
            // our Acquire load saw. Teardown, the one user of idle Ps' caches
            // without the scheduler lock, is excluded by `flush` (above).
            unsafe { p.local().stacks.flush_idle(&self.stacks, &flush) };
        }
    }
}

/// After a burst, the tasks' and channels' memory is free in the C heap but
/// not returned to the OS (glibc only gives back the top of its heap): ask
/// it to, once, when a scavenger run ends. `malloc_trim` walks the arenas
/// under their locks (8–21 ms after a burst of 100,000 goroutines, most of
/// it the kernel freeing pages), so it is not done more often. It does not
/// trim the top chunk of a thread arena (glibc 2.36): small blocks freed
/// into an M's arena stay resident until that arena frees a larger block
/// (`stack/scavenge.rs`). A no-op with other C libraries; with a
/// custom Rust global allocator it trims only what went through glibc.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Give back the free top of this thread's glibc arena. `malloc_trim`
/// trims only the main arena's top (glibc 2.36), and a thread arena trims
/// its top only when it frees a block of at least 64 KiB
/// (`FASTBIN_CONSOLIDATION_THRESHOLD`): that free first merges the arena's
/// fastbins into the top chunk, then shrinks the heap if the top is over
/// the trim threshold. So: allocate such a block below the mmap threshold
/// (128 KiB unless glibc raised it), which comes from this thread's arena,
/// and free it. The small blocks a burst freed into an M's arena (each
/// parked goroutine's 88-byte channel waiter) stayed resident for good
/// otherwise: 7.6-9.0 MiB against 2.4-2.7 before the burst in 5 of 19
/// runs of `examples/burst_rss.rs`. A no-op with other C libraries.
pub(super) fn trim_thread_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc` and `free` of a block we own; the volatile write
    // (inside it, when it is not null) keeps the pair from being removed
    // as unused.
    unsafe {
        let block = libc::malloc(96 * 1024).cast::<u8>();
        if !block.is_null() {
            std::ptr::write_volatile(block, 0);
            libc::free(block.cast());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Two slow jobs submitted while one thread waits run at the same time:
    /// the second is not queued behind the first (the claim count).
    #[test]
    fn racing_submits_each_get_a_thread() {
        let pool = BlockingPool::new("t", Some(Duration::from_secs(10)));
        let (tx, rx) = mpsc::channel();
        let t = tx.clone();
        pool.submit(Box::new(move || t.send(()).unwrap()));
        rx.recv().unwrap();
        // The first thread is now (or soon) waiting; two jobs that each wait
        // for the other can only finish if they run on two threads.
        let gate = Arc::new(std::sync::Barrier::new(2));
        for _ in 0..2 {
            let (g, t) = (gate.clone(), tx.clone());
            pool.submit(Box::new(move || {
                g.wait();
                t.send(()).unwrap();
            }));
        }
        rx.recv_timeout(Duration::from_secs(10)).expect("job 1");
        rx.recv_timeout(Duration::from_secs(10)).expect("job 2");
        // The first thread, or up to two new ones if it was not waiting yet.
        assert!(pool.threads() <= 3);
        pool.shutdown();
    }

    /// Many jobs from many threads all run; the pool never exceeds its bound.
    #[test]
    fn every_job_runs() {
        let pool = Arc::new(BlockingPool::new("t", Some(Duration::from_secs(10))));
        let (tx, rx) = mpsc::channel();
        let submitters: Vec<_> = (0..4)
            .map(|_| {
                let (pool, tx) = (pool.clone(), tx.clone());
                std::thread::spawn(move || {
                    for i in 0..500u64 {
                        let tx = tx.clone();
                        pool.submit(Box::new(move || tx.send(i).unwrap()));
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        drop(tx);
        let sum: u64 = rx.iter().sum();
        assert_eq!(sum, 4 * (0..500).sum::<u64>());
        assert!(pool.threads() <= MAX_THREADS);
        pool.shutdown();
    }
}
