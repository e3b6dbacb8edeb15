// W13 churn: n virtual threads each park on a one-shot of their own (a
// CountDownLatch(1): Go's chan struct{}, released by countDown as by close),
// all are released, all joined with a CountDownLatch(n) (Go's
// sync.WaitGroup) — one round. One warm-up round, then 3 timed rounds, each
// round run by a fresh virtual thread that the main thread waits for. Same
// method as bench/go/w13_churn.go (whose warm-up round is the JIT's too).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W13Churn <n>

import java.util.concurrent.CountDownLatch;

final class W13Churn {
    static final int ROUNDS = 3;

    static long round(long n) throws InterruptedException {
        CountDownLatch wg = new CountDownLatch((int) n);
        CountDownLatch[] chans = new CountDownLatch[(int) n];
        for (int i = 0; i < chans.length; i++) {
            CountDownLatch c = new CountDownLatch(1);
            chans[i] = c;
            Common.go(() -> {
                c.await();
                wg.countDown();
            });
        }
        for (CountDownLatch c : chans) {
            c.countDown();
        }
        wg.await();
        return n;
    }

    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        Common.warmUp();
        long[] total = new long[1];
        Common.root(() -> round(n));
        long t = System.nanoTime();
        for (int r = 0; r < ROUNDS; r++) {
            Common.root(() -> total[0] += round(n));
        }
        Common.report("w13", n, System.nanoTime() - t, total[0], 0, 0);
    }
}
