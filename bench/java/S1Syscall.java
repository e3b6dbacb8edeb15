// S1 blocking calls: 100 virtual threads share n calls of usleep(50)
// (nanosleep 50 µs), each made the way the JDK makes its own blocking calls
// (Common.Syscall: a foreign-function call between
// jdk.internal.misc.Blocker.begin and end: the scheduler may add a carrier
// while one is blocked, Java's hand-off). Same method as
// bench/go/s1_syscall.go and bench/src/workloads/s1_syscall.rs: a root
// virtual thread starts the 100, each makes n / 100 calls and hands back
// the sum of their results, the root adds them (Common.runCalls, Go's
// runCalls). Timed: starting the units until the last finished.
// Warm-up: one thread started and joined (as Go) and one untimed call (the
// foreign-function link), then, for the JIT, one untimed round of n / 10
// (-Dgosched.warmup=false: none).
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> S1Syscall <n>

final class S1Syscall {
    public static void main(String[] args) throws Exception {
        Common.callsMain("s1", args, () -> {
            Common.Syscall.usleep(50);
            return 1;
        });
    }
}
