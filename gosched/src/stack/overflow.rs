//! Goroutine stack-overflow detection: the slab registry, the SIGSEGV/SIGBUS
//! handler, per-thread signal stacks and the "current goroutine" slot.
//!
//! A goroutine that overflows its stack runs into the guard page below it
//! (see `stack/mod.rs`) and the kernel raises SIGSEGV. Without help that is a bare
//! "Segmentation fault"; Go prints `goroutine stack exceeds limit` instead.
//! Here the handler recognises the guard page and prints
//!
//! ```text
//! goroutine stack overflow: goroutine 42 "deep" overflowed its 65536-byte stack
//!   (fault address 0x7f…, guard page 0x7f…-0x7f…, stack 0x7f…-0x7f…)
//! increase the stack size: Go::new().stack_size(n) …, or Builder::stack_size(n) …
//! ```
//!
//! then aborts. Every other fault goes to the handler that was installed
//! before ours (usually Rust std's, which reports overflows of thread stacks).
//!
//! # Pieces and who writes what
//!
//! * **Slab registry** — a fixed array of [`REGISTRY_SLOTS`] entries
//!   `[start, end), stride, guard` written by the stack pool when it maps a
//!   slab or gives one back (under the pool lock, before `munmap`) or
//!   unmaps one in the pool's `Drop`, and
//!   read lock-free by the handler. A slot
//!   is claimed with a CAS on `claimed`; its fields are published through a
//!   per-slot sequence lock (`seq` odd while written) so that a reader never
//!   trusts a half-written entry. When the array is full, registration
//!   returns `None`: the guard still works, and the handler falls back to a
//!   heuristic (a fault within 64 KiB of the interrupted stack pointer while a
//!   goroutine is current is reported as a probable overflow, with the size
//!   from `CurrentGoroutine::stack_size`). The same heuristic covers a
//!   goroutine running on a stack that is not from a pool.
//! * **Current goroutine** — a `const`-initialised thread-local
//!   `Cell<*const CurrentGoroutine>` without destructor, so reading it from a
//!   signal handler touches no lazy initialisation. The scheduler sets it
//!   before resuming a coroutine and clears it after; only the owning thread
//!   writes it, and the handler runs on that same thread.
//! * **Previous actions** — saved once by [`install_overflow_handler`] (under
//!   a `Once`) *before* our handler is installed, in atomics the handler reads.
//! * **Signal stack** — a handler for an overflowed stack cannot run on that
//!   stack, so the handler is installed with `SA_ONSTACK` and every scheduler
//!   thread calls [`ensure_thread_altstack`]: when the thread has no
//!   alternate signal stack, or one smaller than 16 KiB (std gives its threads
//!   `SIGSTKSZ` = 8 KiB), it gets a 64 KiB one with a guard page below it,
//!   freed by a thread-local destructor at thread exit.
//!
//! # Why the handler is safe
//!
//! It only reads atomics, the thread-local cell, and the `CurrentGoroutine`
//! the scheduler promised to keep alive while it is current; it formats into a
//! stack buffer, writes with `write(2)` and calls `abort(3)` or `sigaction(2)`
//! — all async-signal-safe. It allocates nothing and takes no lock.

use std::cell::Cell;
use std::mem;
use std::ptr;
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use super::{guard_mode, page_size, GuardMode, MADV_GUARD_INSTALL};

/// Slabs the registry can describe. One slab holds up to 1 GiB of stacks, so
/// 4096 entries cover far more than any realistic process.
pub(crate) const REGISTRY_SLOTS: usize = 4096;

/// Size of an alternate signal stack made by [`ensure_thread_altstack`].
const ALTSTACK_SIZE: usize = 64 * 1024;
/// An existing alternate signal stack at least this large is kept.
const ALTSTACK_MIN_EXISTING: usize = 16 * 1024;

/// Without a registered slab: how close to the stack pointer a fault must be
/// to be reported as a (probable) overflow.
const NEAR_SP: usize = 64 * 1024;

/// The goroutine running on this thread, for the overflow message.
pub(crate) struct CurrentGoroutine {
    pub(crate) id: u64,
    pub(crate) name: Option<Arc<str>>,
    /// Usable stack bytes (used when the slab is not registered).
    pub(crate) stack_size: usize,
}

thread_local! {
    static CURRENT: Cell<*const CurrentGoroutine> = const { Cell::new(ptr::null()) };
}

