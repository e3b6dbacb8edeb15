//! Goroutines are virtual threads: each runs on a thread pointer of its own.
//!
//! # Why
//!
//! Goroutines that take turns on one OS thread break what every crate assumes of
//! thread-locals: that a thread-local scope opened on a thread closes before any
//! other opened after it (std's lazy `thread_local!` init that parks, `scoped-tls`,
//! the panic count, tracing's current span). And LLVM may keep a thread-local's
//! address across a call, so a goroutine that resumed on another OS thread could
//! use the first thread's slot. Both are cured by giving each goroutine its own
//! static TLS: Java's virtual threads do the same with `ThreadLocal`.
//!
//! # What is per goroutine, what is per OS thread
//!
//! A goroutine's *area* (carved from the top of its stack, `Area::init`) holds a
//! TCB and the static TLS blocks in use; the surplus glibc reserves below them
//! (for modules loaded later with static TLS, which areas do not support) is
//! the top of the goroutine's stack. While the goroutine runs, the
//! thread pointer (x86-64: the FS base) points at its TCB:
//! - **Per goroutine:** the executable's TLS block, initialised from its image at
//!   the goroutine's start. That is every `thread_local!` of Rust code linked into
//!   the executable: std's panic count and `thread::current()` (a `ThreadId` of its
//!   own), tracing's span stack, RNG handles, and allocators linked into the
//!   executable (their thread caches). Also errno, `pthread_self()` and the
//!   pthread key tables (cleared at start). The goroutine's TLS destructors
//!   (`__cxa_thread_atexit_impl`, `dtors.rs`) and key destructors run when it
//!   ends, on its thread pointer.
//! - **Per OS thread:** every other module's static block (the C library's:
//!   malloc's tcache and arena, locale, the TLS destructor list of the thread),
//!   the DTV (so `dlopen`ed modules' TLS, reached through `__tls_get_addr`) and
//!   the kernel tid. Every `switch` copies them from the thread pointer it
//!   replaces into the one it installs, so whichever is installed holds the OS
//!   thread's current values and no two OS threads ever share them. (Only the C
//!   library may have a static block besides the executable: another's could be
//!   written through the DTV, behind the copy's back; the probe refuses it.)
//!   An area's rseq area says "not registered": the kernel updates only the OS
//!   thread's.
//! - **The scheduler's per-M state** lives in the M's own TLS. Code that runs on a
//!   goroutine reaches it through `host_addr` (the area's `HOST` slot holds the
//!   OS thread's own thread pointer) or `with_os_local`.
//!
//! # The switch
//!
//! `Goroutine::poll` (`coro/mod.rs`) installs the goroutine's area before it
//! resumes the coroutine. `switch` moves the OS thread's state from the area it
//! replaces into the one it installs, so the installed area always holds it.
//! - A goroutine leaves its area before its poll returns (`LeaveArea`): it may
//!   move, and another M may install the area as soon as its task is queued
//!   again.
//! - An M goes back to its own thread pointer (`to_host`) before it polls an
//!   async task and before it exits; a finished or cancelled goroutine's area is
//!   left before its stack goes back.
//!
//! An area is installed on at most one OS thread at a time: its task is polled
//! by one M at a time (the task's RUNNING bit), and the rules above. Nothing in
//! `switch` uses a thread-local (the compiler may keep a thread-local's address
//! across the FS-base write): it reaches the `HOST` slots by their offset.
//!
//! # Platforms
//!
//! Linux x86-64 with glibc (layout read at run time, `glibc.rs`). Elsewhere, or
//! when the probe fails (`unsupported_reason`), goroutines use the OS thread's
//! thread pointer and still move between Ms: there the thread-local patterns
//! above remain unsound, and so is a thread-local touched before and after a
//! blocking call (the crate docs, "Where goroutines are not virtual threads").

use std::cell::Cell;
use std::thread::LocalKey;

#[cfg(vthread)]
mod dtors;
#[cfg(vthread)]
mod glibc;
#[cfg(vthread)]
mod tp;

