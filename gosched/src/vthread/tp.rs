//! The thread pointer: read and written without touching thread-local storage.
//!
//! x86-64 only for now: the thread pointer is the FS base, and the TCB's first
//! word points to itself (both psABI variant II and glibc's `tcbhead_t`), so a
//! load of `%fs:0` reads it. It is written with `wrfsbase` where the kernel
//! enables FSGSBASE (`HWCAP2_FSGSBASE`), else with `arch_prctl(ARCH_SET_FS)`.

use std::arch::asm;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Whether `wrfsbase` may be used (set once by the layout probe).
static FSGSBASE: AtomicBool = AtomicBool::new(false);

const HWCAP2_FSGSBASE: u64 = 1 << 1;

/// Probe the CPU and kernel once (the layout probe calls it).
pub(super) fn probe() {
    // SAFETY: getauxval has no preconditions.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
    FSGSBASE.store(hwcap2 & HWCAP2_FSGSBASE != 0, Relaxed);
}

/// The thread pointer now installed on this CPU thread.
///
/// Not `pure`: the value changes when `set` runs, and `set`'s asm clobbers
/// memory, so the compiler never moves this load across it.
#[inline(always)]
pub(super) fn get() -> usize {
    let tp: usize;
    // SAFETY: `%fs:0` is the TCB's self pointer on every thread of the process
    // (glibc's and ours, `Area::init` writes it).
    unsafe {
        asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    tp
}

/// Install `tp` as this thread's thread pointer.
///
/// # Safety
/// `tp` must point at a TCB whose self pointers are `tp` and whose thread's
/// blocks lie below it as the layout says (`Area::init`, or a thread's own).
/// The caller must not use a thread-local address computed before the call
/// after it (the caller, `switch`, is `#[inline(never)]` and touches none).
#[inline(always)]
pub(super) unsafe fn set(tp: usize) {
    if FSGSBASE.load(Relaxed) {
        // SAFETY: FSGSBASE is enabled (HWCAP2); the caller vouches for `tp`.
        unsafe { asm!("wrfsbase {}", in(reg) tp, options(nostack, preserves_flags)) };
    } else {
        // SAFETY: as above.
        unsafe { set_slow(tp) };
    }
}

/// `set` without FSGSBASE: the kernel writes the FS base (a syscall).
///
/// # Safety
/// As `set`.
#[cold]
#[inline(never)]
unsafe fn set_slow(tp: usize) {
    // SAFETY: ARCH_SET_FS only changes this thread's FS base; the caller
    // vouches for `tp`. It cannot fail for a canonical address.
    let r = unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1002, tp) };
    if r != 0 {
        // No panic here: the thread pointer may be half-way between two areas.
        std::process::abort();
    }
}
