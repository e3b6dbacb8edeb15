//! Blocking-style networking that parks the goroutine, not the thread.
//!
//! In a goroutine, [`TcpStream`] and [`TcpListener`] behave like std's: `read`,
//! `write`, `accept`, `connect` block — but only the goroutine parks; its M runs
//! other goroutines meanwhile, and the netpoller (`netpoll/`, inside the
//! scheduler as in Go) readies it when the socket is ready. In async code they
//! implement `futures_io::{AsyncRead, AsyncWrite}` and have `…_async` methods.
//! On a plain thread they block the thread (the runtime's netpoller still
//! delivers the readiness).
//!
//! Every operation tries the non-blocking syscall first, and waits only after
//! `WouldBlock` (`netpoll/desc.rs` has the handshake that keeps a readiness
//! event from being lost in between). A socket belongs to the runtime that was
//! current when it was made (the M's, the one entered by `Runtime::block_on`,
//! else the global one). Dropping it unregisters it and wakes whoever waits on
//! it with an error.
//!
//! Writes never raise `SIGPIPE` (std sends with `MSG_NOSIGNAL`; `writev`
//! relies on Rust ignoring `SIGPIPE`, as every Rust `main` does): a peer that
//! went away is `ErrorKind::BrokenPipe`.
//!
//! # Deadlines (Go's `SetReadDeadline`)
//!
//! A read (write) deadline is an instant after which every read (write)
//! fails with `ErrorKind::TimedOut`, pending ones included: setting it arms a
//! runtime timer that, when it fires, bumps the direction's readiness
//! sequence, so a parked reader wakes, sees the deadline passed and returns
//! the error. Setting or clearing a deadline also bumps the sequence, so a
//! parked reader re-reads it at once (moving a deadline re-arms a waiter).
//! std's `set_read_timeout` is a per-call limit instead (each blocking call
//! gives up after that long without progress); both can be set.

mod tcp;
mod udp;
mod unix;

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixListener, UnixStream};

/// The deadline and timeout methods of a socket type whose field `s` is a
/// `Socket` (the same on every type, as in Go's `net.Conn`).
macro_rules! deadline_methods {
    () => {
        /// Go's `SetReadDeadline`: reads after `at` (and one parked now, when
        /// `at` passes) fail with `ErrorKind::TimedOut`; `None` clears it.
        pub fn set_read_deadline(&self, at: Option<std::time::Instant>) {
            self.s.set_deadline(super::Dir::Read, at);
        }

        /// Go's `SetWriteDeadline` (as `set_read_deadline`, for writes).
        pub fn set_write_deadline(&self, at: Option<std::time::Instant>) {
            self.s.set_deadline(super::Dir::Write, at);
        }

        /// Go's `SetDeadline`: both.
        pub fn set_deadline(&self, at: Option<std::time::Instant>) {
            self.set_read_deadline(at);
            self.set_write_deadline(at);
        }

        /// std's `set_read_timeout`: each read gives up (`TimedOut`) after
        /// `t` without data.
        ///
        /// # Errors
        /// `InvalidInput` for a zero duration (as std).
        pub fn set_read_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
            self.s.set_timeout(super::Dir::Read, t)
        }

        /// std's `set_write_timeout`.
        ///
        /// # Errors
        /// `InvalidInput` for a zero duration (as std).
        pub fn set_write_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
            self.s.set_timeout(super::Dir::Write, t)
        }

        /// The per-read timeout.
        ///
        /// # Errors
        /// Never (std's signature).
        pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
            Ok(self.s.timeout(super::Dir::Read))
        }

        /// The per-write timeout.
        ///
        /// # Errors
        /// Never (std's signature).
        pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
            Ok(self.s.timeout(super::Dir::Write))
        }
    };
}
use deadline_methods;