thread_local! {
    /// In a goroutine's area: the thread pointer of the OS thread it is installed
    /// on (written by every `enter`). Zero in an OS thread's own TLS.
    static HOST: Cell<usize> = const { Cell::new(0) };
}

/// True while the running code is on a goroutine's thread pointer.
///
/// Every function here that reads a thread-local is `#[inline(never)]`: its
/// callers may switch the thread pointer (a poll), and the compiler may keep a
/// thread-local's address across a call within one function.
#[inline(never)]
pub(crate) fn on_virtual_thread() -> bool {
    HOST.with(|h| h.get()) != 0
}

/// The calling OS thread's own copy of the thread-local at `p`, an address in
/// the TLS now installed (the same slot in the host's TLS when a goroutine's
/// area is installed). Only for thread-locals that need no lazy
/// initialisation (`const`, no `Drop`): the host's slot is read as it is.
/// Call it only from an `#[inline(never)]` accessor that computed `p` itself
/// (`context::current`, `os_slot`): inlined there, it reads `HOST` on the same
/// thread pointer `p` was computed on, with no call between (the hot path of
/// every runtime call and task allocation).
#[inline(always)]
pub(crate) fn host_addr<T>(p: *const T) -> *const T {
    #[cfg(vthread)]
    {
        let host = HOST.with(|h| h.get());
        if host != 0 {
            return (p as usize).wrapping_sub(tp::get()).wrapping_add(host) as *const T;
        }
    }
    p
}

/// `f` with the calling OS thread's value of a per-thread runtime structure:
/// `key` holds a pointer to it, made by `init` at the thread's first use (from
/// whatever thread pointer is installed) and dropped when the OS thread exits.
pub(crate) fn with_os_local<T: 'static, R>(
    key: &'static LocalKey<Cell<*mut T>>,
    init: fn() -> T,
    f: impl FnOnce(&T) -> R,
) -> R {
    let cell = os_slot(key);
    // SAFETY: the host's slot lives as long as its OS thread, which is running
    // this code; only this OS thread touches it.
    let cell = unsafe { &*cell };
    let mut p = cell.get();
    if p.is_null() {
        p = Box::into_raw(Box::new(init()));
        cell.set(p);
        at_os_thread_exit(drop_os_local::<T>, cell as *const Cell<*mut T> as *mut _);
    }
    // SAFETY: made above or earlier on this OS thread, freed only at its exit.
    f(unsafe { &*p })
}

/// The host's slot of `key`, its address computed here and now (not inlined:
/// see `on_virtual_thread`).
#[inline(never)]
fn os_slot<T: 'static>(key: &'static LocalKey<Cell<*mut T>>) -> *const Cell<*mut T> {
    host_addr(key.with(|c| c as *const _))
}

