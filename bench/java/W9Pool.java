// W9 pool, the Java peer: Java has no goroutine pool (no ants), so as the
// tokio row: a virtual thread per task. Same method as bench/go/w9_pool.go
// and bench/src/workloads/w9_pool.rs (ants' benchmark: tasks that sleep
// 10 ms, a cap of 50,000).
//
//   - wait (W9, as the tokio row): a root virtual thread takes a permit of a
//     Semaphore(50,000) before each start of a virtual thread that sleeps
//     10 ms, releases its permit and bumps a counter; the thread that brings
//     it to n opens `done`, which the root waits on. Timed: from the first
//     acquire until done opens.
//   - throughput (W9t, as Go's BenchmarkGoroutinesThroughput): the root
//     starts n virtual threads that each sleep 10 ms; no semaphore. Timed:
//     the start loop only; nothing waits for them (the JVM exits with them
//     asleep: virtual threads are daemons).
//   - parallel (W9p, as Go's no-pool row): the root starts 4 × procs
//     submitter threads that each start their share of the n sleeping
//     threads (the first n % units one more) and hand their count back on an
//     ArrayBlockingQueue. Timed: until the root has every count.
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed round of n / 10 (-Dgosched.warmup=false: none); throughput and
// parallel then sleep 300 ms, so that its sleepers are gone.
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W9Pool <n> wait|throughput|parallel

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;

final class W9Pool {
    /** The pool's capacity (ants' PoolCap): here the semaphore's permits. */
    static final int CAP = 50_000;
    /** W9p: submitters per proc (SUBMITTERS_PER_PROC in w9_pool.rs). */
    static final int SUBMITTERS_PER_PROC = 4;

    /** ants' demoFunc: sleep 10 ms. */
    static void demoFunc() {
        try {
            Thread.sleep(10);
        } catch (InterruptedException e) {
            throw Common.interrupted(e);
        }
    }

    /** W9: n tasks behind the semaphore; {elapsed ns, finished}. */
    static long[] waitAll(long n) throws InterruptedException {
        Semaphore sem = new Semaphore(CAP);
        AtomicLong finished = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        long t = System.nanoTime();
        for (long i = 0; i < n; i++) {
            sem.acquire();
            Common.spawn(() -> {
                demoFunc();
                sem.release();
                if (finished.incrementAndGet() == n) {
                    done.countDown();
                }
            });
        }
        done.await();
        return new long[] {System.nanoTime() - t, finished.get()};
    }

    /** W9t: the start loop alone. */
    static long[] throughput(long n) {
        long t = System.nanoTime();
        for (long i = 0; i < n; i++) {
            Common.spawn(W9Pool::demoFunc);
        }
        return new long[] {System.nanoTime() - t, n};
    }

    /** W9p: the share of submitter i of units, n in all. */
    static long share(long n, int units, int i) {
        long s = n / units;
        return i < n % units ? s + 1 : s;
    }

    /** W9p: 4 × procs submitters at once. */
    static long[] parallel(long n) throws InterruptedException {
        int units = SUBMITTERS_PER_PROC * Common.procs();
        ArrayBlockingQueue<Long> counts = new ArrayBlockingQueue<>(units);
        long t = System.nanoTime();
        for (int u = 0; u < units; u++) {
            long k = share(n, units, u);
            Common.go(() -> {
                for (long i = 0; i < k; i++) {
                    Common.spawn(W9Pool::demoFunc);
                }
                counts.put(k);
            });
        }
        long total = 0;
        for (int u = 0; u < units; u++) {
            total += counts.take();
        }
        return new long[] {System.nanoTime() - t, total};
    }

    static long[] run(String mode, long n) throws InterruptedException {
        switch (mode) {
            case "wait":
                return waitAll(n);
            case "throughput":
                return throughput(n);
            default:
                return parallel(n);
        }
    }

    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        String mode = Common.secondArg(args, "wait|throughput|parallel");
        String workload;
        switch (mode) {
            case "wait":
                workload = "w9";
                break;
            case "throughput":
                workload = "w9t";
                break;
            case "parallel":
                workload = "w9p";
                break;
            default:
                System.err.println("bad mode " + mode + ": wait|throughput|parallel");
                System.exit(2);
                return;
        }
        Common.warmUp();
        if (Common.WARM) {
            Common.root(() -> run(mode, Common.warmSize(n)));
            if (!mode.equals("wait")) {
                Thread.sleep(300);
            }
        }
        long[][] out = new long[1][];
        Common.root(() -> out[0] = run(mode, n));
        Common.report(workload, n, out[0][0], out[0][1], 0, 0);
    }
}
