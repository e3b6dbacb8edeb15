//! A goroutine that overflows its stack aborts the process with a clear message
//! (never a bare SIGSEGV). Runs the scenario in a child process.

mod common;

const CHILD_ENV: &str = "GOSCHED_TEST_OVERFLOW_CHILD";

#[test]
fn overflow_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful as the child of the test below
    }
    let rt = gosched::Builder::new().procs(1).build().unwrap();
    let go = gosched::Go::new()
        .name("deep-recursion")
        .stack_size(64 * 1024);
    common::overflow_in(&rt, go);
}

#[test]
fn goroutine_stack_overflow_is_reported_and_aborts() {
    let out = common::run_child_test("overflow_child", CHILD_ENV);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "child must die: {stderr}");
    assert!(
        stderr.contains("goroutine stack overflow"),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("deep-recursion"), "stderr: {stderr}");
    assert!(stderr.contains("65536-byte stack"), "stderr: {stderr}");
    assert!(stderr.contains("stack_size"), "names the remedy: {stderr}");
}
