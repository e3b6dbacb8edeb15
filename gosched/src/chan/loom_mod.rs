//! The channel core, compiled alone under `--cfg loom`: the locked state, waiters
//! and claiming (`core.rs`), the wait queues and the select protocol, with the
//! timer (`after`) and the blocking entry points left out.
#![allow(dead_code)]

mod core;
mod error;
mod queue;
mod ring;
mod select;

pub(crate) use error::{CloseError, SendError};

#[cfg(test)]
mod loom_tests;
