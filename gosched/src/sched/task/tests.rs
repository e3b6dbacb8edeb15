//! The task harness alone, on a test scheduler (no runtime): see `Schedule`.
//!
//! `TestSched` is a plain FIFO run queue plus a list of bound tasks (the runtime's
//! owned-task list). It checks the harness's promises from the outside: who calls
//! `ready` and how often, that a task is never in the queue twice, that the bound
//! reference goes back at completion, and — through the scheduler clone that every
//! task's cell holds — that the task memory is freed (`live_tasks`).
//!
//! Plain std threads, not loom models: under `--cfg loom` the state word and the
//! header cells are loom's, usable only inside `loom::model`.
#![cfg(not(loom))]

use std::collections::{HashSet, VecDeque};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use super::{new_task, Header, JoinError, JoinHandle, Polled, Schedule, Task};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---- The test scheduler ---------------------------------------------------------

#[derive(Clone)]
struct TestSched(Arc<Inner>);

#[derive(Default)]
struct Inner {
    queue: Mutex<Queue>,
    bound: Mutex<Vec<Task>>,
    closed: AtomicBool,
    next_id: AtomicU64,
    /// `ready` calls.
    readied: AtomicUsize,
    /// Successful `bind` calls.
    binds: AtomicUsize,
    /// `unbind` calls that found the task and handed its reference back.
    unbinds: AtomicUsize,
    /// `completed` calls.
    completed: AtomicUsize,
    /// Pushes of a task that was already in the queue (must stay 0).
    double_queued: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    /// Ids of the tasks now in `tasks`: a task is in the queue at most once.
    ids: HashSet<u64>,
}

impl TestSched {
    fn new() -> Self {
        TestSched(Arc::default())
    }

    /// Allocate a task (it starts NOTIFIED, holding a run-queue reference) and
    /// queue it.
    fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let id = self.0.next_id.fetch_add(1, SeqCst);
        let info = super::SpawnInfo::task(std::panic::Location::caller());
        let (task, handle) = new_task(fut, id, info, self.clone());
        self.push(task);
        handle
    }

    fn push(&self, task: Task) {
        let mut q = lock(&self.0.queue);
        if !q.ids.insert(task.header().id) {
            self.0.double_queued.fetch_add(1, SeqCst);
        }
        q.tasks.push_back(task);
    }

    fn pop(&self) -> Option<Task> {
        let mut q = lock(&self.0.queue);
        let t = q.tasks.pop_front()?;
        q.ids.remove(&t.header().id);
        Some(t)
    }

    fn queue_len(&self) -> usize {
        lock(&self.0.queue).tasks.len()
    }

    fn bound_len(&self) -> usize {
        lock(&self.0.bound).len()
    }

    fn is_bound(&self, id: u64) -> bool {
        lock(&self.0.bound).iter().any(|t| t.header().id == id)
    }

    /// Take a bound task out of the list, as shutdown does with the owned list.
    fn take_bound(&self, id: u64) -> Option<Task> {
        let mut b = lock(&self.0.bound);
        let i = b.iter().position(|t| t.header().id == id)?;
        Some(b.swap_remove(i))
    }

    /// Run queued tasks until the queue is empty; returns how many runs.
    fn run_all(&self) -> usize {
        let mut runs = 0;
        while let Some(t) = self.pop() {
            runs += 1;
            match t.run() {
                Polled::Done => {}
                Polled::Notified(t) => self.push(t),
            }
        }
        runs
    }

    /// Tasks whose memory is still allocated: every task cell holds a clone of
    /// the scheduler, dropped by `dealloc`. Assumes the test holds one handle.
    fn live_tasks(&self) -> usize {
        Arc::strong_count(&self.0) - 1
    }

    fn readied(&self) -> usize {
        self.0.readied.load(SeqCst)
    }
    fn binds(&self) -> usize {
        self.0.binds.load(SeqCst)
    }
    fn unbinds(&self) -> usize {
        self.0.unbinds.load(SeqCst)
    }
    fn completed_count(&self) -> usize {
        self.0.completed.load(SeqCst)
    }
    fn double_queued(&self) -> usize {
        self.0.double_queued.load(SeqCst)
    }

    /// Drop whatever is left (queued or bound) without running it, to break the
    /// task → scheduler → task cycle at the end of a test.
    fn clear(&self) {
        let q = std::mem::take(&mut *lock(&self.0.queue));
        drop(q);
        let b = std::mem::take(&mut *lock(&self.0.bound));
        drop(b);
    }
}

