//! W12 echo (issue 21): [`CONNS`] connections over loopback, each sending `n`
//! 64-byte messages to an echo server and waiting for each echo; reported as
//! elapsed / (CONNS × n) ns per message, with the round-trip latency's p50,
//! p99 and max.
//!
//! Same method everywhere (and in `bench/go/w12_echo.go`): a server unit
//! accepts [`CONNS`] connections and starts one unit per connection that
//! reads 64 bytes and writes them back until end of file; [`CONNS`] client
//! units each connect, then `n` times write a 64-byte message and read the
//! 64-byte echo (timing each round trip), then close. Timed: from the first
//! connect to the last client's end. `TCP_NODELAY` on both ends. The check:
//! the total of echoed messages, each compared byte for byte.
//!
//! gosched goroutines use `gosched::net` with std's `Read`/`Write` (the
//! goroutine parks on the netpoller); gosched async tasks use its
//! `futures_io` side; tokio uses `tokio::net` with `AsyncReadExt`; smol
//! uses async-io's `Async<std::net::TcpStream>` with futures-lite's
//! `AsyncReadExt`/`AsyncWriteExt`; Go uses
//! `net` with `io.ReadFull`; Java (`bench/java/W12Echo.java`) a virtual
//! thread per unit with blocking `java.net.Socket` streams.

use std::time::{Duration, Instant};

use super::{Impl, Sample};

/// Connections (BENCHMARKS.md: 100).
pub const CONNS: u64 = 100;
/// Bytes per message.
pub const MSG: usize = 64;

pub fn run(imp: Impl, procs: usize, n: u64) -> Sample {
    match imp {
        Impl::Tokio => tokio_tasks(procs, n),
        Impl::Smol => smol_tasks(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedGo => gosched_go(procs, n),
        #[cfg(feature = "gosched")]
        Impl::GoschedAsync => gosched_async(procs, n),
        _ => {
            let _ = (procs, n);
            unreachable!("{imp:?} is not built into this binary")
        }
    }
}

fn message(conn: u64, i: u64) -> [u8; MSG] {
    let mut m = [0u8; MSG];
    for (k, b) in m.iter_mut().enumerate() {
        *b = (conn as usize * 31 + i as usize * 7 + k) as u8;
    }
    m
}

/// The sample: elapsed, messages echoed, latency p50 / p99 / max.
fn sample(elapsed: Duration, lats: Vec<Vec<u64>>) -> Sample {
    let mut all: Vec<u64> = lats.into_iter().flatten().collect();
    let n = all.len() as u64;
    let mut s = Sample::latencies(elapsed, n, std::mem::take(&mut all));
    s.elapsed_ns = elapsed.as_nanos() as u64;
    s
}

#[cfg(feature = "gosched")]
fn gosched_go(procs: usize, n: u64) -> Sample {
    use gosched::net::{TcpListener, TcpStream};
    use std::io::{Read, Write};
    let rt = super::gosched_runtime(procs);
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let server = rt.go(move || {
        let conns: Vec<_> = (0..CONNS)
            .map(|_| {
                let (mut c, _) = l.accept().expect("accept");
                c.set_nodelay(true).expect("nodelay");
                gosched::go(move || {
                    let mut buf = [0u8; MSG];
                    while c.read_exact(&mut buf).is_ok() {
                        c.write_all(&buf).expect("echo");
                    }
                })
            })
            .collect();
        for c in conns {
            c.join().expect("conn");
        }
    });
    let t = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|conn| {
            rt.go(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.set_nodelay(true).expect("nodelay");
                let mut lat = Vec::with_capacity(n as usize);
                let mut back = [0u8; MSG];
                for i in 0..n {
                    let m = message(conn, i);
                    let t0 = Instant::now();
                    s.write_all(&m).expect("write");
                    s.read_exact(&mut back).expect("read");
                    lat.push(t0.elapsed().as_nanos() as u64);
                    assert_eq!(back, m, "echo of connection {conn}, message {i}");
                }
                lat
            })
        })
        .collect();
    let lats: Vec<_> = clients
        .into_iter()
        .map(|c| rt.block_on(c).expect("client"))
        .collect();
    let elapsed = t.elapsed();
    rt.block_on(server).expect("server");
    sample(elapsed, lats)
}

