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
//! Writes never raise `SIGPIPE` (std sends with `MSG_NOSIGNAL`): a peer that
//! went away is `ErrorKind::BrokenPipe`.

mod tcp;

pub use tcp::{Incoming, TcpListener, TcpStream};

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::netpoll::desc::Direction;
use crate::netpoll::Registration;
use crate::sched::wait::{self, WaitReason};
use crate::sched::Shared;

/// A socket registered with its runtime's netpoller.
struct Socket<S: mio::event::Source> {
    io: S,
    reg: Registration,
    rt: Arc<Shared>,
}

impl<S: mio::event::Source> Socket<S> {
    fn new(mut io: S) -> io::Result<Self> {
        let rt = crate::sched::context::with_current(Arc::clone);
        let (reg, _first) = rt.netpoll.register(&mut io)?;
        rt.ensure_poller();
        Ok(Socket { io, reg, rt })
    }

    fn closed() -> io::Error {
        io::Error::new(
            io::ErrorKind::NotConnected,
            "gosched net: the socket was closed while waiting on it, or its runtime shut down",
        )
    }

    /// Run `op` until it does not say `WouldBlock`, parking the goroutine (or
    /// the thread) on `dir` in between.
    fn blocking<R>(
        &self,
        dir: &Direction,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let seen = dir.seq();
            match op(&self.io) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
            if self.reg.desc.is_closed() {
                return Err(Self::closed());
            }
            crate::coro::block_on(poll_fn(|cx| self.wait(dir, seen, cx)));
            if self.reg.desc.is_closed() {
                return Err(Self::closed());
            }
        }
    }

    /// The async form of `blocking`.
    fn poll_io<R>(
        &self,
        dir: &Direction,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let seen = dir.seq();
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
        self.rt.netpoll.deregister(&mut self.io, &self.reg);
    }
}
