//! Go's edge cases of `net` (issue 46): a connect whose timeout has expired
//! fails before any attempt, `Duration::MAX` is "no timeout" and never
//! overflows, and a read into an empty buffer returns at once.

mod common;

use std::future::poll_fn;
use std::io::{ErrorKind, Read, Write};
use std::pin::Pin;
use std::sync::mpsc;
use std::time::Duration;

use futures_io::AsyncRead;
use gosched::net::{TcpListener, TcpStream, UnixStream};

/// Runs `f` in a goroutine of `rt`; fails (instead of hanging) if it has not
/// returned within 10 s.
fn in_goroutine<T: Send + 'static>(
    rt: &gosched::Runtime,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let _h = rt.go(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the goroutine did not return within 10 s")
}

/// `connect_timeout(addr, Duration::ZERO)` fails with `TimedOut`, 100 times
/// out of 100 on loopback, and never reaches the listener (std rejects a zero
/// timeout; Go's dial with an expired deadline times out).
#[test]
fn a_zero_connect_timeout_fails_before_any_attempt() {
    let rt = common::rt(2);
    in_goroutine(&rt, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        for _ in 0..100 {
            let e = TcpStream::connect_timeout(&addr, Duration::ZERO).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
            assert!(e.to_string().contains("timed out"), "{e}");
        }
        // Nothing connected: an accept with a near deadline times out (a
        // connection made by any of the attempts would be returned at once).
        l.set_deadline(Some(gosched::time::now() + Duration::from_millis(50)));
        let e = l.accept().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    });
}

/// `Duration::MAX` as a connect timeout, and as read and write timeouts, is
/// "no timeout": no `Instant + Duration` overflow (it panicked before).
#[test]
fn duration_max_timeouts_do_not_overflow() {
    let rt = common::rt(2);
    in_goroutine(&rt, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let peer = gosched::go(move || {
            let (mut c, _) = l.accept().unwrap();
            c.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            b[0]
        });
        let mut c = TcpStream::connect_timeout(&addr, Duration::MAX).unwrap();
        c.set_read_timeout(Some(Duration::MAX)).unwrap();
        c.set_write_timeout(Some(Duration::MAX)).unwrap();
        // Kept in whole nanoseconds: 584 years stand for "no timeout".
        let kept = c.read_timeout().unwrap().unwrap();
        assert!(kept >= Duration::from_secs(100 * 365 * 86_400), "{kept:?}");
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
        c.write_all(b"y").unwrap();
        assert_eq!(peer.join().unwrap(), b'y');
    });
}

/// A read into an empty buffer returns `Ok(0)` at once with nothing waiting
/// (Go's `Read`), on TCP and Unix streams, blocking, vectored and async; the
/// stream then reads as usual.
#[test]
fn an_empty_buffer_read_returns_at_once() {
    let rt = common::rt(2);
    in_goroutine(&rt, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        let (u1, u2) = UnixStream::pair().unwrap();
        for (mut a, mut b) in [
            (
                Box::new(c) as Box<dyn ReadWrite>,
                Box::new(s) as Box<dyn ReadWrite>,
            ),
            (Box::new(u1), Box::new(u2)),
        ] {
            assert_eq!(a.read(&mut []).unwrap(), 0);
            assert_eq!(a.read_vectored(&mut []).unwrap(), 0);
            b.write_all(b"z").unwrap();
            let mut one = [0u8; 1];
            a.read_exact(&mut one).unwrap();
            assert_eq!(&one, b"z");
        }
    });
    // The async form, in a task.
    let n = rt
        .block_on(rt.spawn(async {
            let (mut a, _b) = UnixStream::pair().unwrap();
            poll_fn(|cx| Pin::new(&mut a).poll_read(cx, &mut [])).await
        }))
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}
