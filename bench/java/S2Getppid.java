// S2 fast calls: 100 virtual threads share n getppid calls, each made the
// way the JDK makes its own blocking calls (Common.Syscall: a
// foreign-function call between jdk.internal.misc.Blocker.begin and end):
// the fixed cost of that hand-off. See S1Syscall.java and
// bench/go/s2_getppid.go.
//
// usage: java -Djdk.virtualThreadScheduler.parallelism=procs -cp <classes> S2Getppid <n>

final class S2Getppid {
    public static void main(String[] args) throws Exception {
        Common.callsMain("s2", args, () -> Common.Syscall.getppid() > 0 ? 1 : 0);
    }
}
