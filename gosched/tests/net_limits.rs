//! The network at its limits: a process out of file descriptors, and ten
//! thousand connections parked at once. Both run partly in a child process
//! (this binary again, selected by an environment variable): the first
//! lowers its own `RLIMIT_NOFILE`, the second holds the clients' ten thousand
//! fds in a process of their own, so the server's fit under the hard limit.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gosched::net::{TcpListener, TcpStream};

const EMFILE_CHILD: &str = "GOSCHED_TEST_EMFILE_CHILD";
const CLIENTS_CHILD: &str = "GOSCHED_TEST_CLIENTS_CHILD";

/// CPU time this process has used (user + system).
fn cpu_time() -> Duration {
    // SAFETY: `ru` is a valid, writable `rusage`.
    let ru = unsafe {
        let mut ru = std::mem::zeroed::<libc::rusage>();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut ru), 0);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn set_nofile(soft: u64) -> u64 {
    // SAFETY: `lim` is a valid, writable `rlimit`.
    unsafe {
        let mut lim = std::mem::zeroed::<libc::rlimit>();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = soft.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        lim.rlim_cur
    }
}

fn is_fd_exhaustion(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

#[test]
fn emfile_child() {
    if std::env::var_os(EMFILE_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    set_nofile(64);
    let rt = common::rt(2);
    let listener = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = listener.local_addr().unwrap();
    // Clients first (they need fds too): their connections wait in the
    // listener's backlog.
    const PENDING: usize = 5;
    let mut clients: Vec<std::net::TcpStream> = (0..PENDING)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    // Use up every fd left.
    let mut hog = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => hog.push(f),
            Err(e) if is_fd_exhaustion(&e) => break,
            Err(e) => panic!("open: {e}"),
        }
    }
    // An accept loop with Go's net/http back-off (5 ms doubling; capped at
    // 40 ms here to keep the test short): it sees the error, not a hang.
    let errors = Arc::new(AtomicUsize::new(0));
    let out_of_fds = gosched::chan::<()>(1);
    let err_tx = out_of_fds.clone();
    let acceptor = {
        let errors = errors.clone();
        rt.go(move || {
            let mut accepted = Vec::new();
            let mut backoff = Duration::ZERO;
            while accepted.len() < PENDING {
                match listener.accept() {
                    Ok((s, _)) => {
                        backoff = Duration::ZERO;
                        accepted.push(s);
                    }
                    Err(e) if is_fd_exhaustion(&e) => {
                        if errors.fetch_add(1, SeqCst) == 2 {
                            err_tx.send(()).unwrap();
                        }
                        backoff = (backoff * 2)
                            .clamp(Duration::from_millis(5), Duration::from_millis(40));
                        gosched::time::sleep(backoff);
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
            accepted
        })
    };
    // Three errors seen: the fds are out. Watch the CPU for 300 ms: the
    // loop sleeps between tries, nothing spins on the listener's readiness.
    rt.block_on(async { out_of_fds.recv_async().await.unwrap() });
    let (cpu0, t0) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_millis(300));
    let (cpu, wall) = (cpu_time() - cpu0, t0.elapsed());
    let tries = errors.load(SeqCst);
    // Free the fds: the loop recovers and takes every waiting connection.
    drop(hog);
    let mut accepted = rt.block_on(acceptor).unwrap();
    assert_eq!(accepted.len(), PENDING);
    // Each accepted connection works.
    for (i, c) in clients.iter_mut().enumerate() {
        c.write_all(&[i as u8]).unwrap();
    }
    let mut seen: Vec<u8> = accepted
        .iter_mut()
        .map(|s| {
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            b[0]
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..PENDING as u8).collect::<Vec<_>>());
    println!("EMFILE: {tries} accept errors; cpu {cpu:?} in {wall:?} while out of fds; recovered");
    assert!(
        cpu < wall / 3,
        "the accept loop spun while out of fds: {cpu:?} of CPU in {wall:?}"
    );
}

/// `accept` in a process out of file descriptors returns EMFILE (no hang,
/// no spin inside), and the accept loop recovers once fds are freed
/// (`RLIMIT_NOFILE` 64, in a child).
#[test]
fn accept_out_of_fds_returns_the_error_and_recovers() {
    let out = common::run_child_test("emfile_child", EMFILE_CHILD);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("recovered"),
        "child failed:\n{stdout}\n{stderr}"
    );
    eprintln!(
        "{}",
        stdout.lines().find(|l| l.contains("EMFILE:")).unwrap()
    );
}

/// How many connections the ten-thousand test makes (fewer, and says so,
/// if the hard fd limit is lower).
fn connections_for_limit(hard: u64) -> usize {
    let want = std::env::var("GOSCHED_TEST_CONNECTIONS").map_or(10_000, |v| v.parse().unwrap());
    want.min(hard.saturating_sub(256) as usize)
}

#[test]
fn clients_child() {
    if std::env::var_os(CLIENTS_CHILD).is_none() {
        return; // only meaningful as the child of the test below
    }
    let mut args = String::new();
    let mut stdin = BufReader::new(std::io::stdin());
    stdin.read_line(&mut args).unwrap();
    let mut it = args.split_whitespace();
    let addr: std::net::SocketAddr = it.next().unwrap().parse().unwrap();
    let n: usize = it.next().unwrap().parse().unwrap();
    set_nofile(n as u64 + 256);
    let mut slowest = Duration::ZERO;
    let mut slow = 0;
    let mut conns: Vec<std::net::TcpStream> = (0..n)
        .map(|i| {
            let t = Instant::now();
            let c =
                std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {i}: {e}"));
            slowest = slowest.max(t.elapsed());
            slow += usize::from(t.elapsed() > Duration::from_millis(100));
            c
        })
        .collect();
    println!("CONNECTED {n} slowest {slowest:?} slow {slow}");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    stdin.read_line(&mut go).unwrap();
    assert_eq!(go.trim(), "go");
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(&[(i % 251) as u8]).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let mut b = [0u8; 1];
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        c.read_exact(&mut b)
            .unwrap_or_else(|e| panic!("echo {i}: {e}"));
        assert_eq!(b[0], (i % 251) as u8 ^ 0xff);
    }
    println!("ECHOED {n}");
}

