// W6 fairness: 4 virtual threads spin without a call that could yield, and
// one virtual thread sleeps 1 ms at a time (Thread.sleep) for <size> ms.
// Reported: the ticker's lateness (each sleep's length minus 1 ms),
// p50/p99/max, and its tick count. Same method as bench/go/w6_fairness.go and
// bench/src/workloads/w6_fairness.rs: hogs first, then the ticker; the main
// thread waits for the ticker's report for <size> ms + 1 s, then stops the
// hogs (a starved ticker reports once the hogs stop; its ticks count and the
// wait is added as the lateness of the tick it never made).
// Java's scheduler does not preempt a virtual thread (it has no time slice):
// with more hogs than carriers the ticker does not run until they stop.
// The ticker's window is counted from when it is started, not from its
// first run (as in the Go and Rust programs since 2026-11-28), so that a
// ticker that first runs after the hogs stop counts no tick; counted from
// its first run, a starved ticker would tick a whole window after the hogs
// stop and report a p99 of about 1 ms. Lateness: a tick is late by the time
// since the previous tick (or, for the first, since the start) beyond 1 ms.
// The waiting is done by the main (platform) thread, as in the Rust rows: a
// virtual-thread root would be starved with the ticker.
// Warm-up: one thread started and joined (as Go); the hog loop is compiled
// on the fly (OSR), no warm-up round (the figure is the ticker's lateness).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W6Fairness <ms>

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;

final class W6Fairness {
    static final int HOGS = 4;
    static volatile boolean stop;

    static long hog() {
        long x = 0x9E3779B97F4A7C15L;
        while (!stop) {
            for (int i = 0; i < 64; i++) {
                x ^= x << 13;
                x ^= x >>> 7;
                x ^= x << 17;
            }
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        long ms = Common.sizeArg(args);
        Common.warmUp();
        long window = TimeUnit.MILLISECONDS.toNanos(ms);
        ArrayBlockingQueue<Long> done = new ArrayBlockingQueue<>(HOGS);
        for (int i = 0; i < HOGS; i++) {
            Common.go(() -> done.put(hog()));
        }
        ArrayBlockingQueue<List<Long>> report = new ArrayBlockingQueue<>(1);
        long start = System.nanoTime();
        Common.go(() -> {
            List<Long> late = new ArrayList<>((int) ms + 1);
            long last = start;
            while (System.nanoTime() - start < window) {
                Thread.sleep(1);
                long now = System.nanoTime();
                long l = now - last - 1_000_000;
                last = now;
                late.add(Math.max(l, 0));
            }
            report.put(late);
        });
        long wait = window + TimeUnit.SECONDS.toNanos(1);
        List<Long> late = report.poll(wait, TimeUnit.NANOSECONDS);
        long ticks;
        if (late != null) {
            ticks = late.size();
            stop = true;
        } else {
            stop = true;
            late = report.take();
            ticks = late.size();
            late.add(wait);
        }
        for (int i = 0; i < HOGS; i++) {
            done.take();
        }
        Collections.sort(late);
        List<Long> l = late;
        java.util.function.DoubleToLongFunction at =
                q -> l.isEmpty() ? 0 : l.get((int) ((l.size() - 1) * q + 0.5));
        Common.reportExtra("w6", ms, window, ticks, at.applyAsLong(0.5), at.applyAsLong(0.99), at.applyAsLong(1.0));
    }
}