impl Schedule for TestSched {
    fn ready(&self, task: Task) {
        self.0.readied.fetch_add(1, SeqCst);
        self.push(task);
    }

    fn bind(&self, task: Task) -> Result<(), Task> {
        if self.0.closed.load(SeqCst) {
            return Err(task);
        }
        // The harness only calls `bind` while `owned_linked` is false and relies
        // on the scheduler to set it (as the runtime's `OwnedTasks::insert` does),
        // so that later parks do not bind again and completion calls `unbind`.
        // SAFETY: `bind` is called by the thread holding RUNNING on this task,
        // which covers `owned_linked` (task/mod.rs); nobody else reads it now.
        task.header()
            .owned_linked
            .with_mut(|l| unsafe { *l = true });
        self.0.binds.fetch_add(1, SeqCst);
        lock(&self.0.bound).push(task);
        Ok(())
    }

    fn unbind(&self, task: NonNull<Header>) -> bool {
        let mut b = lock(&self.0.bound);
        let Some(i) = b
            .iter()
            .position(|t| ptr::eq(t.header(), task.as_ptr().cast_const()))
        else {
            return false;
        };
        // The list's reference now belongs to the caller: do not release it.
        std::mem::forget(b.swap_remove(i));
        self.0.unbinds.fetch_add(1, SeqCst);
        true
    }

    fn completed(&self, _header: &Header) {
        self.0.completed.fetch_add(1, SeqCst);
    }
}

// ---- Helpers ------------------------------------------------------------------------

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountWaker(AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

impl CountWaker {
    fn count(&self) -> usize {
        self.0.load(SeqCst)
    }
}

fn counting_waker() -> (Arc<CountWaker>, Waker) {
    let c = Arc::new(CountWaker::default());
    let w = Waker::from(c.clone());
    (c, w)
}

fn poll_join<T>(h: &mut JoinHandle<T>, w: &Waker) -> Poll<Result<T, JoinError>> {
    Pin::new(h).poll(&mut Context::from_waker(w))
}

/// Poll a handle whose task must already be finished.
fn join_now<T>(mut h: JoinHandle<T>) -> Result<T, JoinError> {
    let (_c, w) = counting_waker();
    match poll_join(&mut h, &w) {
        Poll::Ready(r) => r,
        Poll::Pending => panic!("JoinHandle pending on a finished task"),
    }
}

#[derive(Clone, Default, Debug)]
struct Counter(Arc<AtomicUsize>);

impl Counter {
    fn get(&self) -> usize {
        self.0.load(SeqCst)
    }
}

/// Counts its drops in a shared counter.
#[derive(Debug)]
struct DropCounter(Counter);

impl DropCounter {
    fn new(c: &Counter) -> Self {
        DropCounter(c.clone())
    }
}

impl Drop for DropCounter {
    fn drop(&mut self) {
        (self.0).0.fetch_add(1, SeqCst);
    }
}

/// Where a `Parker` leaves its waker; `open` lets it finish.
#[derive(Default)]
struct Gate {
    waker: Mutex<Option<Waker>>,
    open: AtomicBool,
    polls: AtomicUsize,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::default()
    }

    /// Let the future finish and wake it through the stored waker (if any).
    fn open(&self) {
        self.open.store(true, SeqCst);
        self.wake();
    }

    /// Wake through the stored waker (taking it) without opening.
    fn wake(&self) {
        let w = lock(&self.waker).take();
        if let Some(w) = w {
            w.wake();
        }
    }

    fn take_waker(&self) -> Option<Waker> {
        lock(&self.waker).take()
    }

    fn has_waker(&self) -> bool {
        lock(&self.waker).is_some()
    }

    fn polls(&self) -> usize {
        self.polls.load(SeqCst)
    }
}

/// Pending (leaving a waker clone in its gate) until the gate is open, then
/// Ready with `out`. Counts its own drops.
struct Parker<T> {
    gate: Arc<Gate>,
    out: Option<T>,
    _drops: DropCounter,
}

impl<T> Parker<T> {
    fn new(gate: &Arc<Gate>, out: T, drops: &Counter) -> Self {
        Parker {
            gate: gate.clone(),
            out: Some(out),
            _drops: DropCounter::new(drops),
        }
    }
}

