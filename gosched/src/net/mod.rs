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
//! ```
//! use gosched::net::{TcpListener, TcpStream};
//!
//! let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//! let addr = listener.local_addr().unwrap();
//! // A goroutine, blocking style: echo five bytes.
//! let server = gosched::go(move || {
//!     use std::io::{Read, Write};
//!     let (mut conn, _) = listener.accept().unwrap();
//!     let mut buf = [0; 5];
//!     conn.read_exact(&mut buf).unwrap();
//!     conn.write_all(&buf).unwrap();
//! });
//! // Async code (here on a runtime of its own) awaits the same types.
//! let echoed = gosched::Runtime::new().unwrap().block_on(async move {
//!     use futures::io::{AsyncReadExt, AsyncWriteExt};
//!     let mut conn = TcpStream::connect_async(addr).await.unwrap();
//!     conn.write_all(b"hello").await.unwrap();
//!     let mut buf = [0; 5];
//!     conn.read_exact(&mut buf).await.unwrap();
//!     buf
//! });
//! assert_eq!(&echoed, b"hello");
//! server.join().unwrap();
//! ```
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
        ///
        /// Compute the instant from [`time::now`](crate::time::now), so that it
        /// follows a [virtual clock](crate::testing::run_virtual) too. (The examples
        /// of these methods use a [`UnixStream`](crate::net::UnixStream); every socket
        /// type of this module has them.)
        ///
        /// ```
        /// use std::io::{ErrorKind, Read};
        /// use std::time::Duration;
        ///
        /// gosched::testing::run_virtual(|| {
        ///     let (mut a, _b) = gosched::net::UnixStream::pair().unwrap(); // _b never writes
        ///     let start = gosched::time::now();
        ///     a.set_read_deadline(Some(start + Duration::from_secs(5)));
        ///     let err = a.read(&mut [0; 8]).unwrap_err(); // parks until the deadline
        ///     assert_eq!(err.kind(), ErrorKind::TimedOut);
        ///     assert_eq!(gosched::time::since(start), Duration::from_secs(5));
        /// });
        /// ```
        pub fn set_read_deadline(&self, at: Option<std::time::Instant>) {
            self.s.set_deadline(super::Dir::Read, at);
        }

        /// Go's `SetWriteDeadline` (as `set_read_deadline`, for writes).
        ///
        /// ```
        /// use std::io::{ErrorKind, Write};
        /// use std::time::Duration;
        ///
        /// gosched::testing::run_virtual(|| {
        ///     let (mut a, _b) = gosched::net::UnixStream::pair().unwrap(); // _b never reads
        ///     a.set_write_deadline(Some(gosched::time::now() + Duration::from_secs(1)));
        ///     let chunk = [0u8; 64 * 1024];
        ///     let err = loop {
        ///         if let Err(e) = a.write(&chunk) {
        ///             break e; // the buffer filled up, then the deadline passed
        ///         }
        ///     };
        ///     assert_eq!(err.kind(), ErrorKind::TimedOut);
        /// });
        /// ```
        pub fn set_write_deadline(&self, at: Option<std::time::Instant>) {
            self.s.set_deadline(super::Dir::Write, at);
        }

        /// Go's `SetDeadline`: both.
        ///
        /// ```
        /// use std::io::{ErrorKind, Read, Write};
        ///
        /// let (mut a, _b) = gosched::net::UnixStream::pair().unwrap();
        /// a.set_deadline(Some(gosched::time::now())); // passed already
        /// assert_eq!(a.read(&mut [0; 1]).unwrap_err().kind(), ErrorKind::TimedOut);
        /// assert_eq!(a.write(b"x").unwrap_err().kind(), ErrorKind::TimedOut);
        /// a.set_deadline(None);
        /// assert_eq!(a.write(b"x").unwrap(), 1);
        /// ```
        pub fn set_deadline(&self, at: Option<std::time::Instant>) {
            self.set_read_deadline(at);
            self.set_write_deadline(at);
        }

        /// std's `set_read_timeout`: each read gives up (`TimedOut`) after
        /// `t` without data.
        ///
        /// # Errors
        /// `InvalidInput` for a zero duration (as std).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::io::{ErrorKind, Read};
        /// use std::time::Duration;
        ///
        /// gosched::testing::run_virtual(|| {
        ///     let (mut a, _b) = gosched::net::UnixStream::pair().unwrap();
        ///     a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        ///     let start = gosched::time::now();
        ///     assert_eq!(a.read(&mut [0; 8]).unwrap_err().kind(), ErrorKind::TimedOut);
        ///     assert_eq!(gosched::time::since(start), Duration::from_secs(2));
        ///     let zero = a.set_read_timeout(Some(Duration::ZERO)).unwrap_err();
        ///     assert_eq!(zero.kind(), ErrorKind::InvalidInput);
        /// });
        /// ```
        pub fn set_read_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
            self.s.set_timeout(super::Dir::Read, t)
        }

        /// std's `set_write_timeout`.
        ///
        /// # Errors
        /// `InvalidInput` for a zero duration (as std).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::io::ErrorKind;
        /// use std::time::Duration;
        ///
        /// let (a, _b) = gosched::net::UnixStream::pair().unwrap();
        /// a.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        /// assert_eq!(a.write_timeout().unwrap(), Some(Duration::from_secs(5)));
        /// let zero = a.set_write_timeout(Some(Duration::ZERO)).unwrap_err();
        /// assert_eq!(zero.kind(), ErrorKind::InvalidInput);
        /// ```
        pub fn set_write_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
            self.s.set_timeout(super::Dir::Write, t)
        }

        /// The per-read timeout.
        ///
        /// # Errors
        /// Never (std's signature).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::time::Duration;
        ///
        /// let (a, _b) = gosched::net::UnixStream::pair().unwrap();
        /// assert_eq!(a.read_timeout().unwrap(), None);
        /// a.set_read_timeout(Some(Duration::from_millis(250))).unwrap();
        /// assert_eq!(a.read_timeout().unwrap(), Some(Duration::from_millis(250)));
        /// ```
        pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
            Ok(self.s.timeout(super::Dir::Read))
        }

        /// The per-write timeout.
        ///
        /// # Errors
        /// Never (std's signature).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::time::Duration;
        ///
        /// let (a, _b) = gosched::net::UnixStream::pair().unwrap();
        /// assert_eq!(a.write_timeout().unwrap(), None);
        /// a.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        /// assert_eq!(a.write_timeout().unwrap(), Some(Duration::from_secs(1)));
        /// ```
        pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
            Ok(self.s.timeout(super::Dir::Write))
        }
    };
}
use deadline_methods;

