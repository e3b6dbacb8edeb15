// W10 blocking calls beside CPU work: procs CPU virtual threads do work in
// chunks (about 20 µs each, then Thread.yield) for <size> ms, first alone
// (the baseline), then beside 4 virtual threads looping on a blocking 50 ms
// call, usleep(50000) (nanosleep), made the way the JDK makes its own
// blocking calls (Common.Syscall: a foreign-function call between
// jdk.internal.misc.Blocker.begin and end, which lets the scheduler add a
// carrier while one is blocked, up to jdk.virtualThreadScheduler.maxPoolSize:
// Java's hand-off). Reported: the chunks done beside the callers as a
// percentage of the baseline, in hundredths (result), and both counts. Same
// method as bench/go/w10_syscall.go and bench/src/workloads/w10_syscall.rs;
// the main (platform) thread times each phase, as in the Rust rows.
// Warm-up: one thread started and joined (as Go) and one untimed blocking
// call (the foreign-function link), then the chunk function compiled (2,000
// chunks on the main thread), so that the baseline is not the interpreter's
// (-Dgosched.warmup=false: no chunks).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W10Syscall <ms>

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

final class W10Syscall {
    static final int CALLERS = 4;
    static final int CALL_US = 50_000;
    static final AtomicLong SINK = new AtomicLong();

    static long chunk(long seed) {
        long x = seed | 1;
        for (int i = 0; i < 20000; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    static volatile boolean stop;

    static long phase(long d, boolean withCallers) throws InterruptedException {
        AtomicLong chunks = new AtomicLong();
        stop = false;
        List<Thread> units = new ArrayList<>();
        if (withCallers) {
            for (int i = 0; i < CALLERS; i++) {
                units.add(Common.go(() -> {
                    while (!stop) {
                        Common.Syscall.usleep(CALL_US);
                    }
                }));
            }
        }
        for (int i = 0; i < Common.procs(); i++) {
            long seed = i;
            units.add(Common.go(() -> {
                long x = seed;
                while (!stop) {
                    x = chunk(x);
                    chunks.incrementAndGet();
                    Thread.yield();
                }
                SINK.addAndGet(x);
            }));
        }
        long t = System.nanoTime();
        Thread.sleep(TimeUnit.NANOSECONDS.toMillis(d));
        long n = chunks.get();
        stop = true;
        long el = System.nanoTime() - t;
        for (Thread u : units) {
            u.join();
        }
        return (long) ((double) n * d / el);
    }

    public static void main(String[] args) throws Exception {
        long ms = Common.sizeArg(args);
        Common.warmUp();
        // One untimed call: the foreign-function link is set up then.
        Common.root(() -> Common.Syscall.usleep(1));
        if (Common.WARM) {
            long x = 1;
            for (int i = 0; i < 2000; i++) {
                x = chunk(x);
            }
            SINK.addAndGet(x);
        }
        long d = TimeUnit.MILLISECONDS.toNanos(ms);
        long base = phase(d, false);
        long beside = phase(d, true);
        long kept = (long) ((double) beside * 10000 / Math.max(base, 1) + 0.5);
        Common.reportExtra("w10", ms, 2 * d, kept, base, beside, 0);
    }
}
