//! `gosched::net` over the netpoller: echo servers and clients as goroutines,
//! async tasks and plain threads; every byte checked.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

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