/// `Read`/`Write` for `&T` and `T` (blocking: park the goroutine or the
/// thread), `futures_io::{AsyncRead, AsyncWrite}` for `T`, and with the
/// `tokio-io` feature `tokio::io::{AsyncRead, AsyncWrite}` for `T` (hyper
/// and the tokio ecosystem through e.g. `hyper_util::rt::TokioIo`), of a
/// stream type whose field `s` is a `Socket` over a mio stream.
macro_rules! stream_io {
    ($t:ty) => {
        impl std::io::Read for &$t {
            /// An empty `buf` reads nothing at once (Go's `Read`), whatever
            /// is waiting.
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.s
                    .blocking(super::Dir::Read, |mut s| std::io::Read::read(&mut s, buf))
            }

            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                if bufs.iter().all(|b| b.is_empty()) {
                    return Ok(0);
                }
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
                if buf.is_empty() {
                    return std::task::Poll::Ready(Ok(0));
                }
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

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                if buf.remaining() == 0 {
                    return std::task::Poll::Ready(Ok(()));
                }
                // read(2) straight into the unfilled part, uninitialised as
                // it may be (hyper hands a fresh `ReadBuf` over its spare
                // capacity to every poll: zeroing it each time cost up to
                // its whole size per read). No `&mut [u8]` is made over it.
                // SAFETY: we only write into `unfilled` (through read(2)),
                // never de-initialise it.
                let unfilled = unsafe { buf.unfilled_mut() };
                let n = std::task::ready!(self.s.poll_io(super::Dir::Read, cx, |io| {
                    let fd = std::os::fd::AsRawFd::as_raw_fd(io);
                    // SAFETY: the pointer and length describe `unfilled`,
                    // writable memory we borrow mutably; the fd is open.
                    let r = unsafe { libc::read(fd, unfilled.as_mut_ptr().cast(), unfilled.len()) };
                    if r < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(r as usize)
                    }
                }))?;
                // SAFETY: read(2) initialised the first `n` bytes of the
                // unfilled part.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.s.poll_io(super::Dir::Write, cx, |mut io| {
                    std::io::Write::write(&mut io, buf)
                })
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.s.poll_io(super::Dir::Write, cx, |mut io| {
                    std::io::Write::write_vectored(&mut io, bufs)
                })
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(self.s.io.shutdown(std::net::Shutdown::Write))
            }
        }
    };
}
use stream_io;