unsafe extern "C" fn drop_os_local<T>(cell: *mut std::ffi::c_void) {
    // SAFETY: `cell` is the host slot registered by `with_os_local`.
    let cell = unsafe { &*(cell as *const Cell<*mut T>) };
    let p = cell.replace(std::ptr::null_mut());
    if !p.is_null() {
        // SAFETY: made by Box::into_raw in `with_os_local`.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Run `dtor(obj)` when the calling OS thread exits (not when a goroutine ends).
fn at_os_thread_exit(
    dtor: unsafe extern "C" fn(*mut std::ffi::c_void),
    obj: *mut std::ffi::c_void,
) {
    #[cfg(vthread)]
    if dtors::os_thread_atexit(dtor, obj) {
        return;
    }
    fallback_atexit(dtor, obj);
}

/// An OS-thread destructor list kept by std (platforms without glibc's).
fn fallback_atexit(dtor: unsafe extern "C" fn(*mut std::ffi::c_void), obj: *mut std::ffi::c_void) {
    struct List(std::cell::RefCell<Vec<(unsafe extern "C" fn(*mut std::ffi::c_void), usize)>>);
    impl Drop for List {
        fn drop(&mut self) {
            while let Some((d, o)) = self.0.borrow_mut().pop() {
                // SAFETY: registered with this object.
                unsafe { d(o as *mut _) };
            }
        }
    }
    thread_local! {
        static LIST: List = const { List(std::cell::RefCell::new(Vec::new())) };
    }
    if LIST
        .try_with(|l| l.0.borrow_mut().push((dtor, obj as usize)))
        .is_err()
    {
        // The thread is exiting and its list is gone: run it now.
        // SAFETY: the caller registered `obj` for `dtor`.
        unsafe { dtor(obj) };
    }
}

/// Why goroutines cannot have thread pointers of their own here (None: they do).
pub(crate) fn unsupported_reason() -> Option<&'static str> {
    #[cfg(vthread)]
    {
        layout().as_ref().err().map(|s| s.as_str())
    }
    #[cfg(not(vthread))]
    {
        Some("goroutines have thread pointers of their own only on Linux x86-64 with glibc")
    }
}

/// Bytes a goroutine's area takes from the top of its stack (0: unsupported).
#[inline]
pub(crate) fn area_bytes() -> usize {
    #[cfg(vthread)]
    {
        if let Ok(l) = layout() {
            return l.area;
        }
    }
    0
}

#[cfg(vthread)]
fn layout() -> &'static Result<glibc::Layout, String> {
    static LAYOUT: std::sync::OnceLock<Result<glibc::Layout, String>> = std::sync::OnceLock::new();
    LAYOUT.get_or_init(|| {
        if std::env::var_os("GOSCHED_VTHREAD").is_some_and(|v| v == "0") {
            return Err("GOSCHED_VTHREAD=0".into());
        }
        let host = HOST.with(|h| h.get());
        let here = tp::get();
        // Probe on an OS thread's own thread pointer.
        let host_tp = if host != 0 { host } else { here };
        if host != 0 {
            return Err("the layout must first be read on an OS thread".into());
        }
        dtors::link();
        let host_slot = HOST.with(|h| h as *const Cell<usize> as usize);
        let layout = glibc::probe(host_tp, host_slot as isize - host_tp as isize)?;
        // SAFETY: plain handlers with no preconditions.
        if unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_after), Some(fork_after)) }
            != 0
        {
            return Err("pthread_atfork failed".into());
        }
        Ok(layout)
    })
}

#[cfg(vthread)]
thread_local! {
    /// The area a `fork` from a goroutine left (the OS thread's own slot).
    static FORKED_FROM: Cell<usize> = const { Cell::new(0) };
}

/// `fork` runs glibc's own bookkeeping on the OS thread's TCB (in the child
/// it takes the running thread for `THREAD_SELF` and recycles every other
/// thread's stack): a goroutine that forks leaves its area first, and
/// `fork_after` installs it again in the parent and in the child.
#[cfg(vthread)]
extern "C" fn fork_prepare() {
    let cur = tp::get();
    if on_virtual_thread() {
        to_host();
        set_forked_from(cur);
    }
}

#[cfg(vthread)]
extern "C" fn fork_after() {
    let area = take_forked_from();
    if area != 0 {
        // SAFETY: the area `fork_prepare` left, still this goroutine's (the
        // forking goroutine is running; in the child, the only one).
        unsafe { switch(tp::get(), area) };
    }
}

#[cfg(vthread)]
#[inline(never)]
fn set_forked_from(area: usize) {
    FORKED_FROM.with(|f| f.set(area));
}

#[cfg(vthread)]
#[inline(never)]
fn take_forked_from() -> usize {
    FORKED_FROM.with(|f| f.replace(0))
}

/// A goroutine's thread pointer and the static TLS below it.
#[derive(Debug)]
pub(crate) struct Area {
    #[cfg_attr(not(vthread), allow(dead_code))]
    tp: usize,
}

