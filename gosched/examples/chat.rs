//! A TCP chat server: a goroutine per client reading lines, a writer
//! goroutine per client, and one hub goroutine that owns the room and
//! broadcasts — Go's "share memory by communicating", with gosched channels.
//!
//!     cargo run --release --example chat [addr]
//!
//! With an address (e.g. `127.0.0.1:7001`) it serves until killed: connect
//! with `nc 127.0.0.1 7001` from a few terminals and type. Without one it
//! serves on a free port, connects 6 clients that each say 3 things, and
//! checks that every client heard all 18 lines, in the same order.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;

use gosched::chan::{Chan, Sender};
use gosched::net::{TcpListener, TcpStream};

/// What the hub hears.
enum Event {
    Join(u64, Sender<String>),
    Leave(u64),
    Say(u64, String),
}

/// The hub: the only owner of the room. Every line goes to every member in
/// the order the hub received it.
fn hub(events: Chan<Event>) {
    let mut members: Vec<(u64, Sender<String>)> = Vec::new();
    for ev in &events {
        match ev {
            Event::Join(id, out) => members.push((id, out)),
            Event::Leave(id) => members.retain(|(m, _)| *m != id),
            Event::Say(id, text) => {
                let line = format!("{id}: {text}\n");
                // A member whose writer has gone is dropped from the room.
                members.retain(|(_, out)| out.send(line.clone()).is_ok());
            }
        }
    }
}

/// One client: its reader runs here, its writer in a goroutine of its own.
fn client(id: u64, conn: TcpStream, events: Chan<Event>) {
    let (out_tx, out_rx) = gosched::chan::<String>(64).split();
    let mut writer = conn.try_clone().expect("clone the connection");
    let w = gosched::go(move || {
        for line in &out_rx {
            if writer.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    });
    let _ = events.send(Event::Join(id, out_tx));
    for line in BufReader::new(conn).lines() {
        match line {
            Ok(text) => {
                let _ = events.send(Event::Say(id, text));
            }
            Err(_) => break,
        }
    }
    let _ = events.send(Event::Leave(id));
    // The hub drops our sender on Leave; the writer then ends.
    w.join().unwrap();
}

fn serve(l: TcpListener, events: Chan<Event>) {
    let mut next = 0;
    while let Ok((conn, _)) = l.accept() {
        next += 1;
        let events = events.clone();
        gosched::go(move || client(next, conn, events));
    }
}

const CLIENTS: usize = 6;
const LINES: usize = 3;

fn self_test(addr: SocketAddr) {
    // Everyone joins first (the hub has seen each join once the client's
    // first line comes back), then talks.
    let start = gosched::chan::<()>(0);
    let ready = gosched::chan::<()>(CLIENTS);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (start, ready) = (start.clone(), ready.clone());
            gosched::go(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                let mut lines = BufReader::new(s.try_clone().unwrap()).lines();
                // A hello, to know the hub has us in the room: once our own
                // comes back (others' may come first), we are in.
                writeln!(s, "hello from {c}").unwrap();
                let mine = format!("hello from {c}");
                loop {
                    let line = lines.next().expect("the room is open").unwrap();
                    if line.ends_with(&mine) {
                        break;
                    }
                    assert!(line.contains("hello from"), "before the lines: {line}");
                }
                ready.send(()).unwrap();
                let _ = start.recv(); // closed when every client is in
                for k in 0..LINES {
                    writeln!(s, "line {k} from {c}").unwrap();
                }
                // Everyone hears everyone's lines (and some later hellos
                // did not reach the ones that joined after them: skip those).
                let heard: Vec<String> = lines
                    .map(|l| l.unwrap())
                    .filter(|l| !l.contains("hello from"))
                    .take(CLIENTS * LINES)
                    .collect();
                heard
            })
        })
        .collect();
    // Every client got its own hello back: all are in the room.
    for _ in 0..CLIENTS {
        ready.recv().unwrap();
    }
    start.close().unwrap();
    let heard: Vec<Vec<String>> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    for h in &heard {
        assert_eq!(h.len(), CLIENTS * LINES);
        assert_eq!(h, &heard[0], "every member hears the room in one order");
    }
    println!(
        "chat: {CLIENTS} clients each heard all {} lines, in the same order",
        CLIENTS * LINES
    );
}

fn main() {
    let arg = std::env::args().nth(1);
    let rt = gosched::Builder::new().build().expect("runtime");
    let l = rt
        .block_on(async { TcpListener::bind(arg.as_deref().unwrap_or("127.0.0.1:0")) })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    println!("chat on {addr}");
    let events = gosched::chan::<Event>(256);
    {
        let events = events.clone();
        rt.go(move || hub(events));
    }
    let server = rt.go(move || serve(l, events));
    if arg.is_some() {
        rt.block_on(server).unwrap();
        return;
    }
    rt.block_on(rt.go(move || self_test(addr))).unwrap();
}
