use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    for _ in 0..3 {
        let n = Arc::new(AtomicUsize::new(0));
        let t = Instant::now();
        let n2 = n.clone();
        let h = rt.go(move || {
            let done = Arc::new(AtomicUsize::new(0));
            for _ in 0..1_000_000 {
                let n = n2.clone();
                gosched::go(move || {
                    n.fetch_add(1, Ordering::Relaxed);
                });
            }
            let _ = done;
        });
        rt.block_on(h).unwrap();
        while n.load(Ordering::Relaxed) < 1_000_000 {
            std::thread::yield_now();
        }
        println!("go spawn 1M: {:?}", t.elapsed());
        let n = Arc::new(AtomicUsize::new(0));
        let t = Instant::now();
        let n2 = n.clone();
        rt.block_on(rt.spawn(async move {
            for _ in 0..1_000_000 {
                let n = n2.clone();
                gosched::spawn(async move {
                    n.fetch_add(1, Ordering::Relaxed);
                });
            }
        }))
        .unwrap();
        while n.load(Ordering::Relaxed) < 1_000_000 {
            std::thread::yield_now();
        }
        println!("async spawn 1M: {:?}", t.elapsed());
        let t = Instant::now();
        let hs: Vec<_> = (0..4)
            .map(|_| {
                rt.go(|| {
                    for _ in 0..1_000_000 {
                        gosched::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
        println!("yield: {:?}/yield", t.elapsed() / 4_000_000);
    }
}
