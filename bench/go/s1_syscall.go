// S1/S2 blocking calls: 100 goroutines share n raw system calls (Go enters
// entersyscall for each; sysmon hands the P off from a call that blocks).
// S1: nanosleep(50 µs); S2 (bench/go/s2_getppid.go): getppid. Same method as
// bench/src/workloads/s1_syscall.rs. Timed: spawning the goroutines until
// the last finished.
//
// usage: GOMAXPROCS=procs s1_syscall <n>    prints one JSON line
package main

import "syscall"

func main() {
	n := sizeArg()
	warmUp()
	elapsed, total := runCalls(n, func() int64 {
		ts := syscall.Timespec{Nsec: 50000}
		syscall.Nanosleep(&ts, nil)
		return 1
	})
	report("s1", n, elapsed, total, 0, 0)
}
