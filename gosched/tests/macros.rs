//! `#[gosched::test]` and `#[gosched::main]`: options reach the runtime, a
//! plain `fn` runs as a goroutine and an `async fn` as a future, `Result`
//! returns and `?` work, panics fail the test; misuse is a compile error
//! with a message that says what to do (`tests/ui`, checked with trybuild).

use std::time::Duration;

#[gosched::test]
fn a_plain_test_runs_as_a_goroutine() {
    // Blocking calls park the goroutine: a goroutine readied by a channel
    // runs while this one waits.
    let ch = gosched::chan::<u32>(0);
    let tx = ch.clone();
    gosched::go(move || tx.send(7).unwrap());
    assert_eq!(ch.recv(), Some(7));
    assert!(gosched::runtime::num_goroutine() >= 1);
}

#[gosched::test(procs = 3)]
fn procs_reach_the_runtime() {
    assert_eq!(gosched::runtime::procs(), 3);
}

#[gosched::test(procs = 1, stack_size = 64 * 1024, deadlock_detection = false)]
async fn an_async_test_with_every_option() {
    assert_eq!(gosched::runtime::procs(), 1);
    gosched::time::sleep_async(Duration::from_millis(1)).await;
    let h = gosched::go(|| 40 + 2);
    assert_eq!(h.await.unwrap(), 42);
}

#[gosched::test]
fn a_test_may_return_a_result() -> Result<(), String> {
    let v: u32 = "42".parse().map_err(|e| format!("{e}"))?;
    if v == 42 {
        return Ok(());
    }
    Err("unreachable".into())
}

#[gosched::test]
async fn an_async_test_may_use_question_marks() -> Result<(), std::num::ParseIntError> {
    let v: u32 = "7".parse()?;
    gosched::task::yield_now().await;
    assert_eq!(v, 7);
    Ok(())
}

#[gosched::test]
#[should_panic(expected = "boom in a goroutine")]
fn a_panic_fails_the_test() {
    panic!("boom in a goroutine");
}

#[gosched::test]
#[should_panic(expected = "boom in a task")]
async fn a_panic_in_an_async_test_fails_it() {
    panic!("boom in a task");
}

/// Misuse gets a compile error that says what to do.
#[test]
fn misuse_is_a_clear_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