impl<T: Unpin> Future for Parker<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.get_mut();
        this.gate.polls.fetch_add(1, SeqCst);
        *lock(&this.gate.waker) = Some(cx.waker().clone());
        if this.gate.open.load(SeqCst) {
            // Leave no waker (and so no task reference) behind.
            drop(this.gate.take_waker());
            Poll::Ready(this.out.take().expect("Parker polled after Ready"))
        } else {
            Poll::Pending
        }
    }
}

// ---- Tests ----------------------------------------------------------------------------

/// 1. Ready on the first poll: `Done`, output to the handle, one completion, no bind.
#[test]
fn ready_on_first_poll() {
    let s = TestSched::new();
    let mut h = s.spawn(async { 42u32 });
    assert_eq!(s.queue_len(), 1);
    assert!(!h.is_finished());

    let t = s.pop().expect("a new task is queued");
    assert!(matches!(t.run(), Polled::Done));
    assert!(h.is_finished());
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.binds(), 0, "a task that never parks is never bound");
    assert_eq!(s.bound_len(), 0);
    assert_eq!(s.unbinds(), 0);
    assert_eq!(s.readied(), 0);
    assert_eq!(s.queue_len(), 0);

    // abort after completion changes nothing.
    h.abort();
    assert_eq!(s.queue_len(), 0);
    assert_eq!(s.readied(), 0);

    let (c, w) = counting_waker();
    match poll_join(&mut h, &w) {
        Poll::Ready(Ok(v)) => assert_eq!(v, 42),
        other => panic!("expected Ready(Ok(42)), got {other:?}"),
    }
    assert_eq!(c.count(), 0, "a finished task's handle is not woken");
    assert_eq!(s.live_tasks(), 1, "the handle still holds the task");
    drop(h);
    assert_eq!(s.live_tasks(), 0);
    assert_eq!(s.completed_count(), 1);
}

/// 2. Parks once, woken from another thread: queued once, bound then unbound,
///    output reaches the handle, whose waker fires exactly once.
#[test]
fn park_then_wake_from_another_thread() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let mut h = s.spawn(Parker::new(&gate, 7u64, &drops));
    let id = h.id().0;

    assert_eq!(s.run_all(), 1);
    assert_eq!(gate.polls(), 1);
    assert!(gate.has_waker(), "the future kept a waker");
    assert_eq!(s.binds(), 1, "bound at its first park");
    assert_eq!(s.bound_len(), 1);
    assert!(s.is_bound(id));
    assert_eq!(s.readied(), 0);
    assert_eq!(s.completed_count(), 0);

    let (jc, jw) = counting_waker();
    assert!(poll_join(&mut h, &jw).is_pending());
    assert!(!h.is_finished());

    let g = gate.clone();
    thread::spawn(move || g.open()).join().unwrap();
    assert_eq!(s.readied(), 1, "one wake, one ready");
    assert_eq!(s.queue_len(), 1);
    assert_eq!(jc.count(), 0);

    let t = s.pop().unwrap();
    assert!(matches!(t.run(), Polled::Done));
    assert_eq!(gate.polls(), 2);
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.unbinds(), 1, "unbound at completion");
    assert_eq!(s.bound_len(), 0);
    assert_eq!(drops.get(), 1, "the future is dropped at completion");
    assert_eq!(jc.count(), 1, "the join waker fires once");
    assert_eq!(s.readied(), 1);
    assert_eq!(s.queue_len(), 0);

    match poll_join(&mut h, &jw) {
        Poll::Ready(Ok(v)) => assert_eq!(v, 7),
        other => panic!("expected Ready(Ok(7)), got {other:?}"),
    }
    assert_eq!(jc.count(), 1);
    drop(h);
    assert_eq!(s.live_tasks(), 0, "every reference released: task freed");
    assert_eq!(s.double_queued(), 0);
}

/// A task that parks twice is bound once (the harness must not bind again while
/// it is linked) and unbound once.
#[test]
fn parks_twice_binds_once() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let h = s.spawn(Parker::new(&gate, (), &drops));

    s.run_all();
    assert_eq!(s.binds(), 1);
    gate.wake(); // not open: it parks again
    assert_eq!(s.readied(), 1);
    assert_eq!(s.run_all(), 1);
    assert_eq!(gate.polls(), 2);
    assert_eq!(s.binds(), 1, "second park must not bind again");
    assert_eq!(s.bound_len(), 1);

    gate.open();
    assert_eq!(s.run_all(), 1);
    assert_eq!(s.unbinds(), 1);
    assert_eq!(s.bound_len(), 0);
    assert!(join_now(h).is_ok());
    assert_eq!(drops.get(), 1);
    assert_eq!(s.live_tasks(), 0);
}

