// W2 skynet, the classic one (as bench/go/w2_skynet.go): a 10-ary tree of
// virtual threads with `leaves` leaves; a leaf sends its number, an inner
// node makes one SynchronousQueue (Go's unbuffered channel), starts its 10
// children on it and sends the sum of what they send. The result must be
// leaves*(leaves-1)/2. Values travel boxed (SynchronousQueue<Long>: Java's
// queues are generic).
// Timed: starting the root node until its sum is received (by a root
// virtual thread, Go's main goroutine).
// Warm-up: one thread started and joined (as Go), then, for the JIT, one
// untimed tree of leaves / 10 (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W2Skynet <leaves>

import java.util.concurrent.SynchronousQueue;

final class W2Skynet {
    static void skynet(SynchronousQueue<Long> c, long num, long size) throws InterruptedException {
        if (size == 1) {
            c.put(num);
            return;
        }
        SynchronousQueue<Long> rc = new SynchronousQueue<>();
        long sub = size / 10;
        for (long i = 0; i < 10; i++) {
            long child = num + i * sub;
            Common.spawn(() -> {
                try {
                    skynet(rc, child, sub);
                } catch (InterruptedException e) {
                    throw Common.interrupted(e);
                }
            });
        }
        long sum = 0;
        for (int i = 0; i < 10; i++) {
            sum += rc.take();
        }
        c.put(sum);
    }

    /** Starts the tree and receives its sum. */
    static long tree(long leaves) throws InterruptedException {
        SynchronousQueue<Long> c = new SynchronousQueue<>();
        Common.spawn(() -> {
            try {
                skynet(c, 0, leaves);
            } catch (InterruptedException e) {
                throw Common.interrupted(e);
            }
        });
        return c.take();
    }

    public static void main(String[] args) throws Exception {
        long leaves = Common.sizeArg(args);
        Common.warmUp();
        if (Common.WARM) {
            Common.root(() -> tree(Common.warmSize(leaves)));
        }
        long[] out = new long[2];
        Common.root(() -> {
            long t = System.nanoTime();
            out[1] = tree(leaves);
            out[0] = System.nanoTime() - t;
        });
        Common.report("w2", leaves, out[0], out[1], 0, 0);
    }
}
