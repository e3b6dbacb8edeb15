//! `gosched::net` over the netpoller: echo servers and clients as goroutines,
//! async tasks and plain threads; every byte checked.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use futures_io::AsyncRead;
use gosched::net::{TcpListener, TcpStream};

/// A goroutine per connection echoing everything back.
fn echo_server(
    rt: &gosched::Runtime,
    conns: usize,
) -> (std::net::SocketAddr, gosched::JoinHandle<usize>) {
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = l.local_addr().unwrap();
    let server = rt.go(move || {
        let mut hs = Vec::new();
        for _ in 0..conns {
            let (mut c, _) = l.accept().unwrap();
            hs.push(gosched::go(move || {
                let mut buf = [0u8; 4096];
                let mut total = 0;
                loop {
                    let n = c.read(&mut buf).unwrap();
                    if n == 0 {
                        return total;
                    }
                    c.write_all(&buf[..n]).unwrap();
                    total += n;
                }
            }));
        }
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    (addr, server)
}

fn message(client: usize, i: usize) -> [u8; 64] {
    let mut m = [0u8; 64];
    for (k, b) in m.iter_mut().enumerate() {
        *b = (client * 31 + i * 7 + k) as u8;
    }
    m
}

#[test]
fn goroutine_echo_every_byte_checked() {
    #[cfg(debug_assertions)]
    const CLIENTS: usize = 20;
    #[cfg(not(debug_assertions))]
    const CLIENTS: usize = 100;
    const MSGS: usize = 200;
    let rt = common::rt(2);
    let (addr, server) = echo_server(&rt, CLIENTS);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            rt.go(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_nodelay(true).unwrap();
                for i in 0..MSGS {
                    let m = message(c, i);
                    s.write_all(&m).unwrap();
                    let mut back = [0u8; 64];
                    s.read_exact(&mut back).unwrap();
                    assert_eq!(back, m, "client {c} message {i}");
                }
                s.shutdown(std::net::Shutdown::Write).unwrap();
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).unwrap();
                assert!(rest.is_empty());
            })
        })
        .collect();
    for c in clients {
        rt.block_on(c).unwrap();
    }
    assert_eq!(rt.block_on(server).unwrap(), CLIENTS * MSGS * 64);
}

#[test]
fn async_and_plain_thread_clients_beside_goroutines() {
    use futures_io_shim::*;
    const MSGS: usize = 100;
    let rt = common::rt(2);
    let (addr, server) = echo_server(&rt, 3);
    // An async task.
    let task = rt.spawn(async move {
        let mut s = TcpStream::connect_async(addr).await.unwrap();
        for i in 0..MSGS {
            let m = message(1, i);
            write_all(&mut s, &m).await;
            let mut back = [0u8; 64];
            read_exact(&mut s, &mut back).await;
            assert_eq!(back, m);
        }
    });
    // A plain thread (outside the runtime: the global runtime's poller).
    let thread = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        for i in 0..MSGS {
            let m = message(2, i);
            s.write_all(&m).unwrap();
            let mut back = [0u8; 64];
            s.read_exact(&mut back).unwrap();
            assert_eq!(back, m);
        }
    });
    // A goroutine sharing one stream between a reader and a writer.
    let shared = rt.go(move || {
        let s = Arc::new(TcpStream::connect(addr).unwrap());
        let w = s.clone();
        let writer = gosched::go(move || {
            for i in 0..MSGS {
                (&*w).write_all(&message(3, i)).unwrap();
            }
        });
        for i in 0..MSGS {
            let mut back = [0u8; 64];
            (&*s).read_exact(&mut back).unwrap();
            assert_eq!(back, message(3, i));
        }
        writer.join().unwrap();
    });
    rt.block_on(task).unwrap();
    thread.join().unwrap();
    rt.block_on(shared).unwrap();
    assert_eq!(rt.block_on(server).unwrap(), 3 * MSGS * 64);
}

#[test]
fn connect_refused_is_an_error() {
    let rt = common::rt(2);
    // A port nobody listens on: bind, take the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = rt
        .block_on(rt.go(move || TcpStream::connect(("127.0.0.1", port)).map(drop)))
        .unwrap();
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);
}

