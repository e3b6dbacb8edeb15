//! The netpoller: one epoll instance per runtime (through `mio`), turning socket
//! readiness into `Waker` calls (Go's `netpoll`).
//!
//! # Who polls
//!
//! As in Go, the scheduler polls; there is no poller thread.
//! - An M looking for work polls without blocking (`find_runnable`, step 5)
//!   when nobody is blocked in the poller, after taking half of the queued
//!   tasks of a P whose M has not moved since its last look
//!   (`steal_queued`): the poll would find its own sockets ready again and
//!   again while a preempted M's queue waited.
//! - The M that would otherwise sleep until the next timer (the *timer
//!   sleeper*, `sched/machine.rs`) blocks in the poller instead, with the timer
//!   as its timeout, once any socket is registered and every P is idle. Only
//!   one M at a time (the poll lock; a non-blocking poll that finds it taken
//!   skips). While some P runs, a sleeper in epoll would get the events one
//!   at a time, each a thread wake-up, and keep the running Ms from polling
//!   in batches: W12 went from 175k epoll_waits and 62k context switches
//!   (1.42x Go) to 0.95x Go with this rule.
//! - sysmon polls when nobody has for 10 ms (`sched/sysmon.rs`).
//!
//! A poll returns the wakers of everyone whose socket became ready; the
//! caller wakes them as one batch (`Shared::inject` in `sched/ready.rs`, Go's
//! `injectglist`): onto the polling M's P in event order with one wake-up
//! for the lot, or, P-less, to the global queue.
//!
//! Whatever would wake the sleeper wakes the poller instead: an earlier timer,
//! a P handed to it, shutdown (`wake`: a `mio::Waker`, an eventfd). The
//! eventfd's edge can be consumed by another M's non-blocking poll just before
//! the sleeper blocks, so `wake` also raises `wake_sig` (Go's
//! `netpollWakeSig`), which the sleeper checks after announcing itself and
//! before blocking: a wake is never lost in that window.
//!
//! An M polls without blocking only while some goroutine, task or thread
//! waits on a socket (`waiting`: Go's `netpollAnyWaiters`), so a runtime
//! with idle sockets pays no syscall per schedule.
//!
//! # Registration and the readiness handshake
//!
//! Each socket gets a `PollDesc` (`desc.rs`: the handshake that keeps an
//! edge-triggered event from being lost between "would block" and "park"),
//! held in a slab whose index and generation form the mio token, so an event
//! for a socket closed meanwhile finds an empty or newer slot and is dropped.
//! The first registration of a runtime creates the epoll instance and kicks
//! the scheduler (`Shared::netpoll_started`), so that an M that went to sleep
//! before sockets existed comes back to block in the poller.

pub(crate) mod desc;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;
use std::time::Duration;

pub(crate) use desc::PollDesc;

const WAKE_TOKEN: mio::Token = mio::Token(usize::MAX);
/// A token is a slab index in the low half and the slot's generation above.
const GEN_SHIFT: u32 = usize::BITS / 2;
const IDX_MASK: usize = (1 << GEN_SHIFT) - 1;

/// The slab of registered sockets: slot index + generation = token.
struct Slab {
    slots: Vec<(u32, Option<Arc<PollDesc>>)>,
    free: Vec<u32>,
}

struct Inner {
    poll: Mutex<(mio::Poll, mio::Events)>,
    registry: mio::Registry,
    waker: mio::Waker,
    slab: Mutex<Slab>,
}

/// One runtime's poller (created at the first registration).
pub(crate) struct Poller {
    inner: OnceLock<Inner>,
    /// Sockets registered now.
    registered: AtomicUsize,
    /// When someone last polled (ns since the poller started; sysmon's 10 ms).
    last_poll: AtomicU64,
    /// An M is blocked in `poll` (0 or 1).
    blocked: AtomicUsize,
    /// Directions that have waiters (`desc.rs` keeps it).
    waiting: Arc<AtomicUsize>,
    /// A `wake` not yet seen by a blocking poll.
    wake_sig: AtomicBool,
    /// The runtime shut down: no more polls; registrations fail.
    shut: AtomicBool,
}

