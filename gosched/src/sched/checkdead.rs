//! Deadlock detection (Go's `checkdead`): "fatal error: all goroutines are
//! asleep - deadlock!" instead of a hang.
//!
//! Reported only when it is certain. sysmon checks when every P has gone
//! idle (before it sleeps), and reports if, at two looks 20 ms apart with
//! nothing having run in between:
//!
//! * some thread waits in `block_on` on this runtime (`Runtime::block_on`,
//!   or `gosched::block_on` on a plain thread), and every such thread in the
//!   process is parked there (`park::BLOCK_ON_PARKED`);
//! * every P is idle, nobody spins, the global queue is empty, and no timer
//!   is pending (a sleeping goroutine will wake);
//! * every M of the runtime is parked on the idle list (none in a poll, none
//!   in a syscall: a P-less M is not on the list);
//! * the blocking pool runs no call and has none queued;
//! * no parker anywhere holds a wake its owner has not taken yet (a thread
//!   woken but not yet scheduled: `park::PENDING_WAKES`);
//! * the process has no thread but those: the Ms, sysmon, the pool's
//!   threads and the `block_on` threads (`/proc/self/task`). Any other
//!   thread — a thread of the user's, of another runtime, of a library —
//!   might hold a waker or a channel handle and use it later, so then
//!   nothing is reported.
//!
//! (The netpoller, when it comes, adds "no goroutine waits on a socket" to
//! this list: a readiness event is a wake-up with no thread behind it.)
//!
//! Then nothing can ever run again: the runtime prints Go's message with
//! the counts and exits with status 2, as Go does. `Builder::
//! deadlock_detection(false)` turns it off (it is on by default).

use std::time::Duration;

use super::timers::NEVER;
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;
use crate::park::{BLOCK_ON_PARKED, BLOCK_ON_WAKES, PENDING_WAKES};

/// The snapshot two looks compare: what a wake-up anywhere would change.
#[derive(PartialEq, Eq, Debug)]
struct Quiet {
    execs: u64,
    wakes: usize,
    waiting: usize,
    tasks: usize,
}

impl Shared {
    /// sysmon, every P idle: report a deadlock if there is one (does not
    /// return then).
    pub(crate) fn checkdead(&self) {
        if !self.config.deadlock_detection {
            return;
        }
        let Some(first) = self.quiet() else {
            return;
        };
        std::thread::sleep(Duration::from_millis(20));
        let Some(second) = self.quiet() else {
            return;
        };
        if first != second {
            return;
        }
        eprintln!(
            "fatal error: all goroutines are asleep - deadlock!\n\n\
             gosched: {} goroutine(s) and task(s) parked, {} thread(s) blocked in block_on, \
             no timer pending, every M idle, and no other thread in the process that could \
             wake them. (Builder::deadlock_detection(false) turns this check off.)",
            second.tasks, second.waiting
        );
        std::process::exit(2);
    }

    /// Whether the runtime looks dead now (see the module docs), and the
    /// snapshot to compare with a second look.
    fn quiet(&self) -> Option<Quiet> {
        let waiting = self.block_on_threads.load(SeqCst);
        if waiting == 0 {
            return None; // nobody waits: an idle runtime, not a deadlock
        }
        if !self.all_ps_idle()
            || self.spinning_ms() != 0
            || self.global_len() != 0
            || self.next_timer() != NEVER
            || self.netpoll.active()
        {
            // (A socket may still deliver: Go's checkdead also gives up
            // while the netpoller has waiters.)
            return None;
        }
        let idle_ms = lock(&self.sched).idle_ms();
        let live_ms = *lock(&self.live_ms);
        if idle_ms != live_ms {
            return None;
        }
        let pool = self.blocking.all_idle()?;
        if BLOCK_ON_PARKED.load(SeqCst) != waiting {
            return None;
        }
        // A thread (an M, a block_on thread) woken but not yet running.
        if PENDING_WAKES.load(SeqCst) != 0 {
            return None;
        }
        let threads = std::fs::read_dir("/proc/self/task").ok()?.count();
        // The Ms, sysmon (us), the pool's threads, the block_on threads.
        if threads != live_ms + 1 + pool + waiting {
            return None;
        }
        Some(Quiet {
            execs: self
                .procs
                .iter()
                .map(|p| u64::from(p.execs.load(SeqCst)))
                .sum(),
            wakes: BLOCK_ON_WAKES.load(SeqCst),
            waiting,
            tasks: self.live_tasks(),
        })
    }
}
