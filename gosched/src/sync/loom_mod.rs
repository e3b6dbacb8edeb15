//! The core of `gosched::sync` compiled alone under `--cfg loom`: the wait queue
//! and the mutex protocol, modelled in `raw_mutex.rs`.
#![allow(dead_code)]

pub(crate) mod raw_mutex;
pub(crate) mod waitlist;