#[test]
fn a_parked_reader_wakes_at_the_peers_close() {
    let rt = common::rt(2);
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = l.local_addr().unwrap();
    let reader = rt.go(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut buf = [0u8; 8];
        c.read(&mut buf).unwrap()
    });
    let c = rt
        .block_on(rt.go(move || TcpStream::connect(addr).unwrap()))
        .unwrap();
    // Let the reader park (it may also not have, which is fine), then close.
    rt.block_on(gosched::time::sleep_async(
        std::time::Duration::from_millis(20),
    ));
    drop(c);
    assert_eq!(rt.block_on(reader).unwrap(), 0, "end of file");
}

/// Minimal helpers over futures_io's traits (no futures-util dependency).
mod futures_io_shim {
    use std::future::poll_fn;
    use std::pin::Pin;

    pub async fn write_all<W: futures_io::AsyncWrite + Unpin>(w: &mut W, mut buf: &[u8]) {
        while !buf.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut *w).poll_write(cx, buf))
                .await
                .unwrap();
            buf = &buf[n..];
        }
    }

    pub async fn read_exact<R: futures_io::AsyncRead + Unpin>(r: &mut R, mut buf: &mut [u8]) {
        while !buf.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut *r).poll_read(cx, buf))
                .await
                .unwrap();
            assert!(n > 0, "early end of file");
            buf = &mut buf[n..];
        }
    }
}

/// Fails instead of hanging: the result of `h`, or a panic after `secs`.
fn within<T: Send + 'static>(rt: &gosched::Runtime, secs: u64, h: gosched::JoinHandle<T>) -> T {
    rt.block_on(gosched::time::timeout(
        std::time::Duration::from_secs(secs),
        h,
    ))
    .expect("timed out: a waiter was never woken")
    .unwrap()
}

#[test]
fn several_goroutines_accept_on_one_listener() {
    const ACCEPTORS: usize = 4;
    const EACH: usize = 10;
    let rt = common::rt(2);
    let l = Arc::new(
        rt.block_on(async { TcpListener::bind("127.0.0.1:0") })
            .unwrap(),
    );
    let addr = l.local_addr().unwrap();
    let acceptors: Vec<_> = (0..ACCEPTORS)
        .map(|_| {
            let l = l.clone();
            rt.go(move || {
                (0..EACH)
                    .map(|_| {
                        let (mut c, _) = l.accept().unwrap();
                        let mut b = [0u8; 1];
                        c.read_exact(&mut b).unwrap();
                        b[0] as usize
                    })
                    .sum::<usize>()
            })
        })
        .collect();
    // Let them all park on the listener, then connect one at a time.
    rt.block_on(gosched::time::sleep_async(
        std::time::Duration::from_millis(20),
    ));
    let clients = rt.go(move || {
        let mut conns = Vec::new();
        for i in 0..ACCEPTORS * EACH {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(&[i as u8]).unwrap();
            conns.push(c);
        }
        conns
    });
    let total: usize = acceptors.into_iter().map(|h| within(&rt, 20, h)).sum();
    assert_eq!(total, (0..ACCEPTORS * EACH).sum::<usize>());
    drop(within(&rt, 20, clients));
}

/// A listener is registered and nothing waits on it: sleeps still end on
/// time (the sleeper waits in the poller, and a timer armed while it goes
/// there must still wake it).
#[test]
fn timers_fire_while_the_sleeper_waits_in_the_poller() {
    let rt = common::rt(2);
    let _l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let h = rt.go(|| {
        let t = std::time::Instant::now();
        for _ in 0..50 {
            gosched::time::sleep(std::time::Duration::from_millis(2));
        }
        t.elapsed()
    });
    let took = within(&rt, 20, h);
    assert!(took >= std::time::Duration::from_millis(100), "{took:?}");
}

/// A plain thread blocked reading a socket of a runtime that shuts down gets
/// an error (nobody would ever poll for it again).
#[test]
fn shutdown_wakes_a_plain_thread_blocked_on_a_socket() {
    let rt = common::rt(2);
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = l.local_addr().unwrap();
    let c = rt
        .block_on(async move { TcpStream::connect_async(addr).await })
        .unwrap();
    let (server_side, _) = rt.block_on(l.accept_async()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        tx.send(()).unwrap();
        let mut b = [0u8; 1];
        (&c).read(&mut b)
    });
    rx.recv().unwrap();
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    let r = reader.join().unwrap();
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::NotConnected);
    drop(server_side);
}

