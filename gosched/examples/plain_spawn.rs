//! Spawning from a plain thread (issue 25): 1,000,000 `go` from `main` (no
//! runtime context: the global runtime, P-less spawns), then every handle
//! joined; prints the wall time.
//!
//! cargo run --release -p gosched --example plain_spawn

fn main() {
    gosched::go(|| {}).join().unwrap(); // start the global runtime
    let t = std::time::Instant::now();
    let hs: Vec<_> = (0..1_000_000u64).map(|i| gosched::go(move || i)).collect();
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 999_999 * 1_000_000 / 2);
    println!("1,000,000 go + join from a plain thread: {:?}", t.elapsed());
}
