//! UDP over the runtime's netpoller.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};

use super::{Dir, Socket};

/// A UDP socket: `send_to`/`recv_from` (and `send`/`recv` once connected)
/// park the calling goroutine until the socket is ready.
///
/// ```
/// let a = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
/// let b = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
/// let to = b.local_addr().unwrap();
/// let h = gosched::go(move || {
///     let mut buf = [0; 16];
///     let (n, _) = b.recv_from(&mut buf).unwrap();
///     buf[..n].to_vec()
/// });
/// a.send_to(b"ping", to).unwrap();
/// assert_eq!(h.join().unwrap(), b"ping");
/// ```
pub struct UdpSocket {
    s: Socket<mio::net::UdpSocket>,
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local_addr", &self.s.io.local_addr().ok())
            .finish()
    }
}

impl UdpSocket {
    /// Bind to the first of `addr`'s addresses that works.
    ///
    /// # Errors
    /// As std's `UdpSocket::bind`, or the netpoller cannot be created.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap(); // port 0: any free one
    /// let addr = s.local_addr().unwrap();
    /// assert!(addr.ip().is_loopback());
    /// assert_ne!(addr.port(), 0);
    /// ```
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        UdpSocket::from_std(std::net::UdpSocket::bind(&super::resolve(addr)?[..])?)
    }

    /// Send one datagram to `addr`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(a.send_to(b"hello", b.local_addr().unwrap()).unwrap(), 5);
    /// let mut buf = [0; 16];
    /// let (n, from) = b.recv_from(&mut buf).unwrap();
    /// assert_eq!((&buf[..n], from), (&b"hello"[..], a.local_addr().unwrap()));
    /// ```
    pub fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.s.blocking(Dir::Write, |s| s.send_to(buf, addr))
    }

    /// Receive one datagram and its sender.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let to = b.local_addr().unwrap();
    /// let sender = gosched::go(move || a.send_to(b"ping", to).map(|_| a.local_addr().unwrap()));
    /// let mut buf = [0; 16];
    /// let (n, from) = b.recv_from(&mut buf).unwrap(); // waits for the datagram
    /// assert_eq!(&buf[..n], b"ping");
    /// assert_eq!(from, sender.join().unwrap().unwrap());
    /// ```
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.s.blocking(Dir::Read, |s| s.recv_from(buf))
    }

    /// Look at the next datagram without taking it.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// a.send_to(b"once", b.local_addr().unwrap()).unwrap();
    /// let mut buf = [0; 16];
    /// let (n, from) = b.peek_from(&mut buf).unwrap();
    /// assert_eq!((&buf[..n], from), (&b"once"[..], a.local_addr().unwrap()));
    /// let (n, _) = b.recv_from(&mut buf).unwrap(); // still there
    /// assert_eq!(&buf[..n], b"once");
    /// ```
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.s.blocking(Dir::Read, |s| s.peek_from(buf))
    }

    /// `send_to` for async code.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     a.send_to_async(b"hi", b.local_addr().unwrap()).await.unwrap();
    ///     let mut buf = [0; 8];
    ///     let (n, _) = b.recv_from_async(&mut buf).await.unwrap();
    ///     assert_eq!(&buf[..n], b"hi");
    /// });
    /// ```
    pub async fn send_to_async(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.s.poll_io(Dir::Write, cx, |s| s.send_to(buf, addr))).await
    }

    /// `recv_from` for async code.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     let to = b.local_addr().unwrap();
    ///     let sender = gosched::spawn(async move { a.send_to_async(b"ping", to).await });
    ///     let mut buf = [0; 8];
    ///     let (n, _) = b.recv_from_async(&mut buf).await.unwrap(); // waits for it
    ///     assert_eq!(&buf[..n], b"ping");
    ///     assert_eq!(sender.await.unwrap().unwrap(), 4);
    /// });
    /// ```
    pub async fn recv_from_async(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        std::future::poll_fn(|cx| self.s.poll_io(Dir::Read, cx, |s| s.recv_from(buf))).await
    }

    /// Set the default peer (`send`/`recv`; datagrams from others are
    /// dropped by the OS).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// a.connect(b.local_addr().unwrap()).unwrap();
    /// a.send(b"hi").unwrap(); // no address needed
    /// let mut buf = [0; 8];
    /// let (n, from) = b.recv_from(&mut buf).unwrap();
    /// assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr().unwrap()));
    /// ```
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        self.s.io.connect(addr)
    }

    /// Send to the connected peer.
    ///
    /// # Errors
    /// The OS's; before `connect`, the OS says there is no peer (on Linux
    /// `EDESTADDRREQ`, which std reports as an uncategorized error, not as
    /// `NotConnected`).
    ///
    /// # Examples
    ///
    /// ```
    /// use gosched::net::UdpSocket;
    ///
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(a.send(b"x").is_err()); // no peer yet
    /// a.connect(b.local_addr().unwrap()).unwrap();
    /// assert_eq!(a.send(b"hello").unwrap(), 5);
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
    /// use gosched::net::UdpSocket;
    ///
    /// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    /// a.connect(b.local_addr().unwrap()).unwrap();
    /// b.connect(a.local_addr().unwrap()).unwrap();
    /// a.send(b"ping").unwrap();
    /// let mut buf = [0; 8];
    /// let n = b.recv(&mut buf).unwrap();
    /// assert_eq!(&buf[..n], b"ping");
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
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let addr = s.local_addr().unwrap();
    /// assert_eq!(addr.ip(), std::net::Ipv4Addr::LOCALHOST);
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    /// `NotConnected` before `connect`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::ErrorKind;
    ///
    /// let a = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert_eq!(a.peer_addr().unwrap_err().kind(), ErrorKind::NotConnected);
    /// let b = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// a.connect(b.local_addr().unwrap()).unwrap();
    /// assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.peer_addr()
    }

    /// `SO_BROADCAST`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_broadcast(true).unwrap();
    /// assert!(s.broadcast().unwrap());
    /// ```
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.s.io.set_broadcast(on)
    }

    /// `SO_BROADCAST`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// assert!(!s.broadcast().unwrap()); // off by default
    /// ```
    pub fn broadcast(&self) -> io::Result<bool> {
        self.s.io.broadcast()
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_ttl(42).unwrap();
    /// assert_eq!(s.ttl().unwrap(), 42);
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
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_ttl(8).unwrap();
    /// assert_eq!(s.ttl().unwrap(), 8);
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.s.io.ttl()
    }

    /// Join an IPv4 multicast group on `interface` (`0.0.0.0`: any).
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    ///
    /// let s = gosched::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    /// let group = Ipv4Addr::new(239, 255, 0, 1);
    /// s.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap(); // on the loopback interface
    /// s.leave_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
    /// ```
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.s.io.join_multicast_v4(group, interface)
    }

    /// Leave an IPv4 multicast group.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    ///
    /// let s = gosched::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    /// let group = Ipv4Addr::new(239, 255, 0, 2);
    /// s.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
    /// s.leave_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
    /// let again = s.leave_multicast_v4(&group, &Ipv4Addr::LOCALHOST);
    /// assert!(again.is_err()); // not a member any more
    /// ```
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.s.io.leave_multicast_v4(group, interface)
    }

    /// `IP_MULTICAST_LOOP`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// There is no getter here; std's socket reads it back:
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_multicast_loop_v4(false).unwrap();
    /// assert!(!s.into_std().unwrap().multicast_loop_v4().unwrap());
    /// ```
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.s.io.set_multicast_loop_v4(on)
    }

    /// `IP_MULTICAST_TTL`.
    ///
    /// # Errors
    /// The OS's.
    ///
    /// There is no getter here; std's socket reads it back:
    ///
    /// # Examples
    ///
    /// ```
    /// let s = gosched::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// s.set_multicast_ttl_v4(4).unwrap();
    /// assert_eq!(s.into_std().unwrap().multicast_ttl_v4().unwrap(), 4);
    /// ```
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.s.io.set_multicast_ttl_v4(ttl)
    }

    super::deadline_methods!();
}

super::std_interop! {
    UdpSocket: mio::net::UdpSocket => std::net::UdpSocket,
}