/// A connected pair on `rt`: (client, server side).
fn pair(rt: &gosched::Runtime) -> (TcpStream, TcpStream) {
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = l.local_addr().unwrap();
    let c = rt
        .block_on(async move { TcpStream::connect_async(addr).await })
        .unwrap();
    let (s, _) = rt.block_on(l.accept_async()).unwrap();
    (c, s)
}

#[test]
fn read_deadline_fails_a_parked_read_with_timed_out() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let (c, _s) = pair(&rt);
    let h = rt.go(move || {
        let t = Instant::now();
        c.set_read_deadline(Some(t + Duration::from_millis(50)));
        let mut b = [0u8; 8];
        let e = (&c).read(&mut b).unwrap_err();
        // Expired: the next read fails at once, without parking.
        let again = (&c).read(&mut b).unwrap_err();
        (e.kind(), again.kind(), t.elapsed())
    });
    let (kind, again, took) = within(&rt, 20, h);
    assert_eq!(kind, std::io::ErrorKind::TimedOut);
    assert_eq!(again, std::io::ErrorKind::TimedOut);
    assert!(took >= Duration::from_millis(45), "{took:?}");
}

#[test]
fn moving_a_deadline_rearms_the_parked_reader_and_clearing_it_waits_on() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let (c, mut s) = pair(&rt);
    let c = Arc::new(c);
    // Far away, then pulled in while the reader is parked: it fails soon.
    c.set_read_deadline(Some(Instant::now() + Duration::from_secs(60)));
    let c2 = c.clone();
    let h = rt.go(move || {
        let t = Instant::now();
        let mut b = [0u8; 8];
        ((&*c2).read(&mut b).map_err(|e| e.kind()), t.elapsed())
    });
    rt.block_on(gosched::time::sleep_async(Duration::from_millis(20)));
    c.set_read_deadline(Some(Instant::now() + Duration::from_millis(20)));
    let (r, took) = within(&rt, 20, h);
    assert_eq!(r, Err(std::io::ErrorKind::TimedOut));
    assert!(took < Duration::from_secs(30), "{took:?}");
    // Cleared: a read waits past where the deadline was, for the data.
    c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)));
    c.set_read_deadline(None);
    let c3 = c.clone();
    let h = rt.go(move || {
        let mut b = [0u8; 8];
        (&*c3).read(&mut b).map_err(|e| e.kind())
    });
    rt.block_on(gosched::time::sleep_async(Duration::from_millis(100)));
    s.write_all(b"late").unwrap();
    assert_eq!(within(&rt, 20, h), Ok(4));
}

#[test]
fn write_deadline_on_a_peer_that_never_reads() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let (c, _s) = pair(&rt);
    let h = rt.go(move || {
        c.set_write_deadline(Some(Instant::now() + Duration::from_millis(100)));
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0usize;
        loop {
            match (&c).write(&chunk) {
                Ok(n) => sent += n,
                Err(e) => return (e.kind(), sent),
            }
        }
    });
    let (kind, sent) = within(&rt, 20, h);
    assert_eq!(kind, std::io::ErrorKind::TimedOut);
    assert!(sent > 0, "the socket buffers took something first");
}

#[test]
fn std_read_timeout_limits_each_call() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let (c, _s) = pair(&rt);
    assert!(c.set_read_timeout(Some(Duration::ZERO)).is_err());
    c.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    assert_eq!(c.read_timeout().unwrap(), Some(Duration::from_millis(30)));
    let h = rt.go(move || {
        let mut b = [0u8; 8];
        let t = Instant::now();
        let first = (&c).read(&mut b).unwrap_err().kind();
        // A per-call limit, not a deadline: the next call waits again.
        let second = (&c).read(&mut b).unwrap_err().kind();
        (first, second, t.elapsed())
    });
    let (a, b, took) = within(&rt, 20, h);
    assert_eq!(
        (a, b),
        (std::io::ErrorKind::TimedOut, std::io::ErrorKind::TimedOut)
    );
    assert!(
        took >= Duration::from_millis(55),
        "two calls of 30 ms: {took:?}"
    );
}

#[test]
fn async_read_honours_the_deadline() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let (mut c, _s) = pair(&rt);
    let h = rt.spawn(async move {
        c.set_read_deadline(Some(Instant::now() + Duration::from_millis(30)));
        let mut b = [0u8; 8];
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut c).poll_read(cx, &mut b))
            .await
            .unwrap_err()
            .kind()
    });
    assert_eq!(within(&rt, 20, h), std::io::ErrorKind::TimedOut);
}

