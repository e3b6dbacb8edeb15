//! Unix-domain sockets over the runtime's netpoller.

use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;

use super::{Dir, Socket};

/// A Unix-domain listening socket.
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
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let l = mio::net::UnixListener::bind(path)?;
        super::raise_backlog(&l);
        Ok(UnixListener { s: Socket::new(l)? })
    }

    /// Wait for a connection (parks the goroutine).
    ///
    /// # Errors
    /// The OS's (`EMFILE` is returned, never retried here).
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (io, addr) = self.s.blocking(Dir::Read, |l| l.accept())?;
        Ok((UnixStream::from_mio(io)?, addr))
    }

    /// `accept` for async code.
    ///
    /// # Errors
    /// As `accept`.
    pub async fn accept_async(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (io, addr) =
            std::future::poll_fn(|cx| self.s.poll_io(Dir::Read, cx, |l| l.accept())).await?;
        Ok((UnixStream::from_mio(io)?, addr))
    }

    /// Our address.
    ///
    /// # Errors
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// Go's `SetDeadline` for `accept`.
    pub fn set_deadline(&self, at: Option<std::time::Instant>) {
        self.s.set_deadline(Dir::Read, at);
    }
}

/// A Unix-domain stream: `read`/`write` park the calling goroutine; `&UnixStream`
/// reads and writes too (a reader and a writer goroutine).
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
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::from_mio(a)?, UnixStream::from_mio(b)?))
    }

    /// Our address.
    ///
    /// # Errors
    /// The OS's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS's.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.peer_addr()
    }

    /// Shut down reading, writing or both.
    ///
    /// # Errors
    /// The OS's.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.s.io.shutdown(how)
    }

    super::deadline_methods!();
}

super::stream_io!(UnixStream);

/// A Unix-domain datagram socket.
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
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        UnixDatagram::from_mio(mio::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to no address (it can send, and receive replies once
    /// connected).
    ///
    /// # Errors
    /// The OS's.
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::from_mio(mio::net::UnixDatagram::unbound()?)
    }

    /// Two connected sockets (`socketpair`).
    ///
    /// # Errors
    /// The OS's.
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
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.s.io.connect(path)
    }

    /// Send one datagram to `path`.
    ///
    /// # Errors
    /// The OS's.
    pub fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.s.blocking(Dir::Write, |s| s.send_to(buf, path))
    }

    /// Receive one datagram and its sender.
    ///
    /// # Errors
    /// The OS's.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.s.blocking(Dir::Read, |s| s.recv_from(buf))
    }

    /// Send to the connected peer.
    ///
    /// # Errors
    /// The OS's.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.s.blocking(Dir::Write, |s| s.send(buf))
    }

    /// Receive from the connected peer.
    ///
    /// # Errors
    /// The OS's.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.blocking(Dir::Read, |s| s.recv(buf))
    }

    /// Our address.
    ///
    /// # Errors
    /// The OS's.
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
