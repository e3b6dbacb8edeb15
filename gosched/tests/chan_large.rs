//! Large channel values (issue 17 §4): a blocking `send`/`recv` moves a value
//! at most about twice on the goroutine's stack ("Moving values",
//! `chan/core.rs`), so Go's largest element, 64 KiB, passes through every
//! kind of channel between goroutines on the default 256 KiB stack. In an
//! unoptimised build the test's own code copies the value a few more times
//! (temporaries), so there it sends 32 KiB, which overflowed the default
//! stack before (8–12 copies on the way). Runs in a child process: an
//! overflow aborts.

mod common;

const CHILD_ENV: &str = "GOSCHED_TEST_CHAN_LARGE_CHILD";
const N: usize = if cfg!(debug_assertions) { 32 } else { 64 } * 1024;

/// A 64 KiB value whose bytes say which message it is.
fn value(i: u8) -> Box<[u8; N]> {
    Box::new([i; N])
}

#[test]
fn large_values_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful as the child of the test below
    }
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    for cap in [0, 1, 4] {
        for procs_busy in [false, true] {
            // 50 messages: with cap 0 each side parks in turn; with a buffer
            // the ring, parked senders and parked receivers all carry values.
            let ch = gosched::chan::<[u8; N]>(cap);
            let (tx, rx) = (ch.clone(), ch);
            let receiver = rt.go(move || {
                let mut ok = 0;
                for i in 0..50u8 {
                    let v = rx.recv().expect("value");
                    if v.iter().all(|&b| b == i) {
                        ok += 1;
                    }
                    if procs_busy {
                        gosched::yield_now();
                    }
                }
                ok
            });
            let sender = rt.go(move || {
                for i in 0..50u8 {
                    // From the heap straight into `send`'s argument.
                    tx.send(*value(i)).unwrap();
                }
            });
            rt.block_on(sender).unwrap();
            let ok = rt.block_on(receiver).unwrap();
            assert_eq!(ok, 50, "cap {cap}: every value arrives intact");
            println!("cap {cap} yielding receiver {procs_busy}: ok");
        }
    }
}

#[test]
fn large_values_fit_the_default_stack() {
    let out = common::run_child_test("large_values_child", CHILD_ENV);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed (a stack overflow?):\n{stdout}\n{stderr}"
    );
    assert_eq!(stdout.matches("receiver").count(), 6, "{stdout}");
}