impl Area {
    /// Build an area in `[top - area_bytes(), top)`: a copy of the calling OS
    /// thread's TCB (its self pointers made ours, the key tables cleared) and the
    /// executable's block from its image. Requires `area_bytes() != 0`.
    ///
    /// # Safety
    /// The range must be writable memory that nothing else uses until the area
    /// is dropped; the caller must be on an OS thread's own thread pointer or
    /// on another area's.
    #[cfg(vthread)]
    pub(crate) unsafe fn init(top: usize) -> Area {
        let l = layout()
            .as_ref()
            .expect("vthread::Area::init without support");
        let host = match HOST.with(|h| h.get()) {
            0 => tp::get(),
            h => h,
        };
        let tp = (top - l.tcb) & !(l.align - 1);
        debug_assert!(l.os_blocks.iter().all(|b| tp - b.off >= top - l.area));
        // SAFETY: the caller hands us [top - area, top); the host's TCB is live.
        unsafe {
            std::ptr::copy_nonoverlapping(host as *const u8, tp as *mut u8, l.tcb);
            // tcbhead_t: `tcb` (offset 0) and `self` (offset 16) point at the TCB.
            *(tp as *mut usize) = tp;
            *((tp + 16) as *mut usize) = tp;
            let (first, specific) = l.keys;
            std::ptr::write_bytes((tp + first) as *mut u8, 0, specific - first);
            std::ptr::write_bytes((tp + specific) as *mut usize, 0, 32);
            *((tp + specific) as *mut usize) = tp + first;
            // `specific_used`, after the table: no key set yet.
            *((tp + specific + 32 * 8) as *mut bool) = false;
            let (b, image) = l.exe;
            let at = (tp - b.off) as *mut u8;
            std::ptr::copy_nonoverlapping(image.as_ptr(), at, image.len());
            std::ptr::write_bytes(at.add(image.len()), 0, b.len - image.len());
            *((tp - l.errno) as *mut i32) = 0;
            if let Some((off, _)) = l.rseq {
                // The kernel updates only the OS thread's rseq area: an area's
                // says "not registered" (`cpu_id_start` and `cpu_id` are
                // RSEQ_CPU_ID_UNINITIALIZED), so `sched_getcpu` and rseq users
                // fall back to the system call instead of a stale CPU, and no
                // per-CPU critical section runs unprotected.
                *((tp + off) as *mut [i32; 2]) = [-1, -1];
            }
        }
        Area { tp }
    }

    /// Install this area's thread pointer on the calling OS thread until the
    /// guard drops, carrying the OS thread's state along (module docs).
    ///
    /// # Safety
    /// The area must be installed on no other thread, and must outlive the guard.
    #[cfg(all(test, vthread))]
    #[inline]
    pub(crate) unsafe fn enter(&self) -> Entered {
        // SAFETY: supported (an Area exists); the caller vouches for exclusivity.
        let prev = unsafe { switch(tp::get(), self.tp) };
        Entered { prev, tp: self.tp }
    }

    /// Install this area on the calling OS thread and leave it installed
    /// (until `to_host`, `reinstall` or another area's install): the schedule
    /// loop may run on it after the goroutine suspends. Only for an area
    /// left again before its task can be polled elsewhere (`LeaveArea`). A no-op when it is installed
    /// already. Returns the thread pointer it replaced (for `reinstall`).
    ///
    /// # Safety
    /// As `enter`, and the area must be left before it is freed.
    #[cfg(vthread)]
    #[inline(never)]
    pub(crate) unsafe fn install(&self) -> Installed {
        let cur = tp::get();
        if cur == self.tp {
            // Left installed by its last poll: what comes back after it is the
            // OS thread's own.
            return Installed::host();
        }
        // SAFETY: as the caller vouches.
        unsafe { switch(cur, self.tp) };
        Installed(cur)
    }

    /// Run the destructors this goroutine registered, on its own thread
    /// pointer, as glibc does at a thread's exit: its `thread_local!`s with
    /// `Drop`, then its pthread keys', again while either registered more (four
    /// rounds at most); then install `back` (the thread pointer before the
    /// first `install` of this poll or drop).
    ///
    /// # Safety
    /// As `install`; the goroutine's code must be done (no frame of it left);
    /// `back` is an OS thread's own TCB or an area installed on no other thread.
    #[cfg(vthread)]
    #[inline(never)]
    pub(crate) unsafe fn run_dtors(&self, back: Installed) {
        // SAFETY: as the caller vouches.
        let _ = unsafe { self.install() };
        // SAFETY: supported (an Area exists).
        let l = unsafe { layout().as_ref().unwrap_unchecked() };
        for _ in 0..4 {
            let mut ran = dtors::run_goroutine_dtors();
            let (first, specific) = l.keys;
            // SAFETY: our area is installed; the offsets are glibc's.
            ran |= unsafe { dtors::run_key_dtors(self.tp, first, specific, l.pthread_keys) };
            if !ran {
                break;
            }
        }
        // SAFETY: as the caller vouches.
        unsafe { reinstall(back) };
    }
}

