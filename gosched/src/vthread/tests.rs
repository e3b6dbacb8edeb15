//! The area on a plain thread (no runtime): thread-locals, errno and
//! destructors follow the installed thread pointer.

use super::*;
use std::cell::RefCell;

fn area_on_heap() -> (Vec<u128>, Area) {
    let bytes = area_bytes();
    let mut mem = vec![0u128; bytes / 16 + 8];
    let top = mem.as_mut_ptr() as usize + mem.len() * 16;
    // SAFETY: our own buffer, used only by this area.
    let area = unsafe { Area::init(top & !63) };
    (mem, area)
}

#[test]
fn supported_here() {
    assert_eq!(
        unsupported_reason(),
        None,
        "this CI runs Linux x86-64 glibc"
    );
    assert!(area_bytes() > 2000);
}

#[test]
fn thread_locals_are_the_areas() {
    thread_local! {
        static X: Cell<u32> = const { Cell::new(7) };
        static LAZY: RefCell<Vec<u32>> = RefCell::new(vec![1]);
    }
    X.with(|x| x.set(1));
    LAZY.with(|v| v.borrow_mut().push(2));
    let host_id = std::thread::current().id();
    let (_mem, area) = area_on_heap();
    {
        // SAFETY: a fresh area, only here.
        let _in = unsafe { area.enter() };
        assert!(on_virtual_thread());
        assert_eq!(X.with(|x| x.get()), 7, "the image's value, not the host's");
        X.with(|x| x.set(3));
        assert_eq!(LAZY.with(|v| v.borrow().clone()), vec![1]);
        assert_ne!(std::thread::current().id(), host_id);
        let s = format!("{} {}", 1, "two");
        assert_eq!(s, "1 two");
        let caught = std::panic::catch_unwind(|| panic!("inside"));
        assert!(caught.is_err());
        assert!(!std::thread::panicking());
    }
    assert!(!on_virtual_thread());
    assert_eq!(X.with(|x| x.get()), 1);
    assert_eq!(LAZY.with(|v| v.borrow().clone()), vec![1, 2]);
    assert_eq!(std::thread::current().id(), host_id);
    // SAFETY: not installed anywhere, its code done.
    unsafe { area.run_dtors(Installed::host()) };
}

#[test]
fn errno_is_the_areas_and_malloc_state_the_threads() {
    // SAFETY: plain libc calls.
    unsafe { *libc::__errno_location() = 11 };
    let (_mem, area) = area_on_heap();
    {
        // SAFETY: as above.
        let _in = unsafe { area.enter() };
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, 0);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = 22 };
        let v: Vec<Vec<u8>> = (0..1000).map(|i| vec![0; i]).collect();
        drop(v);
    }
    // SAFETY: as above.
    assert_eq!(unsafe { *libc::__errno_location() }, 11);
    {
        // SAFETY: as above.
        let _in = unsafe { area.enter() };
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, 22);
    }
    // SAFETY: as above.
    unsafe { area.run_dtors(Installed::host()) };
}

#[test]
fn destructors_run_with_the_area() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct D(u32);
    impl Drop for D {
        fn drop(&mut self) {
            assert!(on_virtual_thread(), "on the goroutine's thread pointer");
            DROPPED.fetch_add(self.0 as usize, SeqCst);
        }
    }
    thread_local! {
        static V: RefCell<Option<D>> = const { RefCell::new(None) };
    }
    let (_mem, area) = area_on_heap();
    {
        // SAFETY: as above.
        let _in = unsafe { area.enter() };
        V.with(|v| *v.borrow_mut() = Some(D(5)));
    }
    assert_eq!(DROPPED.load(SeqCst), 0);
    // SAFETY: as above.
    unsafe { area.run_dtors(Installed::host()) };
    assert_eq!(DROPPED.load(SeqCst), 5);
    // The host's own value is untouched and unregistered.
    assert!(V.with(|v| v.borrow().is_none()));
}