/// `Read`/`Write` for `&T` and `T` (blocking: park the goroutine or the
/// thread), and `futures_io::{AsyncRead, AsyncWrite}` for `T`, of a stream
/// type whose field `s` is a `Socket` over a mio stream.
macro_rules! stream_io {
    ($t:ty) => {
        impl std::io::Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.s
                    .blocking(super::Dir::Read, |mut s| std::io::Read::read(&mut s, buf))
            }

            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                self.s.blocking(super::Dir::Read, |mut s| {
                    std::io::Read::read_vectored(&mut s, bufs)
                })
            }
        }

        impl std::io::Write for &$t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.s.blocking(super::Dir::Write, |mut s| {
                    std::io::Write::write(&mut s, buf)
                })
            }

            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                self.s.blocking(super::Dir::Write, |mut s| {
                    std::io::Write::write_vectored(&mut s, bufs)
                })
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        impl std::io::Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                (&*self).read(buf)
            }

            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                (&*self).read_vectored(bufs)
            }
        }

        impl std::io::Write for $t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                (&*self).write(buf)
            }

            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                (&*self).write_vectored(bufs)
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.s.poll_io(super::Dir::Read, cx, |mut io| {
                    std::io::Read::read(&mut io, buf)
                })
            }
        }

        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.s.poll_io(super::Dir::Write, cx, |mut io| {
                    std::io::Write::write(&mut io, buf)
                })
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(self.s.io.shutdown(std::net::Shutdown::Write))
            }
        }

        super::as_raw_fd!($t);
    };
}
use stream_io;

/// `AsRawFd` for socket types whose field `s` is a `Socket`.
macro_rules! as_raw_fd {
    ($($t:ty),*) => {$(
        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.s.io)
            }
        }
    )*};
}
use as_raw_fd;

/// Wait for a non-blocking `connect` to finish: writable, then the socket
/// error or a peer address says how it went.
fn finish_connect<S: mio::event::Source>(
    s: &Socket<S>,
    take_error: impl Fn(&S) -> io::Result<Option<io::Error>>,
    connected: impl Fn(&S) -> io::Result<bool>,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let dir = &s.reg.desc.write;
    loop {
        let seen = dir.seq();
        if let Some(e) = take_error(&s.io)? {
            return Err(e);
        }
        if connected(&s.io)? {
            return Ok(());
        }
        let wait = poll_fn(|cx| s.wait(dir, seen, cx));
        match deadline {
            None => crate::coro::block_on(wait),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if crate::coro::block_on(crate::time::timeout(left, wait)).is_err() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "gosched net: connect timed out",
                    ));
                }
            }
        }
        if s.reg.desc.is_closed() {
            return Err(Socket::<S>::closed());
        }
    }
}

use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::netpoll::desc::Direction;
use crate::netpoll::Registration;
use crate::sched::wait::{self, WaitReason};
use crate::sched::Shared;

/// Which direction of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Read,
    Write,
}

/// One direction's deadline and per-call timeout.
#[derive(Default)]
struct Limit {
    /// The deadline (ns on the scheduler's clock; 0: none).
    at: AtomicU64,
    /// The timer that wakes the waiters when it passes.
    timer: Mutex<Option<crate::time::Timer>>,
    /// std's per-call timeout (ns; 0: none).
    timeout: AtomicU64,
}

/// A socket registered with its runtime's netpoller.
struct Socket<S: mio::event::Source> {
    io: S,
    reg: Registration,
    rt: Arc<Shared>,
    limits: [Limit; 2],
}

impl<S: mio::event::Source> Socket<S> {
    fn new(mut io: S) -> io::Result<Self> {
        let rt = crate::sched::context::with_current(Arc::clone);
        let (reg, _first) = rt.netpoll.register(&mut io)?;
        rt.ensure_poller();
        Ok(Socket {
            io,
            reg,
            rt,
            limits: Default::default(),
        })
    }

    fn direction(&self, d: Dir) -> &Direction {
        match d {
            Dir::Read => &self.reg.desc.read,
            Dir::Write => &self.reg.desc.write,
        }
    }