/// The thread pointer an `install` replaced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Installed(#[cfg_attr(not(vthread), allow(dead_code))] usize);

impl Installed {
    /// The calling OS thread's own thread pointer.
    #[cfg(vthread)]
    #[inline(never)]
    pub(crate) fn host() -> Installed {
        Installed(match HOST.with(|h| h.get()) {
            0 => tp::get(),
            h => h,
        })
    }
}

/// Install `back` again (the thread pointer an `install` replaced).
///
/// # Safety
/// `back` is this OS thread's own TCB, or an area installed on no other thread
/// that outlives this call.
#[cfg(vthread)]
#[inline(never)]
pub(crate) unsafe fn reinstall(back: Installed) {
    // SAFETY: as the caller vouches.
    unsafe { switch(tp::get(), back.0) };
}

/// Put the calling OS thread back on its own thread pointer, if an area is
/// installed (an M before it exits or polls an async task; a goroutine that
/// may move, after its poll).
#[inline(never)]
pub(crate) fn to_host() {
    #[cfg(vthread)]
    {
        let host = HOST.with(|h| h.get());
        if host != 0 {
            // SAFETY: an area is installed (HOST is set only in areas) and
            // `host` is this OS thread's own TCB.
            unsafe { switch(tp::get(), host) };
        }
    }
}

/// Restores the thread pointer `Area::enter` replaced.
#[cfg(test)]
#[must_use]
pub(crate) struct Entered {
    #[cfg(vthread)]
    prev: usize,
    #[cfg(vthread)]
    tp: usize,
}

#[cfg(all(test, vthread))]
impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `tp` is installed (entered by us), `prev` was before it.
        unsafe { switch(self.tp, self.prev) };
    }
}

/// Move the OS thread's state from the area at `from` to the one at `to`, then
/// install `to`. Returns `from`.
#[cfg(vthread)]
#[inline(never)]
unsafe fn switch(from: usize, to: usize) -> usize {
    if from == to {
        return from;
    }
    // SAFETY: supported, or no area would exist.
    let l = unsafe { layout().as_ref().unwrap_unchecked() };
    // SAFETY: both are TCBs laid out as `l` says (an OS thread's or `Area::init`'s).
    unsafe {
        // The other modules' blocks, whole, then `to`'s errno back over the
        // copy: it is the goroutine's (or the OS thread's) own.
        let errno = *((to - l.errno) as *const i32);
        for b in &l.os_blocks {
            copy_block(from - b.off, to - b.off, b.len);
        }
        *((to - l.errno) as *mut i32) = errno;
        *((to + l.dtv) as *mut usize) = *((from + l.dtv) as *const usize);
        *((to + l.tid) as *mut i32) = *((from + l.tid) as *const i32);
        // Our own HOST slot, by its offset: no thread-local access here, whose
        // address the compiler could keep across `tp::set`.
        let slot = |tp: usize| (tp as isize + l.host) as *mut usize;
        let host = match *slot(from) {
            0 => from,
            h => h,
        };
        // An area says where its OS thread's own TLS is; an OS thread's own TLS
        // says nothing.
        *slot(to) = if to == host { 0 } else { host };
        tp::set(to);
    }
    from
}

/// Copy `len` bytes from `from` to `to` (distinct blocks of two areas), in
/// words when both are word-sized multiples (the common case: no call).
#[cfg(vthread)]
#[inline(always)]
unsafe fn copy_block(from: usize, to: usize, len: usize) {
    if (from | to | len) % 8 == 0 {
        for i in (0..len).step_by(8) {
            // SAFETY: inside both blocks (the caller's), aligned.
            unsafe { *((to + i) as *mut u64) = *((from + i) as *const u64) };
        }
    } else {
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, len) };
    }
}

#[cfg(all(test, vthread))]
mod tests;