/// 3. Woken while running (by reference, and through a clone consumed by
///    `wake`): `run` hands the task back as `Notified`; `ready` is not called.
#[test]
fn wake_while_running_returns_notified() {
    for by_ref in [true, false] {
        let s = TestSched::new();
        let mut first = true;
        let h = s.spawn(poll_fn(move |cx| {
            if first {
                first = false;
                if by_ref {
                    cx.waker().wake_by_ref();
                } else {
                    // Deliberately an owned clone: `wake` consumes its reference.
                    let owned = cx.waker().clone();
                    owned.wake();
                }
                Poll::Pending
            } else {
                Poll::Ready(5u8)
            }
        }));

        let t = s.pop().unwrap();
        let t = match t.run() {
            Polled::Notified(t) => t,
            Polled::Done => {
                panic!("woken while running: must come back Notified (by_ref={by_ref})")
            }
        };
        assert_eq!(s.readied(), 0, "a wake while running must not call ready");
        assert_eq!(s.queue_len(), 0);
        assert_eq!(s.binds(), 1, "it did park (Pending) once");
        assert_eq!(s.completed_count(), 0);

        assert!(matches!(t.run(), Polled::Done));
        assert_eq!(s.readied(), 0);
        assert_eq!(s.completed_count(), 1);
        assert_eq!(s.unbinds(), 1);
        assert_eq!(join_now(h).unwrap(), 5);
        assert_eq!(s.live_tasks(), 0);
    }
}

/// 4. Two wakers woken while the task is idle: queued once.
#[test]
fn double_wake_queues_once() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let h = s.spawn(Parker::new(&gate, 1i32, &drops));
    s.run_all();

    gate.open.store(true, SeqCst);
    let w1 = gate.take_waker().unwrap();
    let w2 = w1.clone();
    let w3 = w1.clone();
    w1.wake();
    w2.wake();
    w3.wake_by_ref();
    assert_eq!(s.readied(), 1, "only the first wake queues the task");
    assert_eq!(s.queue_len(), 1);
    assert_eq!(s.double_queued(), 0);

    assert_eq!(s.run_all(), 1);
    assert_eq!(s.completed_count(), 1);
    // A wake after completion does nothing.
    w3.wake();
    assert_eq!(s.readied(), 1);
    assert_eq!(s.queue_len(), 0);
    assert_eq!(join_now(h).unwrap(), 1);
    assert_eq!(drops.get(), 1);
    assert_eq!(s.live_tasks(), 0);
}

/// 5. `abort` on a parked task: queued once, cancelled when run, the future
///    dropped exactly once.
#[test]
fn abort_parked_task() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let out_drops = Counter::default();
    let mut h = s.spawn(Parker::new(&gate, DropCounter::new(&out_drops), &drops));
    s.run_all();
    assert_eq!(s.bound_len(), 1);

    let (jc, jw) = counting_waker();
    assert!(poll_join(&mut h, &jw).is_pending());

    h.abort();
    assert_eq!(s.readied(), 1, "abort queues the idle task");
    assert_eq!(s.queue_len(), 1);
    h.abort();
    gate.wake();
    assert_eq!(s.readied(), 1, "already queued: no second ready");
    assert_eq!(s.queue_len(), 1);
    assert_eq!(
        drops.get(),
        0,
        "cancellation happens on the run, not in abort"
    );

    assert_eq!(s.run_all(), 1);
    assert_eq!(gate.polls(), 1, "a cancelled task is not polled");
    assert_eq!(drops.get(), 1, "future dropped exactly once");
    assert_eq!(out_drops.get(), 1, "its unreturned output went with it");
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.unbinds(), 1);
    assert_eq!(s.bound_len(), 0);
    assert_eq!(jc.count(), 1);

    match poll_join(&mut h, &jw) {
        Poll::Ready(Err(e)) => {
            assert!(e.is_cancelled());
            assert!(!e.is_panic());
            assert_eq!(e.panic_message(), None);
            assert_eq!(e.id(), h.id());
        }
        other => panic!("expected a cancellation, got {other:?}"),
    }
    drop(h);
    assert_eq!(drops.get(), 1);
    assert_eq!(s.live_tasks(), 0);
}

