// W4 yield: 2 * procs virtual threads each call Thread.yield() n times (on a
// virtual thread it yields the virtual thread: it goes back to the
// scheduler's queue and its carrier takes the next; Go's runtime.Gosched).
// Same method as bench/go/w4_yield.go: the root (a virtual thread) starts the
// yielders, each hands back its loop count on an ArrayBlockingQueue of
// 2 * procs (Go's buffered channel), the root takes all and sums them (the
// check). Timed: starting the yielders until the last count is in.
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed round of n / 10 yields each (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W4Yield <n>

import java.util.concurrent.ArrayBlockingQueue;

final class W4Yield {
    static long round(long n) throws InterruptedException {
        int units = 2 * Common.procs();
        ArrayBlockingQueue<Long> counts = new ArrayBlockingQueue<>(units);
        for (int u = 0; u < units; u++) {
            Common.go(() -> {
                long i;
                for (i = 0; i < n; i++) {
                    Thread.yield();
                }
                counts.put(i);
            });
        }
        long total = 0;
        for (int u = 0; u < units; u++) {
            total += counts.take();
        }
        return total;
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
        Common.report("w4", n, out[0], out[1], 0, 0);
    }
}