#[test]
fn udp_round_trip_between_goroutines() {
    use gosched::net::UdpSocket;
    let rt = common::rt(2);
    let (a, b) = rt.block_on(async {
        (
            UdpSocket::bind("127.0.0.1:0"),
            UdpSocket::bind("127.0.0.1:0"),
        )
    });
    let (a, b) = (a.unwrap(), b.unwrap());
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    // b echoes 100 datagrams; a sends and checks each (the receiver parks
    // first: nothing is lost on loopback once both are bound).
    let echo = rt.go(move || {
        let mut buf = [0u8; 64];
        for _ in 0..100 {
            let (n, from) = b.recv_from(&mut buf).unwrap();
            assert_eq!(from, a_addr);
            b.send_to(&buf[..n], from).unwrap();
        }
    });
    let client = rt.go(move || {
        a.connect(b_addr).unwrap();
        let mut buf = [0u8; 64];
        for i in 0..100usize {
            let m = message(9, i);
            a.send(&m).unwrap();
            let n = a.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &m[..]);
        }
    });
    within(&rt, 20, client);
    within(&rt, 20, echo);
}

#[test]
fn unix_stream_and_datagram() {
    use gosched::net::{UnixDatagram, UnixListener, UnixStream};
    let rt = common::rt(2);
    let dir = std::env::temp_dir().join(format!("gosched-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let _ = std::fs::remove_file(&path);
    let l = rt.block_on(async { UnixListener::bind(&path) }).unwrap();
    let server = rt.go(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        c.write_all(&all).unwrap();
        all.len()
    });
    let p2 = path.clone();
    let client = rt.go(move || {
        let mut c = UnixStream::connect(&p2).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        c.write_all(&data).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
    });
    within(&rt, 20, client);
    assert_eq!(within(&rt, 20, server), 100_000);
    // Datagrams over a socketpair, and a pair of streams.
    let h = rt.go(|| {
        let (a, b) = UnixDatagram::pair().unwrap();
        let r = gosched::go(move || {
            let mut buf = [0u8; 16];
            let n = b.recv(&mut buf).unwrap();
            buf[..n].to_vec()
        });
        a.send(b"dgram").unwrap();
        let got = r.join().unwrap();
        let (mut x, mut y) = UnixStream::pair().unwrap();
        x.write_all(b"pair").unwrap();
        let mut b4 = [0u8; 4];
        y.read_exact(&mut b4).unwrap();
        (got, b4)
    });
    let (got, b4) = within(&rt, 20, h);
    assert_eq!(got, b"dgram");
    assert_eq!(&b4, b"pair");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `try_clone`: a second handle on the same connection, in another
/// goroutine: one writes through the clone while the other reads through
/// the original; each has its own deadline.
#[test]
fn try_clone_reads_and_writes_from_two_goroutines() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let (c, s) = pair(&rt);
    let writer_half = c.try_clone().unwrap();
    // A deadline on the clone does not touch the original.
    writer_half.set_read_deadline(Some(Instant::now()));
    let echo = rt.go(move || {
        let mut s = s;
        let mut buf = [0u8; 1024];
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                return;
            }
            s.write_all(&buf[..n]).unwrap();
        }
    });
    let writer = rt.go(move || {
        let mut w = writer_half;
        for i in 0..100u32 {
            w.write_all(&i.to_le_bytes()).unwrap();
        }
        let mut b = [0u8; 1];
        let e = w.read(&mut b).unwrap_err();
        w.shutdown(std::net::Shutdown::Write).unwrap();
        e.kind()
    });
    let reader = rt.go(move || {
        let mut c = c;
        let mut got = Vec::new();
        c.set_read_deadline(Some(Instant::now() + Duration::from_secs(20)));
        c.read_to_end(&mut got).unwrap();
        got
    });
    assert_eq!(within(&rt, 20, writer), std::io::ErrorKind::TimedOut);
    let got = within(&rt, 20, reader);
    let want: Vec<u8> = (0..100u32).flat_map(u32::to_le_bytes).collect();
    assert_eq!(got, want);
    within(&rt, 20, echo);
}

