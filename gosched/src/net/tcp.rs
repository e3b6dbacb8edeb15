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
    /// a host name is resolved as a blocking call, see `connect`), with the
    /// system's largest accept queue (`somaxconn`, as Go; std uses 128).
    ///
    /// # Errors
    /// As std's `TcpListener::bind`; or the netpoller cannot be created.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap(); // port 0: any free one
    /// let addr = l.local_addr().unwrap();
    /// assert!(addr.ip().is_loopback());
    /// assert_ne!(addr.port(), 0);
    /// ```
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let std = std::net::TcpListener::bind(&super::resolve(addr)?[..])?;
        super::raise_backlog(&std);
        TcpListener::from_std(std)
    }

    /// Wait for a connection (parks the goroutine; on a plain thread, the
    /// thread).
    ///
    /// # Errors
    /// The OS's: e.g. `EMFILE` when the process is out of file descriptors
    /// (returned, never retried in a loop here: back off and try again).
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::{TcpListener, TcpStream};
    ///
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let client = gosched::go(move || TcpStream::connect(addr).unwrap());
    /// let (conn, peer) = l.accept().unwrap();
    /// let client = client.join().unwrap();
    /// assert_eq!(peer, client.local_addr().unwrap());
    /// assert_eq!(conn.peer_addr().unwrap(), peer);
    /// ```
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (io, addr) = self.s.blocking(Dir::Read, |l| l.accept())?;
        Ok((TcpStream::from_mio(io)?, addr))
    }

    /// `accept` for async code.
    ///
    /// # Errors
    /// As `accept`.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::{TcpListener, TcpStream};
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = l.local_addr().unwrap();
    ///     let client = gosched::spawn(async move { TcpStream::connect_async(addr).await });
    ///     let (_conn, peer) = l.accept_async().await.unwrap();
    ///     let client = client.await.unwrap().unwrap();
    ///     assert_eq!(peer, client.local_addr().unwrap());
    /// });
    /// ```
    pub async fn accept_async(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (io, addr) =
            std::future::poll_fn(|cx| self.s.poll_io(Dir::Read, cx, mio::net::TcpListener::accept))
                .await?;
        Ok((TcpStream::from_mio(io)?, addr))
    }

    /// Go's `TCPListener.SetDeadline`: `accept` after `at` (and one parked
    /// now, when `at` passes) fails with `ErrorKind::TimedOut`.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    ///
    /// gosched::testing::run_virtual(|| {
    ///     let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     l.set_deadline(Some(gosched::time::now() + Duration::from_secs(3)));
    ///     let err = l.accept().unwrap_err(); // nobody connects
    ///     assert_eq!(err.kind(), ErrorKind::TimedOut);
    /// });
    /// ```
    pub fn set_deadline(&self, at: Option<Instant>) {
        self.s.set_deadline(Dir::Read, at);
    }

    /// The connections, one `accept` per item (never ends).
    ///
    /// ```
    /// use gosched::net::{TcpListener, TcpStream};
    ///
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let clients = gosched::go(move || {
    ///     (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect::<Vec<_>>()
    /// });
    /// let accepted = l.incoming().take(3).filter(|conn| conn.is_ok()).count();
    /// assert_eq!(accepted, 3);
    /// assert_eq!(clients.join().unwrap().len(), 3);
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address it is bound to.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let conn = gosched::net::TcpStream::connect(addr).unwrap();
    /// assert_eq!(conn.peer_addr().unwrap(), addr);
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// l.set_ttl(100).unwrap();
    /// assert_eq!(l.ttl().unwrap(), 100);
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.s.io.set_ttl(ttl)
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// l.set_ttl(64).unwrap();
    /// assert_eq!(l.ttl().unwrap(), 64);
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.s.io.ttl()
    }
}

