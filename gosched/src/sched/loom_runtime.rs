//! loom models of the whole scheduler: the real `Shared`, Ms on loom threads, the
//! real `find_runnable`, park path, `wakep`, wake policy, sysmon's retake and hand-off, timers
//! and shutdown (tokio's `loom_multi_thread` models are the pattern).
//!
//! Each model builds a runtime with 2 Ps and at most 2 Ms (`max_threads`: a
//! third M would only add schedules, and loom allows 5 threads in all), runs one to three async tasks
//! and shuts down. A lost wake-up shows as a deadlock (every thread parked), a
//! stranded task as a model that never ends (loom's branch limit), a double run
//! or double free as a failed assertion or a loom leak/race report. Time is the
//! model clock of `crate::loom` (a timed park lets its time pass).

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::{Poll, Waker};

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use loom::sync::{Mutex, Notify};
use loom::thread;

use super::config::Config;
use super::context::EnterGuard;
use super::processor::Processor;
use super::task::JoinHandle;
use super::Shared;
use crate::park::block_on_thread;

/// Run `f` under loom with at most `preemptions` preemptions (or fewer, if
/// `LOOM_MAX_PREEMPTIONS` says so): the whole scheduler has far more branch
/// points than the focused models, and each preemption multiplies the schedules.
fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(b.preemption_bound.unwrap_or(preemptions).min(preemptions));
    b.check(move || {
        crate::loom::clock::reset();
        f()
    });
}

/// Preemptions per model. 1 keeps the whole suite within about a minute on the
/// 2-core CI machine; `LOOM_MAX_PREEMPTIONS=0` is a quick smoke run.
const PREEMPTIONS: usize = 0;

fn runtime() -> Arc<Shared> {
    runtime_with(2, 2)
}

fn runtime_with(procs: usize, max_threads: usize) -> Arc<Shared> {
    Shared::new(Config {
        procs,
        max_procs: procs,
        procs_set: true,
        stack_size: 0,
        max_threads,
        name: "loom".into(),
        sysmon: false,
        deadlock_detection: false,
        virtual_time: false,
        thread_keep_alive: None,
    })
}

fn spawn<F>(rt: &Arc<Shared>, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.spawn_with_id(
        |_| fut,
        super::task::SpawnInfo::task(std::panic::Location::caller()),
    )
}

/// Shut the runtime down from the main thread and check that every M exited.
fn shutdown(rt: Arc<Shared>) {
    assert!(rt.shutdown_and_wait(None));
    assert_eq!(*crate::loom::lock(&rt.live_ms), 0);
}

/// A task parks once, handing its waker to a foreign thread that wakes it while
/// the Ms go idle and park: the wake (global queue + `wakep`) must reach an M.
#[test]
fn foreign_wake_while_ms_park() {
    model(PREEMPTIONS, || foreign_wake(runtime()));
}

/// The same on one P and one M with a preemption: the foreign thread's push +
/// `wakep_if_idle` races the M's drop-P → stop spinning → re-check → park, the
/// heart of the lost-wake-up protocol (`idle.rs`), at any point of either side.
#[test]
fn foreign_wake_races_the_last_m_parking() {
    model(1, || foreign_wake(runtime_with(1, 2)));
}

/// `lock_os_thread` (`lockos.rs`): a task that locks its M in its first poll
/// and parks, woken by a foreign thread. Its M gives its P away and parks
/// (`stoplockedm`); whichever M takes the task off a queue hands it back
/// with a P (`startlockedm`), and it runs again on the same M — whether the
/// wake lands during the first poll or after the M parked.
#[test]
fn foreign_wake_of_a_locked_task() {
    model(PREEMPTIONS, || foreign_wake_locked(runtime(), true));
}

/// The same on one P with a preemption: the slot, `nextp` and the parker
/// token race every step of the locked M's way to its park. Three Ms: the
/// locked one parks on no list, so a wake that finds the other on its way
/// to the idle list starts a third (Go's `startm` → `newm`; a cap of two
/// would strand it, as the cap does on purpose elsewhere).
#[test]
fn foreign_wake_of_a_locked_task_races_its_m_parking() {
    model(1, || foreign_wake_locked(runtime_with(1, 3), true));
}

fn foreign_wake(rt: Arc<Shared>) {
    foreign_wake_locked(rt, false)
}