/// Abort of a task that is queued and was never polled: cancelled at its run.
#[test]
fn abort_before_first_run() {
    let s = TestSched::new();
    let drops = Counter::default();
    let d = DropCounter::new(&drops);
    let h = s.spawn(async move {
        let _d = d;
        3u8
    });
    h.abort();
    assert_eq!(s.readied(), 0, "already queued");
    assert_eq!(s.queue_len(), 1);
    s.run_all();
    assert_eq!(drops.get(), 1);
    assert!(join_now(h).unwrap_err().is_cancelled());
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.live_tasks(), 0);
}

/// A future whose destructor panics while being cancelled: the handle gets the
/// panic.
#[test]
fn abort_with_panicking_drop() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("drop boom");
        }
    }
    let s = TestSched::new();
    let p = PanicOnDrop;
    let h = s.spawn(poll_fn(move |_| {
        let _keep = &p;
        Poll::<()>::Pending
    }));
    s.run_all();
    h.abort();
    s.run_all();
    let e = join_now(h).unwrap_err();
    assert!(e.is_panic());
    assert_eq!(e.panic_message(), Some("drop boom"));
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.bound_len(), 0);
    assert_eq!(s.live_tasks(), 0);
}

/// 6. A panicking future (after parking once): the handle gets the panic; the
///    scheduler runs another task afterwards.
#[test]
fn panicking_future() {
    let s = TestSched::new();
    let gate = Gate::new();
    let g = gate.clone();
    let h = s.spawn(poll_fn(move |cx| -> Poll<u32> {
        if g.polls.fetch_add(1, SeqCst) == 0 {
            *lock(&g.waker) = Some(cx.waker().clone());
            Poll::Pending
        } else {
            panic!("boom")
        }
    }));
    s.run_all();
    assert_eq!(s.bound_len(), 1);
    gate.wake();
    assert_eq!(s.run_all(), 1);
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.unbinds(), 1, "a panicked task is unbound too");
    assert_eq!(s.bound_len(), 0);
    let e = join_now(h).unwrap_err();
    assert!(e.is_panic());
    assert!(!e.is_cancelled());
    assert_eq!(e.panic_message(), Some("boom"));
    assert_eq!(s.live_tasks(), 0);

    let h2 = s.spawn(async { "fine" });
    assert_eq!(s.run_all(), 1);
    assert_eq!(join_now(h2).unwrap(), "fine");
    assert_eq!(s.completed_count(), 2);
    assert_eq!(s.live_tasks(), 0);
}

/// A panic with a `String` payload is reported too.
#[test]
fn panic_message_from_string_payload() {
    let s = TestSched::new();
    let n = 3;
    let h = s.spawn(poll_fn(move |_| -> Poll<()> { panic!("boom {n}") }));
    s.run_all();
    let e = join_now(h).unwrap_err();
    assert_eq!(e.panic_message(), Some("boom 3"));
    assert_eq!(e.to_string(), format!("task {} panicked: boom 3", e.id()));
}

/// 7. The handle is dropped while the task is parked: the completer drops the
///    output exactly once — at completion, not later with the task memory — and
///    the task memory is freed once the last reference goes (at completion, or
///    when a spare waker clone is dropped afterwards).
#[test]
fn handle_dropped_before_completion() {
    for keep_waker in [false, true] {
        let s = TestSched::new();
        let gate = Gate::new();
        let fut_drops = Counter::default();
        let out_drops = Counter::default();
        let h = s.spawn(Parker::new(&gate, DropCounter::new(&out_drops), &fut_drops));
        s.run_all();
        drop(h);
        assert_eq!(fut_drops.get(), 0);
        assert_eq!(out_drops.get(), 0);
        assert_eq!(
            s.live_tasks(),
            1,
            "still referenced by the bound list and its waker"
        );
        let spare = keep_waker.then(|| lock(&gate.waker).clone().unwrap());

        gate.open();
        assert_eq!(s.readied(), 1);
        assert_eq!(s.run_all(), 1);
        assert_eq!(fut_drops.get(), 1, "future dropped once");
        assert_eq!(out_drops.get(), 1, "output dropped once, by the completer");
        assert_eq!(s.completed_count(), 1);
        assert_eq!(s.unbinds(), 1);
        assert!(!gate.has_waker());
        assert_eq!(s.live_tasks(), usize::from(keep_waker));
        drop(spare);
        assert_eq!(fut_drops.get(), 1);
        assert_eq!(out_drops.get(), 1);
        assert_eq!(s.live_tasks(), 0, "last reference gone: task freed");
    }
}