/// A socket's registration: its readiness and its token.
pub(crate) struct Registration {
    pub(crate) desc: Arc<PollDesc>,
    token: mio::Token,
}

impl Default for Poller {
    fn default() -> Self {
        Self::new()
    }
}

impl Poller {
    pub(crate) fn new() -> Self {
        Poller {
            inner: OnceLock::new(),
            registered: AtomicUsize::new(0),
            last_poll: AtomicU64::new(0),
            blocked: AtomicUsize::new(0),
            waiting: Arc::new(AtomicUsize::new(0)),
            wake_sig: AtomicBool::new(false),
            shut: AtomicBool::new(false),
        }
    }

    /// Whether anyone waits on a socket now (then Ms poll for them).
    #[inline]
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiting.load(SeqCst) > 0
    }

    /// Whether the runtime shut down (nobody polls any more).
    pub(crate) fn is_shut(&self) -> bool {
        self.shut.load(SeqCst)
    }

    /// Shutdown: refuse new sockets and wake everyone waiting on one (they
    /// see their socket closed).
    pub(crate) fn shutdown(&self) {
        self.shut.store(true, SeqCst);
        let Some(inner) = self.inner.get() else {
            return;
        };
        let descs: Vec<Arc<PollDesc>> = {
            let slab = inner.slab.lock().unwrap_or_else(|e| e.into_inner());
            slab.slots.iter().filter_map(|(_, d)| d.clone()).collect()
        };
        for d in descs {
            for w in d.close() {
                w.wake();
            }
        }
    }

    /// Whether any socket is registered (then the timer sleeper blocks here).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.registered.load(SeqCst) > 0
    }

    /// Whether an M is blocked in the poller now.
    #[inline]
    pub(crate) fn someone_blocked(&self) -> bool {
        self.blocked.load(SeqCst) > 0
    }

    fn inner(&self) -> io::Result<(&Inner, bool)> {
        if let Some(i) = self.inner.get() {
            return Ok((i, false));
        }
        let poll = mio::Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = mio::Waker::new(poll.registry(), WAKE_TOKEN)?;
        let mut first = false;
        let i = self.inner.get_or_init(|| {
            first = true;
            Inner {
                poll: Mutex::new((poll, mio::Events::with_capacity(256))),
                registry,
                waker,
                slab: Mutex::new(Slab {
                    slots: Vec::new(),
                    free: Vec::new(),
                }),
            }
        });
        Ok((i, first))
    }

    /// Register `source` for read and write readiness (edge-triggered).
    /// Returns the registration and whether the poller was just created.
    pub(crate) fn register(
        &self,
        source: &mut impl mio::event::Source,
    ) -> io::Result<(Registration, bool)> {
        if self.is_shut() {
            return Err(io::Error::other(
                "gosched net: the runtime has shut down; make sockets on a live runtime",
            ));
        }
        let (inner, first) = self.inner()?;
        let desc = Arc::new(PollDesc::new(self.waiting.clone()));
        let token = {
            let mut slab = inner.slab.lock().unwrap_or_else(|e| e.into_inner());
            let idx = match slab.free.pop() {
                Some(i) => i,
                None => {
                    slab.slots.push((0, None));
                    (slab.slots.len() - 1) as u32
                }
            };
            let slot = &mut slab.slots[idx as usize];
            slot.0 = slot.0.wrapping_add(1);
            slot.1 = Some(desc.clone());
            mio::Token(((slot.0 as usize) << GEN_SHIFT) | idx as usize)
        };
        if let Err(e) = inner.registry.register(
            source,
            token,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        ) {
            self.release_slot(inner, token);
            return Err(e);
        }
        self.registered.fetch_add(1, SeqCst);
        Ok((Registration { desc, token }, first))
    }

    fn release_slot(&self, inner: &Inner, token: mio::Token) {
        let idx = (token.0 & IDX_MASK) as u32;
        let mut slab = inner.slab.lock().unwrap_or_else(|e| e.into_inner());
        slab.slots[idx as usize].1 = None;
        slab.free.push(idx);
    }

    /// Unregister `source` and wake whoever waits on it (they see it closed).
    pub(crate) fn deregister(&self, source: &mut impl mio::event::Source, reg: &Registration) {
        let Some(inner) = self.inner.get() else {
            return;
        };
        let _ = inner.registry.deregister(source);
        self.release_slot(inner, reg.token);
        self.registered.fetch_sub(1, SeqCst);
        for w in reg.desc.close() {
            w.wake();
        }
    }

    /// Wake an M blocked in `poll` (a no-op if nobody is; the next poll
    /// returns at once).
    pub(crate) fn wake(&self) {
        if let Some(inner) = self.inner.get() {
            self.wake_sig.store(true, SeqCst);
            let _ = inner.waker.wake();
        }
    }

    /// Poll: `None` blocks until an event or `wake`, `Some(d)` at most `d`.
    /// Returns the wakers of every waiter whose socket became ready, for
    /// the caller to wake as one batch (`Shared::inject`, Go's
    /// `injectglist`), or `None` if another thread is polling (a
    /// non-blocking poll skips; a blocking one is never attempted while one
    /// is blocked: the timer sleeper is one M).
    pub(crate) fn poll(
        &self,
        timeout: Option<Duration>,
        now_ns: impl Fn() -> u64,
    ) -> Option<Vec<Waker>> {
        let inner = self.inner.get()?;
        let mut guard = match inner.poll.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let blocking = timeout != Some(Duration::ZERO);
        let mut timeout = timeout;
        if blocking {
            self.blocked.fetch_add(1, SeqCst);
            // A wake since the sleeper decided to sleep (its eventfd edge
            // may have gone to someone's non-blocking poll): do not block.
            if self.wake_sig.swap(false, SeqCst) {
                timeout = Some(Duration::ZERO);
            }
        }
        let (poll, events) = &mut *guard;
        let res = poll.poll(events, timeout);
        if blocking {
            self.blocked.fetch_sub(1, SeqCst);
        }
        self.last_poll.store(now_ns().max(1), Relaxed);
        if let Err(e) = res {
            if e.kind() != io::ErrorKind::Interrupted {
                eprintln!("gosched netpoll: epoll_wait failed: {e}");
            }
            return Some(Vec::new());
        }
        let mut wake: Vec<Waker> = Vec::new();
        {
            let slab = inner.slab.lock().unwrap_or_else(|e| e.into_inner());
            for ev in events.iter() {
                let token = ev.token();
                if token == WAKE_TOKEN {
                    if blocking {
                        // Seen by the sleeper it was for.
                        self.wake_sig.store(false, SeqCst);
                    }
                    continue;
                }
                let idx = token.0 & IDX_MASK;
                let gen = (token.0 >> GEN_SHIFT) as u32;
                let Some((g, Some(desc))) = slab.slots.get(idx) else {
                    continue;
                };
                if *g != gen {
                    continue; // a socket closed meanwhile; the slot is reused
                }
                let (r, w) = (
                    ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    ev.is_writable() || ev.is_write_closed() || ev.is_error(),
                );
                if r {
                    wake.extend(desc.read.event());
                }
                if w {
                    wake.extend(desc.write.event());
                }
            }
        }
        drop(guard);
        Some(wake)
    }

    /// When someone last polled (ns on the scheduler's clock; 0 never).
    pub(crate) fn last_poll(&self) -> u64 {
        self.last_poll.load(Relaxed)
    }
}
