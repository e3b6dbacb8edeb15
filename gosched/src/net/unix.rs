//! Unix-domain sockets over the runtime's netpoller.

use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;

use super::{Dir, Socket};

/// A Unix-domain listening socket.
///
/// ```
/// use gosched::net::{UnixListener, UnixStream};
/// use std::io::{Read, Write};
///
/// let path = std::env::temp_dir().join(format!("gosched-{}-ul.sock", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let l = UnixListener::bind(&path).unwrap();
/// let p = path.clone();
/// let client = gosched::go(move || UnixStream::connect(p).unwrap().write_all(b"hi").unwrap());
/// let (mut conn, _) = l.accept().unwrap();
/// let mut msg = String::new();
/// conn.read_to_string(&mut msg).unwrap();
/// assert_eq!(msg, "hi");
/// client.join().unwrap();
/// std::fs::remove_file(&path).unwrap();
/// ```
pub struct UnixListener {
    s: Socket<mio::net::UnixListener>,
}

impl std::fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixListener")
            .field("local_addr", &self.s.io.local_addr().ok())
            .finish()
    }
}

impl UnixListener {
    /// Bind to the socket file `path` (which must not exist), with the
    /// system's largest accept queue (as `TcpListener::bind`).
    ///
    /// # Errors
    /// The OS's (`AddrInUse` if the file exists).
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UnixListener;
    /// use std::io::ErrorKind;
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-bind.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let l = UnixListener::bind(&path).unwrap();
    /// assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// let err = UnixListener::bind(&path).unwrap_err(); // the file exists
    /// assert_eq!(err.kind(), ErrorKind::AddrInUse);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let l = mio::net::UnixListener::bind(path)?;
        super::raise_backlog(&l);
        Ok(UnixListener { s: Socket::new(l)? })
    }

    /// Wait for a connection (parks the goroutine).
    ///
    /// # Errors
    /// The OS's (`EMFILE` is returned, never retried here).
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::{UnixListener, UnixStream};
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-accept.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let l = UnixListener::bind(&path).unwrap();
    /// let p = path.clone();
    /// let client = gosched::go(move || UnixStream::connect(p).unwrap());
    /// let (conn, _) = l.accept().unwrap();
    /// assert_eq!(conn.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// assert!(client.join().unwrap().local_addr().unwrap().is_unnamed());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (io, addr) = self.s.blocking(Dir::Read, |l| l.accept())?;
        Ok((UnixStream::from_mio(io)?, addr))
    }

    /// `accept` for async code.
    ///
    /// # Errors
    /// As `accept`.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::{UnixListener, UnixStream};
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-async.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let l = UnixListener::bind(&path).unwrap();
    ///     let p = path.clone();
    ///     let client = gosched::go(move || UnixStream::connect(p).unwrap());
    ///     let (conn, _) = l.accept_async().await.unwrap();
    ///     let client = client.await.unwrap();
    ///     assert_eq!(client.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
    ///     drop(conn);
    /// });
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub async fn accept_async(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (io, addr) =
            std::future::poll_fn(|cx| self.s.poll_io(Dir::Read, cx, |l| l.accept())).await?;
        Ok((UnixStream::from_mio(io)?, addr))
    }

    /// Our address.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("gosched-{}-la.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let l = gosched::net::UnixListener::bind(&path).unwrap();
    /// assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// Go's `SetDeadline` for `accept`.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-dl.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let p = path.clone();
    /// gosched::testing::run_virtual(move || {
    ///     let l = gosched::net::UnixListener::bind(&p).unwrap();
    ///     l.set_deadline(Some(gosched::time::now() + Duration::from_secs(3)));
    ///     assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::TimedOut); // nobody came
    /// });
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn set_deadline(&self, at: Option<std::time::Instant>) {
        self.s.set_deadline(Dir::Read, at);
    }
}

