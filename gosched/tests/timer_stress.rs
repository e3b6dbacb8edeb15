//! Timer stress: many goroutines sleeping short, varied durations, so that the
//! timer sleeper M is woken, re-armed and handed Ps in every order. A lost P or
//! a stuck spinning count shows up as a hang (the test harness times out).

mod common;

use std::time::Duration;

use common::rt;

#[test]
fn varied_short_sleeps() {
    let rt = rt(2);
    for _ in 0..200 {
        let hs: Vec<_> = (0..64u64)
            .map(|i| {
                rt.go(move || {
                    for k in 0..5u64 {
                        gosched::time::sleep(Duration::from_micros(50 + ((i * 37 + k * 11) % 400)));
                    }
                })
            })
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
    }
}

#[test]
fn decreasing_deadlines_wake_the_sleeper() {
    let rt = rt(2);
    for _ in 0..20 {
        let long = rt.go(|| gosched::time::sleep(Duration::from_millis(30)));
        let hs: Vec<_> = (0..50u64)
            .map(|i| rt.go(move || gosched::time::sleep(Duration::from_micros(20_000 - i * 300))))
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
        rt.block_on(long).unwrap();
    }
}
