//! Goroutines are virtual threads (issue 45): each has thread-locals of its
//! own. The four patterns that broke while goroutines took turns on one
//! thread's TLS (each fails with `GOSCHED_VTHREAD=0`), then
//! per-goroutine values across migration, errno, TLS destructors and
//! `thread::current()`.

mod common;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use gosched::{chan, Chan};

/// Two handles on one unbuffered channel (sending and receiving side).
fn pair<T>() -> (Chan<T>, Chan<T>) {
    let c = chan(0);
    (c.clone(), c)
}

fn one_p() -> gosched::Runtime {
    common::rt(1)
}

/// Two Ps, goroutines free to change M (Go's scheduling).
fn migrating_2p() -> gosched::Runtime {
    assert_eq!(gosched::runtime::virtual_threads(), Ok(()));
    common::rt(2)
}

/// Pattern 1: a lazy `thread_local!` whose initialiser parks. On one P, A
/// starts the init and parks; B initialises its own and keeps `&X` across a
/// park; A's init returns. Sharing the thread's TLS, std took A's return for a
/// recursive init and dropped B's value under B's reference.
#[test]
fn a_lazy_thread_local_init_that_parks() {
    use std::sync::atomic::AtomicBool;
    thread_local! {
        static CLIENT: String = make_client();
    }
    static FIRST: AtomicBool = AtomicBool::new(true);
    static STEPS: Mutex<Option<(Chan<()>, Chan<()>)>> = Mutex::new(None);
    fn make_client() -> String {
        if FIRST.swap(false, SeqCst) {
            // A: say it is inside its initialiser, and park there until B has
            // made and used its own.
            let (in_init, release) = STEPS.lock().unwrap().clone().unwrap();
            in_init.send(()).unwrap();
            assert_eq!(release.recv(), Some(()));
        }
        format!("client of {:?}", std::thread::current().id())
    }
    let rt = one_p();
    let (in_init, a_in_init) = pair::<()>();
    let (release, release_rx) = pair::<()>();
    *STEPS.lock().unwrap() = Some((in_init, release_rx));
    let a = rt.go(|| CLIENT.with(|c| c.clone()));
    let b = rt.go(move || {
        assert_eq!(a_in_init.recv(), Some(()));
        let me = std::thread::current().id();
        let held = CLIENT.with(|c| {
            // Park with `&X` held while A is parked in its init.
            for _ in 0..10 {
                gosched::yield_now();
            }
            assert_eq!(*c, format!("client of {me:?}"));
            c.clone()
        });
        // Let A's initialiser return, then look again.
        release.send(()).unwrap();
        gosched::yield_now();
        assert_eq!(CLIENT.with(|c| c.clone()), held);
        held
    });
    let (a, b) = (rt.block_on(a).unwrap(), rt.block_on(b).unwrap());
    assert_ne!(a, b, "each goroutine has its own CLIENT");
    assert!(a.starts_with("client of"), "{a}");
}

scoped_tls::scoped_thread_local!(static CUR: u32);

/// Pattern 2: scoped-tls. A and B each park inside `CUR.set(&local, ..)`;
/// A leaves first; B must still see its own value, and after its scope,
/// none. Sharing the thread's TLS, B restored A's freed `&a`.
#[test]
fn scoped_tls_scopes_are_per_goroutine() {
    let rt = one_p();
    let (a_in_tx, a_in) = pair::<()>();
    let (b_in_tx, b_in) = pair::<()>();
    let a = rt.go(move || {
        let local = 1u32;
        CUR.set(&local, || {
            a_in_tx.send(()).unwrap();
            assert_eq!(b_in.recv(), Some(()));
            CUR.with(|v| *v)
        })
    });
    let b = rt.go(move || {
        assert_eq!(a_in.recv(), Some(()));
        let local = 2u32;
        let seen = CUR.set(&local, || {
            b_in_tx.send(()).unwrap();
            // A leaves its scope now and frees its value.
            for _ in 0..10 {
                gosched::yield_now();
            }
            CUR.with(|v| *v)
        });
        (seen, CUR.is_set())
    });
    assert_eq!(rt.block_on(a).unwrap(), 1);
    assert_eq!(rt.block_on(b).unwrap(), (2, false));
}

