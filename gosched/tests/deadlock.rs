//! Deadlock detection (Go's `checkdead`), without libtest: the check stays
//! silent while any thread it does not know exists, and libtest has a few.
//! `main` runs every scenario as a child process of this binary (argument
//! `child <name>`) and checks its exit status and stderr.
//!
//! - `chan_held_by_parked`: the main thread waits for a goroutine that
//!   receives on a channel whose only sender is held by another parked
//!   goroutine: Go's message, exit status 2.
//! - No false positive, each ends normally: a goroutine sleeping (a pending
//!   timer); a goroutine in a 300 ms `syscall` (handed off and in place); a
//!   foreign thread holding the sender, which sends after 300 ms.

use std::process::Command;
use std::time::{Duration, Instant};

const MESSAGE: &str = "fatal error: all goroutines are asleep - deadlock!";

fn rt() -> gosched::Runtime {
    gosched::Builder::new().procs(2).build().unwrap()
}

fn child(name: &str) {
    match name {
        "chan_held_by_parked" => {
            let rt = rt();
            let ch = gosched::chan::<u32>(0);
            let keep = ch.clone();
            // Holds a sender and parks for ever on another channel.
            let never = gosched::chan::<()>(0);
            let n2 = never.clone();
            let _holder = rt.go(move || {
                let _keep = keep;
                let _ = n2.recv();
            });
            let rx = ch.clone();
            drop(ch);
            let h = rt.go(move || rx.recv());
            let _ = rt.block_on(h);
            drop(never);
            println!("not detected");
        }
        "timer_pending" => {
            let rt = rt();
            rt.block_on(rt.go(|| gosched::time::sleep(Duration::from_millis(300))))
                .unwrap();
        }
        "syscall_running" => {
            let rt = rt();
            rt.block_on(rt.go(|| {
                // A site that gives its P away first, and one that keeps it.
                let other = gosched::go(|| gosched::time::sleep(Duration::from_millis(1)));
                gosched::syscall(|| std::thread::sleep(Duration::from_millis(300)));
                gosched::syscall_local(|| std::thread::sleep(Duration::from_millis(300)));
                other.join().unwrap();
            }))
            .unwrap();
        }
        "foreign_sender" => {
            let rt = rt();
            let ch = gosched::chan::<u32>(0);
            let tx = ch.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                tx.send(7).unwrap();
            });
            let v = rt.block_on(rt.go(move || ch.recv())).unwrap();
            assert_eq!(v, Some(7));
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// Runs a scenario; one that has not ended in 60 s (an undetected
/// deadlock) is killed, and its status says so.
fn run(name: &str) -> std::process::Output {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["child", name])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            c.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "child" {
        child(&args[2]);
        return;
    }
    let mut failed = 0;
    let mut check = |name: &str, ok: bool, why: String| {
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            eprintln!("---- {name}: {why}");
            failed += 1;
        }
    };

    let t = Instant::now();
    let out = run("chan_held_by_parked");
    let err = String::from_utf8_lossy(&out.stderr);
    check(
        "chan_held_by_parked",
        out.status.code() == Some(2) && err.contains(MESSAGE),
        format!("status {:?}, stderr:\n{err}", out.status),
    );
    eprintln!("detected in {:?}", t.elapsed());

    for name in ["timer_pending", "syscall_running", "foreign_sender"] {
        let out = run(name);
        let err = String::from_utf8_lossy(&out.stderr);
        check(
            name,
            out.status.success() && !err.contains(MESSAGE),
            format!("status {:?}, stderr:\n{err}", out.status),
        );
    }
    if failed > 0 {
        eprintln!("{failed} deadlock test(s) failed");
        std::process::exit(1);
    }
    println!("test result: ok. 4 passed");
}