/// Records the goroutine about to run on this thread (null: none).
///
/// The scheduler calls it before every coroutine resume and with null after.
/// `g` must stay valid until it is replaced: the signal handler reads it.
pub(crate) fn set_current(g: *const CurrentGoroutine) {
    CURRENT.with(|c| c.set(g));
    // The handler runs on this thread: keep the store before the switch.
    compiler_fence(Ordering::SeqCst);
}

fn current() -> *const CurrentGoroutine {
    CURRENT.try_with(|c| c.get()).unwrap_or(ptr::null())
}

// ---------------------------------------------------------------------------
// Slab registry

struct Entry {
    /// Owned by one registration (writer exclusion).
    claimed: AtomicBool,
    /// Sequence lock: odd while the fields below are being written.
    seq: AtomicUsize,
    start: AtomicUsize,
    /// 0: empty.
    end: AtomicUsize,
    stride: AtomicUsize,
    guard: AtomicUsize,
}

impl Entry {
    const fn new() -> Entry {
        Entry {
            claimed: AtomicBool::new(false),
            seq: AtomicUsize::new(0),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            stride: AtomicUsize::new(0),
            guard: AtomicUsize::new(0),
        }
    }

    fn write(&self, start: usize, end: usize, stride: usize, guard: usize) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.stride.store(stride, Ordering::Relaxed);
        self.guard.store(guard, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

struct Registry<const N: usize> {
    entries: [Entry; N],
    /// Slots ever claimed are all below this.
    high: AtomicUsize,
}

/// A slab registered for the overflow handler; give it back with
/// [`unregister_slab`] before unmapping the slab.
#[derive(Debug)]
pub(crate) struct SlabRegistration {
    slot: usize,
}

/// Where a fault hit a guard page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GuardHit {
    pub(crate) guard_start: usize,
    pub(crate) guard_end: usize,
    /// Usable bytes of the stack above the guard.
    pub(crate) usable: usize,
    /// Exclusive top of that stack.
    pub(crate) stack_base: usize,
}

impl<const N: usize> Registry<N> {
    const fn new() -> Self {
        Registry {
            entries: [const { Entry::new() }; N],
            high: AtomicUsize::new(0),
        }
    }

    fn register(
        &self,
        start: usize,
        end: usize,
        stride: usize,
        guard: usize,
    ) -> Option<SlabRegistration> {
        debug_assert!(start < end && guard < stride);
        for (slot, e) in self.entries.iter().enumerate() {
            if e.claimed
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                e.write(start, end, stride, guard);
                self.high.fetch_max(slot + 1, Ordering::Release);
                return Some(SlabRegistration { slot });
            }
        }
        None
    }

    fn unregister(&self, reg: SlabRegistration) {
        let e = &self.entries[reg.slot];
        e.write(0, 0, 0, 0);
        e.claimed.store(false, Ordering::Release);
    }

    /// Async-signal-safe: atomics only.
    fn lookup(&self, addr: usize) -> Option<GuardHit> {
        let high = self.high.load(Ordering::Acquire).min(N);
        for e in &self.entries[..high] {
            let s1 = e.seq.load(Ordering::Acquire);
            if s1 & 1 != 0 {
                continue; // being written: the slab has no stack out
            }
            let start = e.start.load(Ordering::Relaxed);
            let end = e.end.load(Ordering::Relaxed);
            let stride = e.stride.load(Ordering::Relaxed);
            let guard = e.guard.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if e.seq.load(Ordering::Relaxed) != s1 || end == 0 || stride == 0 {
                continue;
            }
            if addr < start || addr >= end {
                continue;
            }
            let guard_start = addr - (addr - start) % stride;
            if addr - guard_start >= guard {
                return None; // inside a slab but not in a guard page
            }
            return Some(GuardHit {
                guard_start,
                guard_end: guard_start + guard,
                usable: stride - guard,
                stack_base: guard_start + stride,
            });
        }
        None
    }
}

static REGISTRY: Registry<REGISTRY_SLOTS> = Registry::new();

/// Registers the slab `[start, end)` made of stacks `[guard][usable]` of
/// `stride` bytes. `None` when the registry is full (the guards still work).
pub(crate) fn register_slab(
    start: usize,
    end: usize,
    stride: usize,
    guard: usize,
) -> Option<SlabRegistration> {
    REGISTRY.register(start, end, stride, guard)
}