/// Ten thousand goroutines each parked on a read of its own connection
/// (the clients are a child process), then all woken by one byte each: each
/// answers it, and every answer is checked.
#[test]
fn ten_thousand_connections_parked_on_reads_all_wake() {
    let mut lim = unsafe { std::mem::zeroed::<libc::rlimit>() };
    // SAFETY: `lim` is a valid, writable `rlimit`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let n = connections_for_limit(lim.rlim_max);
    if n < 10_000 {
        eprintln!(
            "hard fd limit {}: {n} connections instead of 10,000",
            lim.rlim_max
        );
    }
    set_nofile(n as u64 + 256);
    let rt = common::rt(2);
    let listener = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0") })
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let server = {
        let answered = answered.clone();
        rt.go(move || {
            let mut readers = Vec::with_capacity(n);
            for _ in 0..n {
                let (s, _) = listener.accept().unwrap();
                let answered = answered.clone();
                readers.push(gosched::go(move || {
                    let mut s: TcpStream = s;
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).unwrap();
                    s.write_all(&[b[0] ^ 0xff]).unwrap();
                    answered.fetch_add(1, SeqCst);
                }));
            }
            for r in readers {
                r.join().unwrap();
            }
        })
    };
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "clients_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CLIENTS_CHILD, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = BufReader::new(child.stdout.take().unwrap());
    let t = Instant::now();
    writeln!(to_child, "{addr} {n}").unwrap();
    let mut expect = |what: &str| {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                from_child.read_line(&mut line).unwrap() > 0,
                "the client process ended before {what}"
            );
            if line.contains(what) {
                eprintln!("{line}");
                return;
            }
        }
    };
    expect("CONNECTED");
    let connected = t.elapsed();
    // Every reader parked on its socket before any byte is sent.
    let t = Instant::now();
    while rt.stats().parked < n + 1 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "only {} of {n} readers parked",
            rt.stats().parked
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let parked = t.elapsed();
    writeln!(to_child, "go").unwrap();
    let t = Instant::now();
    expect("ECHOED");
    let woken = t.elapsed();
    rt.block_on(server).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(answered.load(SeqCst), n);
    eprintln!(
        "{n} connections: connected in {connected:?}, parked {parked:?} later; \
         all woken and echoed in {woken:?}"
    );
}
