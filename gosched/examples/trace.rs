//! Record a timeline of a short run and say how to open it.
//!
//!     cargo run --release --example trace [path.json]
//!
//! The run: a ping-pong between two goroutines, a fan-out of async tasks that
//! the other M steals from, a system call made in place that sysmon takes the P away from, and a
//! named goroutine waiting on a channel. Open the file at
//! <https://ui.perfetto.dev> ("Open trace file") or in `chrome://tracing`.
//! Without an argument the file goes to the system's temporary directory.

use std::time::{Duration, Instant};

use gosched::Go;

fn main() {
    let path = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("gosched-trace.json"));
    let rt = gosched::Builder::new().procs(2).build().expect("runtime");

    gosched::runtime::trace_start(&path).expect("start the trace");
    let t = Instant::now();
    rt.block_on(async {
        // 1. Ping-pong: each hand-off is a wake-up arrow from one goroutine
        //    to the other.
        let (ping, pong) = (gosched::chan::<u32>(0), gosched::chan::<u32>(0));
        let (p2, q2) = (ping.clone(), pong.clone());
        let echo = Go::new().name("echo").spawn(move || {
            while let Some(v) = p2.recv() {
                q2.send(v + 1).unwrap();
            }
        });
        let player = gosched::go(move || {
            let mut v = 0;
            for _ in 0..200 {
                ping.send(v).unwrap();
                v = pong.recv().unwrap();
            }
            let _ = ping.close();
            v
        });
        assert_eq!(player.await.unwrap(), 200);
        echo.await.unwrap();

        // 2. Fan-out: 64 small CPU-bound async tasks spawned by one; the
        //    other P steals half of them.
        let hs: Vec<_> = (0..64u64)
            .map(|i| {
                gosched::spawn(async move { (0..20_000u64).fold(i, |a, b| a ^ b.wrapping_mul(31)) })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }

        // 3. A slow system call made in place while other goroutines wait for
        //    its P: sysmon retakes the P and hands it to another M.
        let slow = gosched::go(|| {
            gosched::syscall_local(|| std::thread::sleep(Duration::from_millis(20)))
        });
        let busy: Vec<_> = (0..4)
            .map(|_| gosched::go(|| (0..200_000u64).fold(0, |a, b| a ^ b.wrapping_mul(7))))
            .collect();
        slow.await.unwrap();
        for b in busy {
            b.await.unwrap();
        }

        // 4. A named goroutine parked on a channel for a while.
        let gate = gosched::chan::<()>(0);
        let g2 = gate.clone();
        let waiter = Go::new().name("waiter").spawn(move || g2.recv());
        gosched::time::sleep_async(Duration::from_millis(5)).await;
        gate.send(()).unwrap();
        waiter.await.unwrap();
    });
    let ran = t.elapsed();
    let summary = gosched::runtime::trace_stop().expect("write the trace");
    println!(
        "recorded {} events in {:.1} ms into {}",
        summary.events,
        ran.as_secs_f64() * 1e3,
        path.display()
    );
    println!("open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing:");
    println!("  one track per P (the M holding it, the goroutine it runs, its system calls),");
    println!("  one per thread (runs, wake-up arrows, steals; sysmon's retakes and hand-offs).");
}
