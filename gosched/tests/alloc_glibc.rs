//! Allocator churn with glibc as the global allocator: see `common/churn.rs`.
#![cfg(target_os = "linux")]

#[path = "common/churn.rs"]
mod churn;

// glibc malloc: std's System allocator, the default.
#[global_allocator]
static ALLOCATOR: std::alloc::System = std::alloc::System;

#[test]
fn a_million_goroutines_leave_no_glibc_state_behind() {
    churn::churn("glibc");
}