/// A Unix-domain stream: `read`/`write` park the calling goroutine; `&UnixStream`
/// reads and writes too (a reader and a writer goroutine).
///
/// ```
/// use gosched::net::UnixStream;
/// use std::io::{Read, Write};
/// use std::sync::Arc;
///
/// let (a, mut b) = UnixStream::pair().unwrap();
/// let a = Arc::new(a);
/// let reader = Arc::clone(&a);
/// let h = gosched::go(move || {
///     let mut buf = [0; 4];
///     (&*reader).read_exact(&mut buf).unwrap(); // reads while the other side writes
///     buf
/// });
/// (&*a).write_all(b"ping").unwrap();
/// b.write_all(b"pong").unwrap();
/// assert_eq!(&h.join().unwrap(), b"pong");
/// let mut buf = [0; 4];
/// b.read_exact(&mut buf).unwrap();
/// assert_eq!(&buf, b"ping");
/// ```
pub struct UnixStream {
    s: Socket<mio::net::UnixStream>,
}

impl std::fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixStream")
            .field("local_addr", &self.s.io.local_addr().ok())
            .field("peer_addr", &self.s.io.peer_addr().ok())
            .finish()
    }
}

impl UnixStream {
    fn from_mio(io: mio::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            s: Socket::new(io)?,
        })
    }

    /// Connect to the socket file `path` (parks while the connection is
    /// made).
    ///
    /// # Errors
    /// The OS's (`NotFound`, `ConnectionRefused`).
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::{UnixListener, UnixStream};
    /// use std::io::ErrorKind;
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-conn.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let err = UnixStream::connect(&path).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NotFound); // nobody listens yet
    /// let l = UnixListener::bind(&path).unwrap();
    /// let c = UnixStream::connect(&path).unwrap();
    /// assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// drop(l);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let stream = UnixStream::from_mio(mio::net::UnixStream::connect(path)?)?;
        super::finish_connect(
            &stream.s,
            mio::net::UnixStream::take_error,
            |s| match s.peer_addr() {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                Err(e) => Err(e),
            },
            None,
        )?;
        Ok(stream)
    }

    /// Two connected streams (`socketpair`).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    ///
    /// let (mut a, mut b) = gosched::net::UnixStream::pair().unwrap();
    /// a.write_all(b"hello").unwrap();
    /// let mut buf = [0; 5];
    /// b.read_exact(&mut buf).unwrap();
    /// assert_eq!(&buf, b"hello");
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::from_mio(a)?, UnixStream::from_mio(b)?))
    }

    /// Our address.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = gosched::net::UnixStream::pair().unwrap();
    /// assert!(a.local_addr().unwrap().is_unnamed()); // a socketpair has no path
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("gosched-{}-peer.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let l = gosched::net::UnixListener::bind(&path).unwrap();
    /// let c = gosched::net::UnixStream::connect(&path).unwrap();
    /// assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// drop(l);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.peer_addr()
    }

    /// Shut down reading, writing or both.
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
    /// let (a, mut b) = gosched::net::UnixStream::pair().unwrap();
    /// a.shutdown(Shutdown::Write).unwrap();
    /// let mut rest = Vec::new();
    /// assert_eq!(b.read_to_end(&mut rest).unwrap(), 0); // end of file
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.s.io.shutdown(how)
    }

    super::deadline_methods!();
}

super::stream_io!(UnixStream);

/// A Unix-domain datagram socket.
///
/// ```
/// let (a, b) = gosched::net::UnixDatagram::pair().unwrap();
/// let h = gosched::go(move || {
///     let mut buf = [0; 16];
///     let n = b.recv(&mut buf).unwrap(); // parks until a datagram comes
///     buf[..n].to_vec()
/// });
/// a.send(b"ping").unwrap();
/// assert_eq!(h.join().unwrap(), b"ping");
/// ```
pub struct UnixDatagram {
    s: Socket<mio::net::UnixDatagram>,
}

impl std::fmt::Debug for UnixDatagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixDatagram")
            .field("local_addr", &self.s.io.local_addr().ok())
            .finish()
    }
}