fn foreign_wake_locked(rt: Arc<Shared>, locked: bool) {
    {
        let enter = EnterGuard::new(&rt);
        let slot: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let parked_note = Arc::new(Notify::new());
        let (s, n) = (slot.clone(), parked_note.clone());
        let mut parked = false;
        let mut first: Option<thread::ThreadId> = None;
        let h = rt.spawn_with_id(
            |_| {
                poll_fn(move |cx| {
                    let me = thread::current().id();
                    if parked {
                        if locked {
                            // A locked task runs on its M (loom thread) only.
                            assert_eq!(first, Some(me), "a locked task changed M");
                            super::lockos::unlock_current();
                        }
                        return Poll::Ready(7);
                    }
                    first = Some(me);
                    if locked {
                        super::lockos::lock_current();
                    }
                    parked = true;
                    *s.lock().unwrap() = Some(cx.waker().clone());
                    n.notify();
                    Poll::Pending
                })
            },
            super::task::SpawnInfo {
                goroutine: false,
                site: std::panic::Location::caller(),
                named: false,
            },
        );
        let waker = thread::spawn(move || loop {
            // loom's `Notify` may wake spuriously: check the slot.
            parked_note.wait();
            if let Some(w) = slot.lock().unwrap().take() {
                w.wake();
                return;
            }
        });
        assert_eq!(block_on_thread(h).unwrap(), 7);
        waker.join().unwrap();
        drop(enter);
        shutdown(rt);
    }
}

/// Task A spawns B (into A's P's `runnext`; under loom no sysmon runs, so
/// the put wakes an M as Go's does) and then keeps polling until B has run:
/// only another M can run B, by stealing `runnext` (a spinning M's last
/// round). B must never be stranded.
#[test]
fn runnext_behind_a_long_poll_is_stolen() {
    model(PREEMPTIONS, || {
        let rt = runtime();
        let enter = EnterGuard::new(&rt);
        let done = Arc::new(AtomicBool::new(false));
        let rt2 = rt.clone();
        let d = done.clone();
        let h = spawn(&rt, async move {
            let d2 = d.clone();
            drop(spawn(&rt2, async move { d2.store(true, Release) }));
            // A poll that goes on: no `.await` until B has run elsewhere.
            while !d.load(Acquire) {
                thread::yield_now();
            }
        });
        block_on_thread(h).unwrap();
        assert!(done.load(Acquire));
        drop(enter);
        shutdown(rt);
    });
}

/// A task sleeps on the timer heap; the Ms park, one of them as the timer
/// sleeper, whose timed park lets the time pass: the timer fires and the task
/// completes.
#[test]
fn timer_wakes_a_parked_task() {
    model(PREEMPTIONS, || {
        let rt = runtime();
        let enter = EnterGuard::new(&rt);
        let h = spawn(&rt, async {
            let deadline = super::timers::ns_to_instant(1_000);
            super::timers::sleep_until(deadline).await;
            super::timers::now_ns()
        });
        let woke_at = block_on_thread(h).unwrap();
        assert!(woke_at >= 1_000, "fired early at {woke_at}");
        drop(enter);
        shutdown(rt);
    });
}

/// Counts drops of a value.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Shutdown while a task is parked for ever: teardown cancels it (its future is
/// dropped once), and its JoinHandle reports the cancellation.
#[test]
fn shutdown_cancels_a_parked_task() {
    model(PREEMPTIONS, || {
        let rt = runtime();
        let enter = EnterGuard::new(&rt);
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCount(drops.clone());
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let h = spawn(
            &rt,
            poll_fn(move |_| {
                let _keep = &guard;
                s.store(true, SeqCst);
                Poll::<()>::Pending
            }),
        );
        while !started.load(SeqCst) {
            thread::yield_now();
        }
        drop(enter);
        shutdown(rt);
        let err = block_on_thread(h).unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(drops.load(SeqCst), 1);
    });
}

/// The JoinHandle is dropped while the task completes on an M (or is cancelled
/// by shutdown before it ran): the value, moved from the future into the output,
/// is dropped exactly once, by whichever side owns it.
#[test]
fn join_handle_drop_races_completion() {
    model(PREEMPTIONS, || {
        let rt = runtime();
        let enter = EnterGuard::new(&rt);
        let drops = Arc::new(AtomicUsize::new(0));
        let value = DropCount(drops.clone());
        let h = spawn(&rt, async move { value });
        drop(h);
        drop(enter);
        shutdown(rt);
        assert_eq!(drops.load(SeqCst), 1);
    });
}

