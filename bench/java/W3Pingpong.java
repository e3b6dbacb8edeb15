// W3 pingpong: two virtual threads, two SynchronousQueues (Go's unbuffered
// channels), n round trips. Same method as bench/go/w3_pingpong.go: the root
// (a virtual thread, Go's main goroutine) makes ping and pong, starts the
// ponger (answers every v on ping with v+1 on pong until ping is closed),
// sends 0..n-1 on ping waiting for each answer, sums the answers (the check:
// n(n+1)/2), closes ping and joins the ponger. Timed: all of it.
// Java's queues have no close: "closed" is a -1 sent on ping (the values are
// 0..n-1), one more handoff than Go's close(ping). Values travel boxed.
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed round of n / 10 (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W3Pingpong <n>

import java.util.concurrent.SynchronousQueue;

final class W3Pingpong {
    static final long CLOSED = -1;

    static long round(long n) throws InterruptedException {
        SynchronousQueue<Long> ping = new SynchronousQueue<>();
        SynchronousQueue<Long> pong = new SynchronousQueue<>();
        Thread ponger = Common.go(() -> {
            for (long v; (v = ping.take()) != CLOSED; ) {
                pong.put(v + 1);
            }
        });
        long sum = 0;
        for (long i = 0; i < n; i++) {
            ping.put(i);
            sum += pong.take();
        }
        ping.put(CLOSED);
        ponger.join();
        return sum;
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
        Common.report("w3", n, out[0], out[1], 0, 0);
    }
}
