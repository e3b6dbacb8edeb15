//! A TCP echo server with one goroutine per connection, blocking-style code
//! that parks only the goroutine (the netpoller wakes it), and a few clients
//! to talk to it.
//!
//!     cargo run --release --example echo [addr]
//!
//! With an address (e.g. `127.0.0.1:7000`) it serves until killed; try
//! `nc 127.0.0.1 7000`. Without one it serves on a free port, runs 50
//! clients × 1,000 messages against itself and prints the rate.
//!
//! `accept` errors such as running out of file descriptors (EMFILE) are
//! returned, not retried in a loop by the library; the loop here backs off
//! as Go's net/http does (5 ms, doubling to 1 s).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use gosched::net::{TcpListener, TcpStream};

fn serve(l: TcpListener) {
    let mut backoff = Duration::ZERO;
    loop {
        match l.accept() {
            Ok((mut c, _)) => {
                backoff = Duration::ZERO;
                gosched::go(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if c.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
            Err(e) => {
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
    let addr = arg.as_deref().unwrap_or("127.0.0.1:0");
    let l = rt
        .block_on(async { TcpListener::bind(addr) })
        .expect("bind");
    let local = l.local_addr().expect("addr");
    println!("echo server on {local} ({} Ps)", rt.procs());
    let server = rt.go(move || serve(l));
    if arg.is_some() {
        rt.block_on(server).unwrap();
        return;
    }
    const CLIENTS: usize = 50;
    const MSGS: usize = 1_000;
    let t = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            rt.go(move || {
                let mut s = TcpStream::connect(local).expect("connect");
                s.set_nodelay(true).unwrap();
                let mut back = [0u8; 64];
                for i in 0..MSGS {
                    let m = [(c + i) as u8; 64];
                    s.write_all(&m).unwrap();
                    s.read_exact(&mut back).unwrap();
                    assert_eq!(back, m);
                }
            })
        })
        .collect();
    for c in clients {
        rt.block_on(c).unwrap();
    }
    let took = t.elapsed();
    let n = CLIENTS * MSGS;
    println!(
        "{CLIENTS} clients x {MSGS} round trips of 64 bytes: {:.0} ms, {:.0}k round trips/s",
        took.as_secs_f64() * 1e3,
        n as f64 / took.as_secs_f64() / 1e3
    );
}