    /// Set (or clear) `d`'s deadline; wakes its waiters so they re-read it.
    fn set_deadline(&self, d: Dir, at: Option<Instant>) {
        let limit = &self.limits[d as usize];
        let ns = at.map_or(0, |t| crate::sched::timers::instant_to_ns(t).max(1));
        let mut timer = limit.timer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = timer.take() {
            t.stop();
        }
        limit.at.store(ns, SeqCst);
        if let Some(t) = at {
            let left = t.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                let desc = self.reg.desc.clone();
                *timer = Some(crate::time::Timer::after_func(left, move || {
                    let dir = match d {
                        Dir::Read => &desc.read,
                        Dir::Write => &desc.write,
                    };
                    for w in dir.event() {
                        w.wake();
                    }
                }));
            }
        }
        drop(timer);
        for w in self.direction(d).event() {
            w.wake();
        }
    }

    fn set_timeout(&self, d: Dir, t: Option<Duration>) -> io::Result<()> {
        let ns = match t {
            Some(t) if t.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "gosched net: a zero timeout (use None for no timeout)",
                ))
            }
            Some(t) => u64::try_from(t.as_nanos()).unwrap_or(u64::MAX),
            None => 0,
        };
        self.limits[d as usize].timeout.store(ns, SeqCst);
        Ok(())
    }

    fn timeout(&self, d: Dir) -> Option<Duration> {
        match self.limits[d as usize].timeout.load(SeqCst) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// `Err(TimedOut)` if `d`'s deadline has passed.
    fn check_deadline(&self, d: Dir) -> io::Result<()> {
        let at = self.limits[d as usize].at.load(SeqCst);
        if at != 0 && crate::sched::timers::now_ns() >= at {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                match d {
                    Dir::Read => "gosched net: read deadline exceeded",
                    Dir::Write => "gosched net: write deadline exceeded",
                },
            ));
        }
        Ok(())
    }

    fn closed() -> io::Error {
        io::Error::new(
            io::ErrorKind::NotConnected,
            "gosched net: the socket was closed while waiting on it, or its runtime shut down",
        )
    }

    /// Run `op` until it does not say `WouldBlock`, parking the goroutine (or
    /// the thread) on direction `d` in between, within its deadline and
    /// timeout.
    fn blocking<R>(&self, d: Dir, mut op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        let dir = self.direction(d);
        let limit = self.timeout(d).map(|t| Instant::now() + t);
        loop {
            let seen = dir.seq();
            self.check_deadline(d)?;
            match op(&self.io) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
            if self.reg.desc.is_closed() {
                return Err(Self::closed());
            }
            let wait = poll_fn(|cx| self.wait(dir, seen, cx));
            match limit {
                None => crate::coro::block_on(wait),
                Some(end) => {
                    let left = end.saturating_duration_since(Instant::now());
                    if crate::coro::block_on(crate::time::timeout(left, wait)).is_err() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "gosched net: the operation timed out (set_read_timeout / \
                             set_write_timeout)",
                        ));
                    }
                }
            }
            if self.reg.desc.is_closed() {
                return Err(Self::closed());
            }
        }
    }

    /// The async form of `blocking`.
    fn poll_io<R>(
        &self,
        d: Dir,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let dir = self.direction(d);
        loop {
            let seen = dir.seq();
            if let Err(e) = self.check_deadline(d) {
                return Poll::Ready(Err(e));
            }
            match op(&self.io) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return Poll::Ready(r),
            }
            if self.reg.desc.is_closed() {
                return Poll::Ready(Err(Self::closed()));
            }
            if self.wait(dir, seen, cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn wait(&self, dir: &Direction, seen: u64, cx: &Context<'_>) -> Poll<()> {
        if self.reg.desc.is_closed() {
            return Poll::Ready(());
        }
        match dir.poll_event(seen, cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                // A plain thread (or another runtime's M) cannot count on
                // an M of ours coming round to poll: make sure one does.
                let ours = crate::sched::context::current()
                    .is_some_and(|ctx| Arc::ptr_eq(&ctx.shared, &self.rt));
                if !ours {
                    self.rt.ensure_poller();
                }
                wait::pending(WaitReason::IoWait, cx)
            }
        }
    }
}

impl<S: mio::event::Source> Drop for Socket<S> {
    fn drop(&mut self) {
        for l in &self.limits {
            if let Some(t) = l.timer.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.stop();
            }
        }
        self.rt.netpoll.deregister(&mut self.io, &self.reg);
    }
}
