//! Running one measurement process: its output, how it ended, and its peak
//! RSS as the kernel counted it (`wait4`'s `ru_maxrss`).

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident set of the child, in KiB.
    pub maxrss_kb: u64,
    pub timed_out: bool,
}

impl Finished {
    /// Why the child failed, in one line, from how it ended and its stderr.
    pub fn failure(&self) -> Option<String> {
        if self.timed_out {
            return Some("timed out (killed)".into());
        }
        if self.status.success() {
            return None;
        }
        let how = match (self.status.code(), self.status.signal()) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
            _ => "ended abnormally".into(),
        };
        Some(match last_words(&self.stderr) {
            Some(why) => format!("{how}: {why}"),
            None => how,
        })
    }
}

/// Spawns `cmd`, waits at most `timeout` (then SIGKILLs it).
pub fn run(mut cmd: Command, timeout: Duration) -> std::io::Result<Finished> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let out = drain(child.stdout.take().expect("piped stdout"));
    let err = drain(child.stderr.take().expect("piped stderr"));

    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let (raw_status, usage) = loop {
        // SAFETY: plain wait4 on our own child; rusage is plain old data.
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if timed_out { 0 } else { libc::WNOHANG };
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: the pid is our un-reaped child, so it cannot be reused.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            continue;
        }
        thread::sleep(Duration::from_millis(5));
    };
    // The child is reaped; std's Child must not wait on it again (it won't:
    // dropping a Child neither waits nor kills).
    drop(child);
    Ok(Finished {
        status: ExitStatus::from_raw(raw_status),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        maxrss_kb: usage.ru_maxrss.max(0) as u64, // KiB on Linux
        timed_out,
    })
}

fn drain<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// The most telling stderr line: a Rust panic message, a Go `panic:`/`fatal
/// error:` line, or else the last non-empty line.
fn last_words(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut pick = None;
    for (i, l) in lines.iter().enumerate() {
        if l.contains("panicked at") {
            // Rust >= 1.73 prints the message on the next line.
            let msg = lines.get(i + 1).copied().unwrap_or(l);
            pick = Some(msg.to_string());
            break;
        }
        if l.starts_with("panic:") || l.starts_with("fatal error:") || l.starts_with("runtime:") {
            pick = Some(l.to_string());
            break;
        }
    }
    let s = pick.or_else(|| lines.last().map(|l| l.to_string()))?;
    Some(if s.chars().count() > 160 {
        format!("{}…", s.chars().take(160).collect::<String>())
    } else {
        s
    })
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}
