//! TLS destructors per goroutine.
//!
//! std registers the destructor of every `thread_local!` with `Drop` through
//! `__cxa_thread_atexit_impl` (a weak reference, so the executable's definition
//! here wins over glibc's). glibc keeps its list in the C library's TLS block,
//! which is per OS thread (`super`'s module docs): a goroutine's registrations
//! there would run at the M's exit, on values that died with the goroutine.
//!
//! So the definition below sorts by where it is called from:
//! - on a goroutine's thread pointer (`HOST` set), the destructor goes on the
//!   goroutine's own list, a thread-local of the executable's block and so per
//!   goroutine; `Area::run_dtors` runs it when the goroutine ends, last
//!   registered first, until the list stays empty (a destructor may register
//!   more, as glibc allows);
//! - on an OS thread's own thread pointer, it goes to glibc's, found once with
//!   `dlsym(RTLD_NEXT)`.
//!
//! `os_thread_atexit` reaches glibc's list from anywhere: on a goroutine's thread
//! pointer the C library's block is the OS thread's (carried by `switch`), so the
//! destructor runs at the OS thread's exit.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

type Dtor = unsafe extern "C" fn(*mut c_void);
type AtExit = unsafe extern "C" fn(Dtor, *mut c_void, *mut c_void) -> c_int;

struct Node {
    dtor: Dtor,
    obj: *mut c_void,
    next: *mut Node,
}

thread_local! {
    /// The goroutine's destructors, newest first (a plain pointer: a list with
    /// `Drop` would register itself here).
    static LIST: Cell<*mut Node> = const { Cell::new(ptr::null_mut()) };
}

/// glibc's `__cxa_thread_atexit_impl` (0: not looked up yet, 1: absent).
static GLIBC: AtomicUsize = AtomicUsize::new(0);

extern "C" {
    static __dso_handle: u8;
}

fn glibc() -> Option<AtExit> {
    let mut f = GLIBC.load(Relaxed);
    if f == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the definition after ours.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"__cxa_thread_atexit_impl".as_ptr()) };
        f = if p.is_null() { 1 } else { p as usize };
        GLIBC.store(f, Relaxed);
    }
    // SAFETY: glibc's function of this signature (GLIBC_2.18).
    (f != 1).then(|| unsafe { std::mem::transmute::<usize, AtExit>(f) })
}

/// Keeps this file's object in the link (std's reference is weak and would not
/// pull it in) and looks glibc's definition up while nothing else runs.
pub(super) fn link() {
    std::hint::black_box(__cxa_thread_atexit_impl as *const () as usize);
    let _ = glibc();
}

/// The definition std's `thread_local!` destructors bind to (module docs).
///
/// # Safety
/// As glibc's: `dtor(obj)` must be sound to call once, on this thread, at the
/// end of the (virtual) thread.
#[no_mangle]
pub unsafe extern "C" fn __cxa_thread_atexit_impl(
    dtor: Dtor,
    obj: *mut c_void,
    dso: *mut c_void,
) -> c_int {
    if super::on_virtual_thread() {
        let node = Box::into_raw(Box::new(Node {
            dtor,
            obj,
            next: ptr::null_mut(),
        }));
        LIST.with(|l| {
            // SAFETY: just made, ours.
            unsafe { (*node).next = l.get() };
            l.set(node);
        });
        return 0;
    }
    match glibc() {
        // SAFETY: glibc's contract, forwarded.
        Some(f) => unsafe { f(dtor, obj, dso) },
        None => -1,
    }
}

/// Register `dtor(obj)` for the OS thread's exit, from any thread pointer.
/// False where glibc has no list (the caller keeps one itself).
pub(super) fn os_thread_atexit(dtor: Dtor, obj: *mut c_void) -> bool {
    match glibc() {
        Some(f) => {
            // SAFETY: glibc's contract; our own executable's DSO handle.
            unsafe { f(dtor, obj, &__dso_handle as *const u8 as *mut c_void) };
            true
        }
        None => false,
    }
}

/// Run the installed goroutine's destructors (`Area::run_dtors`). True if
/// there were any.
pub(super) fn run_goroutine_dtors() -> bool {
    let mut ran = false;
    loop {
        let node = LIST.with(|l| {
            let n = l.get();
            if !n.is_null() {
                // SAFETY: a node of this list.
                l.set(unsafe { (*n).next });
            }
            n
        });
        if node.is_null() {
            return ran;
        }
        ran = true;
        // SAFETY: made by Box::into_raw above, unlinked just now.
        let node = unsafe { Box::from_raw(node) };
        // SAFETY: registered for this object, called once.
        unsafe { (node.dtor)(node.obj) };
    }
}

/// glibc's `PTHREAD_KEYS_MAX`, `PTHREAD_KEY_2NDLEVEL_SIZE` and
/// `PTHREAD_DESTRUCTOR_ITERATIONS` (fixed by the ABI).
const KEYS_MAX: usize = 1024;
const LEVEL2: usize = 32;
const ITERATIONS: usize = 4;

/// The pthread key destructors of the goroutine whose TCB is at `tp`, as
/// glibc's `__nptl_deallocate_tsd` runs a thread's at its exit: every key
/// with a value and a destructor, up to four rounds while destructors set
/// values again; then the second-level blocks glibc allocated are freed.
///
/// True if any key had a value.
///
/// # Safety
/// `tp` is the installed area's TCB; `first`/`specific` the key tables'
/// offsets in it, `registry` glibc's `__pthread_keys`.
pub(super) unsafe fn run_key_dtors(
    tp: usize,
    first: usize,
    specific: usize,
    registry: usize,
) -> bool {
    let used = (tp + specific + LEVEL2 * 8) as *mut bool;
    let table = (tp + specific) as *mut *mut [usize; 2];
    // SAFETY: the area's own `specific_used` flag (it follows `specific`).
    if !unsafe { *used } {
        return false;
    }
    for _ in 0..ITERATIONS {
        // SAFETY: as above.
        unsafe { *used = false };
        for l1 in 0..KEYS_MAX / LEVEL2 {
            // SAFETY: the area's tables: entry 0 is its own first block.
            let block = unsafe { *table.add(l1) };
            if block.is_null() {
                continue;
            }
            for l2 in 0..LEVEL2 {
                let key = l1 * LEVEL2 + l2;
                // SAFETY: a `{seq, data}` pair of the block; the registry's
                // `{seq, destr}` of the same key.
                unsafe {
                    let slot = &mut *block.add(l2);
                    let data = slot[1];
                    if data == 0 {
                        continue;
                    }
                    slot[1] = 0;
                    let reg = (registry + key * 16) as *const [usize; 2];
                    let [seq, destr] = *reg;
                    if seq == slot[0] && destr != 0 {
                        let destr: Dtor = std::mem::transmute::<usize, Dtor>(destr);
                        destr(data as *mut c_void);
                    }
                }
            }
        }
        // SAFETY: as above.
        if !unsafe { *used } {
            break;
        }
    }
    for l1 in 1..KEYS_MAX / LEVEL2 {
        // SAFETY: glibc callocs the second-level blocks; the area's own.
        unsafe {
            let block = *table.add(l1);
            if !block.is_null() {
                libc::free(block.cast());
                *table.add(l1) = ptr::null_mut();
            }
        }
    }
    // SAFETY: the first block stays the area's.
    unsafe { *table = (tp + first) as *mut [usize; 2] };
    true
}
