// W7 parked: n virtual threads each parked on a one-shot of its own; reported
// as (VmRSS once all are parked - VmRSS before spawning) / n bytes per
// thread. Same method as bench/go/w7_parked.go: read VmRSS; make n
// CountDownLatch(1) (Go's chan struct{}, released by countDown as Go's by
// close; kept in an array as Go keeps its []chan struct{}) and start one
// virtual thread per latch that bumps `parked` right before await(); poll
// `parked` until it is n, sleep 100 ms, read VmRSS; then open every latch,
// each thread bumps `finished` on wake and the last one opens `done`. All of
// it in a root virtual thread (Go's main goroutine). The elapsed time
// reported is spawning until all are parked.
// The heap is the JVM's default (G1, sized by the machine's memory), so the
// RSS delta is the heap the JVM grew to hold the parked threads and their
// latches (and garbage not yet collected), as Go's is its heap and stacks.
// Warm-up: one thread started and joined (as Go); no warm-up round (the
// figure is memory, and a round would leave the heap grown before "before").
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W7Parked <n>

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

final class W7Parked {
    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        Common.warmUp();
        long[] out = new long[4];
        Common.root(() -> {
            AtomicLong parked = new AtomicLong();
            AtomicLong finished = new AtomicLong();
            CountDownLatch done = new CountDownLatch(1);

            long before = Common.statusKB("VmRSS");
            long t = System.nanoTime();
            CountDownLatch[] chans = new CountDownLatch[(int) n];
            for (int i = 0; i < chans.length; i++) {
                CountDownLatch ch = new CountDownLatch(1);
                chans[i] = ch;
                Common.go(() -> {
                    parked.incrementAndGet();
                    ch.await();
                    if (finished.incrementAndGet() == n) {
                        done.countDown();
                    }
                });
            }
            while (parked.get() < n) {
                Thread.sleep(0, 200_000);
            }
            long elapsed = System.nanoTime() - t;
            Thread.sleep(100);
            long after = Common.statusKB("VmRSS");

            for (CountDownLatch ch : chans) {
                ch.countDown();
            }
            done.await();
            out[0] = elapsed;
            out[1] = finished.get();
            out[2] = before;
            out[3] = after;
        });
        Common.report("w7", n, out[0], out[1], out[2], out[3]);
    }
}