/// Removes a slab from the registry (before it is unmapped).
pub(crate) fn unregister_slab(reg: SlabRegistration) {
    REGISTRY.unregister(reg)
}

/// The guard page of a registered slab that `addr` lies in, if any.
/// Async-signal-safe.
pub(crate) fn lookup_guard(addr: usize) -> Option<GuardHit> {
    REGISTRY.lookup(addr)
}

// ---------------------------------------------------------------------------
// The handler

/// The action that was installed before ours, for chaining.
struct PrevAction {
    handler: AtomicUsize,
    flags: AtomicUsize,
}

static PREV_SEGV: PrevAction = PrevAction {
    handler: AtomicUsize::new(libc::SIG_DFL),
    flags: AtomicUsize::new(0),
};
static PREV_BUS: PrevAction = PrevAction {
    handler: AtomicUsize::new(libc::SIG_DFL),
    flags: AtomicUsize::new(0),
};

/// Installs the SIGSEGV and SIGBUS handler (once per process). Faults that
/// are not in a goroutine guard page go to the previously installed action.
pub(crate) fn install_overflow_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (sig, prev) in [(libc::SIGSEGV, &PREV_SEGV), (libc::SIGBUS, &PREV_BUS)] {
            // SAFETY: sigaction with a null new action only reads the current
            // one into `old`, a zeroed (valid) struct of the right type.
            let old = unsafe {
                let mut old: libc::sigaction = mem::zeroed();
                libc::sigaction(sig, ptr::null(), &mut old);
                old
            };
            // Saved before ours is installed, so the handler never sees an
            // unset previous action.
            prev.flags.store(old.sa_flags as usize, Ordering::Relaxed);
            prev.handler.store(old.sa_sigaction, Ordering::Release);

            // SAFETY: a zeroed sigaction is a valid value; the fields are
            // set below. `handle_fault` has the SA_SIGINFO signature and is
            // async-signal-safe (see the top of this file).
            let mut new: libc::sigaction = unsafe { mem::zeroed() };
            new.sa_sigaction = handle_fault as extern "C" fn(_, _, _) as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: initialises the mask of our own struct; then installs
            // the action. Only this Once writes the SIGSEGV/SIGBUS actions.
            unsafe {
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(sig, &new, ptr::null_mut());
            }
        }
    });
}

extern "C" fn handle_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // `si_addr` is meaningful for SIGSEGV/SIGBUS with a positive si_code
    // (kernel-generated), which is checked before it is used.
    let (code, addr) = unsafe {
        if info.is_null() {
            (0, 0)
        } else {
            ((*info).si_code, (*info).si_addr() as usize)
        }
    };
    if code > 0 {
        if let Some(hit) = lookup_guard(addr) {
            report(addr, Some(hit), current());
            // SAFETY: abort is async-signal-safe and does not return.
            unsafe { libc::abort() };
        }
        let g = current();
        if !g.is_null() {
            if let Some(sp) = context_sp(ctx) {
                if addr.abs_diff(sp) <= NEAR_SP {
                    report(addr, None, g);
                    // SAFETY: as above.
                    unsafe { libc::abort() };
                }
            }
        }
    }
    chain(sig, code, info, ctx);
}

/// Hands a fault that is not ours to the previous action.
fn chain(sig: libc::c_int, code: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = if sig == libc::SIGBUS {
        &PREV_BUS
    } else {
        &PREV_SEGV
    };
    let handler = prev.handler.load(Ordering::Acquire);
    let flags = prev.flags.load(Ordering::Relaxed) as libc::c_int;
    if handler == libc::SIG_IGN && code <= 0 {
        return; // a sent (not kernel-generated) signal that was ignored
    }
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: sigaction is async-signal-safe; a zeroed struct with
        // SIG_DFL is a valid action.
        unsafe {
            let mut dfl: libc::sigaction = mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut dfl.sa_mask);
            libc::sigaction(sig, &dfl, ptr::null_mut());
            if code <= 0 {
                // Sent by kill(2): it will not happen again on return, so
                // send it again; it is blocked until this handler returns.
                libc::raise(sig);
            }
        }
        // Returning re-executes the faulting instruction, which now kills
        // the process with the default action (and a core dump if enabled).
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous action was installed with SA_SIGINFO, so
        // `handler` is a function with this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { mem::transmute::<usize, _>(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the handler is a plain `fn(int)`.
        let f: extern "C" fn(libc::c_int) = unsafe { mem::transmute::<usize, _>(handler) };
        f(sig);
    }
}

