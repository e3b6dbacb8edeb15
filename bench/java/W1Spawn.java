// W1 spawn: spawn n trivial virtual threads that each bump a shared atomic;
// wait for all of them. Same method as bench/go/w1_spawn.go and
// bench/src/workloads/w1_spawn.rs: a root virtual thread (Go's main
// goroutine) spawns the n threads and keeps no reference to them; each does
// one AtomicLong.incrementAndGet; the one that makes the count reach n opens
// `done` (a CountDownLatch(1): Go's close(done)), which the root waits on.
// Timed: the root's spawn loop until done opens.
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed round of n / 10 (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W1Spawn <n>

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

final class W1Spawn {
    /** One round: n threads, each one bump; returns the count. */
    static long round(long n) throws InterruptedException {
        AtomicLong count = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        for (long i = 0; i < n; i++) {
            Common.spawn(() -> {
                if (count.incrementAndGet() == n) {
                    done.countDown();
                }
            });
        }
        done.await();
        return count.get();
    }

    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        Common.warmUp();
        if (Common.WARM) {
            Common.root(() -> round(Common.warmSize(n)));
        }
        long[] out = new long[2];
        Common.root(() -> {
            long t = System.nanoTime();
            out[1] = round(n);
            out[0] = System.nanoTime() - t;
        });
        Common.report("w1", n, out[0], out[1], 0, 0);
    }
}