#[test]
fn os_locals_are_the_threads() {
    thread_local! {
        static P: Cell<*mut Cell<u32>> = const { Cell::new(std::ptr::null_mut()) };
    }
    with_os_local(&P, || Cell::new(0), |c| c.set(9));
    let (_mem, area) = area_on_heap();
    {
        // SAFETY: as above.
        let _in = unsafe { area.enter() };
        with_os_local(
            &P,
            || Cell::new(0),
            |c| {
                assert_eq!(c.get(), 9);
                c.set(10)
            },
        );
    }
    with_os_local(&P, || Cell::new(0), |c| assert_eq!(c.get(), 10));
    // SAFETY: as above.
    unsafe { area.run_dtors(Installed::host()) };
}

#[test]
fn the_layout_is_complete() {
    let l = layout().as_ref().unwrap();
    // The executable's block and the key tables are required by the probe
    // (plain fields of `Layout`); rseq is optional there but present here.
    assert!(l.rseq.is_some(), "{l:?}");
}

#[test]
fn pthread_keys_are_the_areas() {
    let mut keys = [0 as libc::pthread_key_t; 40];
    for k in &mut keys {
        // SAFETY: a fresh key, no destructor.
        assert_eq!(unsafe { libc::pthread_key_create(k, None) }, 0);
        // SAFETY: our key.
        unsafe { libc::pthread_setspecific(*k, std::ptr::without_provenance(1)) };
    }
    let (_mem, area) = area_on_heap();
    {
        // SAFETY: as above.
        let _in = unsafe { area.enter() };
        for &k in &keys {
            // SAFETY: our key; the area's tables start empty.
            assert!(unsafe { libc::pthread_getspecific(k) }.is_null());
        }
        // Key 39 lives in a second-level block: the area's own, not the host's.
        // SAFETY: our key.
        unsafe { libc::pthread_setspecific(keys[39], std::ptr::without_provenance(2)) };
    }
    for &k in &keys {
        // SAFETY: our key.
        assert_eq!(unsafe { libc::pthread_getspecific(k) } as usize, 1);
        // SAFETY: our key, deleted once.
        unsafe { libc::pthread_key_delete(k) };
    }
    // SAFETY: as above.
    unsafe { area.run_dtors(Installed::host()) };
}

#[test]
fn pthread_key_destructors_run_with_the_area() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static RAN: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn destr(p: *mut libc::c_void) {
        assert!(on_virtual_thread());
        RAN.fetch_add(p as usize, SeqCst);
    }
    let mut keys = [0 as libc::pthread_key_t; 40];
    for k in &mut keys {
        // SAFETY: a fresh key with our destructor.
        assert_eq!(unsafe { libc::pthread_key_create(k, Some(destr)) }, 0);
    }
    let (_mem, area) = area_on_heap();
    {
        // SAFETY: as above.
        let _in = unsafe { area.enter() };
        for &k in &keys {
            // SAFETY: our key.
            unsafe { libc::pthread_setspecific(k, std::ptr::without_provenance(1)) };
        }
    }
    assert_eq!(RAN.load(SeqCst), 0);
    // SAFETY: as above.
    unsafe { area.run_dtors(Installed::host()) };
    assert_eq!(
        RAN.load(SeqCst),
        40,
        "every key's destructor, first and second level"
    );
    for &k in &keys {
        // SAFETY: our key; this thread never set it.
        assert!(unsafe { libc::pthread_getspecific(k) }.is_null());
        // SAFETY: our key, deleted once.
        unsafe { libc::pthread_key_delete(k) };
    }
}

#[test]
fn malloc_caches_are_the_os_threads() {
    // glibc's tcache is LIFO per size: a block freed on one side is the next
    // one handed out on the other only if both use the OS thread's cache,
    // which lives in the C library's block `switch` carries both ways.
    let (_mem, area) = area_on_heap();
    // SAFETY: plain malloc/free of our own blocks.
    unsafe {
        let p = libc::malloc(40);
        libc::free(p);
        let q = {
            let _in = area.enter();
            let q = libc::malloc(40);
            assert_eq!(q, p, "the area allocates from the OS thread's cache");
            libc::free(q);
            q
        };
        let r = libc::malloc(40);
        assert_eq!(
            r, q,
            "what the area freed went back to the OS thread's cache"
        );
        libc::free(r);
        area.run_dtors(Installed::host());
    }
}
