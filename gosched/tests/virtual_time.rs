//! Virtual time (`gosched::testing`, `Builder::virtual_time`,
//! `#[gosched::test(virtual_time)]`): the clock moves only when every
//! goroutine and task is parked, straight to the earliest timer; it stands
//! still while anything runs; a stall with no timer is reported.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gosched::testing::{run_virtual, run_virtual_async};
use gosched::time::{self, now, since};

const HOUR: Duration = Duration::from_secs(3600);

/// Real time a virtual test may take: generous for a loaded CI box, and
/// far below what any of them would take on the real clock.
const REAL_BUDGET: Duration = Duration::from_secs(20);

#[test]
fn an_hour_of_sleep_takes_no_real_time() {
    let real = Instant::now();
    let waited = run_virtual(|| {
        let t = now();
        time::sleep(HOUR);
        since(t)
    });
    assert_eq!(waited, HOUR, "the clock moves exactly to the deadline");
    assert!(real.elapsed() < REAL_BUDGET, "took {:?}", real.elapsed());
}

#[test]
fn timeout_fires_at_its_deadline_before_a_slower_reply() {
    let (err, at) = run_virtual(|| {
        let reply = gosched::chan::<u32>(0);
        let r = reply.clone();
        gosched::go(move || {
            time::sleep(Duration::from_secs(30));
            let _ = r.send(7);
        });
        let t = now();
        let got = reply.recv_timeout(Duration::from_secs(10));
        let at = since(t);
        // The reply still comes, 20 s later.
        assert_eq!(reply.recv(), Some(7));
        assert_eq!(since(t), Duration::from_secs(30));
        (got.is_err(), at)
    });
    assert!(err);
    assert_eq!(at, Duration::from_secs(10));
}

#[test]
fn sleepers_wake_in_deadline_order_at_their_deadlines() {
    let woke = run_virtual(|| {
        let start = now();
        let out = Arc::new(Mutex::new(Vec::new()));
        let wg = gosched::sync::WaitGroup::new();
        // Spawned in a scrambled order: 37 is coprime to 200.
        for k in 0..200u64 {
            let i = (k * 37) % 200;
            let (out, wg) = (out.clone(), wg.clone());
            wg.add(1);
            gosched::go(move || {
                time::sleep(Duration::from_millis(100) * i as u32 + Duration::from_secs(1));
                out.lock().unwrap().push((i, since(start)));
                wg.done();
            });
        }
        wg.wait();
        Arc::try_unwrap(out).unwrap().into_inner().unwrap()
    });
    assert_eq!(woke.len(), 200);
    for (n, (i, at)) in woke.iter().enumerate() {
        assert_eq!(*i, n as u64, "woken out of deadline order: {woke:?}");
        assert_eq!(
            *at,
            Duration::from_millis(100) * n as u32 + Duration::from_secs(1)
        );
    }
}

#[test]
fn channel_timers_follow_the_clock() {
    run_virtual(|| {
        let t = now();
        // after: the value is the virtual time it fired at.
        let fired = time::after(Duration::from_secs(5)).recv().unwrap();
        assert_eq!(fired - t, Duration::from_secs(5));
        // tick: ten ticks, one second apart.
        let ticker = time::tick(Duration::from_secs(1));
        for n in 1..=10u32 {
            let at = ticker.recv().unwrap();
            assert_eq!(at - t, Duration::from_secs(5) + Duration::from_secs(1) * n);
        }
        ticker.stop();
        // Timer::after_func runs its goroutine at the deadline.
        let tx = gosched::chan::<Duration>(1);
        let tx2 = tx.clone();
        let _timer = time::Timer::after_func(Duration::from_secs(60), move || {
            let _ = tx2.send(since(t));
        });
        assert_eq!(tx.recv(), Some(Duration::from_secs(75)));
        // select's timeout arm.
        let never = gosched::chan::<()>(0);
        let before = now();
        gosched::select! {
            recv(never) -> _ => unreachable!("nobody sends"),
            after(Duration::from_secs(2)) => {}
        }
        assert_eq!(since(before), Duration::from_secs(2));
    });
}

#[test]
fn the_clock_stands_still_while_goroutines_run() {
    let (busy_saw, sleeper_saw) = run_virtual(|| {
        let start = now();
        let sleeper = gosched::go(move || {
            time::sleep(Duration::from_millis(1));
            since(start)
        });
        // Real work (and real time) with a timer due 1 ms on: as long as
        // this goroutine runs, the clock does not move.
        let real = Instant::now();
        let mut x = 0u64;
        while real.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
            gosched::yield_now();
        }
        let busy_saw = since(start);
        (busy_saw, sleeper.join().unwrap())
    });
    assert_eq!(busy_saw, Duration::ZERO);
    assert_eq!(sleeper_saw, Duration::from_millis(1));
}