/// What every socket type `$t` (field `s`: a `Socket<$mio>`) shares with its
/// std counterpart `$std`: `from_std`/`TryFrom` (adopt), `into_std` (give
/// back, blocking again), `try_clone`, `AsRawFd`, `AsFd`.
///
/// A clone (`dup`) is registered with the netpoller on its own: it has its
/// own readiness state, deadlines and timeouts, and both handles see the
/// same connection (as two fds of one socket do in Go's `File()` or C).
macro_rules! std_interop {
    ($($t:ident: $mio:ty => $std:ty),* $(,)?) => {$(
        impl $t {
            /// Adopt a std socket (made non-blocking here — the socket's
            /// flag, so every fd of it, `dup`s included) in the current
            /// runtime.
            ///
            /// # Errors
            /// If it cannot be made non-blocking, or registering it with the
            /// netpoller fails.
            ///
            /// `TryFrom` does the same. (The examples of these methods use a
            /// [`UdpSocket`](crate::net::UdpSocket); every socket type of this module has
            /// them.)
            ///
            /// # Examples
            ///
            /// ```
            /// let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            /// let addr = std_socket.local_addr().unwrap();
            /// let socket = gosched::net::UdpSocket::from_std(std_socket).unwrap();
            /// assert_eq!(socket.local_addr().unwrap(), addr);
            /// ```
            pub fn from_std(s: $std) -> std::io::Result<$t> {
                s.set_nonblocking(true)?;
                Ok($t {
                    s: super::Socket::new(<$mio>::from_std(s))?,
                })
            }

            /// The std socket, unregistered from the netpoller. It stays
            /// non-blocking (as tokio's `into_std`): `O_NONBLOCK` belongs to
            /// the socket, which `try_clone` handles share, and making it
            /// blocking would block those handles' Ms in the kernel. Call
            /// `set_nonblocking(false)` if no clone is left.
            ///
            /// # Errors
            /// Never today (the signature leaves room for platforms that
            /// must re-create the socket).
            ///
            /// # Examples
            ///
            /// ```
            /// use std::io::ErrorKind;
            ///
            /// let socket = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            /// let addr = socket.local_addr().unwrap();
            /// let std_socket = socket.into_std().unwrap();
            /// assert_eq!(std_socket.local_addr().unwrap(), addr);
            /// let err = std_socket.recv(&mut [0; 8]).unwrap_err();
            /// assert_eq!(err.kind(), ErrorKind::WouldBlock); // still non-blocking
            /// std_socket.set_nonblocking(false).unwrap(); // no clone is left
            /// ```
            pub fn into_std(self) -> std::io::Result<$std> {
                let fd: std::os::fd::OwnedFd = self.s.into_io().into();
                Ok(<$std>::from(fd))
            }

            /// A second handle on the same socket (`dup`), in the same
            /// runtime, with its own deadlines and timeouts.
            ///
            /// # Errors
            /// The OS's (`EMFILE`), or registering it fails.
            ///
            /// # Examples
            ///
            /// ```
            /// use std::time::Duration;
            ///
            /// let a = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            /// let b = a.try_clone().unwrap();
            /// assert_eq!(a.local_addr().unwrap(), b.local_addr().unwrap()); // one socket
            /// b.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            /// assert_eq!(a.read_timeout().unwrap(), None); // its own timeouts
            /// ```
            pub fn try_clone(&self) -> std::io::Result<$t> {
                let fd = std::os::fd::AsFd::as_fd(&self.s.io).try_clone_to_owned()?;
                let s = <$std>::from(fd);
                Ok($t {
                    s: super::Socket::new_in(<$mio>::from_std(s), self.s.rt.clone())?,
                })
            }
        }

        impl TryFrom<$std> for $t {
            type Error = std::io::Error;
            fn try_from(s: $std) -> std::io::Result<$t> {
                $t::from_std(s)
            }
        }

        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.s.io)
            }
        }

        impl std::os::fd::AsFd for $t {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(&self.s.io)
            }
        }
    )*};
}
use std_interop;

