//! User code the scheduler itself calls, outside any task's poll: a `Waker`
//! (a foreign executor's, or one the user wrote) woken when a timer fires or a
//! task completes, and the closures of channel timers (which wake receivers).
//!
//! A panic there would unwind through the M's schedule loop and kill the M.
//! Policy: catch it, report one line on stderr, and carry on — the M keeps
//! running every other task. The one wake-up the panicking waker stood for is
//! lost with it (there is nothing else to deliver it to); the message says so,
//! so the bug is found in the code that built the waker.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Run `f` (a wake, or a timer's closure); if it panics, report it and return.
/// `site` says what the scheduler was doing, for the message.
pub(crate) fn guarded(site: &str, f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("<non-string panic payload>");
        eprintln!(
            "gosched: a Waker panicked when {site} ({msg}); the runtime carries on, but the task \
             that waker stood for was not woken: fix the Waker's wake/drop"
        );
        // Dropping the payload may panic too (a payload with a panicking Drop):
        // leak it rather than unwind here.
        std::mem::forget(payload);
    }
}