/// 7b. The handle is dropped before the first run, and the task completes on
///     its first poll (never bound): the completer drops the output.
#[test]
fn handle_dropped_before_first_run() {
    let s = TestSched::new();
    let out_drops = Counter::default();
    let o = out_drops.clone();
    drop(s.spawn(async move { DropCounter(o) }));
    assert_eq!(s.live_tasks(), 1);
    s.run_all();
    assert_eq!(out_drops.get(), 1);
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.live_tasks(), 0);
}

/// 8. The handle is dropped after completion without reading: it drops the
///    output exactly once, right then (not later with the task memory, which a
///    spare waker keeps alive here).
#[test]
fn handle_dropped_after_completion() {
    let s = TestSched::new();
    let out_drops = Counter::default();
    let o = out_drops.clone();
    let spare: Arc<Mutex<Option<Waker>>> = Arc::default();
    let sp = spare.clone();
    let h = s.spawn(poll_fn(move |cx| {
        *lock(&sp) = Some(cx.waker().clone());
        Poll::Ready(DropCounter::new(&o))
    }));
    s.run_all();
    assert!(h.is_finished());
    assert_eq!(s.completed_count(), 1);
    assert_eq!(out_drops.get(), 0, "the output waits for the handle");
    drop(h);
    assert_eq!(out_drops.get(), 1, "dropped by the handle");
    assert_eq!(s.live_tasks(), 1, "the spare waker keeps the task");
    drop(lock(&spare).take());
    assert_eq!(out_drops.get(), 1);
    assert_eq!(s.live_tasks(), 0);

    // Read, then dropped: still once.
    let out_drops = Counter::default();
    let o = out_drops.clone();
    let h = s.spawn(async move { DropCounter(o) });
    s.run_all();
    let v = join_now(h).unwrap();
    assert_eq!(out_drops.get(), 0);
    drop(v);
    assert_eq!(out_drops.get(), 1);
    assert_eq!(s.live_tasks(), 0);
}

/// 9. `bind` refuses (scheduler closed): the task is cancelled at its first
///    park.
#[test]
fn bind_refused_cancels() {
    let s = TestSched::new();
    s.0.closed.store(true, SeqCst);
    let gate = Gate::new();
    let drops = Counter::default();
    let h = s.spawn(Parker::new(&gate, 0u8, &drops));
    assert!(matches!(s.pop().unwrap().run(), Polled::Done));
    assert_eq!(gate.polls(), 1);
    assert_eq!(s.binds(), 0);
    assert_eq!(s.bound_len(), 0);
    assert_eq!(drops.get(), 1, "future dropped by the cancellation");
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.unbinds(), 0);
    assert!(h.is_finished());

    // A wake through the waker it left behind does nothing.
    gate.wake();
    assert_eq!(s.readied(), 0);
    assert_eq!(s.queue_len(), 0);

    assert!(join_now(h).unwrap_err().is_cancelled());
    assert_eq!(s.live_tasks(), 0);
}

/// 10. `Task::shutdown` on a parked, bound task taken out of the list.
#[test]
fn shutdown_bound_task() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let mut h = s.spawn(Parker::new(&gate, 0u8, &drops));
    s.run_all();
    let (jc, jw) = counting_waker();
    assert!(poll_join(&mut h, &jw).is_pending());

    let t = s.take_bound(h.id().0).expect("bound at its first park");
    t.shutdown();
    assert_eq!(drops.get(), 1);
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.unbinds(), 0, "taken out of the list already");
    assert_eq!(jc.count(), 1);
    assert!(h.is_finished());
    match poll_join(&mut h, &jw) {
        Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
        other => panic!("expected a cancellation, got {other:?}"),
    }
    // The waker the future left behind is harmless.
    gate.wake();
    assert_eq!(s.readied(), 0);
    drop(h);
    assert_eq!(s.live_tasks(), 0);
}

/// 10b. Shutdown of a bound task that is also in the run queue: the queue entry
///      is only dropped afterwards, never run.
#[test]
fn shutdown_bound_task_also_queued() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let h = s.spawn(Parker::new(&gate, 0u8, &drops));
    s.run_all();
    gate.wake();
    assert_eq!(s.queue_len(), 1);
    s.take_bound(h.id().0).unwrap().shutdown();
    assert_eq!(drops.get(), 1);
    assert_eq!(s.completed_count(), 1);
    assert_eq!(s.live_tasks(), 1);
    s.clear();
    assert!(join_now(h).unwrap_err().is_cancelled());
    assert_eq!(s.live_tasks(), 0);
    assert_eq!(gate.polls(), 1);
}

