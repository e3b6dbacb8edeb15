//! A web crawler on a goroutine pool: it starts a small local HTTP site (a
//! goroutine per connection), then crawls it from `/` with at most 8 fetches
//! at once through a `gosched::pool::Pool`, following links breadth-first.
//!
//!     cargo run --release --example crawler
//!
//! Each fetch is blocking-style code (connect, write the request, read the
//! response with a deadline) that parks only its goroutine. The crawl loop
//! gets each page's links back over a channel and queues the new ones, handing
//! them to the pool with `try_submit` as workers free up; `select!` with
//! `after` bounds how long it waits for the next result.

use std::collections::{HashSet, VecDeque};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gosched::net::{TcpListener, TcpStream};
use gosched::pool::{Pool, PoolError};

/// Pages of the site: `/p/N` for N < PAGES; page N links to 3N+1..=3N+3.
const PAGES: usize = 400;

fn page(n: usize) -> String {
    let mut body = format!("<html><h1>page {n}</h1>");
    for k in 3 * n + 1..=3 * n + 3 {
        if k < PAGES {
            body.push_str(&format!("<a href=\"/p/{k}\">page {k}</a>"));
        }
    }
    // A link back to the start: the crawler must not fetch it twice.
    body.push_str("<a href=\"/p/0\">home</a></html>");
    body
}

/// The site: one goroutine per connection, keep-alive off (one request each).
fn serve(l: TcpListener) {
    while let Ok((mut c, _)) = l.accept() {
        gosched::go(move || {
            // Read the whole request head (it may come in several
            // segments): closing with unread bytes would reset the
            // connection, and the client would see a reset, not the page.
            let mut req = Vec::new();
            let mut buf = [0u8; 512];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req);
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let (status, body) = match path {
                "/" => ("200 OK", page(0)),
                p => match p.strip_prefix("/p/").and_then(|n| n.parse::<usize>().ok()) {
                    Some(n) if n < PAGES => ("200 OK", page(n)),
                    _ => ("404 Not Found", String::from("no such page")),
                },
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = c.write_all(resp.as_bytes());
        });
    }
}

/// GET `path`; the body, or why not.
fn fetch(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_deadline(Some(Instant::now() + Duration::from_secs(5)));
    // One write: `write!` would send each piece as its own segment.
    let req = format!("GET {path} HTTP/1.1\r\nHost: crawler\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header end"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!(
            "{path}: {}",
            head.lines().next().unwrap_or("")
        )));
    }
    Ok(body.to_string())
}

fn links(body: &str) -> Vec<String> {
    body.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

fn crawl(addr: SocketAddr) -> (usize, usize, gosched::pool::PoolStats) {
    let pool = Pool::new(8).expect("pool");
    let results = gosched::chan::<(String, std::io::Result<Vec<String>>)>(8);
    let mut seen = HashSet::from(["/".to_string()]);
    let mut queue = VecDeque::from(["/".to_string()]);
    let (mut pending, mut fetched, mut failed) = (0usize, 0, 0);
    loop {
        // Hand out what the pool can take now. `try_submit` never blocks:
        // a crawl loop parked in `submit` while every worker waits to send
        // it a result would deadlock.
        while let Some(path) = queue.front().cloned() {
            let results = results.clone();
            let task = move || {
                let r = fetch(addr, &path).map(|body| links(&body));
                let _ = results.send((path, r));
            };
            match pool.try_submit(task) {
                Ok(()) => {
                    queue.pop_front();
                    pending += 1;
                }
                Err(PoolError::Overload) => break,
                Err(e) => panic!("submit: {e}"),
            }
        }
        if pending == 0 {
            break;
        }
        gosched::select! {
            recv(results) -> r => {
                let (path, r) = r.expect("the crawler holds a sender");
                pending -= 1;
                match r {
                    Ok(found) => {
                        fetched += 1;
                        for link in found {
                            // "/" and "/p/0" are the same page.
                            let link = if link == "/p/0" { "/".to_string() } else { link };
                            if seen.insert(link.clone()) {
                                queue.push_back(link);
                            }
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("{path}: {e}");
                    }
                }
            }
            after(Duration::from_secs(10)) => panic!("no result in 10 s with {pending} fetches out"),
        }
    }
    pool.wait();
    (fetched, failed, pool.stats())
}

fn main() {
    let rt = gosched::Builder::new().build().expect("runtime");
    let l = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    rt.go(move || serve(l));
    let t = Instant::now();
    let (fetched, failed, stats) = rt.block_on(rt.go(move || crawl(addr))).unwrap();
    println!(
        "crawled {fetched} pages ({failed} failed) from http://{addr}/ in {:?}, \
         at most 8 at once on {} pooled goroutines ({} tasks)",
        t.elapsed(),
        stats.running,
        stats.completed,
    );
    assert_eq!(fetched, PAGES, "every page once");
    assert_eq!(failed, 0);
}