/// Pattern 3: the panic state. While A parks in a destructor during its
/// unwind, B on the same thread must not see `thread::panicking()`.
#[test]
fn panicking_is_per_goroutine() {
    struct ParkOnDrop(Chan<()>, Chan<()>);
    impl Drop for ParkOnDrop {
        fn drop(&mut self) {
            assert!(std::thread::panicking());
            self.0.send(()).unwrap();
            assert_eq!(self.1.recv(), Some(()));
        }
    }
    let rt = one_p();
    let (in_drop_tx, in_drop) = pair::<()>();
    let (resume_tx, resume) = pair::<()>();
    let a = rt.go(move || {
        let _guard = ParkOnDrop(in_drop_tx, resume);
        panic!("A unwinds");
    });
    let b = rt.go(move || {
        assert_eq!(in_drop.recv(), Some(()));
        let seen = std::thread::panicking();
        resume_tx.send(()).unwrap();
        seen
    });
    assert!(!rt.block_on(b).unwrap(), "B saw A's panic");
    assert!(rt.block_on(a).unwrap_err().is_panic());
}

/// Pattern 3, second half: a panic hook that parks, and a second panic on
/// the same thread meanwhile. Sharing the thread's TLS, the second panic found
/// the thread "panicking" and aborted the process. In a child process (the
/// hook is process-wide).
#[test]
fn a_panic_hook_that_parks() {
    if std::env::var_os("VTHREAD_HOOK_CHILD").is_none() {
        let out = common::run_child_test("a_panic_hook_that_parks", "VTHREAD_HOOK_CHILD");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child failed: {:?}\n{err}",
            out.status
        );
        assert_eq!(err.matches("hook saw").count(), 2, "{err}");
        return;
    }
    static HOOKED: AtomicUsize = AtomicUsize::new(0);
    std::panic::set_hook(Box::new(|info| {
        let n = HOOKED.fetch_add(1, SeqCst);
        if n == 0 {
            // The first panic's hook parks until the second panic's has run.
            while HOOKED.load(SeqCst) < 2 {
                gosched::yield_now();
            }
        }
        eprintln!(
            "hook saw {}",
            info.payload().downcast_ref::<&str>().unwrap()
        );
    }));
    let rt = one_p();
    let a = rt.go(|| panic!("first"));
    let b = rt.go(|| panic!("second"));
    assert!(rt.block_on(a).unwrap_err().is_panic());
    assert!(rt.block_on(b).unwrap_err().is_panic());
    let _ = std::panic::take_hook();
}

/// Pattern 4: tracing's current span. A enters a span and parks; B logs with
/// no span of its own; A's last event must carry only A's span.
#[test]
fn tracing_spans_are_per_goroutine() {
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let sink = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .with_level(false)
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let rt = one_p();
    let (a_in_tx, a_in) = pair::<()>();
    let (b_done_tx, b_done) = pair::<()>();
    let d = dispatch.clone();
    let a = rt.go(move || {
        tracing::dispatcher::with_default(&d, || {
            let span = tracing::info_span!("request", id = "A");
            let _e = span.enter();
            a_in_tx.send(()).unwrap();
            assert_eq!(b_done.recv(), Some(()));
            tracing::info!("A ends");
        })
    });
    let d = dispatch.clone();
    let b = rt.go(move || {
        tracing::dispatcher::with_default(&d, || {
            assert_eq!(a_in.recv(), Some(()));
            let span = tracing::info_span!("request", id = "B");
            drop(span);
            tracing::info!("B logs with no span of its own");
            b_done_tx.send(()).unwrap();
        })
    });
    rt.block_on(a).unwrap();
    rt.block_on(b).unwrap();
    let out = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let got: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(
        got,
        [
            "B logs with no span of its own",
            "request{id=\"A\"}: A ends"
        ],
        "{out}"
    );
}

