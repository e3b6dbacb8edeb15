//! Running out of stack address space is reported at spawn (issue 17 §4):
//! under an address-space limit (`ulimit -v`), `try_go` returns `SpawnError`
//! once no stack can be reserved, and every goroutine it accepted runs — none
//! dies at its first run for want of a stack. Runs in a child process, whose
//! limit cannot disturb the other tests.

mod common;

const CHILD_ENV: &str = "GOSCHED_TEST_STACK_LIMIT_CHILD";
const SPAWNS: usize = 20_000;

#[test]
fn stack_limit_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful as the child of the test below
    }
    // 1 GiB of address space: room for a few thousand 256 KiB stacks.
    let limit = libc::rlimit {
        rlim_cur: 1 << 30,
        rlim_max: 1 << 30,
    };
    // SAFETY: plain syscall on a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let (accepted, refused, joined) = rt
        .block_on(rt.go(|| {
            let gate = gosched::chan::<()>(0);
            let mut handles = Vec::new();
            let mut refused = 0;
            let mut first_err = None;
            for _ in 0..SPAWNS {
                let g = gate.clone();
                match gosched::try_go(move || {
                    let _ = g.recv(); // keeps its stack until the end
                    1u64
                }) {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        refused += 1;
                        first_err.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            if let Some(e) = first_err {
                eprintln!("first refusal: {e}");
            }
            // `go` at the limit panics in the spawner with the same reason.
            let g = gate.clone();
            let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                gosched::go(move || {
                    let _ = g.recv();
                    1u64
                })
            }));
            match p {
                Ok(h) => handles.push(h), // room was freed meanwhile: fine
                Err(e) => eprintln!(
                    "go panicked: {}",
                    e.downcast_ref::<String>().map_or("?", |s| s.as_str())
                ),
            }
            gate.close().unwrap();
            let accepted = handles.len();
            let joined: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            (accepted, refused, joined)
        }))
        .unwrap();
    println!("accepted {accepted} refused {refused} joined {joined}");
}

#[test]
fn try_go_reports_stack_exhaustion_at_spawn() {
    let out = common::run_child_test("stack_limit_child", CHILD_ENV);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.find("accepted ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no result line:\n{stdout}\n{stderr}"));
    let n: Vec<usize> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (accepted, refused, joined) = (n[0], n[1], n[2]);
    assert!(accepted + refused == SPAWNS || accepted + refused == SPAWNS + 1);
    assert!(refused > 0, "the limit never bit: {line}");
    assert!(accepted > 100, "too few goroutines fit: {line}");
    assert_eq!(
        joined, accepted,
        "an accepted goroutine did not run: {line}"
    );
    assert!(
        !stderr.contains("cannot allocate a stack"),
        "a goroutine died at its first run:\n{stderr}"
    );
    assert!(stderr.contains("first refusal"), "{stderr}");
    if accepted + refused == SPAWNS {
        assert!(
            stderr.contains("go panicked: cannot spawn goroutine: "),
            "{stderr}"
        );
    }
}
