//! The task harness alone, on a test scheduler (no runtime): see `Schedule`.
