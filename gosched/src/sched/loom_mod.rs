//! The scheduler's lock-free pieces, compiled alone under `--cfg loom`.
#![allow(dead_code)]

pub(crate) mod runq;
pub(crate) mod status;
pub(crate) mod task {
    //! Only the state word (`task/state.rs`).
    pub(crate) mod state;
}
