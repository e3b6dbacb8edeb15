//! Pacing the stack scavenger: it may use at most `SCAVENGE_PERCENT` of the
//! CPU time the runtime's procs could use, as Go's background scavenger
//! does (`mgcscavenge.go`: `scavengePercent`, 1% of the application's CPU
//! time, which it measures as wall time × GOMAXPROCS).
//!
//! # The bucket
//!
//! A token bucket of CPU time, kept across scavenger runs (one per burst),
//! so that back-to-back bursts cannot each start with a fresh allowance:
//!
//! * credit accrues at `fraction` × wall time between steps (`fraction` =
//!   1% × procs), up to one second's worth ([`CREDIT_CAP`]): a scavenger
//!   that starts after a quiet while may spend that at once;
//! * a step works while the CPU time of its thread (user and system: almost
//!   all of it is the kernel freeing pages) stays under the credit, checked
//!   before each syscall but its first ([`Step::go_on`]), so it overshoots
//!   by at most one syscall: a `madvise` run (adjacent stacks of a slab, up
//!   to a step's 8,192) or a `munmap` piece of at most `UNMAP_PIECE`.
//!   (mprotect mode unmaps unpaced: its guards count against the map
//!   budget until the slab is gone, `stack/mod.rs`);
//! * what it used comes off the credit, which may go negative (debt: the
//!   overshoot, or the trims at the end of a run, which cannot be split);
//!   the next sleep is long enough to pay the debt back
//!   ([`Pace::end`]).
//!
//! So over any window of W seconds the scavenger uses at most
//! `fraction × (W + 1 s)` of CPU time, plus one syscall's overshoot. Only
//! the scavenger's thread is counted: the per-M trims it asks for at the end
//! of a run (`ask_ms_to_trim`, 0.1–0.6 ms) run on the Ms.
//!
//! The price is time: returning a burst of 100,000 goroutines' stacks
//! takes the kernel 45–65 ms of CPU on the development box, so at 2% (two
//! procs) the memory is back about 2–3 s after the burst rather than 0.75 s
//! (`examples/burst_rss.rs`).
//!
//! The bucket itself is pure arithmetic on times passed in (unit tests
//! below drive it with made-up clocks); [`thread_cpu_ns`] reads the clock.

use std::time::Duration;

/// The scavenger's share of the procs' CPU time, in percent (Go's
/// `scavengePercent`).
pub(crate) const SCAVENGE_PERCENT: u64 = 1;

/// Credit accrues for at most this much wall time: what a scavenger that
/// starts after a long quiet while may spend at once.
pub(crate) const CREDIT_CAP: Duration = Duration::from_secs(1);

/// The CPU-time bucket (see the top of this file).
#[derive(Debug)]
pub(crate) struct Pace {
    /// CPU time the next step may use, in ns; negative: debt.
    credit: i64,
    /// Wall clock (ns, any origin) when the last step ended, or when the
    /// bucket was made.
    last: u64,
}

/// One step's allowance, from [`Pace::begin`]. (A new run submitted while
/// the previous one does its last trims may start before their debt is
/// counted: its first step then finds no credit and makes one syscall.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    /// The thread's CPU clock when the step began.
    cpu_start: u64,
    /// CPU time the step may use (ns).
    budget: u64,
}

impl Step {
    /// Whether the step may go on: the CPU time its thread used since
    /// `begin` is under the budget. Asked before each syscall but the
    /// step's first, which always runs (a step always makes progress).
    pub(crate) fn go_on(&self, cpu_now: u64) -> bool {
        cpu_now.saturating_sub(self.cpu_start) < self.budget
    }

    /// CPU time used since `begin`.
    pub(crate) fn worked(&self, cpu_now: u64) -> u64 {
        cpu_now.saturating_sub(self.cpu_start)
    }
}

/// Fraction of one core the scavenger may use with `procs` procs, in parts
/// per million.
fn fraction_ppm(procs: usize) -> u64 {
    SCAVENGE_PERCENT * 10_000 * procs.max(1) as u64
}

impl Pace {
    /// A full bucket: its first step may spend the cap (the credit is
    /// clamped to the cap of the procs of the day at each `begin`).
    pub(crate) const fn new() -> Pace {
        Pace {
            credit: i64::MAX,
            last: 0,
        }
    }

    /// A step begins at wall time `now` with the thread's CPU clock at
    /// `cpu_now`: the credit accrued since the last step (up to the cap) is
    /// the step's budget.
    pub(crate) fn begin(&mut self, now: u64, cpu_now: u64, procs: usize) -> Step {
        let idle = now.saturating_sub(self.last);
        let accrued = (idle as u128 * fraction_ppm(procs) as u128 / 1_000_000) as i64;
        self.credit = self.credit.saturating_add(accrued).min(cap(procs));
        self.last = now;
        Step {
            cpu_start: cpu_now,
            budget: self.credit.max(0) as u64,
        }
    }