/// Raise a new listener's accept queue to the system's limit, as Go's
/// `net.Listen` does (`/proc/sys/net/core/somaxconn`, 4096 on current
/// Linux): std listens with 128, and a burst of connects beyond that while
/// the acceptor is busy is dropped — each dropped SYN costs its client a
/// 1 s retransmission. `listen` on a listening socket only resizes its
/// queue (Linux and the BSDs).
fn raise_backlog(listener: &impl std::os::fd::AsRawFd) {
    static BACKLOG: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let backlog = *BACKLOG.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .unwrap_or(libc::SOMAXCONN)
            .max(1)
    });
    // SAFETY: `listen` on an fd we borrow; it touches no memory of ours.
    // Failure leaves the queue as it was (128), so it is ignored.
    unsafe { libc::listen(listener.as_raw_fd(), backlog) };
}

/// Resolve `addr` as a blocking call (`syscall_local`): a slow resolver
/// (`getaddrinfo` for a host name) holds this thread, and sysmon hands the P
/// to another M meanwhile: it costs a thread, not a P. A numeric address is
/// parsed without a system call.
fn resolve(addr: impl std::net::ToSocketAddrs) -> io::Result<Vec<std::net::SocketAddr>> {
    crate::syscall_local(|| addr.to_socket_addrs().map(Iterator::collect))
}

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
                let left = d.saturating_duration_since(crate::time::now());
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
    /// Register `io` with the current runtime's netpoller.
    fn new(io: S) -> io::Result<Self> {
        Socket::new_in(io, crate::sched::context::with_current(Arc::clone))
    }

    /// Register `io` with `rt`'s netpoller.
    fn new_in(mut io: S, rt: Arc<Shared>) -> io::Result<Self> {
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
            let left = t.saturating_duration_since(crate::time::now());
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
        if at != 0 && crate::sched::timers::clock_ns() >= at {
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
    ///
    /// A preemption point first (Go's async preemption reaches a goroutine
    /// anywhere): an operation that never has to park (a writer whose peer's
    /// buffer has room, a reader that always finds data) would otherwise
    /// hold its P for good, since nothing else in it calls the runtime.
    fn blocking<R>(&self, d: Dir, mut op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        crate::coro::preempt_point();
        let dir = self.direction(d);
        let limit = self.timeout(d).map(crate::sched::timers::deadline_after);
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
                    let left = end.saturating_duration_since(crate::time::now());
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
        // As `blocking`'s preemption point: an always-ready socket returns
        // `Pending` (after a wake) once sysmon asks this poll to end.
        std::task::ready!(crate::sched::preempt::poll_preempted(cx));
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

impl<S: mio::event::Source> Socket<S> {
    /// Stop the deadline timers and unregister (waking whoever waits: they
    /// see the socket closed).
    fn release(&mut self) {
        for l in &self.limits {
            if let Some(t) = l.timer.lock().unwrap_or_else(|e| e.into_inner()).take() {
                t.stop();
            }
        }
        self.rt.netpoll.deregister(&mut self.io, &self.reg);
    }

    /// Unregister and give back the socket itself (for `into_std`: no `dup`,
    /// so no `EMFILE` to lose it to).
    fn into_io(self) -> S {
        let mut me = std::mem::ManuallyDrop::new(self);
        me.release();
        // SAFETY: `me` is never used or dropped again after this block
        // (`ManuallyDrop`), and each field is moved out (`io`) or dropped in
        // place (the rest) exactly once, so nothing is dropped twice or
        // leaked; `release` already did what `Drop` would have.
        unsafe {
            let io = std::ptr::read(&me.io);
            std::ptr::drop_in_place(&mut me.reg);
            std::ptr::drop_in_place(&mut me.rt);
            std::ptr::drop_in_place(&mut me.limits);
            io
        }
    }
}

impl<S: mio::event::Source> Drop for Socket<S> {
    fn drop(&mut self) {
        self.release();
    }
}
