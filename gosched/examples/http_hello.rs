//! A keep-alive HTTP/1.1 "hello" server: one goroutine per connection,
//! blocking-style reads and writes that park only the goroutine, requests
//! parsed with `httparse`.
//!
//!     cargo run --release --example http_hello [addr] [--max-conns N]
//!
//! With an address (e.g. `127.0.0.1:8080`) it serves until killed (try
//! `curl -v http://127.0.0.1:8080/` or `wrk`). Without one it serves on a
//! free port, sends itself 20 connections × 200 keep-alive requests, checks
//! every response and prints the rate.
//!
//! `--max-conns N` serves connections through a `gosched::pool::WorkerPool`
//! (fasthttp's model: reused worker goroutines, at most N connections at
//! once, `503 Service Unavailable` to the next one). The self-test always
//! runs that way too: it holds 20 connections open on a pool of 20 and
//! checks that a 21st is answered 503.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use gosched::net::{TcpListener, TcpStream};
use gosched::pool::WorkerPool;

const BODY: &[u8] = b"Hello, world!\n";

/// Serve one connection: parse requests as they arrive (pipelined ones
/// too), answer each, until the peer closes or sends garbage.
fn serve_conn(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    let mut out = Vec::with_capacity(1024);
    loop {
        // Answer every complete request in the buffer.
        let mut start = 0;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[start..filled]) {
                Ok(httparse::Status::Complete(n)) => {
                    let close = req.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                    });
                    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n");
                    out.extend_from_slice(
                        format!("Content-Length: {}\r\n\r\n", BODY.len()).as_bytes(),
                    );
                    out.extend_from_slice(BODY);
                    start += n;
                    if close {
                        let _ = c.write_all(&out);
                        return;
                    }
                }
                Ok(httparse::Status::Partial) => break,
                Err(_) => {
                    let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                    return;
                }
            }
        }
        if !out.is_empty() {
            if c.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            return; // a request larger than the buffer: not for this demo
        }
        match c.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
    }
}

const UNAVAILABLE: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Answer 503 and close gracefully: stop sending, then read what the client
/// had sent until it closes (for at most a second). Closing with its request
/// unread would reset the connection, and the client would see a reset
/// instead of the 503 (Go's net/http lingers the same way).
fn turn_away(mut c: TcpStream) {
    if c.write_all(UNAVAILABLE).is_err() {
        return;
    }
    let _ = c.shutdown(std::net::Shutdown::Write);
    c.set_read_deadline(Some(Instant::now() + Duration::from_secs(1)));
    let mut sink = [0u8; 512];
    while let Ok(n) = c.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
}

/// Accept connections: a goroutine each, or a worker of `pool` (then the
/// connection the pool has no worker for gets a 503 and is closed).
fn serve(l: TcpListener, pool: Option<WorkerPool<TcpStream>>) {
    let mut backoff = Duration::ZERO;
    loop {
        match l.accept() {
            Ok((c, _)) => {
                backoff = Duration::ZERO;
                match &pool {
                    None => {
                        gosched::go(move || serve_conn(c));
                    }
                    Some(pool) => {
                        if let Err(c) = pool.try_serve(c) {
                            gosched::go(move || turn_away(c));
                        }
                    }
                }
            }
            Err(e) => {
                // Out of file descriptors and the like: back off as Go's
                // net/http does (5 ms doubling to 1 s), never spin.
                backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                eprintln!("accept: {e}; retrying in {backoff:?}");
                gosched::time::sleep(backoff);
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let max_conns = args.iter().position(|a| a == "--max-conns").map(|i| {
        args.get(i + 1)
            .and_then(|n| n.parse::<usize>().ok())
            .expect("--max-conns N")
    });
    let addr_arg = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--max-conns"))
        .map(|(_, a)| a.clone());
    let rt = gosched::Builder::new().build().expect("runtime");
    if let Some(addr) = addr_arg {
        let (l, _) = listen(&rt, &addr, max_conns);
        let pool = max_conns.map(worker_pool);
        rt.block_on(rt.go(move || serve(l, pool))).unwrap();
        return;
    }
    // Self-test: goroutine per connection, then through a pool of 20.
    for pooled in [false, true] {
        let (l, addr) = listen(&rt, "127.0.0.1:0", pooled.then_some(CONNS));
        let pool = pooled.then(|| worker_pool(CONNS));
        let server_pool = pool.clone();
        rt.go(move || serve(l, server_pool));
        self_test(&rt, addr, pool.as_ref());
        if let Some(pool) = pool {
            pool.stop();
        }
    }
}

const CONNS: usize = 20;
const REQS: usize = 200;

fn listen(
    rt: &gosched::Runtime,
    addr: &str,
    max_conns: Option<usize>,
) -> (TcpListener, std::net::SocketAddr) {
    let l = rt
        .block_on(async { TcpListener::bind(addr) })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    match max_conns {
        None => println!(
            "http_hello on http://{addr}/ ({} Ps), a goroutine per connection",
            rt.procs()
        ),
        Some(n) => println!(
            "http_hello on http://{addr}/ ({} Ps), a worker pool of {n}",
            rt.procs()
        ),
    }
    (l, addr)
}

fn worker_pool(max: usize) -> WorkerPool<TcpStream> {
    let pool = WorkerPool::builder(serve_conn).max_workers(max).build();
    pool.start().expect("start the worker pool");
    pool
}

fn self_test(
    rt: &gosched::Runtime,
    addr: std::net::SocketAddr,
    pool: Option<&WorkerPool<TcpStream>>,
) {
    // Each client does its requests, then (with a pool) keeps its connection
    // open until the 503 check is done.
    let held = gosched::chan::<()>(0);
    let ready = gosched::chan::<()>(CONNS);
    let t = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|_| {
            let (held, ready) = (held.clone(), ready.clone());
            rt.go(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.set_nodelay(true).unwrap();
                let want = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{}",
                    BODY.len(),
                    std::str::from_utf8(BODY).unwrap()
                );
                let mut got = vec![0u8; want.len()];
                for _ in 0..REQS {
                    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                    s.read_exact(&mut got).unwrap();
                    assert_eq!(got, want.as_bytes());
                }
                ready.send(()).unwrap();
                let _ = held.recv();
            })
        })
        .collect();
    for _ in 0..CONNS {
        rt.block_on(ready.recv_async()).unwrap();
    }
    let took = t.elapsed();
    println!(
        "  {CONNS} connections x {REQS} keep-alive requests: {:.0} ms, {:.0}k requests/s",
        took.as_secs_f64() * 1e3,
        (CONNS * REQS) as f64 / took.as_secs_f64() / 1e3
    );
    if let Some(pool) = pool {
        // Every worker holds a connection: the next one is turned away.
        assert_eq!(pool.workers_count(), CONNS);
        let reply = rt
            .block_on(rt.go(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut reply = Vec::new();
                s.read_to_end(&mut reply).unwrap();
                reply
            }))
            .unwrap();
        assert_eq!(reply, UNAVAILABLE, "the 21st connection gets a 503");
        println!(
            "  connection {} while {CONNS} are open: 503 Service Unavailable",
            CONNS + 1
        );
    }
    held.close().unwrap();
    for c in clients {
        rt.block_on(c).unwrap();
    }
}
