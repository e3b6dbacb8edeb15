// S2 fast calls: 100 goroutines share n getppid system calls (the fixed cost
// of entersyscall/exitsyscall). See bench/go/s1_syscall.go.
//
// usage: GOMAXPROCS=procs s2_getppid <n>    prints one JSON line
package main

import "syscall"

func main() {
	n := sizeArg()
	warmUp()
	elapsed, total := runCalls(n, func() int64 {
		if syscall.Getppid() > 0 {
			return 1
		}
		return 0
	})
	report("s2", n, elapsed, total, 0, 0)
}
