//! Batched guard installation (`stack/mod.rs`; written by a review of it): the fallbacks of the
//! guard installation, emulated with a seccomp filter in a child process
//! (x86-64 Linux only):
//!
//! * `pidfd-open`: `process_madvise` on `PIDFD_SELF` (-10001) fails with
//!   EBADF, as on Linux 6.13/6.14: the pool must fall back to a
//!   `pidfd_open` descriptor and still batch;
//! * `per-page`: `process_madvise` and `pidfd_open` fail with ENOSYS: one
//!   `madvise` per stack;
//! * `fail-later`: the probe works, every later `process_madvise` fails
//!   with EINVAL (a descriptor closed and reused, a filter added later):
//!   each carve must still get its guard.
//!
//! In each, 270 goroutines park (slabs of 64, 128, 256 stacks: the next
//! stack is about the 80th of the third slab, in its second guard batch)
//! and the next one overflows: its guard must be there and reported.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::time::Duration;

const CHILD_ENV: &str = "GOSCHED_TEST_GUARD_FALLBACK_CHILD";

const SYS_PROCESS_MADVISE: u32 = 440;
const SYS_PIDFD_OPEN: u32 = 434;

fn install_filter(mode: &str) {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let prog: Vec<libc::sock_filter> = match mode {
        "pidfd-open" | "fork" => vec![
            f(LD_W_ABS, 0, 0, 0),                // nr
            f(JEQ_K, 0, 3, SYS_PROCESS_MADVISE), // -> allow
            f(LD_W_ABS, 0, 0, 16),               // args[0] low
            f(JEQ_K, 0, 1, (-10001i32) as u32),  // -> allow
            f(RET_K, 0, 0, ERRNO | libc::EBADF as u32),
            f(RET_K, 0, 0, ALLOW),
        ],
        "per-page" => vec![
            f(LD_W_ABS, 0, 0, 0),
            f(JEQ_K, 2, 0, SYS_PROCESS_MADVISE),
            f(JEQ_K, 1, 0, SYS_PIDFD_OPEN),
            f(RET_K, 0, 0, ALLOW),
            f(RET_K, 0, 0, ERRNO | libc::ENOSYS as u32),
        ],
        "fail-later" => vec![
            f(LD_W_ABS, 0, 0, 0),
            f(JEQ_K, 0, 3, SYS_PROCESS_MADVISE),
            f(LD_W_ABS, 0, 0, 32), // args[2] low: vlen
            f(JEQ_K, 1, 0, 1),     // the probe's one iovec -> allow
            f(RET_K, 0, 0, ERRNO | libc::EINVAL as u32),
            f(RET_K, 0, 0, ALLOW),
        ],
        _ => unreachable!(),
    };
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl calls with a valid filter program that outlives them.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog),
            0,
            "seccomp: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn pidfds_open() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|l| l.to_string_lossy().contains("pidfd"))
                .unwrap_or(false)
        })
        .count()
}

#[test]
fn guard_fallback_child() {
    let Some(mode) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let mode = mode.to_str().unwrap().to_string();
    install_filter(&mode);
    if mode == "fork" {
        // The probe runs in the parent (a pidfd naming the parent), then a
        // forked child carves with the inherited GuardInstall.
        let rt = gosched::Builder::new().procs(1).build().unwrap();
        rt.block_on(rt.go(|| ())).unwrap();
        drop(rt);
        eprintln!("fork: parent holds {} pidfd(s)", pidfds_open());
        // SAFETY: fork; the child only runs this test's code.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid > 0 {
            let mut st = 0;
            // SAFETY: waits for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            eprintln!("fork: child ended, signaled {}", libc::WIFSIGNALED(st));
            std::process::exit(0);
        }
    }
    let before = pidfds_open();
    // One P: the goroutines take their stacks in spawn order from one slab.
    let rt = gosched::Builder::new()
        .procs(1)
        .stack_size(64 * 1024)
        .build()
        .unwrap();
    eprintln!(
        "{mode}: pidfds opened by the probe: {}",
        pidfds_open() - before
    );
    let c = gosched::chan::<()>(0);
    let c2 = c.clone();
    let _parked = rt
        .block_on(rt.go(move || {
            (0..270)
                .map(|_| {
                    let r = c2.clone();
                    gosched::go(move || {
                        let _ = r.recv();
                    })
                })
                .collect::<Vec<_>>()
        }))
        .unwrap();
    while rt.stats().parked < 270 {
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("{mode}: 270 parked; overflowing the next");
    let _keep = c;
    common::overflow_in(&rt, gosched::Go::new().name("fallback-overflow"));
}

#[test]
fn guard_fallbacks_keep_every_guard() {
    for mode in ["pidfd-open", "per-page", "fail-later", "fork"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "guard_fallback_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, mode)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "{mode}: {:?}",
            stderr.lines().find(|l| l.contains("pidfds"))
        );
        assert!(stderr.contains("270 parked"), "{mode}: {stderr}");
        assert!(
            stderr.contains("goroutine stack overflow")
                && stderr.contains("fallback-overflow")
                && stderr.contains("guard page 0x"),
            "{mode}: {stderr}"
        );
        let want = if mode == "pidfd-open" {
            "probe: 1"
        } else {
            "probe: 0"
        };
        assert!(stderr.contains(want), "{mode}: {stderr}");
    }
}
