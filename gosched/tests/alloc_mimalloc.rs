//! Allocator churn with mimalloc as the global allocator: see `common/churn.rs`.
#![cfg(target_os = "linux")]

#[path = "common/churn.rs"]
mod churn;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[test]
fn a_million_goroutines_leave_no_mimalloc_state_behind() {
    churn::churn("mimalloc");
}
