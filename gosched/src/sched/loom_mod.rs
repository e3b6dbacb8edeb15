//! The scheduler's lock-free pieces, compiled alone under `--cfg loom`.
#![allow(dead_code)]

pub(crate) mod park;
pub(crate) mod runq;
pub(crate) mod state;
pub(crate) mod status;