fn gettid() -> i64 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Thread-locals, errno and `thread::current()` stay each goroutine's own
/// across yields, channel hand-offs, sleeps and (in a migrating runtime)
/// moves between OS threads, which the check requires to happen.
#[test]
fn per_goroutine_values_across_moves() {
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    let rt = migrating_2p();
    let moved = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let moved = moved.clone();
            let ch = chan::<usize>(1);
            let (tx, rx) = (ch.clone(), ch);
            rt.go(move || {
                let me = std::thread::current().id();
                MINE.with(|m| m.set(i));
                // SAFETY: errno is this goroutine's.
                unsafe { *libc::__errno_location() = i as i32 + 1 };
                for r in 0..50 {
                    let tid = gettid();
                    match r % 3 {
                        0 => gosched::yield_now(),
                        1 => {
                            tx.send(r).unwrap();
                            assert_eq!(rx.recv(), Some(r));
                        }
                        _ => gosched::time::sleep(std::time::Duration::from_micros(20)),
                    }
                    if gettid() != tid {
                        moved.fetch_add(1, SeqCst);
                    }
                    assert_eq!(MINE.with(|m| m.get()), i);
                    // SAFETY: as above.
                    assert_eq!(unsafe { *libc::__errno_location() }, i as i32 + 1);
                    assert_eq!(std::thread::current().id(), me);
                }
                me
            })
        })
        .collect();
    let mut ids: Vec<_> = handles
        .into_iter()
        .map(|h| rt.block_on(h).unwrap())
        .collect();
    ids.sort_by_key(|id| format!("{id:?}"));
    ids.dedup();
    assert_eq!(ids.len(), 100, "every goroutine has a ThreadId of its own");
    assert!(
        moved.load(SeqCst) > 0,
        "no goroutine changed OS thread: the check proves nothing"
    );
}

/// Each goroutine's `thread_local!` destructors run once, when it ends, and
/// see its own values.
#[test]
fn tls_destructors_run_per_goroutine() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    static SUM: AtomicUsize = AtomicUsize::new(0);
    struct Counted(usize);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
            SUM.fetch_add(self.0, SeqCst);
        }
    }
    thread_local! {
        static V: RefCell<Option<Counted>> = const { RefCell::new(None) };
    }
    let rt = common::rt(2);
    let handles: Vec<_> = (1..=1000)
        .map(|i| {
            rt.go(move || {
                V.with(|v| *v.borrow_mut() = Some(Counted(i)));
                gosched::yield_now();
                assert_eq!(V.with(|v| v.borrow().as_ref().unwrap().0), i);
            })
        })
        .collect();
    for h in handles {
        rt.block_on(h).unwrap();
    }
    assert_eq!(DROPS.load(SeqCst), 1000);
    assert_eq!(SUM.load(SeqCst), 1000 * 1001 / 2);
}

/// `fork` from a goroutine: the child runs on the goroutine's thread pointer,
/// reads its thread-locals and exits with what it read; `Command` works too.
#[test]
fn fork_from_a_goroutine() {
    thread_local! {
        static V: Cell<i32> = const { Cell::new(0) };
    }
    let rt = common::rt(2);
    let (status, out) = rt
        .block_on(rt.go(|| {
            V.with(|v| v.set(42));
            gosched::yield_now();
            // SAFETY: the child only reads a thread-local and calls _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // The child is single-threaded and glibc's fork bookkeeping
                // ran on the M's TCB: it can start a thread, and exits with
                // what its goroutine's thread-local holds.
                let started = std::thread::spawn(|| 1).join().unwrap_or(0);
                // SAFETY: the child's own exit.
                unsafe { libc::_exit(V.with(|v| v.get()) + started) };
            }
            assert!(pid > 0, "fork failed");
            let mut status = 0;
            // SAFETY: our child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            let out = std::process::Command::new("sh")
                .args(["-c", "echo forked"])
                .output()
                .unwrap();
            (status, out)
        }))
        .unwrap();
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 43);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "forked\n");
}

