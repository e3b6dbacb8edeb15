// W8 timers: n virtual threads each sleep 10 ms (Thread.sleep: the virtual
// thread parks on the scheduler's timer), joined with a CountDownLatch(n)
// (Go's sync.WaitGroup); wall time from the first spawn (ideal: 10 ms). Same
// method as bench/go/w8_sleep.go: a root virtual thread starts them all and
// waits. Timed: from starting the root until it is done.
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed round of n / 10 (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W8Sleep <n>

import java.util.concurrent.CountDownLatch;

final class W8Sleep {
    static long round(long n) throws InterruptedException {
        CountDownLatch wg = new CountDownLatch((int) n);
        for (long i = 0; i < n; i++) {
            Common.go(() -> {
                Thread.sleep(10);
                wg.countDown();
            });
        }
        wg.await();
        return n;
    }

    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        Common.warmUp();
        if (Common.WARM) {
            Common.root(() -> round(Common.warmSize(n)));
        }
        long[] out = new long[1];
        long t = System.nanoTime();
        Common.root(() -> out[0] = round(n));
        long elapsed = System.nanoTime() - t;
        Common.report("w8", n, elapsed, out[0], 0, 0);
    }
}