/// `into_std` gives back a blocking std socket that still works, and
/// `TryFrom` adopts one; `set_keepalive` turns the probes on and off.
#[test]
fn std_conversions_and_keepalive() {
    use std::time::Duration;
    let rt = common::rt(2);
    let (c, s) = pair(&rt);
    c.set_keepalive(Some(Duration::from_secs(30))).unwrap();
    assert!(c.keepalive().unwrap());
    c.set_keepalive(None).unwrap();
    assert!(!c.keepalive().unwrap());
    let mut std_c: std::net::TcpStream = c.into_std().unwrap();
    // Left non-blocking (a clone could share the flag); no clone here.
    std_c.set_nonblocking(false).unwrap();
    let server = rt.go(move || {
        let mut s = s;
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
        s
    });
    // Blocking again: a plain write and read on this thread.
    std_c.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    std_c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ping");
    let s = within(&rt, 20, server);
    // And back into gosched.
    let again = rt
        .block_on(async move { TcpStream::try_from(std_c) })
        .unwrap();
    let h = rt.go(move || {
        let mut again = again;
        again.write_all(b"pong").unwrap();
    });
    let mut s = s;
    let h2 = rt.go(move || {
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        b
    });
    within(&rt, 20, h);
    assert_eq!(&within(&rt, 20, h2), b"pong");
}

/// A host name is resolved (as a blocking call) by `connect` and `bind`.
#[test]
fn connect_and_bind_resolve_host_names() {
    let rt = common::rt(2);
    let h = rt.go(|| {
        let l = TcpListener::bind("localhost:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let accept = gosched::go(move || l.accept().map(|_| ()));
        let c = TcpStream::connect(("localhost", port)).unwrap();
        accept.join().unwrap().unwrap();
        c.peer_addr().unwrap().port()
    });
    assert_ne!(within(&rt, 20, h), 0);
}

/// `connect_timeout` to a listener whose backlog is full (a blackhole: the
/// kernel drops the SYNs; an unrouted address is not allowed here) fails
/// with `TimedOut` near its timeout, and parks only its goroutine: another
/// goroutine on the same single P keeps running meanwhile.
#[test]
fn connect_timeout_to_a_full_backlog_times_out() {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    // A listener with a backlog of 0 that never accepts (std's `TcpListener`
    // listens with 128, so libc).
    // SAFETY: plain socket calls on a fresh fd and a zeroed, then filled,
    // `sockaddr_in` whose size is passed along.
    let (fd, addr) = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let p = &mut sa as *mut libc::sockaddr_in as *mut libc::sockaddr;
        assert_eq!(libc::bind(fd, p, len), 0, "bind");
        assert_eq!(libc::listen(fd, 0), 0, "listen");
        assert_eq!(libc::getsockname(fd, p, &mut len), 0, "getsockname");
        let port = u16::from_be(sa.sin_port);
        (fd, SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    };
    // Fill the backlog: plain connects until one gets no answer.
    let mut held = Vec::new();
    loop {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
            Err(e) => panic!("filling the backlog: {e}"),
        }
        assert!(held.len() < 64, "the backlog never filled");
    }

    let rt = common::rt(1);
    let (ticks, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let (t2, s2) = (ticks.clone(), stop.clone());
    let counter = rt.go(move || {
        while !s2.load(Relaxed) {
            t2.fetch_add(1, Relaxed);
            gosched::yield_now();
        }
    });
    let start = Instant::now();
    let (r, during) = rt
        .block_on(rt.go(move || {
            let before = ticks.load(Relaxed);
            let r = TcpStream::connect_timeout(&addr, Duration::from_millis(300)).map(drop);
            (r, ticks.load(Relaxed) - before)
        }))
        .unwrap();
    let took = start.elapsed();
    stop.store(true, Relaxed);
    rt.block_on(counter).unwrap();
    let e = r.expect_err("a connect into a full backlog cannot complete");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_secs(5),
        "timed out after {took:?}, for a 300 ms timeout"
    );
    assert!(during > 0, "the connect held the only P: nothing else ran");
    drop(held);
    // SAFETY: our fd, closed once.
    unsafe { libc::close(fd) };
}