/// 10c. Shutdown of a task taken from the run queue before it ever ran.
#[test]
fn shutdown_never_run_task() {
    let s = TestSched::new();
    let drops = Counter::default();
    let d = DropCounter::new(&drops);
    let h = s.spawn(poll_fn(move |_| -> Poll<()> {
        let _keep = &d;
        unreachable!("never polled")
    }));
    s.pop().unwrap().shutdown();
    assert_eq!(drops.get(), 1);
    assert_eq!(s.completed_count(), 1);
    let r: Result<(), JoinError> = join_now(h);
    assert!(r.unwrap_err().is_cancelled());
    assert_eq!(s.live_tasks(), 0);
}

/// The join waker is replaced when the handle is polled with another waker:
/// only the last one is woken.
#[test]
fn join_waker_replaced() {
    let s = TestSched::new();
    let gate = Gate::new();
    let drops = Counter::default();
    let mut h = s.spawn(Parker::new(&gate, 9u16, &drops));
    s.run_all();
    let (ca, wa) = counting_waker();
    let (cb, wb) = counting_waker();
    assert!(poll_join(&mut h, &wa).is_pending());
    assert!(poll_join(&mut h, &wb).is_pending());
    assert!(poll_join(&mut h, &wb).is_pending());
    assert_eq!(Arc::strong_count(&ca), 2, "the replaced waker was released");
    gate.open();
    s.run_all();
    assert_eq!(ca.count(), 0);
    assert_eq!(cb.count(), 1);
    assert_eq!(join_now(h).unwrap(), 9);
    assert_eq!(s.live_tasks(), 0);
    assert_eq!(
        Arc::strong_count(&cb),
        2,
        "the join waker went with the task"
    );
}