impl UnixDatagram {
    /// Bind to the socket file `path`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UnixDatagram;
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-dg.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let server = UnixDatagram::bind(&path).unwrap();
    /// UnixDatagram::unbound().unwrap().send_to(b"hi", &path).unwrap();
    /// let mut buf = [0; 8];
    /// let (n, _) = server.recv_from(&mut buf).unwrap();
    /// assert_eq!(&buf[..n], b"hi");
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        UnixDatagram::from_mio(mio::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address (it can send, and receive replies once
    /// connected).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UnixDatagram::unbound().unwrap();
    /// assert!(s.local_addr().unwrap().is_unnamed());
    /// ```
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::from_mio(mio::net::UnixDatagram::unbound()?)
    }

    /// Two connected sockets (`socketpair`).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, b) = gosched::net::UnixDatagram::pair().unwrap();
    /// a.send(b"one").unwrap();
    /// a.send(b"two").unwrap();
    /// let mut buf = [0; 8];
    /// let n = b.recv(&mut buf).unwrap(); // one datagram at a time
    /// assert_eq!(&buf[..n], b"one");
    /// ```
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = mio::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::from_mio(a)?, UnixDatagram::from_mio(b)?))
    }

    fn from_mio(io: mio::net::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            s: Socket::new(io)?,
        })
    }

    /// Set the default peer.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UnixDatagram;
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-dgc.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let server = UnixDatagram::bind(&path).unwrap();
    /// let client = UnixDatagram::unbound().unwrap();
    /// client.connect(&path).unwrap();
    /// client.send(b"hi").unwrap(); // no path needed
    /// let mut buf = [0; 8];
    /// assert_eq!(server.recv(&mut buf).unwrap(), 2);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.s.io.connect(path)
    }

    /// Send one datagram to `path`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UnixDatagram;
    ///
    /// let path = std::env::temp_dir().join(format!("gosched-{}-st.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let server = UnixDatagram::bind(&path).unwrap();
    /// let client = UnixDatagram::unbound().unwrap();
    /// assert_eq!(client.send_to(b"hello", &path).unwrap(), 5);
    /// let mut buf = [0; 8];
    /// assert_eq!(server.recv(&mut buf).unwrap(), 5);
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.s.blocking(Dir::Write, |s| s.send_to(buf, path))
    }

    /// Receive one datagram and its sender.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UnixDatagram;
    ///
    /// let dir = std::env::temp_dir();
    /// let (sp, cp) = (
    ///     dir.join(format!("gosched-{}-rf-s.sock", std::process::id())),
    ///     dir.join(format!("gosched-{}-rf-c.sock", std::process::id())),
    /// );
    /// # let _ = (std::fs::remove_file(&sp), std::fs::remove_file(&cp));
    /// let server = UnixDatagram::bind(&sp).unwrap();
    /// let client = UnixDatagram::bind(&cp).unwrap();
    /// client.send_to(b"hi", &sp).unwrap();
    /// let mut buf = [0; 8];
    /// let (n, from) = server.recv_from(&mut buf).unwrap();
    /// assert_eq!((&buf[..n], from.as_pathname()), (&b"hi"[..], Some(cp.as_path())));
    /// server.send_to(b"back", from.as_pathname().unwrap()).unwrap(); // a reply
    /// assert_eq!(client.recv(&mut buf).unwrap(), 4);
    /// # std::fs::remove_file(&sp).unwrap();
    /// # std::fs::remove_file(&cp).unwrap();
    /// ```
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.s.blocking(Dir::Read, |s| s.recv_from(buf))
    }

    /// Send to the connected peer.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, b) = gosched::net::UnixDatagram::pair().unwrap();
    /// assert_eq!(a.send(b"hello").unwrap(), 5);
    /// let mut buf = [0; 8];
    /// assert_eq!(b.recv(&mut buf).unwrap(), 5);
    /// ```
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.s.blocking(Dir::Write, |s| s.send(buf))
    }

    /// Receive from the connected peer.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, b) = gosched::net::UnixDatagram::pair().unwrap();
    /// b.send(b"pong").unwrap();
    /// let mut buf = [0; 8];
    /// let n = a.recv(&mut buf).unwrap();
    /// assert_eq!(&buf[..n], b"pong");
    /// ```
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.blocking(Dir::Read, |s| s.recv(buf))
    }

    /// Our address.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("gosched-{}-dgla.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let s = gosched::net::UnixDatagram::bind(&path).unwrap();
    /// assert_eq!(s.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    super::deadline_methods!();
}

super::std_interop! {
    UnixListener: mio::net::UnixListener => std::os::unix::net::UnixListener,
    UnixStream: mio::net::UnixStream => std::os::unix::net::UnixStream,
    UnixDatagram: mio::net::UnixDatagram => std::os::unix::net::UnixDatagram,
}
