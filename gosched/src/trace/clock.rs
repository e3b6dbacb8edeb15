//! Event timestamps: the TSC on x86-64 where the CPU says it is invariant
//! (`rdtsc`: ~10 ns here, against ~23 ns for `clock_gettime` through the
//! vDSO), else `CLOCK_MONOTONIC` nanoseconds. Ticks become nanoseconds when a
//! trace is written, along the line through two (ticks, ns) points: one read
//! when the session starts, one when it is copied out.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

const UNDECIDED: u8 = 0;
const TSC: u8 = 1;
const MONO: u8 = 2;

static SOURCE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Choose the source (once; before the first session records).
pub(crate) fn init() {
    if SOURCE.load(Relaxed) == UNDECIDED {
        SOURCE.store(if invariant_tsc() { TSC } else { MONO }, Relaxed);
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU and has no side effects.
    let (max_ext, power) = unsafe { (__cpuid(0x8000_0000).eax, __cpuid(0x8000_0007).edx) };
    // "Invariant TSC" (Intel SDM vol. 3, 17.17.1; AMD APM): constant rate,
    // counting in every C- and P-state, in step across cores.
    max_ext >= 0x8000_0007 && power & (1 << 8) != 0
}

#[cfg(any(not(target_arch = "x86_64"), miri))]
fn invariant_tsc() -> bool {
    false
}

/// The current tick.
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if SOURCE.load(Relaxed) == TSC {
        #[allow(unused_unsafe)]
        // SAFETY: RDTSC is available on every x86-64 CPU (`init` chose it
        // only where it is invariant).
        return unsafe { std::arch::x86_64::_rdtsc() };
    }
    mono_ns()
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A tick and the time it stands for.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Point {
    pub(crate) ticks: u64,
    pub(crate) ns: u64,
}

impl Point {
    pub(crate) fn now() -> Point {
        Point {
            ticks: ticks(),
            ns: mono_ns(),
        }
    }
}

/// Below this, two points are too close for a reliable rate.
pub(crate) const MIN_SPAN_NS: u64 = 200_000;

/// Nanoseconds per tick along `a` → `b` (1 for the nanosecond source).
pub(crate) fn scale(a: Point, b: Point) -> f64 {
    if SOURCE.load(Relaxed) != TSC || b.ticks <= a.ticks || b.ns <= a.ns {
        return 1.0;
    }
    (b.ns - a.ns) as f64 / (b.ticks - a.ticks) as f64
}

/// Ticks in `ns` nanoseconds at `scale`.
pub(crate) fn ticks_in(ns: u64, scale: f64) -> u64 {
    (ns as f64 / scale) as u64
}
