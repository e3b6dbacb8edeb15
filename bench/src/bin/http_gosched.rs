//! HTTP hello under wrk, the gosched servers: keep-alive HTTP/1.1, `GET /`
//! answered with "Hello, World!" (the logic of `gosched/examples/http_hello.rs`,
//! plus a `Date` header as hyper, net/http and fasthttp send one).
//!
//!     http_gosched PORT PROCS [go|async]
//!
//! - `go` (default): one goroutine per connection, blocking-style
//!   `gosched::net` reads and writes that park only the goroutine.
//! - `async`: one async task per connection (`accept_async`, `spawn`, the
//!   stream's `futures_io` `AsyncRead`/`AsyncWrite`).
//!
//! Serves on 127.0.0.1:PORT until killed (scripts/http.py drives it).

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_io::{AsyncRead, AsyncWrite};
use gosched::net::{TcpListener, TcpStream};

#[path = "../civil.rs"]
mod civil;

const BODY: &[u8] = b"Hello, World!";
const BUF: usize = 8192;

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), cached per connection
/// and rebuilt when the second changes.
struct Date {
    secs: u64,
    text: [u8; 29],
}

impl Date {
    fn new() -> Date {
        Date {
            secs: u64::MAX,
            text: [b' '; 29],
        }
    }

    fn get(&mut self) -> &[u8] {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs != self.secs {
            self.secs = secs;
            self.text = imf_fixdate(secs);
        }
        &self.text
    }
}

fn imf_fixdate(secs: u64) -> [u8; 29] {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    let (y, mo, d) = civil::civil_from_days(days as i64);
    let mut out = [0u8; 29];
    let mut w = io::Cursor::new(&mut out[..]);
    let _ = write!(
        w,
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(mo - 1) as usize],
        y,
        h,
        m,
        s
    );
    out
}

/// What a connection does with its input buffer.
enum Step {
    /// Read more (requests answered, if any, are in `out`).
    More,
    /// Write `out`, then close.
    Close,
}

/// Parse every complete request in `buf[..*filled]`, append the answers to
/// `out`, and keep the incomplete tail at the front of `buf`.
fn answer(buf: &mut [u8], filled: &mut usize, out: &mut Vec<u8>, date: &mut Date) -> Step {
    let mut start = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[start..*filled]) {
            Ok(httparse::Status::Complete(n)) => {
                let close = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("connection")
                        && h.value.eq_ignore_ascii_case(b"close")
                });
                out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: gosched\r\nDate: ");
                out.extend_from_slice(date.get());
                out.extend_from_slice(
                    b"\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n",
                );
                out.extend_from_slice(BODY);
                start += n;
                if close {
                    return Step::Close;
                }
            }
            Ok(httparse::Status::Partial) => break,
            Err(_) => {
                out.extend_from_slice(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                return Step::Close;
            }
        }
    }
    buf.copy_within(start..*filled, 0);
    *filled -= start;
    if *filled == buf.len() {
        // A request larger than the buffer: not for this benchmark.
        out.extend_from_slice(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n",
        );
        return Step::Close;
    }
    Step::More
}

/// One goroutine per connection: blocking-style reads and writes.
fn serve_conn(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut buf = vec![0u8; BUF];
    let mut filled = 0;
    let mut out = Vec::with_capacity(1024);
    let mut date = Date::new();
    loop {
        let step = answer(&mut buf, &mut filled, &mut out, &mut date);
        if !out.is_empty() {
            if c.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        if let Step::Close = step {
            return;
        }
        match c.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
    }
}

/// Accept errors (out of descriptors and the like): back off as Go's
/// net/http does, 5 ms doubling to 1 s, never spin.
fn next_backoff(backoff: Duration, e: &io::Error) -> Duration {
    let b = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
    eprintln!("accept: {e}; retrying in {b:?}");
    b
}

fn serve_go(l: TcpListener) {
    let mut backoff = Duration::ZERO;
    loop {
        match l.accept() {
            Ok((c, _)) => {
                backoff = Duration::ZERO;
                gosched::go(move || serve_conn(c));
            }
            Err(e) => {
                backoff = next_backoff(backoff, &e);
                gosched::time::sleep(backoff);
            }
        }
    }
}

async fn write_all_async(c: &mut TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *c).poll_write(cx, data)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n..];
    }
    Ok(())
}

/// One async task per connection.
async fn serve_conn_async(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut buf = vec![0u8; BUF];
    let mut filled = 0;
    let mut out = Vec::with_capacity(1024);
    let mut date = Date::new();
    loop {
        let step = answer(&mut buf, &mut filled, &mut out, &mut date);
        if !out.is_empty() {
            if write_all_async(&mut c, &out).await.is_err() {
                return;
            }
            out.clear();
        }
        if let Step::Close = step {
            return;
        }
        let rest = &mut buf[filled..];
        match poll_fn(|cx| Pin::new(&mut c).poll_read(cx, rest)).await {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
    }
}

async fn serve_async(l: TcpListener) {
    let mut backoff = Duration::ZERO;
    loop {
        match l.accept_async().await {
            Ok((c, _)) => {
                backoff = Duration::ZERO;
                gosched::spawn(serve_conn_async(c));
            }
            Err(e) => {
                backoff = next_backoff(backoff, &e);
                gosched::time::sleep_async(backoff).await;
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: http_gosched PORT PROCS [go|async]";
    let port: u16 = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let procs: usize = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let mode = args.next().unwrap_or_else(|| "go".into());
    assert!(matches!(mode.as_str(), "go" | "async"), "{usage}");
    let rt = gosched::Builder::new()
        .procs(procs)
        .build()
        .expect("gosched runtime");
    let l = rt
        .block_on(async { TcpListener::bind(("127.0.0.1", port)) })
        .expect("bind");
    eprintln!(
        "http_gosched {mode} on http://{}/ ({} Ps)",
        l.local_addr().expect("addr"),
        rt.procs()
    );
    let server = if mode == "async" {
        rt.spawn(serve_async(l))
    } else {
        rt.go(move || serve_go(l))
    };
    rt.block_on(server).expect("server");
}