/// A `dlopen`ed library's TLS (dynamic TLS, through the DTV and
/// `__tls_get_addr`) stays per OS thread: two goroutines on one M share it,
/// and a goroutine that first touches it allocates the M's block.
#[test]
fn dlopened_tls_is_per_os_thread() {
    let dir = std::env::temp_dir().join(format!("gosched-vthread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("tlslib.c");
    let lib = dir.join("libtlslib.so");
    std::fs::write(
        &src,
        "static __thread long v = 5;\nlong tls_get(void) { return v; }\nvoid tls_set(long x) { v = x; }\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("this test builds a C library with `{cc}`: {e}"));
    assert!(built.success());
    let path = std::ffi::CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: a library of ours with no constructors.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    assert!(!h.is_null());
    // SAFETY: symbols of that library, of these types.
    let (get, set) = unsafe {
        let g = libc::dlsym(h, c"tls_get".as_ptr());
        let s = libc::dlsym(h, c"tls_set".as_ptr());
        assert!(!g.is_null() && !s.is_null());
        (
            std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> i64>(g),
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(i64)>(s),
        )
    };
    let rt = one_p();
    let (a_set, a_set_rx) = pair::<()>();
    let (b_set, b_set_rx) = pair::<()>();
    let a = rt.go(move || {
        assert_eq!(get(), 5, "the module's initial value on a fresh M");
        set(1);
        a_set.send(()).unwrap();
        assert_eq!(b_set_rx.recv(), Some(()));
        get()
    });
    let b = rt.go(move || {
        assert_eq!(a_set_rx.recv(), Some(()));
        let seen = get();
        set(2);
        b_set.send(()).unwrap();
        seen
    });
    assert_eq!(rt.block_on(b).unwrap(), 1, "B sees the M's value A set");
    assert_eq!(rt.block_on(a).unwrap(), 2, "A sees the M's value B set");
    assert_eq!(get(), 5, "this thread's own block is untouched");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Goroutines that move between Ms while they allocate and free: each M's
/// malloc state must stay its own (a shared tcache corrupts the heap).
#[test]
fn allocation_across_moves() {
    let rt = migrating_2p();
    let handles: Vec<_> = (0..64)
        .map(|i| {
            rt.go(move || {
                let mut kept: Vec<Vec<u64>> = Vec::new();
                for r in 0..300u64 {
                    let v: Vec<u64> = (0..(r % 37) + i).collect();
                    kept.push(v);
                    if kept.len() > 8 {
                        let old = kept.remove(0);
                        assert!(old.iter().enumerate().all(|(k, &x)| x == k as u64));
                    }
                    if r % 4 == 0 {
                        gosched::yield_now();
                    }
                }
                kept.len()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(rt.block_on(h).unwrap(), 8);
    }
}

/// A runtime dropped inside a goroutine of another cancels its parked
/// goroutines on that goroutine's thread: each unwinds on its own
/// thread pointer, and the dropping goroutine gets its own back.
#[test]
fn dropping_a_runtime_inside_a_goroutine_keeps_its_thread_locals() {
    thread_local! {
        static V: Cell<u32> = const { Cell::new(0) };
    }
    let outer = one_p();
    let seen = outer
        .block_on(outer.go(|| {
            V.with(|v| v.set(7));
            let inner = migrating_2p();
            let (started_tx, started) = pair::<()>();
            let never = chan::<()>(0);
            let rx = never.clone();
            inner.go(move || {
                V.with(|v| v.set(99));
                started_tx.send(()).unwrap();
                rx.recv()
            });
            assert_eq!(started.recv(), Some(()));
            drop(inner);
            drop(never);
            V.with(|v| v.get())
        }))
        .unwrap();
    assert_eq!(seen, 7);
}
