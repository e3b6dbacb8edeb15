// W12 echo: 100 connections over loopback, each sending n 64-byte messages
// to an echo server and reading each echo (timed per round trip). Same
// method as bench/go/w12_echo.go and bench/src/workloads/w12_echo.rs, with
// Java 25 virtual threads and blocking java.net sockets: one virtual thread
// accepts and starts a virtual thread per connection (read 64 bytes, write
// them back, until end of stream); 100 client virtual threads connect, then n
// times write a message and read its 64-byte echo, comparing it byte for
// byte. TCP_NODELAY on both ends (Go's default; Java's is off).
// Timed: first connect to the last client's end. Reports the message count,
// and p50 / p99 / max round-trip latency in ns as x0 / x1 / x2.
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> W12Echo <n>

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Arrays;

final class W12Echo {
    static final int CONNS = 100;
    static final int MSG = 64;

    static byte[] message(long conn, long i) {
        byte[] m = new byte[MSG];
        for (int k = 0; k < MSG; k++) {
            m[k] = (byte) (conn * 31 + i * 7 + k);
        }
        return m;
    }

    /** Reads buf.length bytes (Go's io.ReadFull); false at end of stream. */
    static boolean readFull(InputStream in, byte[] buf) throws IOException {
        return in.readNBytes(buf, 0, buf.length) == buf.length;
    }

    public static void main(String[] args) throws Exception {
        long n = Common.sizeArg(args);
        Common.warmUp();
        // Backlog as Go's (the kernel's somaxconn): Java's default of 50
        // would drop some of the 100 connects, each then retried after 1 s.
        ServerSocket l = new ServerSocket(0, 4096, InetAddress.getLoopbackAddress());
        InetSocketAddress addr = (InetSocketAddress) l.getLocalSocketAddress();
        Thread server = Common.go(() -> {
            Thread[] conns = new Thread[CONNS];
            for (int c = 0; c < CONNS; c++) {
                Socket s = l.accept();
                s.setTcpNoDelay(true);
                conns[c] = Common.go(() -> {
                    try (s) {
                        InputStream in = s.getInputStream();
                        OutputStream out = s.getOutputStream();
                        byte[] buf = new byte[MSG];
                        while (readFull(in, buf)) {
                            out.write(buf);
                        }
                    }
                });
            }
            for (Thread c : conns) {
                c.join();
            }
        });

        long t = System.nanoTime();
        long[][] lats = new long[CONNS][];
        Thread[] clients = new Thread[CONNS];
        for (int c = 0; c < CONNS; c++) {
            final int conn = c;
            clients[c] = Common.go(() -> {
                try (Socket s = new Socket(addr.getAddress(), addr.getPort())) {
                    s.setTcpNoDelay(true);
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    long[] lat = new long[(int) n];
                    byte[] back = new byte[MSG];
                    for (long i = 0; i < n; i++) {
                        byte[] m = message(conn, i);
                        long t0 = System.nanoTime();
                        out.write(m);
                        if (!readFull(in, back)) {
                            throw new IOException("connection " + conn + ": end of stream at message " + i);
                        }
                        lat[(int) i] = System.nanoTime() - t0;
                        if (!Arrays.equals(back, m)) {
                            throw new IllegalStateException("echo mismatch: connection " + conn + ", message " + i);
                        }
                    }
                    lats[conn] = lat;
                }
            });
        }
        for (Thread c : clients) {
            c.join();
        }
        long elapsed = System.nanoTime() - t;
        server.join();
        l.close();

        int total = 0;
        for (long[] lat : lats) {
            total += lat.length;
        }
        long[] all = new long[total];
        int at = 0;
        for (long[] lat : lats) {
            System.arraycopy(lat, 0, all, at, lat.length);
            at += lat.length;
        }
        Arrays.sort(all);
        Common.reportExtra("w12", n, elapsed, all.length, pct(all, 0.5), pct(all, 0.99), pct(all, 1.0));
    }

    /** The q-quantile of sorted v, indexed as Go's and Rust's. */
    static long pct(long[] v, double q) {
        return v.length == 0 ? 0 : v[(int) ((v.length - 1) * q + 0.5)];
    }
}
