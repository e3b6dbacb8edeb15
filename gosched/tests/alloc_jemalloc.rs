//! Allocator churn with jemalloc as the global allocator: see `common/churn.rs`.
#![cfg(target_os = "linux")]

#[path = "common/churn.rs"]
mod churn;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[test]
fn a_million_goroutines_leave_no_jemalloc_state_behind() {
    churn::churn("jemalloc");
}