#[cfg(feature = "gosched")]
fn gosched_async(procs: usize, n: u64) -> Sample {
    use futures_io::{AsyncRead, AsyncWrite};
    use gosched::net::{TcpListener, TcpStream};
    use std::future::poll_fn;
    use std::pin::Pin;

    async fn write_all(s: &mut TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            let k = poll_fn(|cx| Pin::new(&mut *s).poll_write(cx, buf)).await?;
            buf = &buf[k..];
        }
        Ok(())
    }
    async fn read_exact(s: &mut TcpStream, mut buf: &mut [u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            let k = poll_fn(|cx| Pin::new(&mut *s).poll_read(cx, buf)).await?;
            if k == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[k..];
        }
        Ok(())
    }

    let rt = super::gosched_runtime(procs);
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let server = rt.spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..CONNS {
            let (mut c, _) = l.accept_async().await.expect("accept");
            c.set_nodelay(true).expect("nodelay");
            conns.push(gosched::spawn(async move {
                let mut buf = [0u8; MSG];
                while read_exact(&mut c, &mut buf).await.is_ok() {
                    write_all(&mut c, &buf).await.expect("echo");
                }
            }));
        }
        for c in conns {
            c.await.expect("conn");
        }
    });
    let t = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|conn| {
            rt.spawn(async move {
                let mut s = TcpStream::connect_async(addr).await.expect("connect");
                s.set_nodelay(true).expect("nodelay");
                let mut lat = Vec::with_capacity(n as usize);
                let mut back = [0u8; MSG];
                for i in 0..n {
                    let m = message(conn, i);
                    let t0 = Instant::now();
                    write_all(&mut s, &m).await.expect("write");
                    read_exact(&mut s, &mut back).await.expect("read");
                    lat.push(t0.elapsed().as_nanos() as u64);
                    assert_eq!(back, m, "echo of connection {conn}, message {i}");
                }
                lat
            })
        })
        .collect();
    let lats: Vec<_> = clients
        .into_iter()
        .map(|c| rt.block_on(c).expect("client"))
        .collect();
    let elapsed = t.elapsed();
    rt.block_on(server).expect("server");
    sample(elapsed, lats)
}

fn tokio_tasks(procs: usize, n: u64) -> Sample {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    let rt = super::tokio_runtime(procs);
    let l = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = l.local_addr().expect("addr");
    let server = rt.spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..CONNS {
            let (mut c, _) = l.accept().await.expect("accept");
            c.set_nodelay(true).expect("nodelay");
            conns.push(tokio::spawn(async move {
                let mut buf = [0u8; MSG];
                while c.read_exact(&mut buf).await.is_ok() {
                    c.write_all(&buf).await.expect("echo");
                }
            }));
        }
        for c in conns {
            c.await.expect("conn");
        }
    });
    let t = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|conn| {
            rt.spawn(async move {
                let mut s = TcpStream::connect(addr).await.expect("connect");
                s.set_nodelay(true).expect("nodelay");
                let mut lat = Vec::with_capacity(n as usize);
                let mut back = [0u8; MSG];
                for i in 0..n {
                    let m = message(conn, i);
                    let t0 = Instant::now();
                    s.write_all(&m).await.expect("write");
                    s.read_exact(&mut back).await.expect("read");
                    lat.push(t0.elapsed().as_nanos() as u64);
                    assert_eq!(back, m, "echo of connection {conn}, message {i}");
                }
                lat
            })
        })
        .collect();
    let lats: Vec<_> = clients
        .into_iter()
        .map(|c| rt.block_on(c).expect("client"))
        .collect();
    let elapsed = t.elapsed();
    rt.block_on(server).expect("server");
    sample(elapsed, lats)
}

/// tokio's row on smol: async-io's `Async<TcpListener>`/`Async<TcpStream>`
/// (the reactor is driven by the idle workers, see `smol_runtime`) with
/// futures-lite's `read_exact`/`write_all`; the server and client tasks are
/// spawned from the main thread and their `Task`s awaited from it.
fn smol_tasks(procs: usize, n: u64) -> Sample {
    use smol::io::{AsyncReadExt, AsyncWriteExt};
    use smol::Async;
    use std::net::{TcpListener, TcpStream};
    let rt = super::smol_runtime(procs);
    let l = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("bind");
    let addr = l.get_ref().local_addr().expect("addr");
    let server = rt.spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..CONNS {
            let (mut c, _) = l.accept().await.expect("accept");
            c.get_ref().set_nodelay(true).expect("nodelay");
            conns.push(super::SMOL.spawn(async move {
                let mut buf = [0u8; MSG];
                while c.read_exact(&mut buf).await.is_ok() {
                    c.write_all(&buf).await.expect("echo");
                }
            }));
        }
        for c in conns {
            c.await;
        }
    });
    let t = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|conn| {
            rt.spawn(async move {
                let mut s = Async::<TcpStream>::connect(addr).await.expect("connect");
                s.get_ref().set_nodelay(true).expect("nodelay");
                let mut lat = Vec::with_capacity(n as usize);
                let mut back = [0u8; MSG];
                for i in 0..n {
                    let m = message(conn, i);
                    let t0 = Instant::now();
                    s.write_all(&m).await.expect("write");
                    s.read_exact(&mut back).await.expect("read");
                    lat.push(t0.elapsed().as_nanos() as u64);
                    assert_eq!(back, m, "echo of connection {conn}, message {i}");
                }
                lat
            })
        })
        .collect();
    let lats: Vec<_> = clients.into_iter().map(|c| rt.block_on(c)).collect();
    let elapsed = t.elapsed();
    rt.block_on(server);
    sample(elapsed, lats)
}