/// Go's `TestReadWriteProlongedTimeout`, ported: the server's connection
/// has a reader and a writer goroutine that each push their deadline an hour
/// out before every 1-byte operation; the writer never has to park until
/// the client's receive buffer is full (megabytes). The client makes 1,000
/// one-byte exchanges, then closes. Every exchange must complete (when
/// goroutines stayed on their M, the server's reader, sharing the writer's
/// M, waited for it to fill the buffer: seconds), and both server goroutines end on the close
/// (an error: the close resets the connection).
/// Its time is a figure (`--nocapture` prints it), not an assertion.
#[test]
fn read_write_prolonged_timeout() {
    use std::time::{Duration, Instant};
    let rt = common::rt(2);
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = l.local_addr().unwrap();
    let server = rt.go(move || {
        let (c, _) = l.accept().unwrap();
        let (r, w) = (c.try_clone().unwrap(), c);
        let reader = gosched::go(move || {
            let mut b = [0u8; 1];
            let mut n = 0u64;
            loop {
                r.set_read_deadline(Some(Instant::now() + Duration::from_secs(3600)));
                match (&r).read(&mut b) {
                    Ok(0) | Err(_) => return n,
                    Ok(_) => n += 1,
                }
            }
        });
        let writer = gosched::go(move || loop {
            w.set_write_deadline(Some(Instant::now() + Duration::from_secs(3600)));
            if (&w).write(&[7]).is_err() {
                return;
            }
        });
        let n = reader.join().unwrap();
        writer.join().unwrap();
        n
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let client = rt.go(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        let mut b = [0u8; 1];
        for _ in 0..1000 {
            c.write_all(&[1]).unwrap();
            c.read_exact(&mut b).unwrap();
            assert_eq!(b[0], 7);
        }
        let took = t.elapsed();
        drop(c);
        done_tx.send(took).unwrap();
    });
    let took = done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the client's 1,000 exchanges did not finish in 60 s");
    eprintln!("1,000 exchanges beside a flooding writer: {took:?}");
    rt.block_on(client).unwrap();
    // The client closes with the writer's bytes unread, which resets the
    // connection: the reader may lose the tail of what it was sent.
    let read = rt.block_on(server).unwrap();
    assert!(
        read <= 1000,
        "the server's reader read {read} bytes of 1,000 sent"
    );
}

/// On one P: goroutine A reads one byte at a time from a socket that a
/// plain thread keeps full, so no read ever parks, while goroutine B is
/// woken from a plain thread (onto the global queue). A socket operation is
/// a preemption point, so sysmon's request ends A's slice at its next read
/// and B runs on A's thread; without it sysmon would retake the P after a
/// grace period and B would run on another M.
#[test]
fn a_socket_loop_that_never_parks_yields_to_its_ps_other_goroutines() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::{Duration, Instant};
    let rt = common::rt(1);
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = peer.local_addr().unwrap();
    let flood = std::thread::spawn(move || {
        let (mut c, _) = peer.accept().unwrap();
        let chunk = [9u8; 65536];
        while c.write_all(&chunk).is_ok() {}
    });
    let b_ran = Arc::new(AtomicBool::new(false));
    let br = b_ran.clone();
    let (ran, reads, a_thread, b_thread) = rt
        .block_on(rt.go(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            let wake_b = gosched::chan::<()>(1);
            let (started, w2, br2) = (gosched::chan::<()>(0), wake_b.clone(), br.clone());
            let s = started.clone();
            let b = gosched::go(move || {
                s.send(()).unwrap();
                w2.recv().unwrap();
                br2.store(true, SeqCst);
                common::os_thread()
            });
            started.recv().unwrap(); // B has run on our one P, and parks
            let mut b1 = [0u8; 1];
            c.read_exact(&mut b1).unwrap(); // the flood has begun
            std::thread::spawn(move || wake_b.send(()).unwrap());
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut reads = 0u64;
            while !br.load(SeqCst) && Instant::now() < deadline {
                c.read_exact(&mut b1).unwrap();
                reads += 1;
            }
            let ran = br.load(SeqCst);
            let a_thread = common::os_thread();
            drop(c); // ends the flood
            (ran, reads, a_thread, b.join().unwrap())
        }))
        .unwrap();
    flood.join().unwrap();
    eprintln!("B ran after {reads} reads that did not park");
    assert!(ran, "B never ran beside a read loop that never parks");
    assert!(b_ran.load(SeqCst));
    assert_eq!(
        b_thread, a_thread,
        "B ran on another M: A did not yield, sysmon retook its P"
    );
}