/// A goroutine blocked in `call` for 50 ms of real time, beside one whose
/// timer is due 1 ms on: what each saw of the clock.
fn during_a_blocking_call(call: fn()) -> (Duration, Duration) {
    run_virtual(move || {
        let start = now();
        let sleeper = gosched::go(move || {
            time::sleep(Duration::from_millis(1));
            since(start)
        });
        // Let the sleeper arm its timer, then block for real: everything
        // else is parked meanwhile.
        gosched::yield_now();
        call();
        let during = since(start);
        (during, sleeper.join().unwrap())
    })
}

#[test]
fn the_clock_stands_still_during_a_syscall() {
    // In place, the P given away first (a site never measured)...
    let (during, sleeper_saw) = during_a_blocking_call(|| {
        gosched::syscall(|| std::thread::sleep(Duration::from_millis(50)))
    });
    assert_eq!(during, Duration::ZERO, "the clock moved during a call");
    assert_eq!(sleeper_saw, Duration::from_millis(1));
    // ... or keeping it.
    let (during, sleeper_saw) = during_a_blocking_call(|| {
        gosched::syscall_local(|| std::thread::sleep(Duration::from_millis(50)))
    });
    assert_eq!(
        during,
        Duration::ZERO,
        "the clock moved during an in-place call"
    );
    assert_eq!(sleeper_saw, Duration::from_millis(1));
}

#[test]
fn async_tasks_and_futures_follow_the_clock() {
    let waited = run_virtual_async(async {
        let t = now();
        time::sleep_async(Duration::from_secs(24 * 3600)).await;
        let slow = async {
            time::sleep_async(HOUR).await;
            1
        };
        let r = time::timeout(Duration::from_secs(5), slow).await;
        assert!(r.is_err());
        since(t)
    });
    assert_eq!(waited, Duration::from_secs(24 * 3600 + 5));
}

#[test]
fn socket_deadlines_follow_the_clock() {
    let (kind, waited) = run_virtual(|| {
        use std::io::Read;
        let listener = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A server that accepts and never writes.
        let server = gosched::go(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1];
            conn.read(&mut buf).map(|n| n == 0)
        });
        let mut client = gosched::net::TcpStream::connect(addr).unwrap();
        client.set_read_timeout(Some(HOUR)).unwrap();
        let t = now();
        let mut buf = [0u8; 8];
        let err = client.read(&mut buf).unwrap_err();
        let waited = since(t);
        drop(client); // the server's read sees EOF
        assert_eq!(server.join().unwrap().ok(), Some(true));
        (err.kind(), waited)
    });
    assert_eq!(kind, std::io::ErrorKind::TimedOut);
    assert_eq!(waited, HOUR);
}

#[test]
fn pool_workers_expire_on_the_virtual_clock() {
    run_virtual(|| {
        let pool = gosched::pool::Pool::builder()
            .capacity(10)
            .expiry(Duration::from_secs(60))
            .build()
            .unwrap();
        let wg = gosched::sync::WaitGroup::new();
        for _ in 0..10 {
            let wg = wg.clone();
            wg.add(1);
            pool.submit(move || wg.done()).unwrap();
        }
        wg.wait();
        assert!(pool.running() > 0);
        // Two expiry periods later every idle worker was purged.
        time::sleep(Duration::from_secs(150));
        assert_eq!(pool.running(), 0);
        pool.release();
    });
}

#[test]
fn a_stall_with_no_timer_fails_with_the_dump() {
    let real = Instant::now();
    let err = std::panic::catch_unwind(|| {
        run_virtual(|| {
            let never = gosched::chan::<u8>(0);
            let keep = never.clone();
            gosched::go(move || keep.recv());
            never.recv()
        })
    })
    .expect_err("a goroutine that nothing can wake must fail the test");
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| err.downcast_ref::<&str>().unwrap().to_string());
    assert!(msg.contains("virtual time is stuck"), "{msg}");
    assert!(
        msg.contains("chan receive"),
        "the dump names the waits: {msg}"
    );
    assert!(real.elapsed() < REAL_BUDGET);
}

#[test]
fn real_time_runtimes_keep_the_real_clock() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let (t0, t1) = rt
        .block_on(rt.go(|| {
            let t0 = now();
            time::sleep(Duration::from_millis(20));
            (t0, now())
        }))
        .unwrap();
    assert!(t1 - t0 >= Duration::from_millis(20));
    // A virtual runtime beside it does not change this one's clock.
    let _v = gosched::Builder::new().virtual_time(true).build().unwrap();
    let real_now = rt.block_on(rt.go(now)).unwrap();
    assert!(real_now.duration_since(t1) < Duration::from_secs(60));
    assert!(Instant::now() >= real_now);
}

#[gosched::test(virtual_time)]
fn the_test_attribute_runs_on_virtual_time() {
    let t = now();
    let h = gosched::go(|| time::sleep(HOUR));
    h.join().unwrap();
    assert_eq!(since(t), HOUR);
}

