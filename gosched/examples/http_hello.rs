//! A keep-alive HTTP/1.1 "hello" server: one goroutine per connection,
//! blocking-style reads and writes that park only the goroutine, requests
//! parsed with `httparse`.
//!
//!     cargo run --release --example http_hello [addr]
//!
//! With an address (e.g. `127.0.0.1:8080`) it serves until killed (try
//! `curl -v http://127.0.0.1:8080/` or `wrk`). Without one it serves on a
//! free port, sends itself 20 connections × 200 keep-alive requests, checks
//! every response and prints the rate.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use gosched::net::{TcpListener, TcpStream};

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

fn serve(l: TcpListener) {
    let mut backoff = Duration::ZERO;
    loop {
        match l.accept() {
            Ok((c, _)) => {
                backoff = Duration::ZERO;
                gosched::go(move || serve_conn(c));
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
    let arg = std::env::args().nth(1);
    let rt = gosched::Builder::new().build().expect("runtime");
    let l = rt
        .block_on(async { TcpListener::bind(arg.as_deref().unwrap_or("127.0.0.1:0")) })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    println!("http_hello on http://{addr}/ ({} Ps)", rt.procs());
    let server = rt.go(move || serve(l));
    if arg.is_some() {
        rt.block_on(server).unwrap();
        return;
    }
    const CONNS: usize = 20;
    const REQS: usize = 200;
    let t = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|_| {
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
            })
        })
        .collect();
    for c in clients {
        rt.block_on(c).unwrap();
    }
    let took = t.elapsed();
    println!(
        "{CONNS} connections x {REQS} keep-alive requests: {:.0} ms, {:.0}k requests/s",
        took.as_secs_f64() * 1e3,
        (CONNS * REQS) as f64 / took.as_secs_f64() / 1e3
    );
}