/// The connections of a listener ([`TcpListener::incoming`]).
///
/// ```
/// use std::io::{Read, Write};
///
/// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let addr = l.local_addr().unwrap();
/// let client = gosched::go(move || {
///     gosched::net::TcpStream::connect(addr).unwrap().write_all(b"hi").unwrap();
/// });
/// for conn in l.incoming().take(1) {
///     let mut msg = String::new();
///     conn.unwrap().read_to_string(&mut msg).unwrap();
///     assert_eq!(msg, "hi");
/// }
/// client.join().unwrap();
/// ```
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
///
/// ```
/// use gosched::net::{TcpListener, TcpStream};
/// use std::io::{Read, Write};
/// use std::sync::Arc;
///
/// let l = TcpListener::bind("127.0.0.1:0").unwrap();
/// let conn = Arc::new(TcpStream::connect(l.local_addr().unwrap()).unwrap());
/// let (mut server, _) = l.accept().unwrap();
/// let c = Arc::clone(&conn);
/// let reader = gosched::go(move || {
///     let mut buf = [0; 4];
///     (&*c).read_exact(&mut buf).unwrap(); // reads while the other side writes
///     buf
/// });
/// (&*conn).write_all(b"ping").unwrap();
/// server.write_all(b"pong").unwrap();
/// assert_eq!(&reader.join().unwrap(), b"pong");
/// let mut buf = [0; 4];
/// server.read_exact(&mut buf).unwrap();
/// assert_eq!(&buf, b"ping");
/// ```
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
    /// goroutine while the handshake runs). A host name is resolved as a
    /// blocking call (`syscall_local`): a slow resolver holds this thread,
    /// not a P (sysmon hands the P on).
    ///
    /// # Errors
    /// The last address's error (`ConnectionRefused`, …), or `InvalidInput`
    /// if `addr` resolves to nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    ///
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let mut c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// c.write_all(b"hi").unwrap();
    /// let mut buf = [0; 2];
    /// s.read_exact(&mut buf).unwrap();
    /// assert_eq!(&buf, b"hi");
    /// ```
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, |a| TcpStream::connect_one(a, None))
    }

    /// `connect` to one address, giving up after `timeout`
    /// (`ErrorKind::TimedOut`). A zero timeout has expired already: it fails
    /// with `TimedOut` before any attempt, as Go's dial with a past deadline
    /// (std rejects it instead); `Duration::MAX` waits as long as the
    /// connect takes.
    ///
    /// # Errors
    /// As `connect`, or `TimedOut`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let c = gosched::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    /// assert_eq!(c.peer_addr().unwrap(), addr);
    /// ```
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        let deadline = crate::sched::timers::deadline_after(timeout);
        if timeout.is_zero() {
            return Err(connect_timed_out(*addr));
        }
        TcpStream::connect_one(*addr, Some(deadline))
    }

    fn connect_one(addr: SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        if deadline.is_some_and(|d| d <= crate::time::now()) {
            // Expired already: no attempt (a loopback connect would succeed).
            return Err(connect_timed_out(addr));
        }
        let stream = TcpStream::from_mio(mio::net::TcpStream::connect(addr)?)?;
        super::finish_connect(
            &stream.s,
            mio::net::TcpStream::take_error,
            tcp_connected,
            deadline,
        )
        .map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut => connect_timed_out(addr),
            _ => e,
        })?;
        Ok(stream)
    }

    /// `connect` for async code.
    ///
    /// # Errors
    /// As `connect` (for one address).
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::{TcpListener, TcpStream};
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = l.local_addr().unwrap();
    ///     let c = TcpStream::connect_async(addr).await.unwrap();
    ///     assert_eq!(c.peer_addr().unwrap(), addr);
    /// });
    /// ```
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

    /// The peer's address.
    ///
    /// # Errors
    /// The OS's (`NotConnected`).
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (s, _) = l.accept().unwrap();
    /// assert_eq!(c.peer_addr().unwrap(), s.local_addr().unwrap());
    /// assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.peer_addr()
    }

    /// Our end's address.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (_s, peer) = l.accept().unwrap();
    /// assert_eq!(c.local_addr().unwrap(), peer);
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// Shut down reading, writing or both (a parked reader of this stream
    /// sees end of file).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Read;
    /// use std::net::Shutdown;
    ///
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// c.shutdown(Shutdown::Write).unwrap();
    /// let mut rest = Vec::new();
    /// assert_eq!(s.read_to_end(&mut rest).unwrap(), 0); // end of file
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.s.io.shutdown(how)
    }

    /// `TCP_NODELAY`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// c.set_nodelay(true).unwrap();
    /// assert!(c.nodelay().unwrap());
    /// ```
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.s.io.set_nodelay(on)
    }

    /// `TCP_NODELAY`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// c.set_nodelay(false).unwrap();
    /// assert!(!c.nodelay().unwrap());
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.s.io.nodelay()
    }

    /// TCP keep-alive probes (Go's `SetKeepAlive` + `SetKeepAlivePeriod`):
    /// `Some(period)` turns them on, probing after `period` idle and every
    /// `period` after that (whole seconds rounded up, 1 to 32,767; on Linux —
    /// elsewhere the OS's defaults); `None` turns them off.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// c.set_keepalive(Some(Duration::from_secs(30))).unwrap();
    /// assert!(c.keepalive().unwrap());
    /// c.set_keepalive(None).unwrap();
    /// assert!(!c.keepalive().unwrap());
    /// ```
    pub fn set_keepalive(&self, period: Option<Duration>) -> io::Result<()> {
        use std::os::fd::AsFd;
        let fd = self.s.io.as_fd();
        // The period first, so a bad one leaves the probes as they were.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(p) = period {
            // Whole seconds, rounded up (as Go), within the kernel's range.
            let secs = p.as_secs() + u64::from(p.subsec_nanos() > 0);
            let secs = i32::try_from(secs.clamp(1, 32_767)).unwrap_or(32_767);
            setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs)?;
            setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, secs)?;
        }
        setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            i32::from(period.is_some()),
        )
    }

    /// Whether keep-alive probes are on.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// assert!(!c.keepalive().unwrap()); // off by default
    /// c.set_keepalive(Some(Duration::from_secs(15))).unwrap();
    /// assert!(c.keepalive().unwrap());
    /// ```
    pub fn keepalive(&self) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `on` and `len` are valid for writes of the sizes passed,
        // and the fd is open (owned by `self`).
        let r = unsafe {
            libc::getsockopt(
                self.s.io.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_KEEPALIVE,
                std::ptr::addr_of_mut!(on).cast(),
                &mut len,
            )
        };
        if r == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(on != 0)
    }

    super::deadline_methods!();

    /// Read what is there without taking it (parks until something is).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    ///
    /// let l = gosched::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let mut c = gosched::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// c.write_all(b"hello").unwrap();
    /// let mut first = [0; 1];
    /// assert_eq!(s.peek(&mut first).unwrap(), 1);
    /// assert_eq!(&first, b"h");
    /// let mut all = [0; 5];
    /// s.read_exact(&mut all).unwrap(); // still there
    /// assert_eq!(&all, b"hello");
    /// ```
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

/// `setsockopt` of an `int` option.
fn setsockopt(
    fd: std::os::fd::BorrowedFd<'_>,
    level: i32,
    name: i32,
    value: i32,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `value` is a valid `c_int` for the length passed; the fd is
    // open (borrowed).
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn each_addr<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in super::resolve(addr)? {
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

super::std_interop! {
    TcpListener: mio::net::TcpListener => std::net::TcpListener,
    TcpStream: mio::net::TcpStream => std::net::TcpStream,
}

/// The error of a connect whose timeout expired.
fn connect_timed_out(addr: SocketAddr) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("gosched net: connect to {addr} timed out"),
    )
}
