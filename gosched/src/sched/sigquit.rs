//! `GOSCHED_DEBUG=sigquit=1`: on `SIGQUIT` (Ctrl-\), print every runtime's
//! goroutine dump to stderr and exit with status 2 — Go's default
//! behaviour, opt-in here because a Rust program may own that signal.
//!
//! The signal handler only writes one byte to a pipe (`write` is
//! async-signal-safe); a watcher thread blocked on the pipe's other end does
//! the dump (which takes locks and allocates: never inside a handler) and
//! exits. Installed once per process, by the first runtime built with the
//! option; the dump covers every runtime alive then (`context::RUNTIMES`).
//! The watcher is one more thread in `/proc/self/task`, so deadlock
//! detection (which must account for every thread) stays silent while it
//! exists.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

/// The pipe's write end, for the handler (-1 until installed).
static PIPE_W: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_sigquit(_sig: libc::c_int) {
    let fd = PIPE_W.load(Relaxed);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: `write` is async-signal-safe; `fd` is the pipe's write end
        // (never closed) and `b` a live byte.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Install the handler and the watcher (once per process). Errors (no
/// pipe, no thread) leave `SIGQUIT` alone and say so on stderr.
pub(crate) fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid out-array of two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            eprintln!("gosched: GOSCHED_DEBUG=sigquit=1: no pipe; SIGQUIT left alone");
            return;
        }
        let (r, w) = (fds[0], fds[1]);
        let spawned = std::thread::Builder::new()
            .name("gosched-sigquit".into())
            .spawn(move || watch(r));
        if spawned.is_err() {
            eprintln!("gosched: GOSCHED_DEBUG=sigquit=1: no thread; SIGQUIT left alone");
            return;
        }
        PIPE_W.store(w, Relaxed);
        // SAFETY: a zeroed sigaction is valid; we set a plain handler that
        // only calls `write` (async-signal-safe), with an empty mask.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigquit as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGQUIT, &sa, std::ptr::null_mut());
        }
    });
}

/// The watcher: wait for the handler's byte, dump, exit 2.
fn watch(r: libc::c_int) {
    let mut b = 0u8;
    loop {
        // SAFETY: `r` is the pipe's read end, `b` a live one-byte buffer.
        let n = unsafe { libc::read(r, (&mut b as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return; // the write end is never closed: unreachable in practice
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "SIGQUIT: quit\n");
    for rt in super::context::all_runtimes() {
        let _ = rt.dump_goroutines(&mut err);
        let _ = writeln!(err);
    }
    let _ = err.flush();
    std::process::exit(2);
}
