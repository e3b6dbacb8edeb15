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
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        UdpSocket::from_std(std::net::UdpSocket::bind(&super::resolve(addr)?[..])?)
    }

    /// Send one datagram to `addr`.
    ///
    /// # Errors
    /// The OS's.
    pub fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.s.blocking(Dir::Write, |s| s.send_to(buf, addr))
    }

    /// Receive one datagram and its sender.
    ///
    /// # Errors
    /// The OS's.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.s.blocking(Dir::Read, |s| s.recv_from(buf))
    }

    /// Look at the next datagram without taking it.
    ///
    /// # Errors
    /// The OS's.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.s.blocking(Dir::Read, |s| s.peek_from(buf))
    }

    /// `send_to` for async code.
    ///
    /// # Errors
    /// The OS's.
    pub async fn send_to_async(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.s.poll_io(Dir::Write, cx, |s| s.send_to(buf, addr))).await
    }

    /// `recv_from` for async code.
    ///
    /// # Errors
    /// The OS's.
    pub async fn recv_from_async(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        std::future::poll_fn(|cx| self.s.poll_io(Dir::Read, cx, |s| s.recv_from(buf))).await
    }

    /// Set the default peer (`send`/`recv`; datagrams from others are
    /// dropped by the OS).
    ///
    /// # Errors
    /// The OS's.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        self.s.io.connect(addr)
    }

    /// Send to the connected peer.
    ///
    /// # Errors
    /// The OS's (`NotConnected` before `connect`).
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

    /// The connected peer's address.
    ///
    /// # Errors
    /// `NotConnected` before `connect`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.s.io.peer_addr()
    }

    /// `SO_BROADCAST`.
    ///
    /// # Errors
    /// The OS's.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.s.io.set_broadcast(on)
    }

    /// `SO_BROADCAST`.
    ///
    /// # Errors
    /// The OS's.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.s.io.broadcast()
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

    /// Join an IPv4 multicast group on `interface` (`0.0.0.0`: any).
    ///
    /// # Errors
    /// The OS's.
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.s.io.join_multicast_v4(group, interface)
    }

    /// Leave an IPv4 multicast group.
    ///
    /// # Errors
    /// The OS's.
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.s.io.leave_multicast_v4(group, interface)
    }

    /// `IP_MULTICAST_LOOP`.
    ///
    /// # Errors
    /// The OS's.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.s.io.set_multicast_loop_v4(on)
    }

    /// `IP_MULTICAST_TTL`.
    ///
    /// # Errors
    /// The OS's.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.s.io.set_multicast_ttl_v4(ttl)
    }

    super::deadline_methods!();
}

super::std_interop! {
    UdpSocket: mio::net::UdpSocket => std::net::UdpSocket,
}