/// sysmon's side of a retake, as `sysmon_look` does it: wait until some P
/// is in USER and `when` says so (a poll; or a call in place, its M's
/// `in_call`), CAS it to RETAKEN from the word seen, and hand it off. Gives
/// up once `stop` is set.
fn sysmon_retakes(rt: &Arc<Shared>, when: fn(&Processor) -> bool, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Acquire) {
            return false;
        }
        for (pi, p) in rt.procs.iter().enumerate() {
            let word = p.status.load_word();
            if super::status::state_of(word) == super::status::USER
                && when(p)
                && p.status.retake(word)
            {
                rt.handoffp(pi);
                return true;
            }
        }
        thread::yield_now();
    }
}

/// One P. Task A spawns B into the P's `runnext` and then keeps polling
/// until B has run: with the only P held by A's poll, only a retake can run
/// B. sysmon retakes the P (USER → RETAKEN) and hands it to a new M, which
/// runs B; A's poll then ends on an M whose P is gone (its CAS compares the
/// generation), which goes P-less. Nothing is lost or run twice, and the
/// runtime shuts down.
#[test]
fn retake_from_a_long_poll_hands_the_p_off() {
    model(1, || b_runs_only_through_a_retake(false));
}

/// One P. Task A readies B (`runnext`) and then blocks in a call made in
/// place (`syscall::in_place`: its M `in_call`, the P USER) that returns
/// only once B has run. sysmon's USER → RETAKEN, made once it sees the M in
/// the call, always comes before the call's return (only B, which needs the
/// P, ends the call): the return's load of the word finds the P gone, A
/// completes (its runtime call after the call goes P-less), and nothing is
/// lost. (The race of a retake with a return is `status.rs`'s
/// `retake_vs_poll_end`.)
#[test]
fn retake_from_a_syscall_races_its_return() {
    model(1, || b_runs_only_through_a_retake(true));
}

/// The two models above: on one P, task A spawns B into `runnext`, then
/// waits for B in a poll that goes on (`in_syscall`: inside `in_place`,
/// followed by a runtime call that must take the P back or find it gone).
/// Only sysmon's retake (of a poll, or of a call) can run B.
fn b_runs_only_through_a_retake(in_syscall: bool) {
    let rt = runtime_with(1, 2);
    let enter = EnterGuard::new(&rt);
    let b_ran = Arc::new(AtomicBool::new(false));
    let rt2 = rt.clone();
    let d = b_ran.clone();
    let a = spawn(&rt, async move {
        let d2 = d.clone();
        drop(spawn(&rt2, async move { d2.store(true, Release) }));
        let wait_for_b = || {
            while !d.load(Acquire) {
                thread::yield_now();
            }
        };
        if in_syscall {
            super::syscall::in_place(wait_for_b);
            drop(spawn(&rt2, async {}));
        } else {
            wait_for_b();
        }
    });
    let when: fn(&Processor) -> bool = if in_syscall {
        Processor::owner_in_call
    } else {
        |_| true
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (rt3, s3) = (rt.clone(), stop.clone());
    let sysmon = thread::spawn(move || sysmon_retakes(&rt3, when, &s3));
    block_on_thread(a).unwrap();
    stop.store(true, Release);
    assert!(sysmon.join().unwrap(), "B ran without a retake on one P");
    assert!(b_ran.load(Acquire));
    drop(enter);
    shutdown(rt);
}

/// Two Ps. sysmon retakes P 0 from a poll that has nothing queued behind
/// it, so `handoffp` puts it on the idle list (or starts a spinning M if
/// nobody spins and no P is idle), while the other M drops its own P and
/// parks: the hand-off and the park race on the idle lists. A task
/// spawned afterwards from a plain thread must still run.
#[test]
fn hand_off_to_idle_races_an_m_parking() {
    // 1 preemption: ~10 minutes; 0 keeps it in the CI budget.
    model(PREEMPTIONS, || {
        let rt = runtime_with(2, 2);
        let enter = EnterGuard::new(&rt);
        let go_on = Arc::new(AtomicBool::new(false));
        let g = go_on.clone();
        let a = spawn(&rt, async move {
            while !g.load(Acquire) {
                thread::yield_now();
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (rt3, s3, g3) = (rt.clone(), stop.clone(), go_on.clone());
        let sysmon = thread::spawn(move || {
            let took = sysmon_retakes(&rt3, |_| true, &s3);
            g3.store(true, Release);
            took
        });
        let late = spawn(&rt, async { 5 });
        assert_eq!(block_on_thread(late).unwrap(), 5);
        block_on_thread(a).unwrap();
        stop.store(true, Release);
        go_on.store(true, Release);
        sysmon.join().unwrap();
        drop(enter);
        shutdown(rt);
    });
}