    /// How long a new scavenger run should wait at wall time `now` before
    /// its first step: `period`, or longer if the last run ended in debt
    /// (its trims) not yet paid back.
    pub(crate) fn first_sleep(&self, now: u64, procs: usize, period: Duration) -> Duration {
        if self.credit >= 0 {
            return period;
        }
        let pay = self.credit.unsigned_abs() as u128 * 1_000_000 / fraction_ppm(procs) as u128;
        let paid = now.saturating_sub(self.last) as u128;
        period.max(Duration::from_nanos(
            pay.saturating_sub(paid).min(u64::MAX as u128) as u64,
        ))
    }

    /// The step ended at wall time `now` having used `worked` ns of CPU:
    /// returns how long to sleep before the next step — `period`, or longer
    /// when the step left a debt, so that the credit is back at zero when
    /// the next step begins.
    pub(crate) fn end(
        &mut self,
        worked: u64,
        now: u64,
        procs: usize,
        period: Duration,
    ) -> Duration {
        self.credit = self
            .credit
            .saturating_sub(worked.min(i64::MAX as u64) as i64);
        self.last = now;
        if self.credit >= 0 {
            return period;
        }
        let debt = self.credit.unsigned_abs() as u128;
        let pay = debt * 1_000_000 / fraction_ppm(procs) as u128;
        period.max(Duration::from_nanos(pay.min(u64::MAX as u128) as u64))
    }
}

/// One second's worth of credit.
fn cap(procs: usize) -> i64 {
    (CREDIT_CAP.as_nanos() as u64 * fraction_ppm(procs) / 1_000_000) as i64
}

/// CPU time (user + system) of the calling thread, in ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill; the clock
    // id is a constant every POSIX system we build for supports.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const PERIOD: Duration = Duration::from_millis(250);

    #[test]
    fn a_full_bucket_grants_one_seconds_worth() {
        // 2 procs: 2% of one core, 20 ms of CPU per second.
        let mut p = Pace::new();
        let s = p.begin(0, 0, 2);
        assert!(s.go_on(19 * MS));
        assert!(!s.go_on(20 * MS));
        // Credit never accrues beyond the cap, however long the idle.
        let mut p = Pace::new();
        let s = p.begin(3_600_000 * MS, 0, 2);
        assert_eq!(s.budget, 20 * MS);
    }

    #[test]
    fn a_debt_lengthens_the_next_sleep_to_pay_it() {
        let mut p = Pace::new();
        let s = p.begin(0, 0, 1);
        assert_eq!(s.budget, 10 * MS);
        // Used 30 ms (a malloc_trim that cannot be split): 20 ms of debt at
        // 1% takes 2 s to pay back.
        let sleep = p.end(30 * MS, 30 * MS, 1, PERIOD);
        assert_eq!(sleep, Duration::from_secs(2));
        // A new run that starts 0.5 s later waits the other 1.5 s.
        assert_eq!(
            p.first_sleep(530 * MS, 1, PERIOD),
            Duration::from_millis(1_500)
        );
        assert_eq!(p.first_sleep(3_000 * MS, 1, PERIOD), PERIOD);
        // After that sleep the next step starts from zero credit.
        let s = p.begin(30 * MS + 2_000 * MS, 0, 1);
        assert_eq!(s.budget, 0);
        assert!(!s.go_on(0), "no credit: only the first piece runs");
        // Within its credit a step sleeps one period.
        let mut p = Pace::new();
        let s = p.begin(0, 0, 1);
        assert_eq!(p.end(s.worked(4 * MS), 4 * MS, 1, PERIOD), PERIOD);
    }

    /// Whatever each step does (a step always runs its first piece, and
    /// overshoots by up to one piece), the CPU used in any window of wall
    /// time stays under `fraction × (window + cap)` plus one piece.
    #[test]
    fn no_window_uses_more_than_its_share() {
        for procs in [1, 2, 16] {
            let f = fraction_ppm(procs) as f64 / 1e6;
            let mut p = Pace::new();
            let mut now = 0u64;
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ procs as u64;
            // (start of the step, CPU it used)
            let mut steps: Vec<(u64, u64)> = Vec::new();
            let max_piece = 8 * MS;
            for _ in 0..2_000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let piece = 1 + seed % max_piece;
                let s = p.begin(now, 0, procs);
                // Pieces until the budget says stop (the first always runs).
                let mut used = 0;
                loop {
                    used += piece;
                    if !s.go_on(used) {
                        break;
                    }
                }
                steps.push((now, used));
                // The step's own wall time: its CPU time (a loaded box
                // only makes it longer, which is in the bucket's favour).
                now += used;
                let sleep = p.end(s.worked(used), now, procs, PERIOD);
                now += sleep.as_nanos() as u64;
            }
            for window in [250 * MS, 1_000 * MS, 5_000 * MS, 60_000 * MS] {
                let mut j = 0;
                let mut sum = 0u64;
                for i in 0..steps.len() {
                    while j < steps.len() && steps[j].0 < steps[i].0 + window {
                        sum += steps[j].1;
                        j += 1;
                    }
                    let bound =
                        f * (window + CREDIT_CAP.as_nanos() as u64) as f64 + max_piece as f64;
                    assert!(
                        (sum as f64) <= bound,
                        "procs {procs}: {sum} ns of CPU in a {window} ns window, bound {bound}"
                    );
                    sum -= steps[i].1;
                }
            }
        }
    }
}
