//! TCP: a listener and a stream over the runtime's netpoller.

use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Dir, Socket};

/// A TCP listening socket. `accept` parks the calling goroutine until a
/// connection arrives.
///
/// ```
/// use std::io::{Read, Write};
/// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let addr = l.local_addr().unwrap();
/// let server = gosched::go(move || {
///     let (mut c, _) = l.accept().unwrap();
///     let mut buf = [0; 5];
///     c.read_exact(&mut buf).unwrap();
///     c.write_all(&buf).unwrap();
/// });
/// let echoed = gosched::go(move || {
///     let mut c = gosched::net::TcpStream::connect(addr).unwrap();
///     c.write_all(b"hello").unwrap();
///     let mut buf = [0; 5];
///     c.read_exact(&mut buf).unwrap();
///     buf
/// });
/// assert_eq!(&echoed.join().unwrap(), b"hello");
/// server.join().unwrap();
/// ```
pub struct TcpListener {
    s: Socket<mio::net::TcpListener>,
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.s.io.local_addr().ok())
            .finish()
    }
}

impl TcpListener {
    /// Bind to the first of `addr`'s addresses that works (as std's `bind`;
    /// a host name is resolved on the calling thread).
    ///
    /// # Errors
    /// As std's `TcpListener::bind`; or the netpoller cannot be created.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let std = std::net::TcpListener::bind(addr)?;
        TcpListener::from_std(std)
    }

    /// Adopt a std listener (made non-blocking here).
    ///
    /// # Errors
    /// If it cannot be made non-blocking or registered.
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        l.set_nonblocking(true)?;
        Ok(TcpListener {
            s: Socket::new(mio::net::TcpListener::from_std(l))?,
        })
    }

    /// Wait for a connection (parks the goroutine; on a plain thread, the
    /// thread).
    ///
    /// # Errors
    /// The OS's: e.g. `EMFILE` when the process is out of file descriptors
    /// (returned, never retried in a loop here: back off and try again).
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (io, addr) = self.s.blocking(Dir::Read, |l| l.accept())?;
        Ok((TcpStream::from_mio(io)?, addr))
    }

    /// `accept` for async code.
    ///
    /// # Errors
    /// As `accept`.
    pub async fn accept_async(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (io, addr) =
            std::future::poll_fn(|cx| self.s.poll_io(Dir::Read, cx, mio::net::TcpListener::accept))
                .await?;
        Ok((TcpStream::from_mio(io)?, addr))
    }

    /// Go's `TCPListener.SetDeadline`: `accept` after `at` (and one parked
    /// now, when `at` passes) fails with `ErrorKind::TimedOut`.
    pub fn set_deadline(&self, at: Option<Instant>) {
        self.s.set_deadline(Dir::Read, at);
    }

    /// The connections, one `accept` per item (never ends).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address it is bound to.
    ///
    /// # Errors
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The OS's.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.s.io.set_ttl(ttl)
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The OS's.
    pub fn ttl(&self) -> io::Result<u32> {
        self.s.io.ttl()
    }
}

/// The connections of a listener ([`TcpListener::incoming`]).
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A TCP connection. `read`/`write` park the calling goroutine until the socket
/// is ready; `&TcpStream` reads and writes too, so one goroutine may read
/// while another writes (share it in an `Arc`).
pub struct TcpStream {
    s: Socket<mio::net::TcpStream>,
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.s.io.local_addr().ok())
            .field("peer_addr", &self.s.io.peer_addr().ok())
            .finish()
    }
}

impl TcpStream {
    fn from_mio(io: mio::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            s: Socket::new(io)?,
        })
    }

    /// Connect to the first of `addr`'s addresses that accepts (parks the
    /// goroutine while the handshake runs). A host name is resolved on the
    /// calling thread.
    ///
    /// # Errors
    /// The last address's error (`ConnectionRefused`, …), or `InvalidInput`
    /// if `addr` resolves to nothing.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, |a| TcpStream::connect_one(a, None))
    }

    /// `connect` to one address, giving up after `timeout`
    /// (`ErrorKind::TimedOut`).
    ///
    /// # Errors
    /// As `connect`, or `TimedOut`.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        TcpStream::connect_one(*addr, Some(Instant::now() + timeout))
    }

    fn connect_one(addr: SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        let stream = TcpStream::from_mio(mio::net::TcpStream::connect(addr)?)?;
        super::finish_connect(
            &stream.s,
            mio::net::TcpStream::take_error,
            tcp_connected,
            deadline,
        )
        .map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("gosched net: connect to {addr} timed out"),
            ),
            _ => e,
        })?;
        Ok(stream)
    }

    /// `connect` for async code.
    ///
    /// # Errors
    /// As `connect` (for one address).
    pub async fn connect_async(addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::from_mio(mio::net::TcpStream::connect(addr)?)?;
        let dir = &stream.s.reg.desc.write;
        loop {
            let seen = dir.seq();
            if let Some(e) = stream.s.io.take_error()? {
                return Err(e);
            }
            if tcp_connected(&stream.s.io)? {
                return Ok(stream);
            }
            std::future::poll_fn(|cx| stream.s.wait(dir, seen, cx)).await;
            // (Closed by a runtime shutdown: `wait` returns at once from now on.)
            if stream.s.reg.desc.is_closed() {
                return Err(Socket::<mio::net::TcpStream>::closed());
            }
        }
    }

    /// Adopt a connected std stream (made non-blocking here).
    ///
    /// # Errors
    /// If it cannot be made non-blocking or registered.
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        s.set_nonblocking(true)?;
        TcpStream::from_mio(mio::net::TcpStream::from_std(s))
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS's (`NotConnected`).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.peer_addr()
    }

    /// Our end's address.
    ///
    /// # Errors
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// Shut down reading, writing or both (a parked reader of this stream
    /// sees end of file).
    ///
    /// # Errors
    /// The OS's.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.s.io.shutdown(how)
    }

    /// `TCP_NODELAY`.
    ///
    /// # Errors
    /// The OS's.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.s.io.set_nodelay(on)
    }

    /// `TCP_NODELAY`.
    ///
    /// # Errors
    /// The OS's.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.s.io.nodelay()
    }

    super::deadline_methods!();

    /// Read what is there without taking it (parks until something is).
    ///
    /// # Errors
    /// The OS's.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.blocking(Dir::Read, |s| s.peek(buf))
    }
}

/// Whether a non-blocking connect has finished (a peer address exists).
fn tcp_connected(s: &mio::net::TcpStream) -> io::Result<bool> {
    match s.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}

fn each_addr<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "gosched net: the address resolved to nothing",
        )
    }))
}

super::stream_io!(TcpStream);

super::as_raw_fd!(TcpListener);
