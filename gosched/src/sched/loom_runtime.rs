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
        migrate_goroutines: false,
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

/// The thread rule (`machine.rs`): a task pinned to the M where it first ran,
/// woken by a foreign thread, goes to that M's inbox and wakes its parker; the
/// M — parked on the idle list, as the timer sleeper, or about
/// to park — must leave its park, get a P and run it.
#[test]
fn foreign_wake_of_a_homed_task() {
    model(PREEMPTIONS, || foreign_wake_pinned(runtime(), true));
}

/// The same on one P and two Ms with a preemption: the inbox push and parker
/// token race every step of the home M's way to its park.
#[test]
fn foreign_wake_of_a_homed_task_races_its_m_parking() {
    model(1, || foreign_wake_pinned(runtime_with(1, 2), true));
}

fn foreign_wake(rt: Arc<Shared>) {
    foreign_wake_pinned(rt, false)
}

fn foreign_wake_pinned(rt: Arc<Shared>, pinned: bool) {
    {
        let enter = EnterGuard::new(&rt);
        let slot: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let parked_note = Arc::new(Notify::new());
        let (s, n) = (slot.clone(), parked_note.clone());
        let mut parked = false;
        let home: Arc<Mutex<Option<thread::ThreadId>>> = Arc::new(Mutex::new(None));
        let h2 = home.clone();
        let h = rt.spawn_with_id(
            |_| {
                poll_fn(move |cx| {
                    // A pinned task runs on one M (loom thread) only.
                    let me = thread::current().id();
                    let mut h = h2.lock().unwrap();
                    if pinned {
                        assert!(h.is_none_or(|t| t == me), "a pinned task changed M");
                    }
                    *h = Some(me);
                    drop(h);
                    if parked {
                        return Poll::Ready(7);
                    }
                    parked = true;
                    *s.lock().unwrap() = Some(cx.waker().clone());
                    n.notify();
                    Poll::Pending
                })
            },
            super::task::SpawnInfo {
                pinned,
                goroutine: pinned,
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

/// A pinned goroutine that has not run yet (an `async { 7 }` in its place),
/// for the models of placement's adoptions.
fn unstarted_goroutine(rt: &Arc<Shared>) -> (super::task::Task, super::task::JoinHandle<i32>) {
    let info = super::task::SpawnInfo {
        pinned: true,
        goroutine: true,
        site: std::panic::Location::caller(),
        named: false,
    };
    super::task::new_task(async { 7 }, 1, info, rt.clone())
}

/// A goroutine alone on its M about to block in place (`syscall.rs`,
/// `block_alone`) races a placement that adopts a goroutine onto that M:
/// either the adoption lands first and the caller sees it (it hands its
/// call off instead of blocking the M), or the caller shuts the door first
/// and the adoption is refused (the spawner starts it elsewhere) — never a
/// goroutine adopted onto an M that then blocks for the whole call. Once
/// the call is over, adoptions land again.
#[test]
fn adopt_races_a_goroutine_blocking_alone() {
    model(2, || {
        let rt = runtime();
        let m = Arc::new(super::machine::Machine::new());
        let (task, handle) = unstarted_goroutine(&rt);
        let m2 = m.clone();
        // The caller is migratable here (`own` 0): nothing else homed.
        let caller = thread::spawn(move || m2.begin_blocking(0));
        let adopted = m.adopt(task);
        let blocking = caller.join().unwrap();
        assert_ne!(adopted.is_ok(), blocking, "adopted onto an M blocked alone");
        let task = match adopted {
            Ok(()) => {
                let mut queued = m.close_inbox();
                assert_eq!(queued.len(), 1, "the adopted goroutine is in the inbox");
                queued.pop().unwrap()
            }
            Err(task) => {
                m.end_blocking();
                // The call is over: the door is open again.
                let again = m.adopt(task);
                assert!(again.is_ok(), "refused after the call");
                let mut queued = m.close_inbox();
                queued.pop().unwrap()
            }
        };
        task.shutdown();
        assert!(block_on_thread(handle).is_err(), "cancelled, never run");
        drop(rt);
    });
}

/// An M retiring ("Idle Ms exit", `machine.rs`) races a placement that
/// adopts a goroutine onto it through a stale `Processor::owner`: either
/// the goroutine lands in the inbox and the M stays (it has a goroutine
/// homed now), or the M retires and the adoption is refused (the spawner
/// starts it itself) — never a goroutine in the inbox of an M whose thread
/// is gone.
#[test]
fn adopt_races_an_m_retiring() {
    model(2, || {
        let rt = runtime();
        let m = Arc::new(super::machine::Machine::new());
        let (task, handle) = unstarted_goroutine(&rt);
        let m2 = m.clone();
        let retirer = thread::spawn(move || m2.retire_if_unused());
        let adopted = m.adopt(task);
        let retired = retirer.join().unwrap();
        assert_ne!(adopted.is_ok(), retired, "adopted by an M that retired");
        match adopted {
            Ok(()) => {
                let queued = m.close_inbox();
                assert_eq!(queued.len(), 1, "the adopted goroutine is in the inbox");
                queued.into_iter().for_each(super::task::Task::shutdown);
            }
            Err(task) => task.shutdown(),
        }
        assert!(block_on_thread(handle).is_err(), "cancelled, never run");
        assert_eq!(
            m.homed.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "the cancelled goroutine is no longer counted on the M"
        );
        drop(rt);
    });
}