/// 11. Stress: 1,000 parked tasks, 4 threads waking them over and over while 2
///     runners run the queue. Every task completes exactly once, is never queued
///     twice and never polled by two threads at once; everything is freed.
#[test]
fn stress_concurrent_wakes() {
    // Under Miri (every step interpreted): a small instance of the same race.
    const TASKS: usize = if cfg!(miri) { 16 } else { 1_000 };
    const WAKERS: usize = 4;
    const RUNNERS: usize = 2;
    /// Each waker thread sweeps all tasks at least this many times...
    const MIN_ROUNDS: usize = if cfg!(miri) { 2 } else { 10 };
    /// ...and until the runners have run this many times (so that wakes and
    /// runs overlap however the threads happen to be scheduled).
    const TARGET_RUNS: usize = if cfg!(miri) { 2 * TASKS } else { 20 * TASKS };

    #[derive(Default)]
    struct Slot {
        waker: Mutex<Option<Waker>>,
        finish: AtomicBool,
        polling: AtomicBool,
        overlaps: AtomicUsize,
        polls: AtomicUsize,
        readies: AtomicUsize,
    }
    struct StressFut {
        slot: Arc<Slot>,
        id: usize,
        _drops: DropCounter,
    }
    impl Future for StressFut {
        type Output = usize;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let slot = &self.slot;
            if slot.polling.swap(true, SeqCst) {
                slot.overlaps.fetch_add(1, SeqCst);
            }
            slot.polls.fetch_add(1, SeqCst);
            let old = lock(&slot.waker).replace(cx.waker().clone());
            drop(old);
            // Widen the window in which wakes find the task RUNNING.
            for _ in 0..100 {
                std::hint::spin_loop();
            }
            let r = if slot.finish.load(SeqCst) {
                slot.readies.fetch_add(1, SeqCst);
                drop(lock(&slot.waker).take());
                Poll::Ready(self.id)
            } else {
                Poll::Pending
            };
            slot.polling.store(false, SeqCst);
            r
        }
    }

    let s = TestSched::new();
    let drops = Counter::default();
    let slots: Arc<Vec<Arc<Slot>>> = Arc::new((0..TASKS).map(|_| Arc::default()).collect());
    let mut handles: Vec<JoinHandle<usize>> = (0..TASKS)
        .map(|i| {
            s.spawn(StressFut {
                slot: slots[i].clone(),
                id: i,
                _drops: DropCounter::new(&drops),
            })
        })
        .collect();
    let join_wakers: Vec<_> = handles
        .iter_mut()
        .map(|h| {
            let (c, w) = counting_waker();
            assert!(poll_join(h, &w).is_pending());
            (c, w)
        })
        .collect();

    // Park them all.
    assert_eq!(s.run_all(), TASKS);
    assert_eq!(s.bound_len(), TASKS);
    assert_eq!(s.binds(), TASKS);

    let deadline = Instant::now() + Duration::from_secs(30);
    // Set when a runner panics, so that nobody waits for it until the deadline.
    let dead = Arc::new(AtomicBool::new(false));
    struct DeadOnPanic(Arc<AtomicBool>);
    impl Drop for DeadOnPanic {
        fn drop(&mut self) {
            if thread::panicking() {
                self.0.store(true, SeqCst);
            }
        }
    }
    let start = Arc::new(Barrier::new(RUNNERS + WAKERS));
    let stop = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicUsize::new(0));
    let resubmits = Arc::new(AtomicUsize::new(0));
    let runners: Vec<_> = (0..RUNNERS)
        .map(|_| {
            let (s, start, stop) = (s.clone(), start.clone(), stop.clone());
            let (runs, resubmits) = (runs.clone(), resubmits.clone());
            let dead = DeadOnPanic(dead.clone());
            thread::spawn(move || {
                let _dead = dead;
                start.wait();
                while !stop.load(SeqCst) {
                    match s.pop() {
                        Some(t) => {
                            runs.fetch_add(1, SeqCst);
                            if let Polled::Notified(t) = t.run() {
                                resubmits.fetch_add(1, SeqCst);
                                s.push(t);
                            }
                        }
                        None => {
                            assert!(Instant::now() < deadline, "stress test stuck");
                            thread::yield_now();
                        }
                    }
                }
            })
        })
        .collect();

    let wakers: Vec<_> = (0..WAKERS)
        .map(|k| {
            let (slots, start, runs) = (slots.clone(), start.clone(), runs.clone());
            let dead = dead.clone();
            thread::spawn(move || {
                start.wait();
                let mut round = 0;
                while !dead.load(SeqCst) && (round < MIN_ROUNDS || runs.load(SeqCst) < TARGET_RUNS)
                {
                    assert!(Instant::now() < deadline, "runners made no progress");
                    for j in 0..TASKS {
                        // Each thread walks the tasks from a different start.
                        let i = (j + k * TASKS / WAKERS) % TASKS;
                        let w = lock(&slots[i].waker).clone();
                        if let Some(w) = w {
                            if round % 2 == 0 {
                                w.wake();
                            } else {
                                w.wake_by_ref();
                            }
                        }
                    }
                    round += 1;
                }
            })
        })
        .collect();
    for w in wakers {
        w.join().unwrap();
    }

    // Let them all finish.
    for slot in slots.iter() {
        slot.finish.store(true, SeqCst);
        let w = lock(&slot.waker).clone();
        if let Some(w) = w {
            w.wake();
        }
    }
    // Stop waiting early if a runner died (its panic surfaces at the join).
    while s.completed_count() < TASKS && !dead.load(SeqCst) {
        assert!(Instant::now() < deadline, "tasks did not complete");
        thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, SeqCst);
    for r in runners {
        r.join().unwrap();
    }

    assert_eq!(s.double_queued(), 0, "a task was queued twice");
    assert_eq!(s.completed_count(), TASKS);
    assert_eq!(s.unbinds(), TASKS);
    assert_eq!(s.bound_len(), 0);
    assert_eq!(s.queue_len(), 0);
    assert_eq!(drops.get(), TASKS, "every future dropped exactly once");
    // Every run on a runner came from a `ready` or a resubmission.
    assert_eq!(
        runs.load(SeqCst),
        s.readied() + resubmits.load(SeqCst),
        "runs must match queue insertions"
    );
    assert!(runs.load(SeqCst) >= TARGET_RUNS);
    for (i, slot) in slots.iter().enumerate() {
        assert_eq!(
            slot.overlaps.load(SeqCst),
            0,
            "task {i} polled concurrently"
        );
        assert_eq!(slot.readies.load(SeqCst), 1, "task {i} returned Ready once");
        assert!(slot.polls.load(SeqCst) >= 2);
        assert!(lock(&slot.waker).is_none());
    }
    for (i, (mut h, (c, w))) in handles.into_iter().zip(join_wakers).enumerate() {
        assert_eq!(c.count(), 1, "join waker of task {i} woken once");
        match poll_join(&mut h, &w) {
            Poll::Ready(Ok(v)) => assert_eq!(v, i),
            other => panic!("task {i}: {other:?}"),
        }
    }
    assert_eq!(s.live_tasks(), 0, "every task freed");
}
