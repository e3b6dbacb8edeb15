//! A pool's counters and the histogram of how long blocked submitters waited.
//!
//! Relaxed atomics bumped by the workers and submitters (a statistic: no
//! decision reads them). Only a submit that had to queue records a wait, so the
//! common path adds nothing; the submits that did not wait count as zero-wait
//! samples when the percentiles are read.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Sub-buckets per power of two (2 bits: ≤ 25% error on a percentile).
const SUB_BITS: u32 = 2;
const SUB: usize = 1 << SUB_BITS;
/// Buckets: values below `SUB` ns exactly, then `SUB` per power of two.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros(); // >= SUB_BITS
    let mant = ((ns >> (e - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (e - SUB_BITS) as usize * SUB + mant
}

/// The largest value that falls in bucket `i` (what a percentile reports).
fn bucket_max(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let e = ((i - SUB) / SUB) as u32 + SUB_BITS;
    let mant = ((i - SUB) % SUB) as u64;
    let lo = (SUB as u64 + mant) << (e - SUB_BITS);
    lo + ((1u64 << (e - SUB_BITS)) - 1)
}

pub(crate) struct Counters {
    pub(crate) submitted: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) timed_out: AtomicU64,
    pub(crate) purged: AtomicU64,
    hist: Box<[AtomicU64]>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            purged: AtomicU64::new(0),
            hist: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Counters {
    /// A submitter that queued got its worker after `d`.
    pub(crate) fn record_wait(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.hist[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    /// The wait time below which a fraction `q` of all submits got their worker.
    fn percentile(&self, counts: &[u64], total: u64, waited: u64, q: f64) -> Duration {
        if total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let zero = total.saturating_sub(waited);
        if rank <= zero {
            return Duration::ZERO;
        }
        let mut seen = zero;
        for (i, &c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(bucket_max(i));
            }
        }
        Duration::from_nanos(bucket_max(BUCKETS - 1))
    }

    pub(crate) fn snapshot(&self, running: usize, waiting: usize, idle: usize) -> PoolStats {
        let counts: Vec<u64> = self.hist.iter().map(|c| c.load(Relaxed)).collect();
        let waited: u64 = counts.iter().sum();
        let submitted = self.submitted.load(Relaxed);
        // Every submit that got a worker, waiting or not.
        let total = submitted.max(waited);
        PoolStats {
            submitted,
            completed: self.completed.load(Relaxed),
            panicked: self.panicked.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            timed_out: self.timed_out.load(Relaxed),
            purged: self.purged.load(Relaxed),
            waited,
            wait_p50: self.percentile(&counts, total, waited, 0.50),
            wait_p99: self.percentile(&counts, total, waited, 0.99),
            running,
            waiting,
            idle,
        }
    }
}

/// A snapshot of a pool's counters ([`Pool::stats`](super::Pool::stats)).
///
/// Counts are since the pool was built (a reboot keeps them).
///
/// ```
/// let pool = gosched::pool::Pool::new(0).unwrap(); // unlimited: no submit waits
/// for _ in 0..5 {
///     pool.submit(|| {}).unwrap();
/// }
/// pool.wait();
/// let s = pool.stats();
/// assert_eq!((s.submitted, s.completed, s.panicked), (5, 5, 0));
/// assert_eq!((s.waited, s.wait_p99), (0, std::time::Duration::ZERO));
/// assert_eq!(s.waiting, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Tasks handed to a worker.
    pub submitted: u64,
    /// Tasks that ran to the end, or panicked.
    pub completed: u64,
    /// Tasks that panicked (included in `completed`).
    pub panicked: u64,
    /// Submits refused: the pool was full and non-blocking (or `max_blocking`
    /// submitters already waited), or closed.
    pub rejected: u64,
    /// Tasks not run because their [`CancelToken`](super::CancelToken) fired
    /// (while the submitter waited, or before a worker started them).
    pub cancelled: u64,
    /// Submits that gave up after their timeout.
    pub timed_out: u64,
    /// Workers stopped by the purge after idling past the expiry.
    pub purged: u64,
    /// Submits that had to wait for a worker.
    pub waited: u64,
    /// Median time a submit waited for a worker (zero for the ones that did
    /// not wait); within 25%.
    pub wait_p50: Duration,
    /// 99th percentile of the same; within 25%.
    pub wait_p99: Duration,
    /// Live workers, idle or busy (ants' `Running`).
    pub running: usize,
    /// Submitters blocked now.
    pub waiting: usize,
    /// Idle workers now.
    pub idle: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for ns in [0u64, 1, 3, 4, 5, 7, 8, 100, 1_000, 1 << 40, u64::MAX] {
            let b = bucket_of(ns);
            assert!(b < BUCKETS);
            assert!(b >= last, "buckets grow with the value");
            assert!(bucket_max(b) >= ns, "bucket {b} holds {ns}");
            if b > 0 {
                assert!(bucket_max(b - 1) < ns, "{ns} is not in a lower bucket");
            }
            last = b;
        }
    }

    #[test]
    fn percentiles_count_the_submits_that_did_not_wait() {
        let c = Counters::default();
        c.submitted.store(100, Relaxed);
        for _ in 0..10 {
            c.record_wait(Duration::from_millis(8));
        }
        let s = c.snapshot(0, 0, 0);
        assert_eq!(s.waited, 10);
        assert_eq!(s.wait_p50, Duration::ZERO, "90 of 100 did not wait");
        let p99 = s.wait_p99;
        assert!(
            p99 >= Duration::from_millis(8) && p99 <= Duration::from_millis(10),
            "p99 {p99:?} is the 8 ms bucket"
        );
    }
}