/// The interrupted stack pointer.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn context_sp(ctx: *mut libc::c_void) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: for an SA_SIGINFO handler the third argument is a ucontext_t.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    Some(uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize)
}

/// The interrupted stack pointer.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
fn context_sp(ctx: *mut libc::c_void) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: for an SA_SIGINFO handler the third argument is a ucontext_t.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    Some(uc.uc_mcontext.sp as usize)
}

/// The interrupted stack pointer (unknown on this target).
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn context_sp(_ctx: *mut libc::c_void) -> Option<usize> {
    None
}

/// Writes the overflow message to fd 2. `hit` is `None` for a probable
/// overflow found by the stack-pointer heuristic.
fn report(addr: usize, hit: Option<GuardHit>, g: *const CurrentGoroutine) {
    // SAFETY: set_current's contract keeps a non-null `g` alive while it is
    // current on this thread, which it is: we interrupted that goroutine.
    let g = unsafe { g.as_ref() };
    let mut m = Msg::new();
    m.str("goroutine stack overflow: goroutine ");
    match g {
        Some(g) => {
            m.dec(g.id);
            if let Some(name) = g.name.as_deref() {
                m.str(" \"");
                let b = name.as_bytes();
                m.bytes(&b[..b.len().min(64)]);
                m.str("\"");
            }
        }
        None => m.str("(unknown)"),
    }
    let size = match (hit, g) {
        (Some(h), _) => h.usable,
        (None, Some(g)) => g.stack_size,
        (None, None) => 0,
    };
    m.str(if hit.is_some() {
        " overflowed its "
    } else {
        " probably overflowed its "
    });
    m.dec(size as u64);
    m.str("-byte stack\n  (fault address ");
    m.hex(addr);
    match hit {
        Some(h) => {
            m.str(", guard page ");
            m.hex(h.guard_start);
            m.str("-");
            m.hex(h.guard_end);
            m.str(", stack ");
            m.hex(h.guard_end);
            m.str("-");
            m.hex(h.stack_base);
        }
        None => m.str(", near the stack pointer; stack slab not registered"),
    }
    m.str(
        ")\nincrease the stack size: Go::new().stack_size(n) for this goroutine, \
           or Builder::stack_size(n) for every goroutine of the runtime (n in bytes)\n",
    );
    m.write_stderr();
}

/// A fixed buffer formatted without allocation (usable in a signal handler).
struct Msg {
    buf: [u8; 512],
    len: usize,
}

