use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn smoke() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let h = rt.go(|| 1 + 1);
    assert_eq!(rt.block_on(h).unwrap(), 2);
    let h = rt.spawn(async { 40 + 2 });
    assert_eq!(rt.block_on(h).unwrap(), 42);
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let h = rt.go(move || {
        let hs: Vec<_> = (0..1000)
            .map(|_| {
                let n = n2.clone();
                gosched::go(move || {
                    gosched::yield_now();
                    n.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    rt.block_on(h).unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 1000);
    let t = Instant::now();
    let h = rt.go(|| gosched::time::sleep(Duration::from_millis(20)));
    rt.block_on(h).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(20));
    let h = rt.go(|| panic!("boom"));
    let e = rt.block_on(h).unwrap_err();
    assert!(e.is_panic());
    assert_eq!(e.panic_message(), Some("boom"));
}
