// W5 mpmc: 4 producer and 4 consumer virtual threads share one queue of
// capacity cap: an ArrayBlockingQueue(cap) for 1024, a SynchronousQueue for 0
// (Go's buffered and unbuffered chan int64); n longs in all. Same method as
// bench/go/w5_mpmc.go: the root (a virtual thread, Go's main goroutine) makes
// the queue, starts 4 consumers (each sums what it takes until the queue is
// closed and hands its sum back on an ArrayBlockingQueue(4)), then 4
// producers (producer p sends p*n/4 .. (p+1)*n/4-1); a CountDownLatch(4)
// (Go's WaitGroup) waits for the producers, then the root closes the queue
// and adds the 4 sums (the check: n(n-1)/2). Timed: all of it.
// Java's queues have no close: "closed" is one -1 per consumer put after the
// producers are done (the values are 0..n-1; each consumer stops at its
// first -1), 4 more messages than Go's close(ch). Values travel boxed.
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed round of n / 10 messages (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W5Mpmc <n> <cap>

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.SynchronousQueue;

final class W5Mpmc {
    static final int PRODUCERS = 4;
    static final int CONSUMERS = 4;
    static final long CLOSED = -1;

    static long round(long n, int cap) throws InterruptedException {
        long per = n / PRODUCERS;
        BlockingQueue<Long> ch = cap == 0 ? new SynchronousQueue<>() : new ArrayBlockingQueue<>(cap);
        ArrayBlockingQueue<Long> sums = new ArrayBlockingQueue<>(CONSUMERS);
        for (int c = 0; c < CONSUMERS; c++) {
            Common.go(() -> {
                long sum = 0;
                for (long v; (v = ch.take()) != CLOSED; ) {
                    sum += v;
                }
                sums.put(sum);
            });
        }
        CountDownLatch wg = new CountDownLatch(PRODUCERS);
        for (long p = 0; p < PRODUCERS; p++) {
            long from = p * per;
            Common.go(() -> {
                for (long v = from; v < from + per; v++) {
                    ch.put(v);
                }
                wg.countDown();
            });
        }
        wg.await();
        for (int c = 0; c < CONSUMERS; c++) {
            ch.put(CLOSED);
        }
        long total = 0;
        for (int c = 0; c < CONSUMERS; c++) {
            total += sums.take();
        }
        return total;
    }

    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        int cap = -1;
        try {
            cap = Integer.parseInt(Common.secondArg(args, "<cap>"));
        } catch (NumberFormatException e) {
            cap = -1;
        }
        if (n % PRODUCERS != 0 || cap < 0) {
            System.err.println("bad arguments: n must be a multiple of 4, cap >= 0");
            System.exit(2);
        }
        int capacity = cap;
        Common.warmUp();
        if (Common.WARM) {
            long w = Math.max(PRODUCERS, Common.warmSize(n) / PRODUCERS * PRODUCERS);
            Common.root(() -> round(w, capacity));
        }
        long[] out = new long[2];
        Common.root(() -> {
            long t = System.nanoTime();
            out[1] = round(n, capacity);
            out[0] = System.nanoTime() - t;
        });
        Common.report("w5", n, out[0], out[1], 0, 0);
    }
}