impl Msg {
    fn new() -> Msg {
        Msg {
            buf: [0; 512],
            len: 0,
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        for &c in b {
            if self.len < self.buf.len() {
                self.buf[self.len] = c;
                self.len += 1;
            }
        }
    }

    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    fn dec(&mut self, mut n: u64) {
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.bytes(&tmp[i..]);
    }

    fn hex(&mut self, mut n: usize) {
        let mut tmp = [0u8; 16];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b"0123456789abcdef"[n & 15];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        self.str("0x");
        self.bytes(&tmp[i..]);
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn write_stderr(&self) {
        let mut rest = self.as_bytes();
        let mut tries = 0;
        while !rest.is_empty() && tries < 16 {
            tries += 1;
            // SAFETY: write(2) from a valid buffer of `rest.len()` bytes; it is
            // async-signal-safe.
            let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            if n > 0 {
                rest = &rest[n as usize..];
            } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
            {
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Alternate signal stacks

/// This thread's alternate signal stack, when we made it: `[guard][stack]`.
struct AltStack {
    map: Cell<usize>,
    len: Cell<usize>,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let map = self.map.get();
        if map == 0 {
            return;
        }
        let page = page_size();
        // SAFETY: queries this thread's signal stack into a zeroed stack_t;
        // if it is ours, disables it (the thread is exiting and is not on it),
        // then unmaps our mapping, which nothing else references.
        unsafe {
            let mut cur: libc::stack_t = mem::zeroed();
            libc::sigaltstack(ptr::null(), &mut cur);
            if cur.ss_sp as usize == map + page && cur.ss_flags & libc::SS_DISABLE == 0 {
                let off = libc::stack_t {
                    ss_sp: ptr::null_mut(),
                    ss_flags: libc::SS_DISABLE,
                    ss_size: 0,
                };
                libc::sigaltstack(&off, ptr::null_mut());
            }
            libc::munmap(map as *mut libc::c_void, self.len.get());
        }
        self.map.set(0);
    }
}

thread_local! {
    static ALTSTACK: AltStack = const { AltStack { map: Cell::new(0), len: Cell::new(0) } };
}

/// Gives the calling thread an alternate signal stack (64 KiB plus a guard
/// page) unless it has one of at least 16 KiB. Idempotent; the stack is
/// freed when the thread exits. Call it at the start of every scheduler
/// thread: the overflow handler runs on it.
pub(crate) fn ensure_thread_altstack() {
    // SAFETY: reads this thread's signal stack into a zeroed (valid) stack_t.
    let cur = unsafe {
        let mut cur: libc::stack_t = mem::zeroed();
        libc::sigaltstack(ptr::null(), &mut cur);
        cur
    };
    if cur.ss_flags & libc::SS_DISABLE == 0 && cur.ss_size >= ALTSTACK_MIN_EXISTING {
        return;
    }
    if cur.ss_flags & libc::SS_ONSTACK != 0 {
        return; // running on it: cannot be changed now
    }
    let _ = ALTSTACK.try_with(|alt| {
        let page = page_size();
        if alt.map.get() == 0 {
            let len = page + ALTSTACK_SIZE;
            // SAFETY: a fresh private anonymous mapping; no existing memory
            // is affected.
            let map = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                    -1,
                    0,
                )
            };
            if map == libc::MAP_FAILED {
                return;
            }
            // SAFETY: the lowest page of our fresh mapping becomes its guard.
            let guarded = unsafe {
                match guard_mode() {
                    GuardMode::Madvise => libc::madvise(map, page, MADV_GUARD_INSTALL),
                    GuardMode::Mprotect => libc::mprotect(map, page, libc::PROT_NONE),
                }
            } == 0;
            if !guarded {
                // SAFETY: unmapping the mapping made above, unused.
                unsafe { libc::munmap(map, len) };
                return;
            }
            alt.map.set(map as usize);
            alt.len.set(len);
        }
        let new = libc::stack_t {
            ss_sp: (alt.map.get() + page) as *mut libc::c_void,
            ss_flags: 0,
            ss_size: alt.len.get() - page,
        };
        // SAFETY: installs our mapping (alive until this thread's TLS
        // destructor disables and unmaps it) as the signal stack.
        unsafe { libc::sigaltstack(&new, ptr::null_mut()) };
    });
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_child_passed, run_child, CHILD_ENV};
    use super::super::StackPool;
    use super::*;

    #[test]
    fn registry_lookup_and_reuse() {
        let reg: Registry<4> = Registry::new();
        let page = 4096;
        let stride = page + 16384;
        let a = reg
            .register(0x10_0000, 0x10_0000 + 8 * stride, stride, page)
            .unwrap();
        assert_eq!(reg.lookup(0x0f_ffff), None);
        let hit = reg.lookup(0x10_0000 + 3 * stride + 100).unwrap();
        assert_eq!(hit.guard_start, 0x10_0000 + 3 * stride);
        assert_eq!(hit.guard_end, hit.guard_start + page);
        assert_eq!(hit.usable, 16384);
        assert_eq!(hit.stack_base, 0x10_0000 + 4 * stride);
        assert_eq!(reg.lookup(0x10_0000 + 3 * stride + page), None);
        assert_eq!(reg.lookup(0x10_0000 + 8 * stride), None);
        let b = reg
            .register(0x90_0000, 0x90_0000 + stride, stride, page)
            .unwrap();
        let _c = reg
            .register(0xa0_0000, 0xa0_0000 + stride, stride, page)
            .unwrap();
        let _d = reg
            .register(0xb0_0000, 0xb0_0000 + stride, stride, page)
            .unwrap();
        // Full: registration fails gracefully.
        assert!(reg
            .register(0xc0_0000, 0xc0_0000 + stride, stride, page)
            .is_none());
        reg.unregister(a);
        assert_eq!(reg.lookup(0x10_0000 + 3 * stride + 100), None);
        assert!(reg.lookup(0x90_0000 + 1).is_some());
        // The freed slot is reused.
        let e = reg
            .register(0xc0_0000, 0xc0_0000 + stride, stride, page)
            .unwrap();
        assert_eq!(e.slot, 0);
        assert!(reg.lookup(0xc0_0000).is_some());
        reg.unregister(b);
        reg.unregister(e);
    }

    #[test]
    fn message_formatting() {
        let mut m = Msg::new();
        m.dec(0);
        m.str(" ");
        m.dec(u64::MAX);
        m.str(" ");
        m.hex(0);
        m.str(" ");
        m.hex(0x7fff_dead_beef);
        assert_eq!(
            std::str::from_utf8(m.as_bytes()).unwrap(),
            "0 18446744073709551615 0x0 0x7fffdeadbeef"
        );
        let mut m = Msg::new();
        for _ in 0..100 {
            m.str("0123456789");
        }
        assert_eq!(m.as_bytes().len(), 512);
    }

    fn altstack() -> libc::stack_t {
        // SAFETY: reads this thread's signal stack.
        unsafe {
            let mut cur: libc::stack_t = mem::zeroed();
            libc::sigaltstack(ptr::null(), &mut cur);
            cur
        }
    }

    fn disable_altstack() {
        let off = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disables this thread's signal stack (we are not on it).
        unsafe { libc::sigaltstack(&off, ptr::null_mut()) };
    }

    #[test]
    fn altstack_is_made_and_freed() {
        assert_child_passed(&run_child(module_path!(), "altstack"));
    }

    /// In a child process (nothing else maps memory there): a thread without
    /// a signal stack gets ours, and its exit unmaps it.
    fn child_altstack() {
        let map = std::thread::spawn(|| {
            disable_altstack();
            assert_ne!(altstack().ss_flags & libc::SS_DISABLE, 0);
            ensure_thread_altstack();
            let cur = altstack();
            assert_eq!(cur.ss_flags, 0);
            assert_eq!(cur.ss_size, ALTSTACK_SIZE);
            ensure_thread_altstack(); // idempotent
            assert_eq!(altstack().ss_sp, cur.ss_sp);
            let map = ALTSTACK.with(|a| a.map.get());
            assert_eq!(map + page_size(), cur.ss_sp as usize);
            map
        })
        .join()
        .unwrap();
        // The thread-local destructor unmapped it.
        let mut v = [0u8; 1];
        // SAFETY: mincore only inspects the page tables.
        let r = unsafe { libc::mincore(map as *mut libc::c_void, page_size(), v.as_mut_ptr()) };
        assert_eq!(r, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOMEM)
        );
        // A thread keeps a signal stack of 16 KiB or more, and gets ours
        // instead of a smaller one.
        std::thread::spawn(|| {
            for (size, kept) in [(32 * 1024, true), (8 * 1024, false)] {
                let mem = vec![0u8; size].leak(); // leaked: may stay in use
                let st = libc::stack_t {
                    ss_sp: mem.as_mut_ptr().cast(),
                    ss_flags: 0,
                    ss_size: size,
                };
                // SAFETY: installs a leaked (never freed) buffer as the
                // signal stack.
                unsafe { libc::sigaltstack(&st, ptr::null_mut()) };
                ensure_thread_altstack();
                assert_eq!(altstack().ss_sp == st.ss_sp, kept, "{size}");
            }
            assert_eq!(altstack().ss_size, ALTSTACK_SIZE);
        })
        .join()
        .unwrap();
    }

    #[inline(never)]
    fn recurse(depth: u64) -> u64 {
        let buf = std::hint::black_box([depth as u8; 128]);
        if buf[0] == 0 && depth == u64::MAX {
            return 0; // never: keeps the recursion unbounded in practice
        }
        recurse(depth + 1).wrapping_add(buf[7] as u64)
    }

    fn no_core_dumps() {
        let zero = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit with a valid struct.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
    }

    /// A private PROT_NONE page to fault on.
    fn inaccessible_page() -> *mut u8 {
        // SAFETY: a fresh mapping.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                page_size(),
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    extern "C" fn custom_prev(
        _sig: libc::c_int,
        _info: *mut libc::siginfo_t,
        _ctx: *mut libc::c_void,
    ) {
        let msg = b"custom previous handler called\n";
        // SAFETY: write and _exit are async-signal-safe.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(42);
        }
    }

    /// The child role; does nothing in a normal test run.
    #[test]
    fn child() {
        let Ok(mode) = std::env::var(CHILD_ENV) else {
            return;
        };
        no_core_dumps();
        match mode.as_str() {
            "altstack" => {
                child_altstack();
                return;
            }
            "overflow"
            | "overflow-std-altstack"
            | "overflow-own-altstack"
            | "overflow-unregistered" => {
                if mode == "overflow-own-altstack" {
                    disable_altstack();
                }
                install_overflow_handler();
                install_overflow_handler(); // idempotent
                if mode != "overflow-std-altstack" {
                    // (std gives test threads a SIGSTKSZ one; see that it suffices)
                    ensure_thread_altstack();
                }
                let co_size = 64 * 1024;
                let pool = StackPool::new();
                let g = CurrentGoroutine {
                    id: 42,
                    name: Some(Arc::from("deep")),
                    stack_size: co_size,
                };
                set_current(&g);
                if mode == "overflow-unregistered" {
                    // corosensei's own stack: guarded, but not in our registry.
                    let stack = corosensei::stack::DefaultStack::new(co_size).unwrap();
                    let mut co = corosensei::Coroutine::with_stack(
                        stack,
                        |_: &corosensei::Yielder<(), ()>, ()| recurse(0),
                    );
                    co.resume(());
                } else {
                    let stack = pool.alloc(co_size).unwrap();
                    assert_eq!(stack.size(), co_size);
                    let mut co = corosensei::Coroutine::with_stack(
                        stack,
                        |_: &corosensei::Yielder<(), ()>, ()| recurse(0),
                    );
                    co.resume(());
                }
                set_current(ptr::null());
                eprintln!("child: recursion returned?");
            }
            "wild" => {
                install_overflow_handler();
                let p = inaccessible_page();
                // SAFETY: deliberately faults (the test expects the process to die).
                unsafe { ptr::read_volatile(p) };
            }
            "chain" => {
                // SAFETY: installs a test handler before ours.
                unsafe {
                    let mut act: libc::sigaction = mem::zeroed();
                    act.sa_sigaction = custom_prev as extern "C" fn(_, _, _) as usize;
                    act.sa_flags = libc::SA_SIGINFO;
                    libc::sigemptyset(&mut act.sa_mask);
                    libc::sigaction(libc::SIGSEGV, &act, ptr::null_mut());
                }
                install_overflow_handler();
                let p = inaccessible_page();
                // SAFETY: deliberately faults into the chained handler.
                unsafe { ptr::read_volatile(p) };
            }
            other => panic!("unknown child mode {other}"),
        }
        // Not reached in any mode: exit distinctly if it is.
        std::process::exit(3);
    }

    fn check_overflow(mode: &str, needle: &str) {
        use std::os::unix::process::ExitStatusExt;
        let out = run_child(module_path!(), mode);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "{mode}: {:?}\n{stderr}",
            out.status
        );
        for want in [
            "goroutine stack overflow: goroutine 42 \"deep\"",
            needle,
            "65536-byte stack",
            "Go::new().stack_size(n)",
            "Builder::stack_size(n)",
        ] {
            assert!(
                stderr.contains(want),
                "{mode}: missing {want:?} in:\n{stderr}"
            );
        }
    }

    #[test]
    fn overflow_on_pool_stack_is_reported() {
        check_overflow("overflow", " overflowed its ");
    }

    #[test]
    fn overflow_on_std_altstack_is_reported() {
        check_overflow("overflow-std-altstack", " overflowed its ");
    }

    #[test]
    fn overflow_on_own_altstack_is_reported() {
        check_overflow("overflow-own-altstack", " overflowed its ");
    }

    #[test]
    fn overflow_on_unregistered_stack_is_reported() {
        check_overflow("overflow-unregistered", " probably overflowed its ");
    }

    #[test]
    fn other_faults_chain_to_the_previous_handler() {
        use std::os::unix::process::ExitStatusExt;
        let out = run_child(module_path!(), "wild");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGSEGV),
            "{:?}\n{stderr}",
            out.status
        );
        assert!(!stderr.contains("goroutine stack overflow"), "{stderr}");

        let out = run_child(module_path!(), "chain");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(42), "{:?}\n{stderr}", out.status);
        assert!(
            stderr.contains("custom previous handler called"),
            "{stderr}"
        );
    }
}