#[gosched::test(virtual_time, procs = 2)]
async fn the_test_attribute_on_async_fns() {
    let t = now();
    time::sleep_async(HOUR).await;
    assert_eq!(since(t), HOUR);
}

// ---- Regressions found by review ------------------------------------------

/// Burn real CPU for `d` without a runtime call.
fn spin_real(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::black_box(0u64);
    }
}

#[test]
fn a_goroutine_that_never_yields_keeps_the_clock_still() {
    // sysmon once compared the virtual deadline with the real clock, found
    // the hog's P "needed" and retook it; the idle P let the clock jump.
    let (busy, slept) = run_virtual(|| {
        let start = now();
        let s = gosched::go(move || {
            time::sleep(Duration::from_millis(1));
            since(start)
        });
        gosched::yield_now();
        spin_real(Duration::from_millis(100));
        let busy = since(start);
        (busy, s.join().unwrap())
    });
    assert_eq!(busy, Duration::ZERO);
    assert_eq!(slept, Duration::from_millis(1));
    // A goroutine left in runnext behind the hog: the same.
    let busy = run_virtual(|| {
        let start = now();
        let _s = gosched::go(move || time::sleep(HOUR));
        spin_real(Duration::from_millis(100));
        since(start)
    });
    assert_eq!(busy, Duration::ZERO);
}

// An async test body runs on the test thread: woken by a goroutine that then
// sleeps, it must see the clock where the send left it (the clock once moved
// between the wake and the thread's next poll).
#[gosched::test(virtual_time)]
async fn a_woken_block_on_thread_is_busy_until_it_polls() {
    let start = now();
    let ch = gosched::chan::<u32>(0);
    let tx = ch.clone();
    gosched::go(move || {
        for i in 0..20 {
            tx.send(i).unwrap();
            time::sleep(HOUR);
        }
    });
    for i in 0..20u32 {
        assert_eq!(ch.recv_async().await, Some(i));
        assert_eq!(since(start), HOUR * i, "message {i} was sent at {i} h");
    }
}

#[test]
fn a_goroutine_parked_inside_a_syscall_lets_the_clock_move() {
    // The syscall's busy count used to stay up while its goroutine parked
    // inside `f`: the clock never moved again (a hang).
    let (slept, got) = run_virtual(|| {
        let t = now();
        gosched::syscall(|| time::sleep(Duration::from_secs(1)));
        let slept = since(t);
        let ch = gosched::chan::<u8>(0);
        let tx = ch.clone();
        gosched::go(move || {
            time::sleep(Duration::from_secs(5));
            tx.send(9).unwrap();
        });
        let got = gosched::syscall_local(|| ch.recv());
        (slept, (got, since(t)))
    });
    assert_eq!(slept, Duration::from_secs(1));
    assert_eq!(got, (Some(9), Duration::from_secs(6)));
}

#[test]
fn a_stuck_async_test_body_is_reported() {
    // The body polls on the test thread; with nothing spawned no M existed
    // to notice the stall (it hung).
    let rt = gosched::Builder::new()
        .procs(1)
        .virtual_time(true)
        .build()
        .unwrap();
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gosched::__private::test_future(rt, async {
            let never = gosched::chan::<u8>(0);
            let _keep = never.clone();
            never.recv_async().await
        })
    }))
    .expect_err("nothing can wake the body: the test must fail");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("virtual time is stuck"), "{msg}");
}

#[test]
fn a_plain_thread_that_keeps_waking_a_goroutine_is_no_stall() {
    // Wakes that ran and parked again between two of the sleeper's looks
    // once went unseen, and 1 s of them was reported as a stall.
    let n = run_virtual(|| {
        let ch = gosched::chan::<u32>(0);
        let tx = ch.clone();
        let feeder = std::thread::spawn(move || {
            for i in 0..5 {
                std::thread::sleep(Duration::from_millis(300));
                tx.send(i).unwrap();
            }
        });
        let got: Vec<u32> = (0..5).map(|_| ch.recv().unwrap()).collect();
        feeder.join().unwrap();
        got
    });
    assert_eq!(n, vec![0, 1, 2, 3, 4]);
}

#[test]
fn waits_on_real_time_stay_real_inside_a_virtual_runtime() {
    // `shutdown_timeout` of another runtime took its deadline on the
    // virtual clock: 300 ms behind the real one, it gave up at once.
    let (ok, took) = run_virtual(|| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) {
            gosched::yield_now();
        }
        let other = gosched::Builder::new().procs(1).build().unwrap();
        let h = other.go(|| 1);
        while !h.is_finished() {
            gosched::yield_now();
        }
        let t = Instant::now();
        let ok = gosched::syscall(move || other.shutdown_timeout(Duration::from_secs(10)));
        (ok, t.elapsed())
    });
    assert!(ok, "an idle runtime shuts down within 10 s (took {took:?})");
}
